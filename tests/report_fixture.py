"""Hand-made run folders for the report's tests: a results folder shaped like a cpu reproduce
(answers, claims, figures, tables) written file by file, without training anything."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tailmem.claims.core import ClaimResult
from tailmem.claims.registry import claims_of
from tailmem.outputs import Answer, Figure, Outputs, Report, Table, write
from tailmem.rundir import RunDir

VERDICT_CYCLE = ("reproduced", "not reproduced", "inconclusive", "reproduced")

QA_ANSWERS = [
    {
        "question": f"{question} ({ffn} FFN)",
        "answer": answer,
        "evidence": f"{lag} needs {ratio} × Muon's exposures to bring the rarest facts' FTA to "
        "0.5 (pooled over groups; 95 % interval); the paper's tables (arXiv v2, same reading): "
        "4.13",
        "verdict": verdict,
    }
    for ffn in ("plain", "gated")
    for question, answer, lag, ratio, verdict in (
        ("With equal tuning freedom (Adam on the hidden matrices at its own rate), does Muon "
         "learn the rare facts faster than Adam?", "no: the two are equivalent within ×1.25",
         "Adam (own rate)", "1.01 [0.95, 1.08]", "equivalent"),
        ("In paper A's comparison (Adam everywhere at one rate), does Muon learn the rare facts "
         "faster than Adam?", "yes", "Adam", "1.78 [1.71, 1.86]", "faster"),
        ("How much of Muon's edge over Adam at one rate does Adam's own rate on the hidden "
         "matrices recover?", "mostly the rate", "Adam", "0.98 [0.9, 1.1]", "mostly the rate"),
    )
]  # fmt: skip
BENCH_ANSWERS = [
    {
        "question": f"Does Adam on the hidden matrices at its own rate share Muon's tail edge "
        f"({level})?",
        "answer": "yes: equivalent within ×1.25",
        "evidence": "it needs 1.01 [0.97, 1.05] × Muon's exposures (τ 0.5); 8 of 11 other "
        "optimisers share the edge",
        "verdict": "equivalent",
    }
    for level in ("BPE answers", "one token per answer")
]


@dataclass
class _Config:
    seed: int = 0


def make_run(
    root: Path,
    experiment: str,
    preset: str = "cpu",
    *,
    name: str | None = None,
    answers: list[dict[str, str]] | None = None,
    figures: int = 0,
    claims: int | None = None,
    tables: bool = False,
) -> RunDir:
    """A complete run of ``experiment`` at ``preset`` in ``root/name``: its first ``claims``
    registry claims (all by default) with verdicts cycling through :data:`VERDICT_CYCLE`,
    ``figures`` PNGs, a table with a mean ± SE pair when ``tables``, and ``answers``."""
    run = RunDir(root / (name or experiment))
    run.write_config(experiment, preset, _Config())
    results = []
    for i, claim in enumerate(claims_of(experiment)[:claims]):
        verdict = VERDICT_CYCLE[i % len(VERDICT_CYCLE)]
        reason = "within 2 SE" if verdict == "inconclusive" else ""
        results.append(ClaimResult(
            claim.id if claim.variant is None else f"{claim.id}.{claim.variant}",
            claim.describe(claim.statement), claim.source,
            claim.describe(claim.published), f"{0.5 + i / 100:.3f} ± 0.010",
            claim.describe(claim.rule), verdict, reason=reason, seeds=[0, 1, 2],
        ))  # fmt: skip
    shown = []
    for k in range(figures):
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([0, 1, 2], [k, k + 1, k / 2])
        shown.append(Figure(f"figure_{k}", fig, f"figure {k} of {experiment}"))
    listed = []
    if tables:
        rows = [{"arm": arm, "fta mean": m, "fta SE": s, "n": 3}
                for arm, m, s in (("muon", 0.9012345, 0.008), ("adam", 0.625, 0.0084))]  # fmt: skip
        listed.append(Table("final.csv", rows, "final FTA of the rarest group",
                            {"rarest FTA": "seed mean ± SE"},
                            {"rarest FTA": ["fta mean", "fta SE"]}))  # fmt: skip
    report = Report(f"{experiment} at {preset}", f"What {experiment} measured, in one paragraph.",
                    tuple(Answer(**a) for a in answers or ()))  # fmt: skip
    write(run, Outputs(tuple(listed), tuple(shown), claims=tuple(results), report=report))
    run.mark_complete(12.0)
    return run


def cpu_style_folder(root: Path, preset: str = "cpu") -> Path:
    """A results folder like a cpu reproduce's, at ``preset``: the one-layer memory, knowledge
    QA (answers, many figures, a table) and the optimiser benchmark (answers)."""
    make_run(root, "assoc-two-group", preset, figures=3)
    make_run(root, "knowledge-qa", preset, answers=QA_ANSWERS, figures=8, tables=True)
    make_run(root, "spectra", preset, figures=2)
    make_run(root, "optim-bench", preset, answers=BENCH_ANSWERS, figures=2)
    return root
