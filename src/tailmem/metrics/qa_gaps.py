"""How far one optimiser leads another on the heavy-tailed knowledge QA: lag ratios and gaps.

Inputs (:class:`FTACurves`): first-token accuracy per arm, seed, group and evaluation step, the
evaluation steps, and the *exposures* of every group at every step — how many times one fact
(person, attribute) of that group has been trained by then (:func:`exposures_per_group`).
Outputs are typed values (:class:`GapMeasures` → :class:`PairMeasure` → :class:`LagRatio`);
``to_json`` gives their JSON form (no NaN or infinity: ``None`` where a number does not exist).

Exposure-lag ratio (the measure every verdict and leaderboard place reads)
    ``exposures the lag arm needs to bring a group to FTA τ ÷ exposures the lead arm needs``,
    for τ in :data:`TAUS` (2.0: the lag arm needs twice the training on each fact). Each arm's
    crossing is read on the *monotone envelope* of its curve — the isotonic (non-decreasing)
    least-squares fit of FTA against exposures (:func:`monotone_envelope`), so a single noisy
    evaluation that touches τ early does not decide the crossing — interpolated *linearly in
    exposures* between the fitted evaluations either side of τ. Linear, not log-exposures: both
    are unchanged by the unit of exposures (so the paper's tables, whose epochs are unknown,
    give exact ratios), linear admits the step-0 evaluation (zero exposures), and it is how the
    published tables' ratios were derived, so ours and theirs are computed alike.

    Per seed the ratio is paired (the same seed gives both arms the same data order). Its
    *resolution* — how far the interpolation can be off when the true curve bends between two
    evaluations — is the bracket's width over √12 (a crossing uniform within its bracket),
    relative to the crossing, for each arm, added in quadrature (:attr:`Ratio.resolution`, in
    log units): evaluations every few percent of training give ratios that tie across seeds
    (e.g. "1.67 ± 0") only to that resolution, and it floors every standard error.

    When a crossing is not bracketed the ratio is a bound, never a made-up number: an arm
    already at τ at its first evaluation crossed at or before it; an arm that never reaches τ
    crosses after its last. Status "measured", "lower bound", "upper bound", "not reached" (an
    arm never reaches τ; bounds where they exist) or "undetermined".

    *Pooled* over groups: per seed, the mean of the per-group log ratios over the groups whose
    ratio is measured in every seed at that τ (:attr:`LagRatio.groups`) — a geometric mean
    over groups with one weight each, not the first crossing of all points as one curve (which
    is in effect the earliest group's and snaps to ratios of shared exposure values).

    Summaries are over seeds on the log scale: mean and SE of the log ratios, a two-sided 95 %
    Student-t interval (:func:`tailmem.claims.core.t_quantile`), the SE floored at the
    resolution (:func:`tailmem.claims.core.floored_se`); the ratio reported is the geometric
    mean. A comparison reads :meth:`LagRatio.log_values`.

Gaps
    The *tail gap* is the pre-specified cell every comparison may read: FTA lead − lag of the
    rarest group at the final evaluation, mean ± SE over paired seeds (:attr:`PairMeasure.
    tail_gap`). The *peak gap* — the largest seed-mean gap over groups × steps — is
    **descriptive**: it selects the maximum of many noisy cells and reports that one cell's SE,
    so it enters no verdict and no leaderboard place; it shows where the lead is largest.

Like for like with the paper
    The paper's tables hold three groups (m − 4, m − 2, m) at three steps (20%, 50% and 100% of
    training) and no step-0 evaluation; ours hold every group at every evaluation from step 0.
    :func:`paper_cells` cuts our curves to the paper's cells, so that ratios computed from them
    (:attr:`PairMeasure.cells`) are computed exactly as the paper's are.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy.optimize import isotonic_regression

from tailmem.claims import core
from tailmem.claims import paper_a_qa_tables as tables

TAUS = (0.3, 0.5, 0.8)
"""FTA levels at which the exposure-lag ratio is read."""

POOLED = "pooled"
"""Group label of the lag ratio pooled over groups (the mean of per-group log ratios)."""

Group = int | str
"""A group index, or :data:`POOLED`."""

CrossingStatus = Literal["crossed", "before first", "not reached"]
RatioStatus = Literal["measured", "lower bound", "upper bound", "not reached", "undetermined"]

PAPER_OFFSETS = tuple(tables.M - g for g in tables.GROUPS)
"""The groups of the paper's tables counted from the rarest: m − 4, m − 2 and m."""
PAPER_FRACTIONS = tuple(step / tables.STEPS[-1] for step in tables.STEPS)
"""The steps of the paper's tables as fractions of training: 20%, 50% and 100%."""


@dataclass(frozen=True)
class FTACurves:
    """FTA of several arms over training, with the exposures of each group at each step.

    ``fta[arm]`` has shape ``(n_seeds, n_groups, n_steps)`` (the same ``n_seeds`` for every
    arm, seed ``i`` of one arm paired with seed ``i`` of another); ``steps`` has ``n_steps``
    increasing entries; ``exposures`` has shape ``(n_groups, n_steps)``, non-decreasing along
    the steps; ``groups`` labels the group axis (default ``0 .. n_groups - 1``); ``seeds``
    labels the seed axis (default ``0 .. n_seeds - 1``).
    """

    fta: Mapping[str, np.ndarray]
    steps: np.ndarray
    exposures: np.ndarray
    groups: tuple[int, ...] = ()
    seeds: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        steps = np.asarray(self.steps, dtype=np.float64)
        exposures = np.asarray(self.exposures, dtype=np.float64)
        fta = {arm: np.asarray(values, dtype=np.float64) for arm, values in self.fta.items()}
        if not fta:
            raise ValueError("need the FTA of at least one arm")
        if steps.ndim != 1 or not np.all(np.diff(steps) > 0):
            raise ValueError(f"steps must be a strictly increasing 1-D array, got {steps}")
        if exposures.shape[1:] != steps.shape or exposures.ndim != 2:
            raise ValueError(
                f"exposures must have shape (n_groups, {len(steps)}), got {exposures.shape}"
            )
        if not np.isfinite(exposures).all() or np.any(np.diff(exposures, axis=1) < 0):
            raise ValueError("exposures must be finite and non-decreasing along the steps")
        shape = next(iter(fta.values())).shape
        for arm, values in fta.items():
            if values.ndim != 3 or values.shape[1:] != exposures.shape or values.shape != shape:
                raise ValueError(
                    f"fta[{arm!r}] must have shape (n_seeds, {exposures.shape[0]}, "
                    f"{len(steps)}) like every other arm, got {values.shape}"
                )
            if not np.isfinite(values).all():
                raise ValueError(f"fta[{arm!r}] holds non-finite values")
        groups = tuple(int(g) for g in self.groups) or tuple(range(exposures.shape[0]))
        if len(groups) != exposures.shape[0]:
            raise ValueError(f"groups has {len(groups)} labels for {exposures.shape[0]} groups")
        seeds = tuple(int(s) for s in self.seeds) or tuple(range(shape[0]))
        if len(seeds) != shape[0]:
            raise ValueError(f"seeds has {len(seeds)} labels for {shape[0]} seeds")
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "exposures", exposures)
        object.__setattr__(self, "fta", fta)
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "seeds", seeds)

    @property
    def arms(self) -> list[str]:
        return list(self.fta)

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)


def exposures_per_group(
    selections: Sequence[int] | np.ndarray,
    steps: Sequence[float] | np.ndarray,
    steps_per_epoch: float,
    qa_per_selection: int = 1,
) -> np.ndarray:
    """Exposures of one fact of each group by each step, shape ``(n_groups, n_steps)``.

    An epoch trains every fact of group ``g`` ``selections[g] * qa_per_selection`` times (the
    data set's ``S_g`` and ``n_qa / 6`` QA samples per attribute and selection); the stream
    spreads an epoch's items uniformly at random over its ``steps_per_epoch`` steps, so by step
    ``s`` a fact has been trained ``S_g * qa_per_selection * s / steps_per_epoch`` times in
    expectation (exactly, at whole epochs).
    """
    selections = np.asarray(selections, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    if not steps_per_epoch > 0:
        raise ValueError(f"steps_per_epoch must be positive, got {steps_per_epoch}")
    return selections[:, None] * qa_per_selection * steps[None, :] / steps_per_epoch


def band(fta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seed mean and standard error (0 with one seed) along axis 0: the bands of the figures."""
    fta = np.asarray(fta, dtype=np.float64)
    if len(fta) < 2:
        return fta.mean(axis=0), np.zeros(fta.shape[1:])
    return fta.mean(axis=0), fta.std(axis=0, ddof=1) / math.sqrt(len(fta))


# --------------------------------------------------------------------------- crossings


def monotone_envelope(values: np.ndarray) -> np.ndarray:
    """The non-decreasing least-squares fit of ``values`` (isotonic regression, pool adjacent
    violators): a curve that learning only raises, through the noise of each evaluation."""
    return np.asarray(isotonic_regression(np.asarray(values, dtype=np.float64)).x)


@dataclass(frozen=True)
class Crossing:
    """Where a rising FTA curve first reaches τ: ``status`` "crossed" (``exposure``
    interpolated inside the bracket ``low``–``high`` of the evaluations either side), "before
    first" (at or before ``exposure``, the first point) or "not reached" (after ``exposure``,
    the last point)."""

    exposure: float
    status: CrossingStatus
    low: float = 0.0
    high: float = 0.0

    @property
    def resolution(self) -> float:
        """The SD, in log exposures, of where the crossing lies if it is uniform within its
        bracket: (high − low) / (√12 · exposure); 0 for an unbracketed crossing."""
        if self.status != "crossed" or self.exposure <= 0:
            return 0.0
        return (self.high - self.low) / (math.sqrt(12.0) * self.exposure)


def fta_crossing(exposures: np.ndarray, fta: np.ndarray, tau: float) -> Crossing:
    """First crossing of ``fta >= tau`` along ``exposures`` (non-decreasing) on the monotone
    envelope of ``fta`` (:func:`monotone_envelope`), interpolated linearly between the fitted
    evaluation below τ and the first one at or above it."""
    exposures = np.asarray(exposures, dtype=np.float64)
    fitted = monotone_envelope(fta)
    if fitted[0] >= tau:
        return Crossing(float(exposures[0]), "before first")
    above = np.flatnonzero(fitted >= tau)
    if not len(above):
        return Crossing(float(exposures[-1]), "not reached")
    i = int(above[0])
    e0, e1, v0, v1 = exposures[i - 1], exposures[i], fitted[i - 1], fitted[i]
    return Crossing(float(e0 + (tau - v0) / (v1 - v0) * (e1 - e0)), "crossed", float(e0),
                    float(e1))  # fmt: skip


@dataclass(frozen=True)
class Ratio:
    """One lag ratio (a seed's, or the seed-mean curves'): ``ratio`` when both crossings are
    bracketed, else the ``lower`` / ``upper`` bound where one exists; ``resolution`` is the SD
    of its log from interpolating inside the brackets (module docstring)."""

    status: RatioStatus
    ratio: float | None = None
    lower: float | None = None
    upper: float | None = None
    resolution: float = 0.0

    @property
    def log(self) -> float | None:
        return None if self.ratio is None else math.log(self.ratio)

    @property
    def value(self) -> float | core.Bound | None:
        """The ratio where measured, else its bound (:class:`~tailmem.claims.core.Bound`),
        else None: what :func:`~tailmem.claims.core.compare_seeds` takes per seed."""
        if self.ratio is not None:
            return self.ratio
        if self.lower is not None:
            return core.Bound(self.lower, "lower")
        return None if self.upper is None else core.Bound(self.upper, "upper")

    def to_json(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "status": self.status, "lower": self.lower,
                "upper": self.upper, "resolution": self.resolution}  # fmt: skip


def _quotient(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def lag_ratio(lead: Crossing, lag: Crossing) -> Ratio:
    """``lag.exposure / lead.exposure`` as a measured value or as bounds (module docstring)."""
    value = _quotient(lag.exposure, lead.exposure)
    statuses = (lead.status, lag.status)
    if statuses == ("crossed", "crossed") and value is not None:
        resolution = math.hypot(lead.resolution, lag.resolution)
        return Ratio("measured", value, value, value, resolution)
    # the lead crossed at or before its point -> the ratio is at least value; after -> at most
    lower_ok = lead.status in ("crossed", "before first") and lag.status in (
        "crossed",
        "not reached",
    )
    upper_ok = lead.status in ("crossed", "not reached") and lag.status in (
        "crossed",
        "before first",
    )
    status: RatioStatus
    if "not reached" in statuses:
        status = "not reached"
    elif (lower_ok or upper_ok) and value is not None:
        status = "lower bound" if lower_ok else "upper bound"
    else:
        status = "undetermined"
    return Ratio(status, None, value if lower_ok else None, value if upper_ok else None)


# --------------------------------------------------------------------------- summaries


@dataclass(frozen=True)
class LagRatio:
    """The lag ratio of one pair at one group (or :data:`POOLED`) and τ: one :class:`Ratio`
    per seed (in :attr:`FTACurves.seeds` order), the ratio of the seed-mean curves, and for
    the pooled reading the groups it pools."""

    group: Group
    tau: float
    seeds: tuple[Ratio, ...]
    of_mean: Ratio
    groups: tuple[int, ...] = ()

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    @property
    def n_measured(self) -> int:
        return sum(r.status == "measured" for r in self.seeds)

    @property
    def statuses(self) -> dict[str, int]:
        """How many seeds have each status, in the order first met."""
        statuses = [r.status for r in self.seeds]
        return {s: statuses.count(s) for s in dict.fromkeys(statuses)}

    @property
    def complete(self) -> bool:
        """Measured in every seed (a summary over seeds exists)."""
        return bool(self.seeds) and self.n_measured == self.n_seeds

    def log_values(self) -> list[float]:
        """The per-seed log ratios that were measured."""
        return [r.log for r in self.seeds if r.log is not None]

    @property
    def resolution(self) -> float:
        """The root-mean-square resolution of the measured seeds' log ratios: the floor of
        their per-seed SD."""
        res = [r.resolution for r in self.seeds if r.status == "measured"]
        return math.sqrt(sum(x * x for x in res) / len(res)) if res else 0.0

    @property
    def mean_log(self) -> float | None:
        logs = self.log_values()
        return sum(logs) / len(logs) if logs else None

    @property
    def se_log(self) -> float | None:
        """SE of the mean log ratio over the measured seeds, floored at :attr:`resolution`
        (None below two seeds)."""
        logs = self.log_values()
        if len(logs) < 2:
            return None
        return core.floored_se(core.mean_se(logs), self.resolution)

    @property
    def ratio(self) -> float | None:
        """The geometric mean of the measured seeds' ratios."""
        mean = self.mean_log
        return None if mean is None else math.exp(mean)

    def interval(self, confidence: float = core.CONFIDENCE) -> tuple[float, float] | None:
        """The two-sided Student-t interval of the geometric-mean ratio (df = seeds − 1)."""
        mean, se = self.mean_log, self.se_log
        if mean is None or se is None:
            return None
        half = core.t_quantile(len(self.log_values()) - 1, confidence) * se
        return math.exp(mean - half), math.exp(mean + half)

    def summary(self) -> tuple[float | None, float | None, float | None]:
        """The geometric-mean ratio and its 95 % interval's ends (None where not measured)."""
        interval = self.interval()
        low, high = (None, None) if interval is None else interval
        return self.ratio, low, high

    def to_json(self) -> dict[str, Any]:
        interval = self.interval()
        return {
            "group": self.group,
            "tau": self.tau,
            "ratio": self.ratio,
            "mean_log": self.mean_log,
            "se_log": self.se_log,
            "ci_low": None if interval is None else interval[0],
            "ci_high": None if interval is None else interval[1],
            "resolution": self.resolution,
            "n_measured": self.n_measured,
            "n_seeds": self.n_seeds,
            "statuses": self.statuses,
            "groups": list(self.groups),
            "of_mean": self.of_mean.to_json(),
            "seeds": [r.to_json() for r in self.seeds],
        }


@dataclass(frozen=True)
class Gap:
    """A seed-mean FTA gap lead − lag at one cell (group, step), with its SE over paired seeds
    (None for one seed)."""

    group: int
    step: float
    gap: float
    se: float | None

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "step": self.step, "gap": self.gap, "se": self.se}


@dataclass(frozen=True)
class PairMeasure:
    """Everything measured for one pair ``(lead, lag)``: its lag ratios (every group, pooled,
    every τ), the same on the paper's cells, the tail gap (the pre-specified cell) and the
    descriptive peak gaps, over ``seeds`` at the evaluated ``steps``."""

    lead: str
    lag: str
    lag_ratios: tuple[LagRatio, ...]
    tail_gap: Gap
    peak_per_group: tuple[Gap, ...]
    seeds: tuple[int, ...]
    steps: tuple[float, ...]
    cells: tuple[LagRatio, ...] = ()

    status: Literal["measured"] = "measured"

    def ratio(self, tau: float, group: Group = POOLED) -> LagRatio | None:
        """The lag ratio at ``tau`` and ``group`` (None: not computed)."""
        return _find(self.lag_ratios, tau, group)

    def cell(self, tau: float, group: Group = POOLED) -> LagRatio | None:
        """The lag ratio on the paper's cells at ``tau`` and ``group`` (m − 4, m − 2, m or
        :data:`POOLED`)."""
        return _find(self.cells, tau, group)

    @property
    def cell_groups(self) -> list[int]:
        return sorted({int(r.group) for r in self.cells if r.group != POOLED})

    @property
    def peak_gap(self) -> Gap:
        """The descriptive peak: the largest seed-mean gap over groups and steps."""
        return max(self.peak_per_group, key=lambda g: g.gap)

    def to_json(self) -> dict[str, Any]:
        return {
            "lead": self.lead,
            "lag": self.lag,
            "status": self.status,
            "n_seeds": len(self.seeds),
            "seeds": list(self.seeds),
            "steps": list(self.steps),
            "lag_ratio": [r.to_json() for r in self.lag_ratios],
            "paper_cells_lag_ratio": [r.to_json() for r in self.cells],
            "tail_gap": self.tail_gap.to_json(),
            "peak_gap": {
                "overall": self.peak_gap.to_json(),
                "per_group": [g.to_json() for g in self.peak_per_group],
                "descriptive": True,
            },
        }


@dataclass(frozen=True)
class UnmeasuredPair:
    """A pair that could not be measured, and why."""

    lead: str
    lag: str
    reason: str
    status: Literal["not measured"] = "not measured"

    def to_json(self) -> dict[str, Any]:
        return {"lead": self.lead, "lag": self.lag, "status": self.status, "reason": self.reason}


def _find(rows: Sequence[LagRatio], tau: float, group: Group) -> LagRatio | None:
    return next((r for r in rows if r.group == group and math.isclose(r.tau, tau)), None)


@dataclass(frozen=True)
class GapMeasures:
    """The gap measures of several pairs at the same τ levels."""

    taus: tuple[float, ...]
    pairs: tuple[PairMeasure | UnmeasuredPair, ...]
    groups: tuple[int, ...] = ()

    def pair(self, lead: str, lag: str) -> PairMeasure | None:
        """The measured pair ``(lead, lag)``, or None."""
        return next(
            (p for p in self.measured if (p.lead, p.lag) == (lead, lag)),
            None,
        )

    @property
    def measured(self) -> list[PairMeasure]:
        return [p for p in self.pairs if isinstance(p, PairMeasure)]

    def to_json(self) -> dict[str, Any]:
        return {"taus": list(self.taus), "groups": list(self.groups),
                "pairs": [p.to_json() for p in self.pairs]}  # fmt: skip


# --------------------------------------------------------------------------- computing


def _crossings(exposures: np.ndarray, fta: np.ndarray, tau: float) -> list[Crossing]:
    """Per group, the crossing of one seed's (or the seed mean's) curves."""
    return [fta_crossing(exposures[k], fta[k], tau) for k in range(len(exposures))]


def _pooled(per_group: Sequence[Ratio], use: Sequence[int]) -> Ratio:
    """The mean of the log ratios of the groups ``use`` (indices), as one ratio, its
    resolution the SD of a mean of independent quantisation errors; undetermined when a group
    of ``use`` is not measured or ``use`` is empty."""
    chosen = [per_group[k] for k in use]
    logs = [r.log for r in chosen]
    if not chosen or any(log is None for log in logs):
        return Ratio("undetermined")
    value = math.exp(sum(log for log in logs if log is not None) / len(chosen))
    resolution = math.sqrt(sum(r.resolution**2 for r in chosen)) / len(chosen)
    return Ratio("measured", value, value, value, resolution)


def lag_ratios(
    curves: FTACurves, lead: str, lag: str, taus: Sequence[float] = TAUS
) -> list[LagRatio]:
    """Exposure-lag ratio of ``lag`` behind ``lead`` per group and τ, then pooled per τ."""
    a, b = curves.fta[lead], curves.fta[lag]
    out: list[LagRatio] = []
    for tau in taus:
        per_seed = [
            [lag_ratio(x, y) for x, y in zip(_crossings(curves.exposures, sa, tau),
                                               _crossings(curves.exposures, sb, tau),
                                               strict=True)]
            for sa, sb in zip(a, b, strict=True)
        ]  # fmt: skip
        of_mean = [
            lag_ratio(x, y)
            for x, y in zip(_crossings(curves.exposures, a.mean(axis=0), tau),
                            _crossings(curves.exposures, b.mean(axis=0), tau), strict=True)
        ]  # fmt: skip
        rows = [
            LagRatio(group, float(tau), tuple(seed[k] for seed in per_seed), of_mean[k])
            for k, group in enumerate(curves.groups)
        ]
        use = [k for k, row in enumerate(rows) if row.complete]
        pooled = LagRatio(
            POOLED,
            float(tau),
            tuple(_pooled(seed, use) for seed in per_seed),
            _pooled(of_mean, [k for k in use if of_mean[k].status == "measured"]),
            tuple(curves.groups[k] for k in use),
        )
        out += [*rows, pooled]
    return out


def _gap(diff: np.ndarray, group: int, step: float) -> Gap:
    """Mean and paired SE over seeds of one cell's gaps ``diff`` (per seed)."""
    stats = core.mean_se(diff.tolist())
    return Gap(group, float(step), stats.mean, stats.se)


def gap_cells(curves: FTACurves, lead: str, lag: str) -> tuple[Gap, tuple[Gap, ...]]:
    """The tail gap (rarest group, final evaluation) and, per group, the descriptive peak (the
    step of the largest seed-mean gap)."""
    diff = curves.fta[lead] - curves.fta[lag]  # (seeds, groups, steps), paired by seed
    mean = diff.mean(axis=0)
    peaks = []
    for k, group in enumerate(curves.groups):
        j = int(np.argmax(mean[k]))
        peaks.append(_gap(diff[:, k, j], group, curves.steps[j]))
    rarest = int(np.argmax(curves.groups))
    tail = _gap(diff[:, rarest, -1], curves.groups[rarest], curves.steps[-1])
    return tail, tuple(peaks)


def measure_pair(
    curves: FTACurves,
    lead: str,
    lag: str,
    taus: Sequence[float] = TAUS,
    total_steps: float | None = None,
) -> PairMeasure:
    """Every measure of one pair; with ``total_steps``, its lag ratios on the paper's cells
    too (:func:`paper_cells`)."""
    missing = [arm for arm in (lead, lag) if arm not in curves.fta]
    if missing:
        raise ValueError(f"pair {(lead, lag)}: no FTA for {missing}; arms are {curves.arms}")
    tail, peaks = gap_cells(curves, lead, lag)
    cells: list[LagRatio] = []
    if total_steps is not None:
        cut = paper_cells(curves, total_steps)
        cells = [] if cut is None else lag_ratios(cut, lead, lag, taus)
    return PairMeasure(
        lead, lag, tuple(lag_ratios(curves, lead, lag, taus)), tail, peaks, curves.seeds,
        tuple(float(s) for s in curves.steps), tuple(cells),
    )  # fmt: skip


def gap_measures(
    curves: FTACurves,
    taus: Sequence[float] = TAUS,
    pairs: Sequence[tuple[str, str]] | None = None,
    total_steps: float | None = None,
) -> GapMeasures:
    """:func:`measure_pair` for every pair of ``pairs`` (default: every ``(lead, lag)`` with
    ``lead`` listed before ``lag`` in ``curves.fta``)."""
    chosen = list(pairs) if pairs is not None else list(itertools.combinations(curves.arms, 2))
    measured = [measure_pair(curves, lead, lag, taus, total_steps) for lead, lag in chosen]
    return GapMeasures(tuple(float(t) for t in taus), tuple(measured), curves.groups)


# --------------------------------------------------------------------------- the paper's cells


def paper_cells(curves: FTACurves, total_steps: float) -> FTACurves | None:
    """``curves`` cut to the cells of the paper's tables: the groups :data:`PAPER_OFFSETS`
    from the rarest at the evaluations nearest :data:`PAPER_FRACTIONS` of ``total_steps``
    (ties: the earlier), without the step-0 anchor the paper does not have. None where the
    run has fewer groups, or too few evaluations for three distinct steps after step 0."""
    rarest = max(curves.groups)
    wanted = [rarest - offset for offset in sorted(PAPER_OFFSETS, reverse=True)]
    if any(g not in curves.groups for g in wanted):
        return None
    later = [i for i, step in enumerate(curves.steps) if step > 0]
    if not later:
        return None

    def nearest(fraction: float) -> int:
        target = fraction * total_steps
        return min(later, key=lambda i: (abs(curves.steps[i] - target), curves.steps[i]))

    picked = [nearest(f) for f in PAPER_FRACTIONS]
    if len(set(picked)) < len(picked):
        return None
    rows = [curves.groups.index(g) for g in wanted]
    return FTACurves(
        {arm: fta[:, rows][:, :, picked] for arm, fta in curves.fta.items()},
        curves.steps[picked],
        curves.exposures[rows][:, picked],
        tuple(wanted),
        curves.seeds,
    )


def paper_curves(version: tables.Version = "arxiv-v2", ffn: str = "plain") -> FTACurves:
    """Paper A's published table (:mod:`tailmem.claims.paper_a_qa_tables`, ``version``
    "arxiv-v2" or "iclr") as :class:`FTACurves`: one "seed" (the published means), groups 11, 13
    and 15 at 2k, 5k and 10k steps (gated FFN: group 15 at 10k).

    Group ``g`` has ``S_g = 2**(15 - g)`` selections, so by step ``s`` one of its facts has been
    trained ``S_g * s / steps_per_epoch`` times. The paper's batch size, hence its epoch
    length, is not published; ratios of exposures do not depend on it, so exposures are counted
    with ``steps_per_epoch = 1``.
    """
    table = tables.published_fta(version)
    cells = [key for key in table if key[0] == ffn]
    if not cells:
        raise ValueError(f"ffn: got {ffn!r}; expected 'plain' or 'gated'")
    steps = sorted({step for _, step, _ in cells})
    groups = sorted({group for _, _, group in cells})
    fta = {
        arm: np.array([[[table[ffn, s, g][arm] for s in steps] for g in groups]])
        for arm in tables.ARMS
    }
    selections = [2 ** (tables.M - g) for g in groups]
    exposures = exposures_per_group(selections, steps, steps_per_epoch=1.0)
    return FTACurves(fta, np.array(steps), exposures, tuple(groups))


def published_measures(
    version: tables.Version, ffn: str, pairs: Sequence[tuple[str, str]],
    taus: Sequence[float] = TAUS,
) -> GapMeasures:  # fmt: skip
    """The gap measures of the paper's ``version`` tables for the ``pairs`` of its arms (the
    tables are the cells: their lag ratios on the paper's cells are their own)."""
    published = paper_curves(version, ffn)
    known = [p for p in pairs if all(arm in published.fta for arm in p)]
    return gap_measures(published, taus, known, total_steps=tables.STEPS[-1])
