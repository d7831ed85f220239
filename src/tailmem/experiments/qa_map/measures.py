"""What the knowledge-QA grid studies (``qa-map``, ``qa-sensitivity``) read of one finished point
(:class:`~tailmem.experiments.knowledge_qa.grid.PointResult`), as typed values.

- :func:`arm_choice`: an arm's chosen rate, where it sits among the candidates tried, and its
  tuning cost against its budget (:class:`ArmChoice`).
- :func:`seed_ratios`: a lag ratio over seeds (:class:`~tailmem.metrics.qa_gaps.LagRatio`) as
  the claims read it (:class:`~tailmem.claims.a3_sensitivity.SeedRatios`).
- :func:`final_gaps`: lead − lag per seed and group at the last evaluation (paired by seed), and
  :func:`tail_gap`, the rarest group's — the pre-specified cell every comparison may read — as a
  :class:`FinalGap` with the resolution of its FTA.
- :func:`edge`: whether Muon's edge at a point is shown, absent or not distinguished, from the
  lag ratio and the tail gap together (:class:`Edge`), and :func:`holm_edges`, the same across
  a grid's points with Holm's correction. The descriptive peak gap enters none of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from tailmem.claims.a3_sensitivity import SeedRatios, judge_log
from tailmem.claims.core import (
    ALPHA,
    Comparison,
    EquivalenceTest,
    compare_seeds,
    equivalence,
    holm,
)
from tailmem.data.bios import N_ATTRIBUTES, group_sizes
from tailmem.experiments.knowledge_qa import grid
from tailmem.metrics.qa_gaps import LagRatio

RATIO_MARGIN = 1.25
"""Equivalence margin of a lag ratio to 1 (no edge): a ratio inside ×/÷ 1.25 counts as none.
Adam needing under a quarter more exposures than Muon is below a quarter of the paper's own
log ratio (ln 2.59 = 0.95 at group m − 2, τ 0.5) and about the width of one evaluation bracket
at the map's cadence (ten evaluations: a crossing mid-training is placed within ±10–20 %)."""
GAP_MARGIN = 0.05
"""Equivalence margin of the tail gap to 0 (no edge), in FTA: under a fourteenth of the paper's
tail gap (0.976 − 0.264 = 0.71, arXiv v2, group 15 at 10k steps) and about two binomial SDs of
the rarest group's FTA at m = 7 (384 questions: 0.026 at FTA 0.5)."""

Where = Literal["interior", "lowest edge", "highest edge", "set", "shared", "not run"]


@dataclass(frozen=True)
class ArmChoice:
    """One arm's learning rate at a point: ``rate`` of the kind it tunes (None: not run),
    ``where`` it sits — "interior" to the candidates tried, at their "lowest"/"highest edge"
    (the budget ran out: it may not be the optimum), "set" (one number: nothing tuned) or
    "shared" (Muon at the rate Adam chose) — and the trials its tuning cost of its budget."""

    rate: float | None
    where: Where
    trials: int = 0
    budget: int = 0

    @property
    def at_edge(self) -> bool:
        return self.where in ("lowest edge", "highest edge")


def arm_choice(point: grid.PointResult, ffn: str, arm: str) -> ArmChoice:
    """The :class:`ArmChoice` of ``arm`` at ``point`` (read from the plan's tuning phase, which
    holds an arm's choice even when every one of its seed runs diverged)."""
    plan = point.plan
    lrs = plan.best.get((ffn, arm))
    if lrs is None:
        return ArmChoice(None, "not run")
    tuned = plan.arm(arm).tuned
    if arm == "muon" and point.point.shared_lr:
        return ArmChoice(lrs[tuned], "shared")
    trials, budget = plan.tuning_cost((ffn, arm))
    if plan.states[ffn, arm].entry.sweep is None:
        return ArmChoice(lrs[tuned], "set")
    edges: dict[str | None, Where] = {"lowest": "lowest edge", "highest": "highest edge"}
    return ArmChoice(lrs[tuned], edges.get(plan.edge((ffn, arm)), "interior"), trials, budget)


def seed_ratios(row: LagRatio | None) -> SeedRatios:
    """A lag ratio's per-seed values (ratio, bound or None) and resolution, as the claims read
    them; empty where the ratio was not computed."""
    if row is None:
        return SeedRatios()
    return SeedRatios(tuple(r.value for r in row.seeds), row.resolution)


# --------------------------------------------------------------------------- final gaps


def final_gaps(
    point: grid.PointResult, ffn: str, lead: str, lag: str, metric: str = "fta"
) -> tuple[tuple[int, ...], np.ndarray]:
    """The seeds both arms completed and ``metric`` (FTA or EM, :data:`.curves.METRICS`) of
    ``lead`` − ``lag`` at the last step, ``(seeds, groups)``, paired by seed."""
    curves = [point.curves.arm(ffn, arm) for arm in (lead, lag)]
    seeds = tuple(sorted(set(curves[0].by_seed) & set(curves[1].by_seed)))
    if not seeds:
        return (), np.zeros((0, 0))
    values = [curve.only(seeds).at(point.plan.steps, metric) for curve in curves]
    return seeds, values[0] - values[1]


def rarest_questions(point: grid.PointResult) -> int:
    """Questions the rarest group is asked at every evaluation: every one of its people's
    attributes, or ``eval_sample`` of them."""
    asked = int(group_sizes(point.config.data.m)[-1]) * N_ATTRIBUTES
    sample = point.config.eval_sample
    return asked if sample is None else min(asked, sample)


@dataclass(frozen=True)
class FinalGap:
    """Lead − lag FTA of one group at the last evaluation, per seed (paired), with the
    ``resolution`` of a per-seed difference: FTA over ``n`` questions moves in steps of 1/n,
    whose rounding error has SD 1/(n·√12) per arm, 1/(n·√6) for a difference of two."""

    group: int
    values: tuple[float, ...]
    resolution: float

    def test(self) -> Comparison:
        """The gap against 0: 95 % two-sided t interval, SE floored at the resolution."""
        return compare_seeds(list(self.values), 0.0, resolution=self.resolution)

    def equivalence(self, margin: float = GAP_MARGIN) -> EquivalenceTest:
        """Two one-sided tests of |gap| < ``margin``."""
        return equivalence(list(self.values), margin, resolution=self.resolution)


def tail_gap(point: grid.PointResult, ffn: str, lead: str, lag: str) -> FinalGap | None:
    """The rarest group's FTA gap at the last evaluation (the pre-specified cell of
    :attr:`~tailmem.metrics.qa_gaps.PairMeasure.tail_gap`, here with its per-seed values);
    None where no seed completed in both arms."""
    seeds, diff = final_gaps(point, ffn, lead, lag)
    if not seeds:
        return None
    n = rarest_questions(point)
    return FinalGap(point.config.data.m, tuple(float(x) for x in diff[:, -1]),
                    1.0 / (n * math.sqrt(6.0)))  # fmt: skip


# --------------------------------------------------------------------------- the edge

EdgeFinding = Literal["Muon ahead", "Adam ahead", "mixed", "no edge", "not distinguished"]


@dataclass(frozen=True)
class Edge:
    """Muon's edge at one point from two pre-specified measures: the pooled lag ratio at one τ
    (log scale, against 1) and the tail gap (against 0). ``ahead_p`` / ``behind_p``: the
    p-value of "Muon ahead" / "Adam ahead" — the smaller of the two tests' two-sided p-values
    in that direction, doubled (Bonferroni over the two measures); ``none_p``: the p-value of
    "no edge", the larger of the two equivalence tests' (both must hold: intersection–union).
    ``finding``: the decision at level :data:`~tailmem.claims.core.ALPHA` (after
    :func:`holm_edges`: corrected across the grid's points)."""

    ratio: Comparison | None
    gap: Comparison | None
    ratio_equivalence: EquivalenceTest | None
    gap_equivalence: EquivalenceTest | None
    ahead_p: float
    behind_p: float
    none_p: float
    finding: EdgeFinding = "not distinguished"


def _direction_p(test: Comparison | None, sign: float) -> float:
    """The two-sided p-value of ``test`` when its estimate points in direction ``sign`` and its
    censored seeds do not block that verdict, else 1."""
    if test is None or test.p is None or sign * (test.difference + test.margin) <= 0:
        return 1.0
    blocked = test.verdict == "inconclusive" and test.half_width is not None and abs(
        test.difference) > test.half_width  # fmt: skip
    return 1.0 if blocked else test.p


def _decide(ahead: bool, behind: bool, none: bool) -> EdgeFinding:
    if ahead and behind:
        return "mixed"
    if ahead:
        return "Muon ahead"
    if behind:
        return "Adam ahead"
    return "no edge" if none else "not distinguished"


def edge(ratio: LagRatio | None, gap: FinalGap | None) -> Edge:
    """Muon's edge at one point (see :class:`Edge`), decided at this point alone. The lag
    ratio's equivalence needs it measured in every seed (a censored seed is a lag, not
    sameness); its direction counts a censored seed at its bound (:func:`judge_log`)."""
    ratios = seed_ratios(ratio)
    ratio_test = judge_log(ratios, 1.0) if ratio is not None else None
    ratio_eq = None
    if ratio is not None and ratio.complete:
        ratio_eq = equivalence(ratio.log_values(), math.log(RATIO_MARGIN),
                               resolution=ratio.resolution)  # fmt: skip
    gap_test = None if gap is None else gap.test()
    gap_eq = None if gap is None else gap.equivalence()
    ahead = min(1.0, 2 * min(_direction_p(ratio_test, 1.0), _direction_p(gap_test, 1.0)))
    behind = min(1.0, 2 * min(_direction_p(ratio_test, -1.0), _direction_p(gap_test, -1.0)))
    none = max(
        1.0 if ratio_eq is None else ratio_eq.p_equivalent,
        1.0 if gap_eq is None else gap_eq.p_equivalent,
    )
    found = _decide(ahead < ALPHA, behind < ALPHA, none < ALPHA)
    return Edge(ratio_test, gap_test, ratio_eq, gap_eq, ahead, behind, none, found)


def holm_edges(edges: Sequence[Edge]) -> list[Edge]:
    """``edges`` with each finding decided by Holm's rule across them: every family — Muon
    ahead, Adam ahead, no edge — corrected over the grid's points, so that a list of the
    points where the edge is absent (or shown) is at 95 % as a whole."""
    ahead = holm([e.ahead_p for e in edges])
    behind = holm([e.behind_p for e in edges])
    none = holm([e.none_p for e in edges])
    return [replace(e, finding=_decide(a, b, n))
            for e, a, b, n in zip(edges, ahead, behind, none, strict=True)]  # fmt: skip
