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

The report trusts nothing it reads (:func:`read_run`): ``config.yaml`` must name a tailmem
experiment (:func:`experiment_names`), every ``claims.json`` entry must have fields of the right
types, a known verdict and a claim id of that experiment (each once), and every ``report.json``
entry must be a file inside the run. What does not fit is handled by where it was found:

- a run directory given on its own is refused with one line naming the file and the problem
  (the user asked about that run; a report without it says nothing);
- in a results folder a damaged run is *not rendered*: the report names it with the reason
  right under the summary, its verdicts are not counted (its experiment's registry claims count
  as "not measured", so the summary still covers every claim), and the other runs render —
  one broken run does not hide the results of a whole ``reproduce``. A folder in which no run
  can be rendered is refused like a single run.

A damaged ``report.json`` makes the whole run not rendered, not only the entry: the experiment
writes it together with ``claims.json``, so a run whose files do not read as tailmem wrote them
is not one whose verdicts the summary should count.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import html
import io
import math
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailmem import config
from tailmem.claims.core import VERDICTS, Claim, ClaimResult
from tailmem.claims.listing import EXPERIMENTS
from tailmem.claims.registry import claims_of, lookup, not_measured, read_claims
from tailmem.errors import DataError
from tailmem.mdtable import md_table
from tailmem.rundir import RunDir, atomic_write_text, strict_json

MAX_TABLE_ROWS = 40
LAYOUT_KEYS = ("title", "summary", "figures", "tables", "data", "answers")
"""The keys ``report.json`` may hold."""
ENTRY_KEYS = {"figures": ("file", "caption"), "tables": ("file", "caption", "columns")}
"""The keys each ``report.json`` figure or table entry may hold."""


@dataclass(frozen=True)
class Table:
    """One ``report.json`` table, read: at most :data:`MAX_TABLE_ROWS` rows of ``rows`` (numbers
    shortened for reading), ``total`` the data rows of ``file``."""

    file: str
    caption: str
    header: list[str]
    rows: list[list[str]]
    total: int
    columns: dict[str, str]


@dataclass
class RunSummary:
    """What the report needs from one run directory, validated (see :func:`read_run`)."""

    name: str
    run: RunDir
    record: dict[str, Any]
    incomplete: str | None
    wall_seconds: float | None
    claims: list[ClaimResult] = field(default_factory=list)
    layout: dict[str, Any] = field(default_factory=dict)
    figures: list[tuple[Path, str]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.incomplete is None

    @property
    def title(self) -> str:
        return self.layout.get("title") or self.record["experiment"]


@dataclass(frozen=True)
class NotRendered:
    """A run directory of a results folder that failed validation, with the reason.

    ``experiment`` is the registry experiment its ``config.yaml`` names (None where it names
    none or cannot be read): the summary says that experiment's run was not rendered.
    """

    name: str
    experiment: str | None
    reason: str


@dataclass
class Results:
    """The runs of a results folder: those that render and those that do not."""

    runs: list[RunSummary]
    not_rendered: list[NotRendered] = field(default_factory=list)


def collect_runs(root: str | Path) -> Results:
    """Every run directory directly below ``root`` (or ``root`` itself), in experiment order.

    ``root`` itself a run: a damaged run is a :class:`DataError`. A results folder: damaged runs
    are returned as :class:`NotRendered`; a DataError only when none of its runs renders.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root} is not a directory; expected a results folder from reproduce")
    if (root / "config.yaml").is_file():
        return Results([read_run(root)])
    runs, broken = [], []
    for path in sorted(root.iterdir()):
        if not (path / "config.yaml").is_file():
            continue
        try:
            runs.append(read_run(path))
        except (DataError, OSError) as exc:
            reason = " ".join(str(exc).split())
            broken.append(NotRendered(path.name, _named_experiment(path), reason))
    if not runs and not broken:
        raise DataError(f"{root} holds no run directories (no */config.yaml); run reproduce first")
    if not runs:
        if len(broken) == 1:
            raise DataError(broken[0].reason)
        raise DataError(
            f"{root}: none of its {len(broken)} runs can be rendered; the first, "
            f"{broken[0].name}: {broken[0].reason}"
        )
    rank = {name: i for i, name in enumerate(EXPERIMENTS)}
    runs.sort(key=lambda r: (rank.get(r.record["experiment"], len(rank)), r.name))
    return Results(runs, broken)


def experiment_names() -> list[str]:
    """The tailmem experiments: those with packaged presets (``tailmem/configs/<name>/``).

    The experiment registry (:data:`tailmem.experiments.EXPERIMENTS`) lies in a layer the report
    may not import; every registered experiment ships its presets, and a test keeps the two sets
    the same.
    """
    root = config.CONFIGS_ROOT
    return sorted(p.name for p in root.iterdir() if p.is_dir() and config.available_presets(p.name))


def _named_experiment(path: Path) -> str | None:
    """The claims-registry experiment a damaged run's ``config.yaml`` names, if it names one."""
    try:
        named = RunDir(path).read_config()["experiment"]
    except (DataError, OSError):
        return None
    return named if isinstance(named, str) and named in EXPERIMENTS else None


def read_run(path: str | Path) -> RunSummary:
    """Read one run directory and check everything the report shows from it.

    Raises a one-line :class:`DataError` naming the file and what was expected: an experiment
    that is not in the registry, a claim of another experiment or one listed twice, a claim
    field of the wrong type (see :class:`~tailmem.claims.core.ClaimResult`), a damaged
    ``COMPLETE`` time or a ``report.json`` entry that is damaged, missing or outside the run.
    """
    run = RunDir(path)
    record = run.read_config()
    experiment = _check_record(run, record)
    incomplete = run.incomplete_reason()
    wall = None if incomplete else _wall_seconds(run)
    if run.file("claims.json").is_file():
        claims = read_claims(run)
        _check_claims(run, experiment, claims)
        claims += not_measured(experiment, claims)
    else:
        claims = not_measured(experiment, [], "the run wrote no claims.json")
    layout = _read_layout(run)
    figures = _figures(run, layout)
    tables = _tables(run, layout)
    return RunSummary(run.path.name, run, record, incomplete, wall, claims, layout, figures, tables)


def _check_record(run: RunDir, record: dict[str, Any]) -> str:
    """The experiment ``config.yaml`` names, checked against the registry (and the fields the
    report prints checked for their type)."""
    source = run.file("config.yaml")
    experiment = record["experiment"]
    known = experiment_names()
    if not isinstance(experiment, str) or experiment not in known:
        raise DataError(
            f"{source}: experiment {experiment!r} is not a tailmem experiment; expected one of: "
            f"{', '.join(known)}"
        )
    if not isinstance(record.get("preset", ""), str):
        raise DataError(f"{source}: preset {record['preset']!r}; expected a preset name")
    if not isinstance(record.get("environment", {}), dict):
        raise DataError(f"{source}: 'environment' must map names to values")
    return experiment


def _wall_seconds(run: RunDir) -> float | None:
    """The wall time ``COMPLETE`` records (None: not recorded)."""
    wall = run.read_json("COMPLETE").get("wall_seconds")
    if wall is None:
        return None
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not 0 <= wall < math.inf:
        raise DataError(
            f"{run.file('COMPLETE')}: wall_seconds is {wall!r}; expected seconds (a number ≥ 0)"
        )
    return float(wall)


def _check_claims(run: RunDir, experiment: str, claims: list[ClaimResult]) -> None:
    """Each claim of ``claims.json`` once, and each a claim of the run's ``experiment``."""
    source = run.file("claims.json")
    seen: set[str] = set()
    for claim in claims:
        if claim.id in seen:
            raise DataError(f"{source}: claim {claim.id!r} is listed twice; expected each once")
        seen.add(claim.id)
        registered = lookup(claim.id)
        owner = registered.experiment if registered is not None else None
        if owner != experiment:
            raise DataError(
                f"{source}: claim {claim.id!r} belongs to "
                f"{repr(owner) if owner else 'no experiment'}, but config.yaml names "
                f"{experiment!r}; expected only that experiment's claims (files of two runs?)"
            )


def _read_layout(run: RunDir) -> dict[str, Any]:
    """``report.json`` (``{}`` where the run has none), its keys and their types checked."""
    if not run.file("report.json").is_file():
        return {}
    source = run.file("report.json")
    layout = run.read_json("report.json")
    if not isinstance(layout, dict):
        raise DataError(f"{source}: expected a JSON object")
    unknown = [key for key in layout if key not in LAYOUT_KEYS]
    if unknown:
        raise DataError(
            f"{source}: unknown key {unknown[0]!r}; expected only {', '.join(LAYOUT_KEYS)}"
        )
    for key in ("title", "summary"):
        if not isinstance(layout.get(key, ""), str):
            raise DataError(f"{source}: {key!r} must be text")
    if "data" in layout:
        _check_data(source, layout["data"])
    return layout


def _check_data(source: Path, data: object) -> None:
    """``report.json``'s ``data``: a corpus named in text, whole token counts (other keys, such
    as a fingerprint, are provenance kept in the file)."""
    if not isinstance(data, dict) or not isinstance(data.get("corpus"), str):
        raise DataError(f"{source}: 'data' must be an object naming its 'corpus' in text")
    if not isinstance(data.get("tokenizer", ""), str):
        raise DataError(f"{source}: data 'tokenizer' is {data['tokenizer']!r}; expected text")
    for key in ("train_tokens", "val_tokens"):
        count = data.get(key, 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise DataError(f"{source}: data {key!r} is {count!r}; expected a whole number ≥ 0")


def _entries(
    run: RunDir, layout: dict[str, Any], kind: str
) -> list[tuple[Path, str, dict[str, Any]]] | None:
    """The ``(file, caption, entry)`` of ``report.json``'s ``kind`` list (None: no such list).

    Every entry must be ``{"file": NAME, "caption": TEXT}`` (tables may add ``columns``) with
    NAME a file inside the run directory: a damaged entry, or one pointing elsewhere
    (``/etc/passwd``, ``../x``, a symlink out of the run), is a :class:`DataError`, so the report
    never embeds a file from outside.
    """
    listed = layout.get(kind)
    if listed is None:
        return None
    source = run.file("report.json")
    if not isinstance(listed, list):
        raise DataError(f"{source}: {kind!r} must be a list of {{file, caption}} entries")
    root = run.path.resolve()
    entries = []
    for i, item in enumerate(listed):
        name = item.get("file") if isinstance(item, dict) else None
        caption = item.get("caption") if isinstance(item, dict) else None
        if not isinstance(name, str) or not isinstance(caption, (str, type(None))):
            raise DataError(
                f"{source}: {kind}[{i}] is {item!r}; expected {{'file': NAME, 'caption': TEXT}}"
            )
        unknown = [key for key in item if key not in ENTRY_KEYS[kind]]
        if unknown:
            raise DataError(
                f"{source}: {kind}[{i}] has unknown key {unknown[0]!r}; expected only "
                f"{', '.join(ENTRY_KEYS[kind])}"
            )
        path = run.file(name)
        if not path.resolve().is_relative_to(root):
            raise DataError(
                f"{source}: {kind}[{i}] points at {name!r}, outside the run directory; "
                "expected a file of the run"
            )
        if not path.is_file():
            raise DataError(f"{path} is listed in report.json but missing; rerun the experiment")
        entries.append((path, caption or path.stem, item))
    return entries


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _figures(run: RunDir, layout: dict[str, Any]) -> list[tuple[Path, str]]:
    """The figures to embed: report.json's, or every PNG of the run; each must be a PNG image
    (the HTML embeds it as one)."""
    listed = _entries(run, layout, "figures")
    if listed is None:
        root = run.path.resolve()
        found = sorted(run.path.glob("*.png"))
        figures = [(p, p.stem.replace("_", " ")) for p in found if p.resolve().is_relative_to(root)]
    else:
        figures = [(path, caption) for path, caption, _ in listed]
    for path, _ in figures:
        with open(path, "rb") as handle:
            if handle.read(len(PNG_SIGNATURE)) != PNG_SIGNATURE:
                raise DataError(f"{path} is not a PNG image; expected the figure the run saved")
    return figures


def _tables(run: RunDir, layout: dict[str, Any]) -> list[Table]:
    """Each table ``report.json`` lists, read and checked (CSV text, every row as wide as the
    header, ``columns`` mapping names to text)."""
    tables = []
    for path, caption, item in _entries(run, layout, "tables") or []:
        try:
            rows = list(csv.reader(io.StringIO(path.read_text())))
        except (UnicodeDecodeError, csv.Error) as exc:
            raise DataError(
                f"{path} is listed in report.json but is not CSV text ({exc})"
            ) from None
        header, *body = rows or [[]]
        for i, row in enumerate(body, start=2):
            if len(row) != len(header):
                raise DataError(
                    f"{path}: line {i} has {len(row)} cells; expected {len(header)}, as the header"
                )
        columns = item.get("columns", {})
        if not isinstance(columns, dict) or not all(isinstance(v, str) for v in columns.values()):
            raise DataError(f"{path}: report.json 'columns' must map column names to text")
        columns = {k: v for k, v in columns.items() if k in header}
        shown = [_readable_row(row) for row in body[:MAX_TABLE_ROWS]]
        tables.append(Table(path.name, caption, header, shown, len(body), columns))
    return tables


def data_provenance(summary: RunSummary) -> str:
    """The corpus, token counts and tokenizer of a run's ``report.json`` ``data``, in one line
    (``""`` where the run names none)."""
    data = summary.layout.get("data")
    if data is None:
        return ""
    parts = [data["corpus"]]
    tokens = [
        f"{data[k]:,} {label} tokens"
        for k, label in (("train_tokens", "training"), ("val_tokens", "validation"))
        if k in data
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
NOT_RENDERED_TITLE = "Runs not rendered"
NOT_RENDERED_NOTE = (
    "These run directories failed the report's checks: their verdicts are not counted above "
    "(their experiments' registry claims count as not measured). Fix or rerun them."
)


def summary_rows(results: Results) -> list[list[str]]:
    """Verdict counts per experiment — every registry claim, whether a run covers it or not."""
    rows = []
    for r in results.runs:
        rows.append([r.title, *(str(sum(c.verdict == v for c in r.claims)) for v in VERDICTS)])
    ran = {r.record["experiment"] for r in results.runs}
    for name in EXPERIMENTS:
        if name not in ran:
            broken = [b.name for b in results.not_rendered if b.experiment == name]
            why = f"run {', '.join(broken)} not rendered" if broken else NOT_RUN
            rows.append([f"{name} ({why})", "0", "0", "0", str(len(claims_of(name)))])
    rows.append([f"uncovered ({NO_EXPERIMENT})", "0", "0", "0", str(len(claims_of(None)))])
    return rows


def verdict_counts(rows: list[list[str]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for row in rows:
        for v, n in zip(VERDICTS, row[1:], strict=True):
            counts[v] += int(n)
    return counts


def _column_notes(columns: dict[str, str]) -> str:
    return "Columns: " + "; ".join(f"**{k}** {v}" for k, v in columns.items())


def _cut_note(table: Table) -> str:
    """Says that a table shows only its first rows ("" where it shows them all)."""
    if table.total <= len(table.rows):
        return ""
    return f"First {len(table.rows)} of {table.total} rows; every row is in {table.file}."


def _incomplete_note(summary: RunSummary) -> str:
    return f"This run is incomplete ({summary.incomplete}); rerun reproduce to finish it."


def _environment_rows(runs: list[RunSummary]) -> list[list[str]]:
    rows = []
    for r in runs:
        env = r.record.get("environment", {})
        wall = f"{r.wall_seconds:.0f} s" if r.wall_seconds is not None else "incomplete"
        if r.complete and r.wall_seconds is None:
            wall = "not recorded"
        rows.append(
            [
                r.record["experiment"],
                str(r.record.get("preset", "?")),
                wall,
                str(env.get("device", "?")),
                f"torch {env.get('torch', '?')}, python {env.get('python', '?')}",
                str(env.get("git_commit") or "?")[:10],
            ]
        )
    return rows


ENV_HEADER = ["experiment", "preset", "wall time", "device", "versions", "commit"]


def render_markdown(results: Results, root: Path) -> str:
    rows = summary_rows(results)
    counts = verdict_counts(rows)
    out = ["# tailmem report", ""]
    out.append("## Summary of verdicts")
    out.append("")
    out.append(", ".join(f"**{counts.get(v, 0)}** {v}" for v in VERDICTS))
    out.append("")
    out.append(md_table(["experiment", *VERDICTS], rows))
    if results.not_rendered:
        out += ["", f"## {NOT_RENDERED_TITLE}", "", NOT_RENDERED_NOTE, ""]
        out += [f"- **{b.name}** not rendered: {b.reason}" for b in results.not_rendered]
    for r in results.runs:
        out += ["", f"## {r.title}", ""]
        if not r.complete:
            out += [f"*{_incomplete_note(r)}*", ""]
        if r.layout.get("summary"):
            out += [r.layout["summary"], ""]
        if provenance := data_provenance(r):
            out += [f"**Data**: {provenance}", ""]
        for path, caption in r.figures:
            out += [f"![{caption}]({path.relative_to(root).as_posix()})", "", f"*{caption}*", ""]
        for table in r.tables:
            out += [f"**{table.caption}**", ""]
            if not table.header:
                out += [f"*{table.file} is empty.*", ""]
                continue
            out += [md_table(table.header, table.rows), ""]
            out += [f"*{cut}*", ""] if (cut := _cut_note(table)) else []
            out += [_column_notes(table.columns), ""] if table.columns else []
        if r.claims:
            out += ["**Claims**", "", md_table(CLAIM_HEADER, _claim_rows(r)), ""]
            out += [CLAIM_COLUMNS, ""]
    out += ["", f"## {UNCOVERED_TITLE}", "", md_table(UNCOVERED_HEADER, _uncovered_rows())]
    out += ["", "## Environment", "", md_table(ENV_HEADER, _environment_rows(results.runs)), ""]
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
    verdicts: Sequence[str] | None = None,
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


def render_html(results: Results) -> str:
    rows = summary_rows(results)
    counts = verdict_counts(rows)
    body = ["<h1>tailmem report</h1>", "<h2>Summary of verdicts</h2>"]
    body.append(
        "<p>" + ", ".join(f"<b>{counts.get(v, 0)}</b> {html.escape(v)}" for v in VERDICTS) + "</p>"
    )
    body.append(_html_table(["experiment", *VERDICTS], rows, "summary"))
    if results.not_rendered:
        items = "".join(
            f"<li><b>{html.escape(b.name)}</b> not rendered: {html.escape(b.reason)}</li>"
            for b in results.not_rendered
        )
        body.append(
            f"<h2>{NOT_RENDERED_TITLE}</h2>"
            f'<p class="incomplete">{html.escape(NOT_RENDERED_NOTE)}</p><ul>{items}</ul>'
        )
    for r in results.runs:
        body.append(f'<h2 id="{html.escape(r.name)}">{html.escape(r.title)}</h2>')
        if not r.complete:
            body.append(f'<p class="incomplete">{html.escape(_incomplete_note(r))}</p>')
        if r.layout.get("summary"):
            body.append(f"<p>{html.escape(r.layout['summary'])}</p>")
        if provenance := data_provenance(r):
            body.append(f'<p class="data"><b>Data</b>: {html.escape(provenance)}</p>')
        for path, caption in r.figures:
            data = base64.b64encode(path.read_bytes()).decode()
            body.append(
                f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            )
        for table in r.tables:
            body.append(f"<h3>{html.escape(table.caption)}</h3>")
            if not table.header:
                body.append(f"<p>{html.escape(table.file)} is empty.</p>")
                continue
            body.append(_html_table(table.header, table.rows))
            body += (
                [f'<p class="columns">{html.escape(cut)}</p>'] if (cut := _cut_note(table)) else []
            )
            body += [_html_notes(_column_notes(table.columns))] if table.columns else []
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
    env = _environment_rows(results.runs)
    body.append("<h2>Environment</h2>" + _html_table(ENV_HEADER, env, "env"))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tailmem report</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def write_report(root: str | Path) -> Path:
    """Write ``report.md`` and ``report.html`` into ``root``; returns the HTML path.

    Each run that is not rendered is also named on stderr (``tailmem: warning: ...``), so a
    command that ends with the report's path does not hide it.
    """
    root = Path(root)
    results = collect_runs(root)
    atomic_write_text(root / "report.md", render_markdown(results, root))
    html_path = root / "report.html"
    atomic_write_text(html_path, render_html(results))
    verdicts = {r.name: [dataclasses.asdict(c) for c in r.claims] for r in results.runs}
    atomic_write_text(root / "verdicts.json", strict_json(verdicts))
    for broken in results.not_rendered:
        print(f"tailmem: warning: {broken.name} not rendered: {broken.reason}", file=sys.stderr)
    return html_path
