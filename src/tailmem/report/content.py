"""What the report says, as text and rows; :mod:`.markdown` and :mod:`.page` only lay it out.

The first screen answers: each study's headline answers (``report.json`` ``answers``), or which
studies to run to get them (the questions of the studies' records, passed in: the report does
not import the studies), under a banner per preset saying what its
runs can show. Then the verdict counts — per preset, never pooled across presets
(:func:`tallies`) — and the claims no run here measures (:func:`unmeasured`); then one section
per run in the papers' order, the registry claims no experiment measures, and the environment.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tailmem.claims.core import VERDICTS, Claim, ClaimResult
from tailmem.claims.host import host_note
from tailmem.claims.listing import EXPERIMENTS
from tailmem.claims.registry import claims_of, lookup
from tailmem.config import USER_PRESET
from tailmem.outputs import Answer
from tailmem.report.layout import Table
from tailmem.report.presets import Preset, mixed_note
from tailmem.report.reader import Results, RunSummary

ANSWERS_TITLE = "Answers"
VERDICTS_TITLE = "Verdicts"
NOT_RENDERED_TITLE = "Runs not rendered"
NOT_RENDERED_NOTE = (
    "These run directories failed the report's checks: their verdicts are not counted above "
    "(their experiments' registry claims count as not measured). Fix or rerun them."
)
UNCOVERED_TITLE = "Claims not covered by an experiment"
UNCOVERED_HEADER = ["claim", "source", "published", "rule"]
ENVIRONMENT_TITLE = "Environment"
ENV_HEADER = ["experiment", "preset", "wall time", "device", "versions", "commit"]
SUMMARY_HEADER = ["experiment", "preset", *VERDICTS]
ANSWER_HEADER = ["question", "answer", "evidence", "verdict", "study"]
CLAIM_HEADER = ["claim", "source", "published", "ours", "rule", "seeds", "verdict"]
CLAIMS_TABLE_NOTE = (
    "Columns: **claim** the published statement; **source** where it stands in the paper; "
    "**published** the paper's value (each paper version's where they differ); **ours** our "
    "measurement (mean ± standard error over seeds where seeds vary); **rule** what decided the "
    "verdict, in words, and why it follows from the published statement; **seeds** the seeds "
    "behind the verdict (exact: a deterministic computation with no sampling); **verdict** "
    "reproduced, not reproduced, inconclusive (the run cannot resolve the effect) or not "
    "measured, with the reason. Every interval behind a verdict is 95 % two-sided (Student t, "
    "Welch degrees of freedom, standard errors floored at the measurement's resolution); "
    '"the same" is an equivalence test with a declared margin, never "no difference shown"; '
    'a verdict marked "decided per host" moved when only the floating-point reduction '
    "order changed."
)
NOT_RUN = "experiment not in this results folder"
NO_EXPERIMENT = "no experiment measures it yet"


def anchor(run: RunSummary) -> str:
    """The HTML id of a run's section: ``run-`` and its folder name, made safe."""
    return "run-" + re.sub(r"[^A-Za-z0-9_-]+", "-", run.name)


def presets(results: Results) -> list[Preset]:
    """The presets of the runs, each once, in the order the runs come."""
    return list(dict.fromkeys(r.preset for r in results.runs))


def mixed(results: Results) -> bool:
    return len({p.label for p in presets(results)}) > 1


def mixed_warning(results: Results) -> str:
    """The visible note of a folder mixing presets ("" for one preset)."""
    return mixed_note(presets(results))


def section_title(run: RunSummary, results: Results) -> str:
    """A run's heading: its title, with its preset where the folder mixes presets and its folder
    where the folder holds another run of the same experiment."""
    title = run.title
    if mixed(results):
        title += f" ({run.preset.label})"
    if sum(r.experiment == run.experiment for r in results.runs) > 1:
        title += f" — {run.name}"
    return title


def contents(results: Results) -> list[tuple[str, str]]:
    """The table of contents: ``(anchor, title)`` of every section, in page order."""
    entries = [("answers", ANSWERS_TITLE), ("verdicts", VERDICTS_TITLE)]
    if results.not_rendered:
        entries.append(("not-rendered", NOT_RENDERED_TITLE))
    entries += [(anchor(r), section_title(r, results)) for r in results.runs]
    entries += [("uncovered", UNCOVERED_TITLE), ("environment", ENVIRONMENT_TITLE)]
    return entries


# ------------------------------------------------------------------------------- answers


def answers(results: Results) -> list[tuple[RunSummary, Answer]]:
    """Every answer the runs state, in the papers' order of their studies."""
    return [(r, a) for r in results.runs for a in r.layout.answers]


def answer_row(run: RunSummary, answer: Answer, results: Results) -> list[str]:
    study = run.experiment + (f" ({run.preset.label})" if mixed(results) else "")
    verdict = smoke_verdict(run, answer.verdict)
    return [answer.question, answer.answer, answer.evidence, verdict, study]


def unanswered(results: Results, folder: Path | None, questions: Mapping[str, str]) -> list[str]:
    """One line per study of ``questions`` (study name → the headline question its report
    answers: :func:`tailmem.experiments.headline_questions`) whose answers the report lacks:
    its question and the command that adds them (``folder``: the results folder; None for a
    report of one run)."""
    lines = []
    preset = _one_packaged_preset(results)
    for experiment, question in questions.items():
        runs = [r for r in results.runs if r.experiment == experiment]
        if any(r.layout.answers for r in runs):
            continue
        if runs and not runs[0].complete:
            how = f"its run here is incomplete: finish it with `{_rerun(runs[0], force=False)}`"
        elif runs:
            how = (
                "its run here states none (made before studies stated answers): redo it with "
                f"`{_rerun(runs[0], force=True)}`"
            )
        else:
            out = f" --out {shlex.quote(str(folder))}" if folder is not None else ""
            command = f"tailmem reproduce --preset {preset} --only {experiment}{out}"
            how = f"not in this report: `{command}`"
        lines.append(f"{experiment} answers “{question}” — {how}")
    return lines


def _one_packaged_preset(results: Results) -> str:
    """The packaged preset all runs share (a command's ``--preset``), else ``cpu``."""
    names = {p.name for p in presets(results)}
    return names.pop() if len(names) == 1 and USER_PRESET not in names else "cpu"


def _rerun(run: RunSummary, force: bool) -> str:
    """The command that resumes ``run`` in place at its own preset (``force``: redoes it)."""
    given = (
        f"--config {shlex.quote(run.preset.config_file)}"
        if run.preset.config_file is not None
        else f"--preset {run.preset.name}"
    )
    redo = " --force" if force else ""
    return f"tailmem run {run.experiment} {given} --out {shlex.quote(str(run.path))}{redo}"


# ------------------------------------------------------------------------------ verdicts


@dataclass(frozen=True)
class Tally:
    """The verdict counts of the runs of one preset (every claim of their experiments)."""

    preset: str
    counts: tuple[int, ...]
    experiments: tuple[str, ...]

    def text(self) -> list[tuple[int, str]]:
        return list(zip(self.counts, VERDICTS, strict=True))


def tallies(results: Results) -> list[Tally]:
    """The verdict counts per preset, in the order the presets' runs come: runs of different
    presets are never counted together."""
    out = []
    for preset in dict.fromkeys(r.preset.label for r in results.runs):
        runs = [r for r in results.runs if r.preset.label == preset]
        counts = [sum(c.verdict == v for r in runs for c in r.claims) for v in VERDICTS]
        experiments = tuple(dict.fromkeys(r.experiment for r in runs))
        out.append(Tally(preset, tuple(counts), experiments))
    return out


@dataclass(frozen=True)
class Unmeasured:
    """The registry claims no run here measures: those of experiments not in the folder (or
    whose run was not rendered) and those no experiment measures yet."""

    not_run: int
    uncovered: int


def unmeasured(results: Results) -> Unmeasured:
    ran = {r.experiment for r in results.runs}
    not_run = sum(len(claims_of(name)) for name in EXPERIMENTS if name not in ran)
    return Unmeasured(not_run, len(claims_of(None)))


def summary_rows(results: Results) -> list[list[str]]:
    """Verdict counts per run with its preset, then every experiment not rendered here (its
    registry claims as not measured) and the uncovered claims."""
    rows = []
    for r in results.runs:
        counts = [str(sum(c.verdict == v for c in r.claims)) for v in VERDICTS]
        rows.append([section_title(r, results), r.preset.label, *counts])
    ran = {r.experiment for r in results.runs}
    for name in EXPERIMENTS:
        if name not in ran:
            broken = [b.name for b in results.not_rendered if b.experiment == name]
            why = f"run {', '.join(broken)} not rendered" if broken else NOT_RUN
            rows.append([f"{name} ({why})", "—", "0", "0", "0", str(len(claims_of(name)))])
    rows.append([f"uncovered ({NO_EXPERIMENT})", "—", "0", "0", "0", str(len(claims_of(None)))])
    return rows


# -------------------------------------------------------------------------------- claims


def seeds_text(claim: ClaimResult) -> str:
    if claim.verdict == "not measured":
        return "—"
    if claim.seeds is None:
        return "exact (no sampling)" if claim.check else "see rule"
    return ", ".join(map(str, claim.seeds)) + f" (n = {len(claim.seeds)})"


def verdict_text(claim: ClaimResult) -> str:
    """The verdict with its reason, and "decided per host" where rounding alone moved it
    (:mod:`tailmem.claims.host`)."""
    text = f"{claim.verdict}: {claim.reason}" if claim.reason else claim.verdict
    note = host_note(claim.id)
    return f"{text} — {note}" if note else text


def rule_text(claim: ClaimResult) -> str:
    """The rule in words, with the registry's reasoning for it where there is one."""
    registered = lookup(claim.id)
    why = registered.why if registered is not None else ""
    return f"{claim.rule} — why: {why}" if why else claim.rule


def claim_rows(run: RunSummary) -> list[list[str]]:
    """The claims table of a run (:data:`CLAIM_HEADER`); a smoke run's verdicts say they are
    not evidence (:func:`smoke_verdict`)."""
    return [
        [c.claim, c.source, c.published, c.ours, rule_text(c), seeds_text(c),
         smoke_verdict(run, verdict_text(c))]
        for c in run.claims
    ]  # fmt: skip


SMOKE_VERDICT = "smoke: not evidence"


def is_smoke(run: RunSummary) -> bool:
    return run.preset.name == "smoke"


def smoke_note(run: RunSummary) -> str:
    """The banner every section of a smoke run repeats ("" for other presets): a reader who
    lands on a study's section or figure sees that its verdicts are not evidence."""
    return run.preset.banner() if is_smoke(run) else ""


def smoke_verdict(run: RunSummary, verdict: str) -> str:
    """``verdict`` as a smoke run's report shows it, ``reproduced (smoke: not evidence)``."""
    return f"{verdict} ({SMOKE_VERDICT})" if is_smoke(run) else verdict


def figure_caption(run: RunSummary, caption: str) -> str:
    """A figure's caption, with a smoke run's figures marked as no evidence."""
    return f"{caption} ({SMOKE_VERDICT})" if is_smoke(run) else caption


def uncovered_rows() -> list[list[str]]:
    """The registry claims that no experiment measures (yet)."""
    return [_describe(c) for c in claims_of(None)]


def _describe(claim: Claim) -> list[str]:
    return [claim.describe(t) for t in (claim.statement, claim.source, claim.published, claim.rule)]


# ------------------------------------------------------------------------- tables, notes


def column_notes(columns: dict[str, str]) -> str:
    return "Columns: " + "; ".join(f"**{k}** {v}" for k, v in columns.items())


def cut_note(table: Table) -> str:
    """Says that a table shows only its first rows ("" where it shows them all)."""
    if table.total <= len(table.rows):
        return ""
    return f"First {len(table.rows)} of {table.total} rows; every row is in {table.file}."


def incomplete_note(run: RunSummary) -> str:
    return f"This run is incomplete ({run.incomplete}); rerun reproduce to finish it."


def environment_rows(results: Results) -> list[list[str]]:
    rows = []
    for r in results.runs:
        env = r.record.get("environment", {})
        wall = f"{r.wall_seconds:.0f} s" if r.wall_seconds is not None else "incomplete"
        if r.complete and r.wall_seconds is None:
            wall = "not recorded"
        rows.append(
            [
                r.experiment,
                r.preset.label,
                wall,
                str(env.get("device", "?")),
                f"torch {env.get('torch', '?')}, python {env.get('python', '?')}",
                str(env.get("git_commit") or "?")[:10],
            ]
        )
    return rows
