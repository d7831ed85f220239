"""The gap measures of knowledge-QA (:mod:`tailmem.metrics.qa_gaps`) on a trained plan, beside
the paper's values computed the same way from its tables, and our ratios on the paper's cells
(like for like with the paper's: the same groups, steps and anchors).

For every FFN type and every pair of arms (Muon first where it is run, then the arms in the
plan's order): the FTA curves of the seeds both arms finished (paired by seed), the exposures of
each group at each evaluated step (:class:`Exposures`), and from them the lag ratios, the tail
gap and the (descriptive) peak gap (:class:`~tailmem.metrics.qa_gaps.PairMeasure`). The
paper's values are those of :func:`~tailmem.metrics.qa_gaps.published_measures` for each
version of :data:`~tailmem.claims.paper_a_qa_tables.VERSIONS`, for the same pairs.

Two pairs lead the report: :data:`FAIR` — Muon against ``adam_split``, Adam on the hidden
matrices at a rate of its own over the same Adam-trained rest, so both tune one rate by the
same rule and differ in the update rule alone — and :data:`PAPER`, Muon against Adam
everywhere at one rate, paper A's comparison (one tuned rate against Muon's two).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tailmem.claims.paper_a_qa_tables import STEPS as PAPER_STEPS
from tailmem.claims.paper_a_qa_tables import VERSIONS, Version
from tailmem.columns import column
from tailmem.experiments.knowledge_qa.curves import PlanCurves
from tailmem.lm.plan import TrainedPlan
from tailmem.metrics.qa_gaps import (
    POOLED,
    TAUS,
    FTACurves,
    GapMeasures,
    LagRatio,
    PairMeasure,
    Ratio,
    UnmeasuredPair,
    exposures_per_group,
    measure_pair,
    published_measures,
)

LEAD_FIRST = "muon"
"""The arm listed first in every pair it is in: ratios read "Adam needs x times Muon's"."""

VERSION_LABELS: dict[Version, str] = {"arxiv-v2": "paper arXiv v2", "iclr": "paper ICLR"}
REFERENCE: Version = "arxiv-v2"
"""The paper version drawn beside ours in the lag-ratio figure (the tables list both)."""
FAIR = ("muon", "adam_split")
"""The fair comparison: Muon vs Adam on the hidden matrices at its own rate (equal tuning)."""
PAPER = ("muon", "adam")
"""Paper A's comparison: Muon vs Adam everywhere at one rate."""
HEADLINES = (FAIR, PAPER)
"""The pairs the report leads with, in order."""
CELLS_SOURCE = "tailmem, paper's cells"
"""The source label of our ratios on the paper's cells in the lag-ratio tables."""


@dataclass(frozen=True)
class Exposures:
    """How often one fact of each group is trained per epoch, and the epoch's length in steps:
    ``selections[g] * qa_per_selection`` trainings per ``steps_per_epoch`` steps."""

    selections: tuple[int, ...]
    qa_per_selection: int
    steps_per_epoch: float

    def at(self, steps: Sequence[float] | np.ndarray) -> np.ndarray:
        """Exposures of one fact of each group by each step, ``(n_groups, n_steps)``."""
        return exposures_per_group(
            self.selections, steps, self.steps_per_epoch, self.qa_per_selection
        )


@dataclass(frozen=True)
class QAGaps:
    """The gap measures of one FFN type: ours (:attr:`ours`), the paper's per version
    (:attr:`paper`, the same pairs where the paper ran both arms) and the exposures counted."""

    ours: GapMeasures
    paper: Mapping[Version, GapMeasures]
    exposures: Exposures

    def pair(self, lead: str, lag: str) -> PairMeasure | None:
        return self.ours.pair(lead, lag)

    def headline(self) -> tuple[str, str] | None:
        """The first of :data:`HEADLINES` measured, else the first measured pair."""
        measured = [(p.lead, p.lag) for p in self.ours.measured]
        return next((h for h in HEADLINES if h in measured), next(iter(measured), None))

    def headlines(self) -> list[tuple[str, str]]:
        """The :data:`HEADLINES` measured (the first measured pair when neither is)."""
        measured = [(p.lead, p.lag) for p in self.ours.measured]
        found = [h for h in HEADLINES if h in measured]
        return found or measured[:1]

    def to_json(self) -> dict[str, Any]:
        return {
            "taus": list(self.ours.taus),
            "exposures": {
                "selections_per_group": list(self.exposures.selections),
                "qa_per_selection": self.exposures.qa_per_selection,
                "steps_per_epoch": self.exposures.steps_per_epoch,
            },
            "pairs": [p.to_json() for p in self.ours.pairs],
            "paper": {v: m.to_json() for v, m in self.paper.items()},
        }


def pairs(arms: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of ``arms`` once, :data:`LEAD_FIRST` leading where present."""
    ordered = sorted(arms, key=lambda arm: arm != LEAD_FIRST)  # stable: the rest keep their order
    return list(itertools.combinations(ordered, 2))


def pair_curves(
    curves: PlanCurves, ffn: str, lead: str, lag: str, exposures: Exposures
) -> FTACurves | None:
    """FTA of ``lead`` and ``lag`` over the seeds both completed (paired by seed), at the steps
    all of those runs evaluated; ``None`` when no seed completed in both arms."""
    runs = {arm: curves.arm(ffn, arm).by_seed for arm in (lead, lag)}
    seeds = [
        seed
        for seed, run in runs[lead].items()
        if run.ok and seed in runs[lag] and runs[lag][seed].ok
    ]
    if not seeds:
        return None
    paired = {arm: curves.arm(ffn, arm).only(seeds) for arm in (lead, lag)}
    steps = np.intersect1d(paired[lead].steps, paired[lag].steps)
    # FTACurves holds each arm's FTA as (runs, groups, steps)
    fta = {arm: c.on(steps).transpose(0, 2, 1) for arm, c in paired.items()}
    return FTACurves(fta, steps, exposures.at(steps), seeds=tuple(seeds))


def measure(
    plan: TrainedPlan,
    curves: PlanCurves,
    ffn: str,
    exposures: Exposures,
    taus: Sequence[float] = TAUS,
    chosen: Sequence[tuple[str, str]] | None = None,
) -> tuple[QAGaps, dict[tuple[str, str], FTACurves]]:
    """The gap measures of one FFN type, ours and the paper's, and our curves of each pair.

    ``chosen``: the pairs (lead, lag) to measure (default: every pair of the arms the plan was
    made with, :func:`pairs` — an arm whose every seed diverged too). A pair with no seed
    finished in both arms is an :class:`~tailmem.metrics.qa_gaps.UnmeasuredPair` with the
    reason, never left out.
    """
    chosen = pairs(list(plan.plan.catalogue)) if chosen is None else chosen
    out: list[PairMeasure | UnmeasuredPair] = []
    found: dict[tuple[str, str], FTACurves] = {}
    for lead, lag in chosen:
        pair = pair_curves(curves, ffn, lead, lag, exposures)
        if pair is None:
            out.append(UnmeasuredPair(lead, lag, "no seed completed in both arms"))
            continue
        found[lead, lag] = pair
        out.append(measure_pair(pair, lead, lag, taus, total_steps=plan.steps))
    groups = next(iter(found.values())).groups if found else ()
    ours = GapMeasures(tuple(float(t) for t in taus), tuple(out), groups)
    paper = {v: published_measures(v, ffn, chosen, taus) for v in VERSIONS}
    return QAGaps(ours, paper, exposures), found


# --------------------------------------------------------------------------- readings

READINGS = ("paper_cells_group", "paper_cells_pooled", "pooled")
"""The lag-ratio readings of a pair: group m − 2 and pooled on the paper's cells (like for like
with the paper's), and pooled over every group and evaluation (ours alone)."""


def readings(pair: PairMeasure) -> dict[str, dict[float, LagRatio]]:
    """A pair's lag ratios per reading (:data:`READINGS`) and τ (a reading the run cannot make
    — too few groups or evaluations for the paper's cells — is empty)."""
    groups = pair.cell_groups
    middle = groups[len(groups) // 2] if groups else None  # m − 2 of (m − 4, m − 2, m)
    pick: dict[str, list[LagRatio]] = {
        "paper_cells_group": [r for r in pair.cells if r.group == middle],
        "paper_cells_pooled": [r for r in pair.cells if r.group == POOLED],
        "pooled": [r for r in pair.lag_ratios if r.group == POOLED],
    }
    return {name: {r.tau: r for r in rows} for name, rows in pick.items()}


def paper_readings(
    version: Version, ffn: str, taus: Sequence[float], lead: str = "muon", lag: str = "adam"
) -> dict[str, dict[float, Ratio]]:
    """The paper's ``version`` tables' lag ratio of ``lag`` behind ``lead`` per like-for-like
    reading (``paper_cells_group``, ``paper_cells_pooled``) and τ: the ratio of its published
    means (one "seed"), or its bounds."""
    pair = published_measures(version, ffn, [(lead, lag)], taus).pair(lead, lag)
    if pair is None:
        return {}
    found = readings(pair)
    return {
        name: {tau: row.of_mean for tau, row in rows.items()}
        for name, rows in found.items()
        if name != "pooled"
    }


# --------------------------------------------------------------------------- text and tables


def ratio_status(row: LagRatio) -> str:
    """One word for a lag-ratio summary: "measured" in every seed, "measured in k of n seeds",
    or (none measured) the status of the ratio of the seed-mean curves."""
    k, n = row.n_measured, row.n_seeds
    if k == n:
        return "measured"
    return f"measured in {k} of {n} seeds" if k else row.of_mean.status


def bound_text(central: Ratio, lead: str, lag: str) -> str:
    """A ratio that is only a bound, as text (``≥ 1.80 (Adam never reaches τ)``)."""
    if central.lower is not None:  # the lagging arm crossed late or never
        bound, late = f"≥ {central.lower:.2f}", lag
    elif central.upper is not None:
        bound, late = f"≤ {central.upper:.2f}", lead
    else:
        return central.status
    return f"{bound} ({late} never reaches τ)" if central.status == "not reached" else bound


def ratio_text(row: LagRatio, lead: str, lag: str) -> str:
    """A lag-ratio summary as a table cell: ``2.10 [1.80, 2.45]`` (geometric mean and 95 % t
    interval over seeds), else a bound of the seed-mean curves' ratio with which arm never
    reaches τ, or the status alone."""
    if row.ratio is not None:
        interval = row.interval()
        ci = "" if interval is None else f" [{interval[0]:.2f}, {interval[1]:.2f}]"
        k, n = row.n_measured, row.n_seeds
        return f"{row.ratio:.2f}{ci}" + ("" if k == n else f" ({k}/{n} seeds)")
    if row.of_mean.status == "measured" and row.of_mean.ratio is not None:
        return f"{row.of_mean.ratio:.2f} (seed-mean curves)"
    return bound_text(row.of_mean, lead, lag)


def _sources(gaps: QAGaps) -> list[tuple[str, list[PairMeasure], bool]]:
    """(source label, measured pairs, whether to read their paper's-cells ratios) of ours, ours
    on the paper's cells and each paper version. The paper's tables are their own cells: their
    ratios are read whole (the gated FFN's single published cell cannot be cut to three)."""
    ours = gaps.ours.measured
    papers = [(VERSION_LABELS[v], m.measured, False) for v, m in gaps.paper.items()]
    return [("tailmem", ours, False), (CELLS_SOURCE, ours, True), *papers]


@dataclass(frozen=True)
class LagRatioRow:
    """One lag ratio of one pair, group and τ from one source (a row of ``lag_ratio_<ffn>.csv``)."""

    ffn: str = column("the FFN type")
    source: str = column(f"tailmem (this run, every group and evaluation), {CELLS_SOURCE} "
                         "(groups m−4, m−2, m at 20/50/100% of training, no step 0) or the "
                         "paper's published tables (m = 15, groups 11/13/15)")  # fmt: skip
    lead: str = column("the arm ahead: the ratio is exposures lag needs ÷ lead's")
    lag: str = column("the arm behind")
    group: int | str = column("frequency group; pooled = the geometric mean over the groups "
                              "measured in every seed")  # fmt: skip
    tau: float = column("the FTA level τ the exposures are read at")
    ratio: float | None = column(
        "geometric mean of the per-seed lag ratios (exposures lag needs ÷ lead's)"
    )
    ci_low: float | None = column(
        "its 95 % two-sided Student-t interval (df = seeds − 1), low and high end"
    )
    ci_high: float | None = column("the interval's high end")
    se_log: float | None = column(
        "SE of the mean log ratio, floored at the interpolation's resolution"
    )
    resolution: float | None = column(
        "SD of a per-seed log ratio from interpolating between evaluations"
    )
    n_measured: int = column(
        "seeds whose ratio is measured (both arms cross τ between evaluations)"
    )
    n_seeds: int = column("the paired seeds")
    pooled_groups: tuple[int, ...] = column("the groups a pooled ratio is the mean over")
    status: str = column("measured, measured in k of n seeds, or the seed-mean curves' bound")
    of_mean: float | None = column("the ratio of the seed-mean curves (lower/upper: its bounds)")
    lower: float | None = column("the lower bound of the seed-mean curves' ratio")
    upper: float | None = column("the upper bound of the seed-mean curves' ratio")


def lag_ratio_rows(ffn: str, gaps: QAGaps) -> list[LagRatioRow]:
    """One row per source, pair, group (and pooled) and τ: the geometric mean over seeds with
    its interval, SE, resolution and seed counts, its status, and the ratio (or bounds) of
    the seed-mean curves; ours twice, from every group and evaluation and from the paper's
    cells alone."""
    rows = []
    for source, measured, cells in _sources(gaps):
        for pair in measured:
            for row in pair.cells if cells else pair.lag_ratios:
                interval = row.interval()
                rows.append(LagRatioRow(
                    ffn=ffn, source=source, lead=pair.lead, lag=pair.lag, group=row.group,
                    tau=row.tau, ratio=row.ratio,
                    ci_low=None if interval is None else interval[0],
                    ci_high=None if interval is None else interval[1],
                    se_log=row.se_log, resolution=row.resolution, n_measured=row.n_measured,
                    n_seeds=row.n_seeds, pooled_groups=tuple(row.groups),
                    status=ratio_status(row), of_mean=row.of_mean.ratio,
                    lower=row.of_mean.lower, upper=row.of_mean.upper,
                ))  # fmt: skip
    return rows


TAU_LOW, TAU_MIDDLE, TAU_HIGH = TAUS
"""The three FTA levels of the report's lag-ratio table, a column each."""


@dataclass(frozen=True)
class LagRatioCells:
    """One source and group of the report's table of one pair (a row of
    ``lag_ratio_summary_<stem>.csv``): the lag ratio at each τ as text (:func:`ratio_text`)."""

    source: str = column(
        "tailmem (this run, every group and evaluation), tailmem on the paper's cells (groups "
        "m−4, m−2, m at 20/50/100% of training, no step 0: like for like with the paper's rows) "
        "or the paper's published tables (m = 15, groups 11/13/15)"
    )
    group: int | str = column(
        "frequency group; pooled = the geometric mean over the groups measured in every seed "
        "(the mean of per-group log ratios)"
    )
    low: str | None = column(
        f"lag ratio at FTA {TAU_LOW:g}: geometric mean over seeds with its 95 % t interval (k/n "
        "seeds: measured in k of them); ≥ / ≤ a bound of the seed-mean curves' ratio where a "
        "crossing is not bracketed by two evaluations, naming the arm that never reaches τ",
        name=f"τ = {TAU_LOW:g}",
    )
    middle: str | None = column(f"the same at FTA {TAU_MIDDLE:g}", name=f"τ = {TAU_MIDDLE:g}")
    high: str | None = column(f"the same at FTA {TAU_HIGH:g}", name=f"τ = {TAU_HIGH:g}")


def lag_ratio_table(
    gaps: QAGaps, lead: str, lag: str, labels: Mapping[str, str]
) -> list[LagRatioCells]:
    """The report's table of one pair: a row per source and group (pooled last), a column per
    τ (:func:`ratio_text`; arms named by ``labels``); ours from every group and evaluation,
    then from the paper's cells alone (like for like with the paper's rows)."""
    rows = []
    named = (labels.get(lead, lead), labels.get(lag, lag))
    for source, measured, cells in _sources(gaps):
        for pair in measured:
            if (pair.lead, pair.lag) != (lead, lag):
                continue
            found = pair.cells if cells else pair.lag_ratios
            for group in dict.fromkeys(r.group for r in found):
                text = {r.tau: ratio_text(r, *named) for r in found if r.group == group}
                rows.append(LagRatioCells(source, group, text.get(TAU_LOW),
                                          text.get(TAU_MIDDLE), text.get(TAU_HIGH)))  # fmt: skip
    return rows


@dataclass(frozen=True)
class GapRow:
    """The tail and peak gaps of one pair from one source (a row of ``gap_<ffn>.csv``)."""

    ffn: str = column("the FFN type")
    source: str = column("tailmem (this run) or the paper's published tables")
    lead: str = column("the arms compared: the gap is FTA of lead − FTA of lag")
    lag: str = column("the arm behind")
    tail_gap: float = column(
        "the pre-specified cell: rarest group at the last evaluation, seed mean (the paper's: "
        "group 15 at 10k steps)"
    )
    tail_se: float | None = column("its SE over paired seeds (empty for one seed or the paper)")
    tail_group: int = column("the rarest group")
    peak_gap: float = column(
        "descriptive only — the largest seed-mean gap over all groups and evaluations (a "
        "maximum over many noisy cells: in no verdict or place)"
    )
    peak_se: float | None = column(
        "the SE of that one cell (understates the uncertainty of a maximum)"
    )
    group: int = column("the group where the peak occurs")
    step: int = column("the evaluated step where it occurs")
    fraction: float = column("that step as a fraction of training")


def gap_rows(ffn: str, gaps: QAGaps, steps: int) -> list[GapRow]:
    """One row per source and pair: the tail gap (the pre-specified cell) with its SE, and the
    descriptive peak gap with where it occurs (group, step, fraction of training)."""
    rows = []
    for source, measured, _ in _sources(gaps):
        if source == CELLS_SOURCE:  # the gaps of our cells are our gaps
            continue
        total = steps if source == "tailmem" else PAPER_STEPS[-1]
        for pair in measured:
            tail, peak = pair.tail_gap, pair.peak_gap
            rows.append(GapRow(
                ffn=ffn, source=source, lead=pair.lead, lag=pair.lag,
                tail_gap=round(tail.gap, 4), tail_se=_round(tail.se), tail_group=tail.group,
                peak_gap=round(peak.gap, 4), peak_se=_round(peak.se), group=peak.group,
                step=int(peak.step), fraction=round(peak.step / total, 3),
            ))  # fmt: skip
    return rows


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def summary_sentences(gaps: QAGaps, ffn: str, labels: Mapping[str, str]) -> list[str]:
    """The report summary's lead, per headline pair (:meth:`QAGaps.headlines`): the pooled lag
    ratio at each τ with its interval, like for like with the paper's tables where the paper
    ran the pair (our ratios on the paper's cells, beside the paper's), and the tail gap."""
    found = gaps.headlines()
    if not found:
        return [f"Gap measures, {ffn} FFN: not measured (no seed completed in any pair of arms)."]
    sentences = []
    for lead_arm, lag_arm in found:
        pair = gaps.pair(lead_arm, lag_arm)
        assert pair is not None
        lead, lag = labels.get(lead_arm, lead_arm), labels.get(lag_arm, lag_arm)
        kind = "fair comparison" if (lead_arm, lag_arm) == FAIR else "paper A's comparison"
        pooled = ", ".join(f"τ {r.tau:g}: {ratio_text(r, lead, lag)}"
                           for r in pair.lag_ratios if r.group == POOLED)  # fmt: skip
        tail = pair.tail_gap
        se = "" if tail.se is None else f" ± {tail.se:.3f}"
        sentences.append(
            f"{lag} behind {lead} ({kind}, {ffn} FFN): exposure-lag ratio pooled over groups "
            f"(geometric mean, 95 % interval) {pooled or '—'}; rarest-group FTA gap at the end "
            f"{tail.gap:+.3f}{se}."
        )
        like = _like_for_like(gaps, pair, lead, lag)
        if like:
            sentences.append(like)
    return sentences


def _like_for_like(gaps: QAGaps, pair: PairMeasure, lead: str, lag: str) -> str:
    """Our ratio on the paper's cells (group m − 2 and pooled) beside the paper's, for a pair
    the paper ran ("" otherwise)."""
    papers = {v: m.pair(pair.lead, pair.lag) for v, m in gaps.paper.items()}
    if not any(papers.values()):
        return ""
    parts = []
    for name in ("paper_cells_group", "paper_cells_pooled"):
        ours = readings(pair)[name]
        text = ", ".join(f"τ {t:g}: {ratio_text(r, lead, lag)}" for t, r in ours.items()) or "—"
        theirs = "; ".join(
            f"{VERSION_LABELS[v]} " + ", ".join(
                f"τ {t:g}: {ratio_text(r, lead, lag)}" for t, r in readings(p)[name].items()
            )
            for v, p in papers.items() if p is not None
        )  # fmt: skip
        label = "group m − 2" if name == "paper_cells_group" else "pooled"
        parts.append(f"{label} {text} ({theirs})")
    return ("Like for like with the paper (groups m−4, m−2, m at 20/50/100% of training, no "
            f"step 0): {'; '.join(parts)}.")  # fmt: skip
