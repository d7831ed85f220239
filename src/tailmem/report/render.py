"""Build ``report.md`` and a self-contained ``report.html`` from run directories only.

The report never re-runs anything: it reads each run's ``config.yaml``, ``claims.json``,
``COMPLETE`` and figures. An experiment may write ``report.json`` to choose and caption what is
shown::

    {"title": "...", "summary": "markdown paragraph",
     "figures": [{"file": "rho_vs_k.png", "caption": "..."}],
     "tables": [{"file": "rho.csv", "caption": "..."}]}

Without it, every PNG of the run is shown; a table entry may add ``"columns": {"name": "what
it means"}`` to explain its headers, and ``"data": {"corpus": ..., "train_tokens": N,
"val_tokens": N, "tokenizer": ...}`` names the data a study trained on (printed under the
summary, so a loss beside a published one says what it was measured on). Verdicts come from
``claims.json`` as written by the experiment (computed by each claim's check from its results),
never from here. The claims registry (:data:`~tailmem.claims.registry.CLAIMS`) adds what the
runs do not say: a registry claim of an experiment that its run lacks is listed as "not
measured" with the reason, the summary counts every registry claim (those of experiments not in
the folder and those no experiment measures too), and the claims no experiment measures close
the report in one table.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import html
import io
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailmem.claims.core import VERDICTS, Claim, ClaimResult
from tailmem.claims.listing import EXPERIMENTS
from tailmem.claims.registry import claims_of, lookup, not_measured, read_claims
from tailmem.errors import DataError
from tailmem.mdtable import md_table
from tailmem.rundir import RunDir, atomic_write_text, strict_json

MAX_TABLE_ROWS = 40


@dataclass
class RunSummary:
    """What the report needs from one run directory."""

    name: str
    run: RunDir
    record: dict[str, Any]
    complete: bool
    wall_seconds: float | None
    claims: list[ClaimResult] = field(default_factory=list)
    layout: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return self.layout.get("title") or self.record.get("experiment", self.name)


def collect_runs(root: Path) -> list[RunSummary]:
    """Every run directory directly below ``root`` (or ``root`` itself), in name order."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root} is not a directory; expected a results folder from reproduce")
    candidates = [root] if (root / "config.yaml").is_file() else sorted(root.iterdir())
    runs = []
    for path in candidates:
        if not (path / "config.yaml").is_file():
            continue
        run = RunDir(path)
        record = run.read_config()
        complete = run.is_complete
        wall = run.read_json("COMPLETE").get("wall_seconds") if complete else None
        if run.file("claims.json").is_file():
            claims = read_claims(run)
            claims += not_measured(record["experiment"], claims)
        else:
            reason = "the run wrote no claims.json"
            claims = not_measured(record["experiment"], [], reason)
        layout = run.read_json("report.json") if run.file("report.json").is_file() else {}
        if not isinstance(layout, dict):
            raise DataError(f"{run.file('report.json')}: expected a JSON object")
        for key in ("title", "summary"):
            if not isinstance(layout.get(key, ""), str):
                raise DataError(f"{run.file('report.json')}: {key!r} must be text")
        runs.append(RunSummary(path.name, run, record, complete, wall, claims, layout))
    if not runs:
        raise DataError(f"{root} holds no run directories (no */config.yaml); run reproduce first")
    order = list(EXPERIMENTS)
    rank = {name: i for i, name in enumerate(order)}
    return sorted(runs, key=lambda r: (rank.get(r.record["experiment"], len(order)), r.name))


def _entries(summary: RunSummary, kind: str) -> list[tuple[Path, str]] | None:
    """The ``(file, caption)`` pairs of ``report.json``'s ``kind`` list (None: no such list).

    Every entry must be ``{"file": NAME, "caption": TEXT}`` with NAME a file inside the run
    directory: a damaged entry, or one pointing elsewhere (``/etc/passwd``, ``../x``, a symlink
    out of the run), is a :class:`DataError`, so the report never embeds a file from outside.
    """
    listed = summary.layout.get(kind)
    if listed is None:
        return None
    source = summary.run.file("report.json")
    if not isinstance(listed, list):
        raise DataError(f"{source}: {kind!r} must be a list of {{file, caption}} entries")
    root = summary.run.path.resolve()
    entries = []
    for i, item in enumerate(listed):
        name = item.get("file") if isinstance(item, dict) else None
        caption = item.get("caption") if isinstance(item, dict) else None
        if not isinstance(name, str) or not isinstance(caption, (str, type(None))):
            raise DataError(
                f"{source}: {kind}[{i}] is {item!r}; expected {{'file': NAME, 'caption': TEXT}}"
            )
        path = summary.run.file(name)
        if not path.resolve().is_relative_to(root):
            raise DataError(
                f"{source}: {kind}[{i}] points at {name!r}, outside the run directory; "
                "expected a file of the run"
            )
        if not path.is_file():
            raise DataError(f"{path} is listed in report.json but missing; rerun the experiment")
        entries.append((path, caption or path.stem))
    return entries


def _figures(summary: RunSummary) -> list[tuple[Path, str]]:
    listed = _entries(summary, "figures")
    if listed is None:
        root = summary.run.path.resolve()
        found = sorted(summary.run.path.glob("*.png"))
        return [(p, p.stem.replace("_", " ")) for p in found if p.resolve().is_relative_to(root)]
    return listed


def _tables(summary: RunSummary) -> list[tuple[str, list[list[str]], dict[str, str]]]:
    """(caption, header + rows, explanation per column) of each table report.json lists."""
    tables = []
    entries = _entries(summary, "tables") or []
    for (path, caption), item in zip(entries, summary.layout.get("tables") or [], strict=False):
        try:
            rows = list(csv.reader(io.StringIO(path.read_text())))
        except (UnicodeDecodeError, csv.Error) as exc:
            raise DataError(
                f"{path} is listed in report.json but is not CSV text ({exc})"
            ) from None
        header, *body = rows[: MAX_TABLE_ROWS + 1] or [[]]
        columns = item.get("columns", {})
        if not isinstance(columns, dict):
            raise DataError(f"{path}: report.json 'columns' must map column names to text")
        columns = {k: str(v) for k, v in columns.items() if k in header}
        tables.append((caption, [header, *map(_readable_row, body)], columns))
    return tables


def data_provenance(summary: RunSummary) -> str:
    """The corpus, token counts and tokenizer of a run's ``report.json`` ``data``, in one line
    (``""`` where the run names none)."""
    data = summary.layout.get("data")
    if not isinstance(data, dict) or not data.get("corpus"):
        return ""
    parts = [str(data["corpus"])]
    tokens = [
        f"{data[k]:,} {label} tokens"
        for k, label in (("train_tokens", "training"), ("val_tokens", "validation"))
        if isinstance(data.get(k), int)
    ]
    if tokens:
        parts.append(", ".join(tokens))
    if data.get("tokenizer"):
        parts.append(f"tokenizer: {data['tokenizer']}")
    return "; ".join(parts)


def _readable_row(row: list[str]) -> list[str]:
    """Long floats (``-0.9438772991412437``) shortened to 4 significant digits for reading; the
    CSV next to the report keeps every digit."""
    return [_readable_number(cell) for cell in row]


def _readable_number(cell: str) -> str:
    try:
        value = float(cell)
    except ValueError:
        return cell
    digits = sum(ch.isdigit() for ch in cell.split("e")[0].lstrip("-0."))
    if digits <= 5 or "." not in cell:
        return cell
    return f"{value:#.4g}" if abs(value) < 1e4 else f"{value:.0f}"


def _seeds(claim: ClaimResult) -> str:
    if claim.verdict == "not measured":
        return "—"
    if claim.seeds is None:
        return "exact (no sampling)" if claim.check else "see rule"
    return ", ".join(map(str, claim.seeds)) + f" (n = {len(claim.seeds)})"


def _verdict(claim: ClaimResult) -> str:
    return f"{claim.verdict}: {claim.reason}" if claim.reason else claim.verdict


def _rule(claim: ClaimResult) -> str:
    """The rule in words, with the registry's reasoning for it where there is one."""
    registered = lookup(claim.id)
    why = registered.why if registered is not None else ""
    return f"{claim.rule} — why: {why}" if why else claim.rule


def _claim_rows(summary: RunSummary) -> list[list[str]]:
    return [
        [c.claim, c.source, c.published, c.ours, _rule(c), _seeds(c), _verdict(c)]
        for c in summary.claims
    ]


CLAIM_HEADER = ["claim", "source", "published", "ours", "rule", "seeds", "verdict"]
CLAIM_COLUMNS = (
    "Columns: **claim** the published statement; **source** where it stands in the paper; "
    "**published** the paper's value (each paper version's where they differ); **ours** our "
    "measurement (mean ± standard error over seeds where seeds vary); **rule** what decided the "
    "verdict, in words, and why it follows from the published statement; **seeds** the seeds "
    "behind the verdict (exact: a deterministic computation with no sampling); **verdict** "
    "reproduced, not reproduced, inconclusive (the run cannot resolve the effect) or not "
    "measured, with the reason."
)
UNCOVERED_TITLE = "Claims not covered by an experiment"
UNCOVERED_HEADER = ["claim", "source", "published", "rule"]


def _uncovered_rows() -> list[list[str]]:
    """The registry claims that no experiment measures (yet)."""
    return [_describe(c) for c in claims_of(None)]


def _describe(claim: Claim) -> list[str]:
    return [claim.describe(t) for t in (claim.statement, claim.source, claim.published, claim.rule)]


NOT_RUN = "experiment not in this results folder"
NO_EXPERIMENT = "no experiment measures it yet"


def summary_rows(runs: list[RunSummary]) -> list[list[str]]:
    """Verdict counts per experiment — every registry claim, whether a run covers it or not."""
    rows = []
    for r in runs:
        rows.append([r.title, *(str(sum(c.verdict == v for c in r.claims)) for v in VERDICTS)])
    ran = {r.record.get("experiment") for r in runs}
    for name in EXPERIMENTS:
        if name not in ran:
            rows.append([f"{name} ({NOT_RUN})", "0", "0", "0", str(len(claims_of(name)))])
    rows.append([f"uncovered ({NO_EXPERIMENT})", "0", "0", "0", str(len(claims_of(None)))])
    return rows


def verdict_counts(rows: list[list[str]]) -> Counter:
    counts: Counter = Counter()
    for row in rows:
        for v, n in zip(VERDICTS, row[1:], strict=True):
            counts[v] += int(n)
    return counts


def _column_notes(columns: dict[str, str]) -> str:
    return "Columns: " + "; ".join(f"**{k}** {v}" for k, v in columns.items())


def _environment_rows(runs: list[RunSummary]) -> list[list[str]]:
    rows = []
    for r in runs:
        env = r.record.get("environment", {})
        wall = f"{r.wall_seconds:.0f} s" if r.wall_seconds is not None else "incomplete"
        rows.append(
            [
                r.record.get("experiment", r.name),
                str(r.record.get("preset", "?")),
                wall,
                str(env.get("device", "?")),
                f"torch {env.get('torch', '?')}, python {env.get('python', '?')}",
                str(env.get("git_commit") or "?")[:10],
            ]
        )
    return rows


ENV_HEADER = ["experiment", "preset", "wall time", "device", "versions", "commit"]


def render_markdown(runs: list[RunSummary], root: Path) -> str:
    rows = summary_rows(runs)
    counts = verdict_counts(rows)
    out = ["# tailmem report", ""]
    out.append("## Summary of verdicts")
    out.append("")
    out.append(", ".join(f"**{counts.get(v, 0)}** {v}" for v in VERDICTS))
    out.append("")
    out.append(md_table(["experiment", *VERDICTS], rows))
    for r in runs:
        out += ["", f"## {r.title}", ""]
        if not r.complete:
            out += ["*This run is incomplete; rerun reproduce to finish it.*", ""]
        if r.layout.get("summary"):
            out += [r.layout["summary"], ""]
        if provenance := data_provenance(r):
            out += [f"**Data**: {provenance}", ""]
        for path, caption in _figures(r):
            out += [f"![{caption}]({path.relative_to(root).as_posix()})", "", f"*{caption}*", ""]
        for caption, table, columns in _tables(r):
            if table:
                out += [f"**{caption}**", "", md_table(table[0], table[1:]), ""]
                out += [_column_notes(columns), ""] if columns else []
        if r.claims:
            out += ["**Claims**", "", md_table(CLAIM_HEADER, _claim_rows(r)), ""]
            out += [CLAIM_COLUMNS, ""]
    out += ["", f"## {UNCOVERED_TITLE}", "", md_table(UNCOVERED_HEADER, _uncovered_rows())]
    out += ["", "## Environment", "", md_table(ENV_HEADER, _environment_rows(runs)), ""]
    return "\n".join(out)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
.scroll{overflow-x:auto;max-width:100%;margin:.6em 0 1.4em}
table{border-collapse:collapse;font-size:.9em;width:100%}
th,td{border:1px solid #ccc;padding:.3em .5em;text-align:left;vertical-align:top;
overflow-wrap:anywhere;min-width:4em}
th{background:#f3f3f3} img{max-width:100%;height:auto;border:1px solid #eee}
figure{margin:1em 0} figcaption{font-size:.9em;color:#555}
.v-reproduced{background:#e3f6e3}.v-not-reproduced{background:#fbe3e3}
.v-not-measured{background:#f1f1f1;color:#666}.v-inconclusive{background:#fdf5d8}
.columns{font-size:.85em;color:#444}
.incomplete{color:#a00}
"""


def _html_table(
    header: list[str],
    rows: list[list[str]],
    css_class: str = "",
    verdicts: list[str] | None = None,
) -> str:
    """A table in a horizontally scrolling box (wide tables never clip); ``verdicts`` colour
    the rows."""
    parts = [f'<div class="scroll"><table class="{css_class}"><thead><tr>']
    parts += [f"<th>{html.escape(str(h))}</th>" for h in header]
    parts.append("</tr></thead><tbody>")
    for i, row in enumerate(rows):
        cls = f' class="v-{verdicts[i].replace(" ", "-")}"' if verdicts else ""
        parts.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row))
        parts.append("</tr>")
    parts.append("</tbody></table></div>")
    return "".join(parts)


def _html_notes(markdown: str) -> str:
    """A column explanation (``**name** text; …``) as an HTML paragraph."""
    parts = html.escape(markdown).split("**")
    text = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    return f'<p class="columns">{text}</p>'


def render_html(runs: list[RunSummary]) -> str:
    rows = summary_rows(runs)
    counts = verdict_counts(rows)
    body = ["<h1>tailmem report</h1>", "<h2>Summary of verdicts</h2>"]
    body.append(
        "<p>" + ", ".join(f"<b>{counts.get(v, 0)}</b> {html.escape(v)}" for v in VERDICTS) + "</p>"
    )
    body.append(_html_table(["experiment", *VERDICTS], rows, "summary"))
    for r in runs:
        body.append(f'<h2 id="{html.escape(r.name)}">{html.escape(r.title)}</h2>')
        if not r.complete:
            body.append('<p class="incomplete">This run is incomplete; rerun reproduce.</p>')
        if r.layout.get("summary"):
            body.append(f"<p>{html.escape(r.layout['summary'])}</p>")
        if provenance := data_provenance(r):
            body.append(f'<p class="data"><b>Data</b>: {html.escape(provenance)}</p>')
        for path, caption in _figures(r):
            data = base64.b64encode(path.read_bytes()).decode()
            body.append(
                f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            )
        for caption, table, columns in _tables(r):
            if table:
                body.append(f"<h3>{html.escape(caption)}</h3>" + _html_table(table[0], table[1:]))
                body += [_html_notes(_column_notes(columns))] if columns else []
        if r.claims:
            verdicts = [c.verdict for c in r.claims]
            body.append(
                "<h3>Claims</h3>"
                + _html_table(CLAIM_HEADER, _claim_rows(r), "claims", verdicts)
                + _html_notes(CLAIM_COLUMNS)
            )
    body.append(
        f"<h2>{UNCOVERED_TITLE}</h2>"
        + _html_table(UNCOVERED_HEADER, _uncovered_rows(), "uncovered")
    )
    body.append("<h2>Environment</h2>" + _html_table(ENV_HEADER, _environment_rows(runs), "env"))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tailmem report</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def write_report(root: str | Path) -> Path:
    """Write ``report.md`` and ``report.html`` into ``root``; returns the HTML path."""
    root = Path(root)
    runs = collect_runs(root)
    atomic_write_text(root / "report.md", render_markdown(runs, root))
    html_path = root / "report.html"
    atomic_write_text(html_path, render_html(runs))
    verdicts = {r.name: [dataclasses.asdict(c) for c in r.claims] for r in runs}
    atomic_write_text(root / "verdicts.json", strict_json(verdicts))
    return html_path
