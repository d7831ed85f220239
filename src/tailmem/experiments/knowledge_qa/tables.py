"""Tables over seeds, the LR sweep, the head–tail gap and the claims of knowledge-QA (A3).

All functions read the finished :class:`~tailmem.lm.plan.Plan` and its arms' curves
(:class:`~.curves.PlanCurves`, read once) only. FTA and exact-match (EM) values are means over
seeds with the sample standard deviation (``ddof = 1``; 0 for a single seed). A fraction of
training is read at the evaluated step nearest to it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tailmem.claims.a3 import A3_PUBLISHED_FTA, A3Inputs, evaluate_per_ffn
from tailmem.claims.core import ClaimResult, Scale, mean_se
from tailmem.columns import column
from tailmem.data.bios import N_ATTRIBUTES, group_sizes
from tailmem.experiments.knowledge_qa.curves import METRICS, ArmCurve, PlanCurves
from tailmem.lm.plan import TrainedPlan
from tailmem.lm.spec import RunResult, number, per_group, step_of


def fta_all(result: RunResult) -> float:
    """FTA over all questions at the last evaluation (NaN when the run has none)."""
    return number(result.evals[-1], "fta_all") if result.evals else float("nan")


def rarest(result: RunResult) -> float:
    """FTA of the rarest group at the last evaluation."""
    return per_group(result.evals[-1], "fta")[-1] if result.evals else float("nan")


def seed_results(plan: TrainedPlan, ffn: str, arm: str) -> list[RunResult]:
    """The finished seed runs of ``arm`` (empty if it was not run)."""
    return plan.seed_results((ffn, arm))


def evaluated_step(plan: TrainedPlan, frac: float) -> int:
    """The evaluated step nearest to ``frac`` of training (ties: the earlier one)."""
    first = next(plan.results[jobs[0]] for jobs in plan.seed_runs.values() if jobs)
    steps = [step_of(e) for e in first.evals]
    return min(steps, key=lambda s: (abs(s - frac * plan.steps), s))


def mean_std(values: Sequence[float] | np.ndarray, axis: int = 0) -> tuple[Any, Any]:
    """Mean and sample standard deviation (0 for one value) along ``axis``."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[axis]
    std = values.std(axis=axis, ddof=1) if n > 1 else np.zeros_like(values.mean(axis=axis))
    return values.mean(axis=axis), std


def final_mean_se(
    curve: ArmCurve, step: int, metric: str, group: int
) -> tuple[float | None, float | None]:
    """Mean and SE over seeds of ``metric`` of ``group`` at ``step`` (rounded to 4 decimals;
    the SE None for one seed, both None without a run)."""
    if not curve.runs:
        return None, None
    values = curve.at(step, metric)[:, group]
    mean, std = mean_std(values)
    se = round(float(std) / math.sqrt(len(values)), 4) if len(values) > 1 else None
    return round(float(mean), 4), se


def mean_and_se(values: np.ndarray) -> tuple[float, float | None]:
    """Mean and standard error over seeds, rounded to 5 decimals (SE None for one seed)."""
    stats = mean_se(values.tolist())
    return round(stats.mean, 5), None if stats.se is None else round(stats.se, 5)


@dataclass(frozen=True)
class TailCells:
    """One arm's cells of a tail-table row, headed by the arm's label."""

    mean: float = column("first-token accuracy (FTA) of the group, mean over seeds",
                         name=" mean")  # fmt: skip
    se: float | None = column("its standard error over seeds", name=" SE")
    paper: float | None = column("published FTA (m = 15) at the same distance from the rarest "
                                 "(empty where not published)", name="paper {}")  # fmt: skip
    em_mean: float = column("whole-answer exact match (greedy decoding), mean over seeds",
                            name=" EM mean")  # fmt: skip
    em_se: float | None = column("its standard error over seeds", name=" EM SE")


@dataclass(frozen=True)
class TailTableRow:
    """One (fraction of training, tail group) row of ``tail_table_<ffn>.csv``, like the paper's
    Tables 3–8: every arm's cells side by side (:class:`TailRow` has one arm a row)."""

    step: int = column("the evaluated step nearest to the fraction")
    fraction: float = column("fraction of training")
    group: int = column("frequency group (the rarest is m)")
    arms: Mapping[str, TailCells] = column("the arm's cells", each="{}")


def tail_table(
    plan: TrainedPlan,
    curves: PlanCurves,
    ffn: str,
    fracs: Sequence[float],
    offsets: Sequence[int],
    m: int,
) -> list[TailTableRow]:
    """Rows like the paper's Tables 3–8: one per (fraction of training, tail group), every
    arm's FTA and exact match over seeds beside the published FTA. The report shows each mean
    and SE as one column (:func:`tail_mean_se`)."""
    rows = []
    for frac, step, group, published in _tail_cells(plan, ffn, fracs, offsets, m):
        cells = {}
        for arm in plan.arms:
            curve = curves.arm(ffn, arm)
            fta = mean_and_se(curve.at(step)[:, group])
            em = mean_and_se(curve.at(step, "em")[:, group])
            cells[plan.arm(arm).label] = TailCells(*fta, published.get(arm), *em)
        rows.append(TailTableRow(step, frac, group, cells))
    return rows


def tail_mean_se(labels: Sequence[str]) -> dict[str, list[str]]:
    """The report's ``mean_se`` of :func:`tail_table`: each arm's FTA and EM as one column."""
    pairs = {}
    for label in labels:
        pairs[label] = [f"{label} mean", f"{label} SE"]
        pairs[f"{label} EM"] = [f"{label} EM mean", f"{label} EM SE"]
    return pairs


@dataclass(frozen=True)
class TailRow:
    """One tail-table cell of one arm, for analysis (a row of ``tail_table_long.csv``)."""

    ffn: str = column("the FFN type")
    step: int = column("the evaluated step nearest to the fraction")
    fraction: float = column("fraction of training")
    group: int = column("frequency group (the rarest is m)")
    arm: str = column("the arm")
    mean: float = column("first-token accuracy (FTA) of the group, mean over seeds")
    std: float = column("its sample standard deviation over seeds (0 for one seed)")
    se: float | None = column("its standard error over seeds (empty for one seed)")
    em_mean: float = column("whole-answer exact match (greedy decoding), mean over seeds")
    em_std: float = column("its sample standard deviation over seeds (0 for one seed)")
    em_se: float | None = column("its standard error over seeds (empty for one seed)")
    n_seeds: int = column("the seed runs of the arm")
    published_m15: float | None = column(
        "published FTA (m = 15) at the same distance from the rarest (empty where not published)"
    )


def tail_table_long(
    plan: TrainedPlan,
    curves: PlanCurves,
    ffn: str,
    fracs: Sequence[float],
    offsets: Sequence[int],
    m: int,
) -> list[TailRow]:
    """The numbers of :func:`tail_table`, one row per (fraction, group, arm), for analysis."""
    rows = []
    for frac, step, group, published in _tail_cells(plan, ffn, fracs, offsets, m):
        for arm in plan.arms:
            curve = curves.arm(ffn, arm)
            values = curve.at(step)[:, group]
            mean, std = mean_std(values)
            em = curve.at(step, "em")[:, group]
            em_mean, em_std = mean_std(em)
            rows.append(TailRow(
                ffn=ffn, step=step, fraction=frac, group=group, arm=arm, mean=float(mean),
                std=float(std), se=mean_and_se(values)[1], em_mean=float(em_mean),
                em_std=float(em_std), em_se=mean_and_se(em)[1], n_seeds=len(values),
                published_m15=published.get(arm),
            ))  # fmt: skip
    return rows


def _tail_cells(
    plan: TrainedPlan, ffn: str, fracs: Sequence[float], offsets: Sequence[int], m: int
) -> Iterator[tuple[float, int, int, dict[str, float]]]:
    """(fraction, step, group, published FTA by arm) of every existing tail-table cell."""
    for frac in fracs:
        step = evaluated_step(plan, frac)
        for offset in offsets:
            if m - offset >= 0:
                yield frac, step, m - offset, A3_PUBLISHED_FTA.get(ffn, {}).get((frac, offset), {})


@dataclass(frozen=True)
class Spread:
    """A measure over seeds: its mean and sample standard deviation, rounded to 4 decimals."""

    mean: float
    std: float


@dataclass(frozen=True)
class HeadTail:
    """One metric at the end over seeds: the head (the most frequent groups' mean), the rarest
    group and the gap head minus rarest."""

    head: Spread
    rarest: Spread
    gap: Spread


def head_tail(curve: ArmCurve, step: int, metric: str, head_groups: int) -> HeadTail:
    """``metric`` (:data:`METRICS`) of the ``head_groups`` most frequent groups and of the
    rarest at ``step``, and their gap, over the seed runs of ``curve``."""
    final = curve.at(step, metric)
    head = final[:, :head_groups].mean(axis=1)
    rare = final[:, -1]
    spreads = []
    for values in (head, rare, head - rare):
        mean, std = mean_std(values)
        spreads.append(Spread(round(float(mean), 4), round(float(std), 4)))
    return HeadTail(*spreads)


@dataclass(frozen=True)
class HeadTailRow:
    """One arm's head–tail gap at the end (a row of ``head_tail_gap.csv``)."""

    ffn: str = column("the FFN type")
    arm: str = column("the arm")
    label: str = column("the arm as the report names it")
    head_mean: float = column("FTA of the most frequent groups (mean over them), seed mean")
    head_std: float = column("its standard deviation over seeds")
    rarest_mean: float = column("FTA of the rarest group, seed mean")
    rarest_std: float = column("its standard deviation over seeds")
    gap_mean: float = column("head minus rarest FTA, seed mean (_std: standard deviation over "
                             "seeds)")  # fmt: skip
    gap_std: float = column("its standard deviation over seeds")
    em_head_mean: float = column("the same three for whole-answer exact match")
    em_head_std: float = column("its standard deviation over seeds")
    em_rarest_mean: float = column("exact match of the rarest group, seed mean")
    em_rarest_std: float = column("its standard deviation over seeds")
    em_gap_mean: float = column("head minus rarest exact match, seed mean")
    em_gap_std: float = column("its standard deviation over seeds")
    fta_all: float = column("FTA over all questions")
    em_all: float = column("exact match over all questions")


def gap_rows(
    plan: TrainedPlan, curves: PlanCurves, ffn: str, head_groups: int
) -> list[HeadTailRow]:
    """Per arm at the end: head FTA (the ``head_groups`` most frequent groups), rarest-group FTA,
    and the head–tail gap (head minus rarest), each mean ± std over seeds; the same three of
    exact match (``em_`` prefix); FTA and EM over all questions."""
    rows = []
    for arm in plan.arms:
        results = seed_results(plan, ffn, arm)
        fta = head_tail(curves.arm(ffn, arm), plan.steps, "fta", head_groups)
        em = head_tail(curves.arm(ffn, arm), plan.steps, "em", head_groups)
        fta_all, em_all = (
            round(float(np.mean([number(r.evals[-1], f"{metric}_all") for r in results])), 4)
            for metric in METRICS
        )
        rows.append(HeadTailRow(
            ffn=ffn, arm=arm, label=plan.arm(arm).label,
            head_mean=fta.head.mean, head_std=fta.head.std,
            rarest_mean=fta.rarest.mean, rarest_std=fta.rarest.std,
            gap_mean=fta.gap.mean, gap_std=fta.gap.std,
            em_head_mean=em.head.mean, em_head_std=em.head.std,
            em_rarest_mean=em.rarest.mean, em_rarest_std=em.rarest.std,
            em_gap_mean=em.gap.mean, em_gap_std=em.gap.std, fta_all=fta_all, em_all=em_all,
        ))  # fmt: skip
    return rows


# --------------------------------------------------------------------------- claims


def claim_inputs(
    plan: TrainedPlan,
    curves: PlanCurves,
    ffn: str,
    m: int,
    head_groups: int,
    chance: float,
    model: Scale | None = None,
) -> A3Inputs:
    """The inputs of the A3 checks (:class:`~tailmem.claims.a3.A3Inputs`) for one FFN type: per
    arm, the FTA per group at the last step and at the evaluation nearest half-way, on the
    seeds every arm completed, in seed order (the checks pair the arms by seed), and the
    evaluation questions of each group (one per person and attribute: the resolution of its
    FTA)."""
    half = evaluated_step(plan, 0.5)
    complete = {arm: curves.arm(ffn, arm).complete() for arm in plan.arms}
    complete = {arm: curve for arm, curve in complete.items() if curve.runs}
    seeds = (sorted(set.intersection(*(set(c.by_seed) for c in complete.values())))
             if complete else [])  # fmt: skip
    fta = {}
    for arm, curve in complete.items():
        paired = curve.only(seeds)
        fta[arm] = {"final": paired.at(plan.steps).tolist(),
                    "half": paired.at(half).tolist()} if seeds else {}  # fmt: skip
    return A3Inputs(
        ffn=ffn,
        seeds=seeds,
        rarest=m,
        head_groups=head_groups,
        fta={arm: v for arm, v in fta.items() if v},
        chance_fta=chance,
        questions_per_group=(N_ATTRIBUTES * group_sizes(m)).tolist(),
        model=model,
        edges={arm: edge for arm in complete if (edge := plan.edge((ffn, arm)))},
    )


def claims(
    plan: TrainedPlan,
    curves: PlanCurves,
    m: int,
    head_groups: int,
    chance: float,
    model: Scale | None = None,
) -> list[ClaimResult]:
    """Every A3 claim, each checked against the runs of its own FFN type (one not run leaves
    its claims not measured)."""
    per_ffn = {ffn: claim_inputs(plan, curves, ffn, m, head_groups, chance, model)
               for ffn in plan.ffns}  # fmt: skip
    return evaluate_per_ffn(per_ffn)


def final_by_group(
    plan: TrainedPlan, curves: PlanCurves, ffn: str
) -> dict[str, dict[str, list[float]]]:
    """Per arm, FTA and EM of every group at the end: seed mean and standard deviation."""
    out = {}
    for arm in plan.arms:
        curve = curves.arm(ffn, arm)
        entry = {}
        for metric in METRICS:
            mean, std = mean_std(curve.at(plan.steps, metric))
            entry[metric], entry[f"{metric}_std"] = mean.round(5).tolist(), std.round(5).tolist()
        out[arm] = entry
    return out
