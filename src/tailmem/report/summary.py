"""What ``tailmem run`` and ``tailmem reproduce`` print when they end: the results, on one screen.

Read from the run directories alone (``config.yaml``, ``claims.json``, ``report.json`` and the
tuning tables, through :func:`tailmem.report.reader.read_run`, so the registry claims a run
lacks count as "not measured" exactly as in the report, and a damaged run is refused in one
line): a table of each study's verdict counts (one row per run: presets are never pooled), each
preset's banner (a smoke run's verdicts are not evidence: the preset's own line says so), the
headline answers with the number behind each and its interval, and every tuned learning rate
that ended at an end of its grid (the best candidate tried, perhaps not the best rate). ``run``
adds each claim that did not reproduce, with the published value beside ours (not at smoke,
whose verdicts say nothing about the papers); ``reproduce`` adds the runs the report could not
render.
"""

from __future__ import annotations

import csv
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tailmem.claims.core import VERDICTS
from tailmem.mdtable import text_table
from tailmem.report.reader import Results, RunSummary, collect_runs, read_run

MAX_LISTED = 8
"""At most this many claims are listed, two lines each (the rest are counted): one screen."""
WIDTH = 110
TUNING_TABLES = ("tuning.csv",)
"""The tables that record each tuned rate's choice and whether it sat at a grid edge."""


@dataclass(frozen=True)
class EdgeRate:
    """A tuned learning rate that ended at an end of the candidates tried."""

    experiment: str
    where: str
    arm: str
    chosen: str
    edge: str


def run_summary(path: str | Path) -> str:
    """The end of ``tailmem run``: the results table of the run directory ``path``, then the
    claims that did not reproduce (not at smoke) and where to look."""
    path = Path(path)
    run = read_run(path)
    lines = results_lines(Results((run,)))
    if run.preset.name != "smoke":
        missed = [c for c in run.claims if c.verdict != "reproduced"]
        if missed:
            lines.append("claims not reproduced:")
        for claim in missed[:MAX_LISTED]:
            lines.append(_fit(f"  {claim.verdict:<16}{claim.claim} ({claim.source})"))
            lines.append(_fit(f"  {'':<16}published {claim.published}; ours {claim.ours}"))
        if len(missed) > MAX_LISTED:
            lines.append(f"  … and {len(missed) - MAX_LISTED} more in claims.json")
    lines.append(f"run directory: {path} (claims.json: every rule and number)")
    return "\n".join(lines)


def folder_summary(folder: str | Path) -> str:
    """The end of ``tailmem reproduce``: the results table of the results folder ``folder``,
    and each run the report could not render."""
    results = collect_runs(folder)
    lines = results_lines(results)
    lines += [_fit(f"not rendered: {b.name}: {b.reason}") for b in results.not_rendered]
    return "\n".join(lines)


def results_lines(results: Results) -> list[str]:
    """The verdict counts per study, each preset's banner, the answers with their intervals and
    the rates at a grid edge (module docstring)."""
    rows = []
    for run in results.runs:
        counts: Counter[str] = Counter(c.verdict for c in run.claims)
        state = "" if run.complete else " (incomplete)"
        rows.append([run.experiment + state, run.preset.label, *(counts[v] for v in VERDICTS)])
    lines = ["results:", *_indent(text_table(["study", "preset", *VERDICTS], rows))]
    for preset in dict.fromkeys(r.preset for r in results.runs):
        lines += textwrap.wrap(preset.banner(), WIDTH, subsequent_indent="  ")
    answered = [(run, answer) for run in results.runs for answer in run.layout.answers]
    if answered:
        lines.append("answers (the number behind each, with its 95 % interval):")
    for run, answer in answered:
        question = f"{run.experiment}: {answer.question}"
        lines += textwrap.wrap(question, WIDTH, initial_indent="  ", subsequent_indent="    ")
        text = f"→ {answer.answer} [{answer.verdict}] — {answer.evidence}"
        lines += textwrap.wrap(text, WIDTH, initial_indent="    ", subsequent_indent="      ")
    edges = [edge for run in results.runs for edge in edge_rates(run)]
    if edges:
        lines.append(
            "rates at an end of their grid (the best candidate tried; a wider grid may do better):"
        )
    lines += [
        _fit(f"  {e.experiment}: {e.arm} {e.chosen}, the {e.edge} tried ({e.where})") for e in edges
    ]
    return lines


def edge_rates(run: RunSummary) -> list[EdgeRate]:
    """Every tuned rate of ``run`` whose choice sits at an end of its candidates: the rows of
    its tuning tables (the run's own and its grid points') with an ``edge``."""
    found = []
    for name in TUNING_TABLES:
        for table in sorted(run.path.rglob(name)):
            if "runs" in table.relative_to(run.path).parts:
                continue  # a training run's folder holds no tuning table of the study's
            with table.open(newline="", encoding="utf-8") as handle:
                for row in csv.DictReader(handle):
                    if row.get("edge"):
                        found.append(EdgeRate(
                            run.experiment, table.relative_to(run.path).as_posix(),
                            "/".join(filter(None, (row.get("ffn"), row.get("arm")))),
                            row.get("chosen", "?"), row["edge"],
                        ))  # fmt: skip
    return found


def _indent(text: str) -> Sequence[str]:
    return [f"  {line}" for line in text.splitlines()]


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"
