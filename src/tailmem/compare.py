"""``tailmem compare RUN_A RUN_B [...]``: runs of one experiment side by side.

What differs between the runs' configs (key by key, from each ``config.yaml``, with the
environment facts that differ), each run's verdict counts (per run, never added up), each claim's
verdict and our number in one row per claim with a column pair per run, and the key figures
side by side (the first :data:`KEY_FIGURES` of the experiment's ``report.json`` order that every
run has). Each column is headed by its run and preset (``kqa8 (smoke)``); a note says when the
runs' presets differ. Printed as a summary; with ``--out DIR`` also written as ``compare.md``
(figures linked) and a self-contained ``compare.html`` (:mod:`tailmem.compare_page`).

Every run is read and checked as the report reads it (:func:`tailmem.report.reader.read_run`),
before anything is written; runs of different experiments are refused in one line, as are a
run given twice, fewer than two runs, a path that does not lead to a folder (a symbolic-link
loop, a missing path) and a run still being written (another tailmem process holds its writer
lock: its files change while they are read). A run that is not complete is labelled as the
report labels it, in every column header and in a note: one that stopped before finishing
(killed, or failed: no ``COMPLETE``) and one whose files changed after it finished (a file no
longer matches the hash ``COMPLETE`` recorded, as when ``claims.json`` was edited).

Each preset's banner says what its runs can show (a smoke run's verdicts are not evidence).
Beside each later run, each claim has a difference column: its measures (``mean ± SE``) minus
the first run's, with 95 % intervals where both rest on seeds (:mod:`tailmem.compare_values`);
each run's headline answers are listed with their intervals; and the training curves of the
runs' language-model sub-runs are drawn on one figure (:mod:`tailmem.compare_curves`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailmem.claims.core import VERDICTS
from tailmem.compare_values import Delta, differences
from tailmem.config_diff import MISSING, Difference, flatten
from tailmem.config_diff import differences as config_differences
from tailmem.errors import ConfigError, DataError
from tailmem.mdtable import md_table
from tailmem.report.layout import Figure
from tailmem.report.reader import RunSummary, read_run
from tailmem.rundir import COMPLETE_MARKER, RunDir

KEY_FIGURES = 4
"""Figures shown side by side (the rest are listed in compare.md and folded in compare.html)."""
ENVIRONMENT_KEYS = ("tailmem", "git_commit", "torch", "python", "device")
"""The environment facts compared (those that can change a number; not the start time)."""


@dataclass(frozen=True)
class ClaimRow:
    """One claim: its statement and the published value, then per run its verdict and ours,
    and per run after the first its measures' differences from the first run's."""

    id: str
    claim: str
    published: str
    verdicts: tuple[str, ...]
    ours: tuple[str, ...]
    differences: tuple[tuple[Delta, ...], ...] = ()

    @property
    def agree(self) -> bool:
        return len(set(self.verdicts)) == 1


@dataclass(frozen=True)
class Comparison:
    """Runs of one experiment compared (see the module docstring)."""

    experiment: str
    runs: tuple[RunSummary, ...]
    labels: tuple[str, ...]
    config: tuple[Difference, ...]
    environment: tuple[Difference, ...]
    claims: tuple[ClaimRow, ...]
    figures: tuple[tuple[Figure, ...], ...]
    only_some: tuple[str, ...]

    @property
    def presets_differ(self) -> bool:
        return len({r.preset.label for r in self.runs}) > 1

    @property
    def banners(self) -> list[str]:
        """What each preset of the runs can show, once per preset (the report's banners)."""
        return [p.banner() for p in dict.fromkeys(r.preset for r in self.runs)]

    def notes(self) -> list[str]:
        """One line per run that is not complete: what happened to it and what that means."""
        return [
            f"{label}: {_state(run)} ({run.incomplete}); {_meaning(run)}"
            for run, label in zip(self.runs, self.labels, strict=True)
            if not run.complete
        ]

    def counts(self, run: RunSummary) -> list[int]:
        """The verdict counts of one run (:data:`~tailmem.claims.core.VERDICTS` order)."""
        return [sum(c.verdict == v for c in run.claims) for v in VERDICTS]


def compare(paths: Sequence[str | os.PathLike[str]]) -> Comparison:
    """Read and compare the run directories ``paths`` (at least two, one experiment)."""
    if len(paths) < 2:
        raise ConfigError(f"compare: got {len(paths)} run; expected two or more run folders")
    seen: dict[Path, str] = {}
    for path in paths:
        if not str(path).strip():
            raise ConfigError(
                "compare: got an empty path; expected a run folder ('.' for this one)"
            )
        _reachable(path)
        resolved = Path(path).resolve()
        if resolved in seen:
            raise ConfigError(f"compare: {path} is given twice; expected each run once")
        seen[resolved] = str(path)
        if not (Path(path) / "config.yaml").is_file():
            raise DataError(f"compare: {path} is not a run folder (no config.yaml); expected one "
                            "written by tailmem run or reproduce")  # fmt: skip
        if (pid := RunDir(path).writer()) is not None:
            raise ConfigError(
                f"compare: {path} is being written by a tailmem process (pid {pid}); expected a "
                "finished run: wait for it to finish, then compare"
            )
    runs = tuple(read_run(Path(p)) for p in paths)
    experiments = list(dict.fromkeys(r.experiment for r in runs))
    if len(experiments) > 1:
        other = next(r for r in runs if r.experiment != runs[0].experiment)
        raise ConfigError(
            f"compare: {paths[0]} is a run of {runs[0].experiment} but {other.path} of "
            f"{other.experiment}; expected runs of one experiment"
        )
    labels = _labels(runs, paths)
    return Comparison(
        experiment=experiments[0],
        runs=runs,
        labels=labels,
        config=config_differences([_config_view(r.record) for r in runs]),
        environment=config_differences([_environment(r.record) for r in runs]),
        claims=_claim_rows(runs),
        figures=_shared_figures(runs),
        only_some=_figures_of_some(runs),
    )


def _reachable(path: str | os.PathLike[str]) -> None:
    """Refuse a path the file system cannot follow (a symbolic-link loop, a missing folder)
    in one line, before anything resolves it."""
    try:
        os.stat(path)
    except OSError as exc:
        what = "a symbolic-link loop" if exc.errno == errno.ELOOP else exc.strerror
        raise DataError(
            f"compare: {path}: {what or type(exc).__name__}; expected a run folder written by "
            "tailmem run or reproduce"
        ) from None


def _labels(runs: Sequence[RunSummary], paths: Sequence[str | os.PathLike[str]]) -> tuple[str, ...]:
    """Each run's column header: its folder name (its path where two share a name), preset and,
    for a run that is not complete, what it is (:func:`_state`)."""
    names = [r.name for r in runs]
    shown = [
        str(p) if names.count(r.name) > 1 else r.name for r, p in zip(runs, paths, strict=True)
    ]
    return tuple(
        f"{name} ({', '.join([r.preset.label, *([_state(r)] if not r.complete else [])])})"
        for name, r in zip(shown, runs, strict=True)
    )


def _state(run: RunSummary) -> str:
    """``incomplete`` (it never finished) or ``changed after it finished`` (COMPLETE is there
    but a file no longer matches it); "" for a complete run."""
    if run.complete:
        return ""
    finished = (run.path / COMPLETE_MARKER).is_file()
    return "changed after it finished" if finished else "incomplete"


def _meaning(run: RunSummary) -> str:
    """What a run's state means for its columns."""
    if _state(run) == "incomplete":
        return (
            "it stopped before finishing (killed, or failed): its claims are what it had "
            "written, not a finished run's; rerun it to finish it"
        )
    return (
        "its files are not what the run wrote: its verdicts and numbers are not the run's; "
        "rerun it with --force to certify them again"
    )


def _config_view(record: Mapping[str, Any]) -> dict[str, Any]:
    """A run record's compared keys: its preset, a user's config file, then the config."""
    view: dict[str, Any] = {"preset": record.get("preset")}
    config_file = record.get("config_file")
    if isinstance(config_file, Mapping):
        view.update({f"config_file.{k}": v for k, v in config_file.items()})
    view.update(flatten(record["config"]))
    return view


def _environment(record: Mapping[str, Any]) -> dict[str, Any]:
    env = record.get("environment", {})
    return {key: env.get(key) for key in ENVIRONMENT_KEYS if key in env}


def _claim_rows(runs: Sequence[RunSummary]) -> tuple[ClaimRow, ...]:
    """One row per claim any run has, in the first run's (the registry's) order."""
    by_run = [{c.id: c for c in r.claims} for r in runs]
    ids = list(dict.fromkeys(cid for claims in by_run for cid in claims))
    rows = []
    for cid in ids:
        first = next(claims[cid] for claims in by_run if cid in claims)
        verdicts = tuple(c[cid].verdict if cid in c else MISSING for c in by_run)
        ours = tuple(c[cid].ours if cid in c else MISSING for c in by_run)
        base = by_run[0].get(cid)
        diffs = tuple(
            differences(base, c[cid]) if base is not None and cid in c else () for c in by_run[1:]
        )
        rows.append(ClaimRow(cid, first.claim, first.published, verdicts, ours, diffs))
    return tuple(rows)


def _shared_figures(runs: Sequence[RunSummary]) -> tuple[tuple[Figure, ...], ...]:
    """Per figure file every run shows (first run's order), the runs' figures of it."""
    by_run = [{f.path.name: f for f in r.layout.figures} for r in runs]
    return tuple(
        tuple(figures[name] for figures in by_run)
        for name in by_run[0]
        if all(name in figures for figures in by_run)
    )


def _figures_of_some(runs: Sequence[RunSummary]) -> tuple[str, ...]:
    """``name (run, ...)`` of each figure only some runs show."""
    names = [[f.path.name for f in r.layout.figures] for r in runs]
    every = set.intersection(*(set(n) for n in names))
    out = []
    for name in dict.fromkeys(n for listed in names for n in listed):
        if name not in every:
            holders = [r.name for r, listed in zip(runs, names, strict=True) if name in listed]
            out.append(f"{name} ({', '.join(holders)})")
    return tuple(out)


# ------------------------------------------------------------------------------ as text


def presets_note(comparison: Comparison) -> str:
    """The warning of runs made at different presets ("" when they share one)."""
    if not comparison.presets_differ:
        return ""
    labels = ", ".join(dict.fromkeys(r.preset.label for r in comparison.runs))
    smoke = " Smoke verdicts are not evidence." if any(
        r.preset.name == "smoke" for r in comparison.runs
    ) else ""  # fmt: skip
    return (
        f"These runs were made at different presets ({labels}): each column is one run at its "
        f"own preset; nothing is added up across them.{smoke}"
    )


def summary(comparison: Comparison, written: Sequence[Path] = ()) -> str:
    """The printed summary: each preset's banner, the runs that are not complete, the config
    keys that differ, each run's verdict counts, the claims whose verdicts differ, each claim's
    difference from the first run (:data:`MAX_LISTED` at most), each run's answers and the
    files written."""
    c = comparison
    lines = [f"compare {c.experiment}: {' vs '.join(c.labels)}", *c.banners]
    if note := presets_note(c):
        lines.append(note)
    lines += c.notes()
    verb = "differs" if len(c.config) == 1 else "differ"
    facts = f"; environment: {_count(len(c.environment), 'fact')}" if c.environment else ""
    lines.append(f"config: {_count(len(c.config), 'key')} {verb}{facts}")
    lines += [f"  {d.key}: {' | '.join(d.values)}" for d in c.config]
    lines += [f"  environment {d.key}: {' | '.join(d.values)}" for d in c.environment]
    lines.append("verdicts:")
    for run, label in zip(c.runs, c.labels, strict=True):
        counts = ", ".join(f"{n} {v}" for n, v in zip(c.counts(run), VERDICTS, strict=True))
        lines.append(f"  {label}: {counts}")
    differ = [row for row in c.claims if not row.agree]
    lines.append(f"claims whose verdict differs: {len(differ)} of {len(c.claims)}")
    lines += [f"  {row.id}: {' | '.join(row.verdicts)}" for row in differ]
    lines += _difference_lines(c)
    for question, given in answers(c):
        lines.append(f"answer: {question}")
        lines += [f"  {label}: {text}" for label, text in given]
    if written:
        lines.append(f"written: {', '.join(str(p) for p in written)}")
    return "\n".join(lines)


MAX_LISTED = 12
"""Claims whose differences the printed summary lists (every one is in compare.md)."""


def _difference_lines(comparison: Comparison) -> list[str]:
    """Each claim's measured differences from the first run, one line per claim and later run."""
    c = comparison
    rows = [row for row in c.claims if any(row.differences)]
    if not rows:
        return ["differences: no claim states a measure (mean ± SE) in both runs"]
    lines = [f"differences from {c.labels[0]} (95 % t intervals where both runs have seeds):"]
    for row in rows[:MAX_LISTED]:
        for label, deltas in zip(c.labels[1:], row.differences, strict=True):
            if deltas:
                lines.append(f"  {row.id} ({label}): {'; '.join(d.text() for d in deltas)}")
    if len(rows) > MAX_LISTED:
        lines.append(f"  … and {len(rows) - MAX_LISTED} more claims in compare.md")
    return lines


def answers(comparison: Comparison) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each headline question any run answers, with each run's answer, verdict and the number
    behind it (its interval): ``(question, [(run label, text), ...])``."""
    questions: dict[str, list[tuple[str, str]]] = {}
    for run, label in zip(comparison.runs, comparison.labels, strict=True):
        for answer in run.layout.answers:
            text = f"{answer.answer} [{answer.verdict}] — {answer.evidence}"
            questions.setdefault(answer.question, []).append((label, text))
    return list(questions.items())


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def claim_header(comparison: Comparison) -> list[str]:
    """The claims table's header: the claim and published value, verdict and ours per run, then
    each later run's difference from the first."""
    c = comparison
    per_run = [f"{what} ({label})" for label in c.labels for what in ("verdict", "ours")]
    diffs = [f"difference ({label} − {c.labels[0]})" for label in c.labels[1:]]
    return ["claim", "published", *per_run, *diffs]


def claim_cells(row: ClaimRow) -> list[str]:
    pairs = [cell for pair in zip(row.verdicts, row.ours, strict=True) for cell in pair]
    diffs = ["; ".join(d.text() for d in deltas) or MISSING for deltas in row.differences]
    return [f"{row.claim} ({row.id})", row.published, *pairs, *diffs]


def config_header(comparison: Comparison) -> list[str]:
    return ["key", *comparison.labels]


def counts_rows(comparison: Comparison) -> list[list[str]]:
    return [
        [label, *map(str, comparison.counts(run))]
        for run, label in zip(comparison.runs, comparison.labels, strict=True)
    ]


DIFFERENCE_NOTE = (
    "Each **difference** column: every measure (mean ± SE) the claim states in both runs, this "
    "run's minus the first's, with its 95 % two-sided Student-t interval (Welch degrees of "
    "freedom) where both rest on two or more seeds; — where the claim states none in both."
)
CURVES_CAPTION = "The runs' training curves overlaid: an arm's colour, a run's line style"
NO_CURVES = "No training curves to overlay: these runs train no language model in common."


def render_markdown(comparison: Comparison, out: Path, curves: str | None = None) -> str:
    """``compare.md``; figures linked relative to ``out``, ``curves`` the overlaid curves'
    file name in ``out`` (None: the runs have none)."""
    c = comparison
    lines = [f"# tailmem compare: {c.experiment}", ""]
    lines += [f"Runs: {', '.join(f'`{r.path}`' for r in c.runs)}", ""]
    lines += [f"> **{banner}**" for banner in c.banners] + [""]
    if note := presets_note(c):
        lines += [f"> **{note}**", ""]
    lines += [f"- *{note}*" for note in c.notes()] + ([""] if c.notes() else [])
    lines += ["## Config difference", ""]
    if c.config:
        lines += [md_table(config_header(c), [[d.key, *d.values] for d in c.config]), ""]
    else:
        lines += ["The configs are identical.", ""]
    if c.environment:
        rows = [[d.key, *d.values] for d in c.environment]
        lines += ["Environment:", "", md_table(config_header(c), rows), ""]
    lines += ["## Verdicts", "", md_table(["run", *VERDICTS], counts_rows(c)), ""]
    lines += ["## Claims", "", md_table(claim_header(c), [claim_cells(r) for r in c.claims]), ""]
    lines += [DIFFERENCE_NOTE, ""]
    if found := answers(c):
        lines += ["## Answers", ""]
        for question, given in found:
            lines += [f"**{question}**", ""] + [f"- {label}: {text}" for label, text in given]
            lines.append("")
    lines += ["## Training curves", ""]
    lines += [f"![{CURVES_CAPTION}]({curves})" if curves else NO_CURVES, ""]
    lines += ["## Key figures", ""]
    for figures in c.figures[:KEY_FIGURES]:
        cells = [
            f"![{f.caption}]({Path(os.path.relpath(f.path, out)).as_posix()})" for f in figures
        ]
        lines += [f"**{figures[0].caption}**", "", md_table(c.labels, [cells]), ""]
    rest = [figures[0].path.name for figures in c.figures[KEY_FIGURES:]]
    if rest:
        lines += [f"Other figures every run has: {', '.join(rest)}.", ""]
    if c.only_some:
        lines += [f"Figures only some runs have: {', '.join(c.only_some)}.", ""]
    return "\n".join(lines)
