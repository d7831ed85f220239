"""The map's outputs from its finished points: a typed :class:`MapRow` per point (written as a
``map.csv`` row), heat maps, the fitted trend and its extrapolation (:class:`Trend`),
``results.json``, ``claims.json`` and ``report.json`` (see :mod:`tailmem.experiments.qa_map`).

``map.csv`` columns: the point and its axes, sizes and schedule; per τ the
pooled lag ratio Adam ÷ Muon (``lag_<τ>``: the geometric mean over seeds where every seed
measured it, else a bound of the seed-mean curves; ``_lo``/``_hi`` its 95 % t interval,
``_se_log``, ``_kind``, ``_status``) and the same of group m − 2 on the paper's cells
(``m2_lag_<τ>``: like for like with the paper's tables); the tail gap (rarest group at the end:
the pre-specified cell) with its interval; ``edge``, Muon's edge from the lag ratio and the
tail gap together (:func:`~.measures.edge`, Holm across the grid); the descriptive peak gaps;
each arm's chosen rate, where it sits and its tuning cost. The report shows
:func:`summary_rows` of it (``map_summary.csv``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tailmem.claims.a3_map import CLAIMS as MAP_CLAIMS
from tailmem.claims.a3_map import A3MapInputs, MapPoint
from tailmem.claims.a3_sensitivity import READING as LIKE_FOR_LIKE
from tailmem.claims.core import ClaimResult
from tailmem.claims.paper_a_qa_tables import VERSIONS, Version
from tailmem.columns import column, column_docs, records
from tailmem.experiments.knowledge_qa import gaps, grid
from tailmem.experiments.knowledge_qa.gaps import TAU_HIGH, TAU_LOW, TAU_MIDDLE
from tailmem.experiments.qa_map.config import Config, Planned
from tailmem.experiments.qa_map.measures import (
    GAP_MARGIN,
    RATIO_MARGIN,
    ArmChoice,
    Edge,
    FinalGap,
    arm_choice,
    holm_edges,
    seed_ratios,
    tail_gap,
)
from tailmem.experiments.qa_map.measures import edge as judge_edge
from tailmem.experiments.qa_map.points import AXES, AXIS_LABELS, LAG, LEAD, paper_point
from tailmem.metrics.lag_trend import (
    Prediction,
    TrendError,
    TrendFit,
    fit_trend,
    independent_features,
)
from tailmem.metrics.qa_gaps import TAUS, Gap, LagRatio, Ratio
from tailmem.outputs import Figure, Outputs, Report, Table
from tailmem.report.qa_map_figures import AxisValue, Cell, heat_map_figure, trend_figure

_V = TypeVar("_V")
PREFIXES = {"lag": "pooled", "m2_lag": LIKE_FOR_LIKE}
"""Column prefix → the lag-ratio reading it holds (:func:`.knowledge_qa.gaps.readings`)."""


def ratio_value(row: LagRatio | None) -> tuple[float | None, str | None]:
    """A lag ratio as one number and its kind: the geometric mean over seeds where every seed
    measured it ("measured"), else the bound of the seed-mean curves ("lower"/"upper"), else
    none (a geometric mean of only the seeds that crossed would leave out the largest lags)."""
    if row is None:
        return None, None
    if row.complete and row.ratio is not None:
        return row.ratio, "measured"
    central = row.of_mean
    if central.status != "measured" and central.lower is not None:
        return central.lower, "lower"
    if central.status != "measured" and central.upper is not None:
        return central.upper, "upper"
    return None, None


@dataclass(frozen=True)
class MapRow:
    """One point of the map: its plan (axes, sizes, schedule), the seeds it ran, the Muon–Adam
    lag ratios per reading and τ, the tail gap, the descriptive peak gaps (the rarest group's
    and the largest over all groups), each arm's learning rate, and Muon's edge there."""

    planned: Planned
    n_head: int | None
    seeds: int
    readings: Mapping[str, Mapping[float, LagRatio]] = field(default_factory=dict)
    tail: FinalGap | None = None
    peak_rarest: Gap | None = None
    peak: Gap | None = None
    arms: Mapping[str, ArmChoice] = field(default_factory=dict)
    edge: Edge | None = None

    @property
    def label(self) -> str:
        return self.planned.point.label

    @property
    def facts_per_param(self) -> float:
        return self.planned.facts / self.planned.hidden_params

    def ratio(self, reading: str, tau: float) -> LagRatio | None:
        return self.readings.get(reading, {}).get(tau)

    def axis(self, name: str) -> float:
        return self.planned.point.axes()[name]

    def feature(self, name: str) -> float:
        """A trend feature (:data:`~.points.FEATURES`) of this point."""
        return self.facts_per_param if name == "facts_per_param" else float(self.axis(name))

    def record(self) -> MapRecord:
        """The ``map.csv`` row."""
        p = self.planned
        test = None if self.tail is None else self.tail.test()
        interval = None if test is None else test.interval
        lead, lag = (_ArmCells.of(self.arms.get(arm)) for arm in (LEAD, LAG))
        return MapRecord(
            point=self.label, axes=p.point.axes(), n_head=self.n_head,
            hidden_params=p.hidden_params, facts=p.facts, facts_per_param=self.facts_per_param,
            steps=p.steps, steps_per_epoch=round(p.steps_per_epoch, 3), seeds=self.seeds,
            ratios={f"{prefix}_{tau:g}": MapCells.of(self.ratio(reading, tau))
                    for prefix, reading in PREFIXES.items() for tau in TAUS},
            tail_gap=None if test is None else test.a.mean,
            tail_gap_se=None if test is None else test.se,
            tail_gap_lo=None if interval is None else interval[0],
            tail_gap_hi=None if interval is None else interval[1],
            edge="" if self.edge is None else self.edge.finding,
            edge_ahead_p=None if self.edge is None else self.edge.ahead_p,
            edge_none_p=None if self.edge is None else self.edge.none_p,
            peaks={"peak_rarest": GapCells.of(self.peak_rarest), "peak": GapCells.of(self.peak)},
            lr_lead=lead.rate, lead_lr_where=lead.where, lead_trials=lead.trials,
            lr_lag=lag.rate, lag_lr_where=lag.where, lag_trials=lag.trials,
        )  # fmt: skip


@dataclass(frozen=True)
class MapCells:
    """A lag ratio as ``map.csv`` cells, headed by the field that holds them and these
    suffixes."""

    value: float | None = column("the ratio (explained by its column)", name="")
    low: float | None = column("its 95 % t interval, low end (every seed measured)", name="_lo")
    high: float | None = column("the interval's high end", name="_hi")
    se_log: float | None = column("SE of the mean log ratio, floored (every seed measured)",
                                  name="_se_log")  # fmt: skip
    kind: str | None = column("measured (the geometric mean over seeds), or lower/upper: the "
                              "bound of the seed-mean curves", name="_kind")  # fmt: skip
    status: str = column("the ratio's status in words", name="_status")

    @classmethod
    def of(cls, row: LagRatio | None) -> MapCells:
        """A lag ratio's value and kind (:func:`ratio_value`), the 95 % t interval and the SE
        of the mean log ratio (floored) where every seed measured it, and its status in words
        (:func:`.gaps.ratio_status`)."""
        value, kind = ratio_value(row)
        if row is None:
            return cls(value, None, None, None, kind, "not measured")
        interval = row.interval() if kind == "measured" else None
        return cls(
            value,
            None if interval is None else interval[0],
            None if interval is None else interval[1],
            row.se_log if kind == "measured" else None,
            kind,
            gaps.ratio_status(row),
        )


@dataclass(frozen=True)
class GapCells:
    """A descriptive peak gap as ``map.csv`` cells."""

    gap: float | None = column("the peak seed-mean FTA gap Muon − Adam", name="_gap")
    se: float | None = column("its SE over paired seeds", name="_gap_se")
    group: int | None = column("the group where it peaks", name="_gap_group")
    step: float | None = column("the step where it peaks", name="_gap_step")

    @classmethod
    def of(cls, gap: Gap | None) -> GapCells:
        if gap is None:
            return cls(None, None, None, None)
        return cls(gap.gap, gap.se, gap.group, gap.step)


@dataclass(frozen=True)
class _ArmCells:
    rate: float | None
    where: str | None
    trials: str | None

    @classmethod
    def of(cls, choice: ArmChoice | None) -> _ArmCells:
        if choice is None:
            return cls(None, None, None)
        trials = f"{choice.trials}/{choice.budget}" if choice.budget else ""
        return cls(choice.rate, choice.where, trials)


_WHERE = "where it sits: interior, lowest/highest edge (the budget ran out), set or shared"


@dataclass(frozen=True)
class MapRecord:
    """One point of the map (a row of ``map.csv``)."""

    point: str = column("the point's label")
    axes: Mapping[str, float] = column("the point's value on this axis", each="{}")
    n_head: int | None = column("attention heads")
    hidden_params: int = column("parameters of the hidden matrices")
    facts: int = column("facts in the data")
    facts_per_param: float = column("facts per hidden-matrix parameter")
    steps: int = column("training steps")
    steps_per_epoch: float = column("steps per epoch")
    seeds: int = column("evaluation seeds")
    ratios: Mapping[str, MapCells] = column(
        "exposures Adam needs ÷ Muon's to bring a group to FTA τ (the suffix; lag: all groups "
        "pooled, m2_lag: like for like)",
        each="{}",
    )
    tail_gap: float | None = column("the rarest group's final FTA gap Muon − Adam, paired")
    tail_gap_se: float | None = column("its SE")
    tail_gap_lo: float | None = column("its 95 % t interval, low end")
    tail_gap_hi: float | None = column("its 95 % t interval, high end")
    edge: str = column("Muon's edge at this point, judged across the grid")
    edge_ahead_p: float | None = column("p of the test that Muon is ahead")
    edge_none_p: float | None = column("p of the test that the edge is within the margin")
    peaks: Mapping[str, GapCells] = column("descriptive peak gaps: the rarest group's, then the "
                                           "largest over all groups", each="{}")  # fmt: skip
    lr_lead: float | None = column("Muon's learning rate", name=f"lr_{LEAD}")
    lead_lr_where: str | None = column(_WHERE, name=f"{LEAD}_lr_where")
    lead_trials: str | None = column("trials its tuning cost, of its budget", name=f"{LEAD}_trials")
    lr_lag: float | None = column("Adam's learning rate", name=f"lr_{LAG}")
    lag_lr_where: str | None = column(_WHERE, name=f"{LAG}_lr_where")
    lag_trials: str | None = column("trials its tuning cost, of its budget", name=f"{LAG}_trials")


def point_row(planned: Planned, result: grid.PointResult, tau: float) -> MapRow:
    """A finished point as a :class:`MapRow`, its edge judged at ``tau`` at this point alone
    (:func:`with_edges` corrects it across the grid)."""
    ffn = result.plan.ffns[0] if result.plan.ffns else result.config.ffns[0]
    arms = {arm: arm_choice(result, ffn, arm) for arm in (LEAD, LAG)}
    found = result.measures.get(ffn)
    pair = None if found is None else found.pair(LEAD, LAG)
    if pair is None:
        return MapRow(planned, result.config.model.n_head, result.config.seeds, arms=arms)
    readings = gaps.readings(pair)
    tail = tail_gap(result, ffn, LEAD, LAG)
    return MapRow(
        planned, result.config.model.n_head, result.config.seeds, readings, tail,
        pair.peak_per_group[-1], pair.peak_gap, arms,
        judge_edge(readings["pooled"].get(tau), tail),
    )  # fmt: skip


def with_edges(rows: Sequence[MapRow]) -> list[MapRow]:
    """``rows`` with Muon's edge decided by Holm's rule across the grid's points
    (:func:`~.measures.holm_edges`; a row without a measured pair keeps none)."""
    judged = [r for r in rows if r.edge is not None]
    decided = dict(zip((r.label for r in judged),
                       holm_edges([r.edge for r in judged if r.edge is not None]),
                       strict=True))  # fmt: skip
    return [dataclasses.replace(r, edge=decided.get(r.label)) for r in rows]


def cells(
    rows: Sequence[MapRow],
    x: str,
    y: str,
    value: Callable[[MapRow], Cell | None],
    fixed: Mapping[str, float],
) -> dict[tuple[AxisValue, AxisValue], Cell | None]:
    """Heat-map cells ``value(row)`` over axes ``x`` and ``y``, the other axes at ``fixed``."""
    return {
        (r.axis(x), r.axis(y)): value(r)
        for r in rows
        if all(r.axis(a) == v for a, v in fixed.items() if a not in (x, y))
    }


def ratio_cell(reading: str, tau: float) -> Callable[[MapRow], Cell | None]:
    """A lag-ratio heat-map cell: the geometric mean with its interval, or a bound."""

    def cell(row: MapRow) -> Cell | None:
        found = row.ratio(reading, tau)
        value, kind = ratio_value(found)
        if value is None or kind is None or found is None:
            return None
        if kind != "measured":
            return Cell(value, kind="lower" if kind == "lower" else "upper")
        interval = found.interval()
        return Cell(value, *(interval or (None, None)))

    return cell


def tail_cell(row: MapRow) -> Cell | None:
    """A tail-gap heat-map cell: the seed mean with its 95 % t interval."""
    if row.tail is None:
        return None
    test = row.tail.test()
    return Cell(test.a.mean, *(test.interval or (None, None)))


def paper_ratios(tau: float) -> dict[Version, dict[str, Ratio]]:
    """The paper's lag ratio of Adam behind Muon at ``tau`` per table version and like-for-like
    reading (``paper_cells_group``: group m − 2 of its cells; ``paper_cells_pooled``: the
    geometric mean over the groups its cells bracket), computed as ours are."""
    return {
        version: {name: by_tau[tau] for name, by_tau in gaps.paper_readings(
            version, "plain", (tau,), LEAD, LAG).items()}
        for version in VERSIONS
    }  # fmt: skip


# --------------------------------------------------------------------------- the trend


@dataclass(frozen=True)
class Trend:
    """The fitted trend of one lag-ratio reading at ``tau`` over the points at frequency
    ``exponent``: the points ``used`` with their ratios (geometric means over seeds) and SEs
    on the ratio scale (the floored SE of the mean log ratio times the ratio: the delta method
    :func:`~tailmem.metrics.lag_trend.fit_trend` inverts), those ``excluded`` (label, why),
    the features kept
    and ``dropped`` (collinear over the grid), the paper's point, and the fit with its
    extrapolation — or the ``reason`` there is none."""

    tau: float
    exponent: float
    reading: str
    level: float
    used: tuple[MapRow, ...]
    ratios: tuple[float, ...]
    ses: tuple[float, ...]
    excluded: tuple[tuple[str, str], ...]
    features: tuple[str, ...]
    dropped: tuple[str, ...]
    paper_point: Mapping[str, float]
    fit: TrendFit | None = None
    prediction: Prediction | None = None
    reason: str = ""

    @property
    def fitted(self) -> bool:
        return self.fit is not None and self.prediction is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "fitted" if self.fitted else "not fitted", "reason": self.reason,
            "tau": self.tau, "exponent": self.exponent, "reading": self.reading,
            "n_points": len(self.used), "used": [r.label for r in self.used],
            "excluded": [{"point": p, "why": why} for p, why in self.excluded],
            "features": list(self.features), "dropped": list(self.dropped),
            "paper_point": dict(self.paper_point),
            "fit": None if self.fit is None else self.fit.to_json(),
            "extrapolation": None if self.prediction is None else self.prediction.to_json(),
        }  # fmt: skip


def _excluded_because(row: LagRatio | None) -> str:
    """Why a point stays out of the weighted fit ("" when it is in): a ratio not measured in
    every seed (a censored seed is often the largest lag: a bound, not a ratio), or no
    positive SE of its mean log ratio (fewer than two seeds, and no resolution to floor it)."""
    if row is None:
        return "not measured"
    if not row.complete:
        return f"{gaps.ratio_status(row)} (a bound, not a ratio)"
    if not (row.se_log or 0.0) > 0:
        return "no positive SE of the mean log ratio"
    return ""


def fit(cfg: Config, rows: Sequence[MapRow]) -> Trend:
    """The trend of :class:`~tailmem.experiments.qa_map.TrendSection` through the points whose
    reading is measured in every seed, and its extrapolation to the paper's point."""
    tau, reading = cfg.trend.tau, cfg.trend.reading
    at_exponent = [r for r in rows if r.axis("frequency_exponent") == cfg.trend.exponent]
    used = [
        (r, x)
        for r in at_exponent
        if not _excluded_because(x := r.ratio(reading, tau)) and x is not None
    ]
    excluded = tuple((r.label, why) for r in at_exponent
                     if (why := _excluded_because(r.ratio(reading, tau))))  # fmt: skip
    columns = {f: [r.feature(f) for r, _ in used] for f in cfg.trend.features}
    kept = tuple(independent_features(columns)) if len(used) > 1 else ()
    found = Trend(
        tau, cfg.trend.exponent, reading, cfg.trend.level, tuple(r for r, _ in used),
        tuple(x.ratio or 0.0 for _, x in used),
        tuple((x.se_log or 0.0) * (x.ratio or 0.0) for _, x in used), excluded, kept,
        tuple(f for f in cfg.trend.features if f not in kept), paper_point(),
    )  # fmt: skip
    try:
        if not kept:
            raise TrendError(
                f"no feature varies over the {len(used)} point(s) whose ratio is measured in "
                "every seed with an SE (an SE needs ≥ 2 seeds)"
            )
        trend = fit_trend({f: columns[f] for f in kept}, found.ratios, found.ses)
    except TrendError as exc:
        return dataclasses.replace(found, reason=str(exc))
    prediction = trend.predict({f: found.paper_point[f] for f in kept}, level=cfg.trend.level)
    return dataclasses.replace(found, fit=trend, prediction=prediction)


def paper_point_text(trend: Trend, short: bool = False) -> str:
    """Where the trend is extrapolated: the paper's 160M / m = 15 values of the fitted features,
    saying so when a feature was dropped (then the other axes stay as in the grid, which is not
    the paper's point in them); ``short`` for a legend."""
    values = ", ".join(f"{f.replace('_', ' ')} {trend.paper_point[f]:.3g}" for f in trend.features)
    if trend.dropped:
        if short:
            return f"paper's {values}, rest as grid"
        return f"the paper's {values} (160M model; depth and m as in the grid, not the paper's)"
    return "paper's 160M, m = 15" if short else f"the paper's 160M model at m = 15 ({values})"


READING_WORDS = {
    "pooled": "pooled over every group and evaluation (per seed the geometric mean over the "
    "groups measured in every seed)",
    LIKE_FOR_LIKE: "of group m − 2 on the paper's cells (like for like with the paper's tables)",
}


def trend_figure_of(trend: Trend, published: Mapping[Version, Mapping[str, Ratio]]) -> Any:
    """The trend figure (:func:`~tailmem.report.qa_map_figures.trend_figure`) of a fitted
    trend, with the paper's ratios of its like-for-like readings beside it."""
    assert trend.fit is not None
    shown = {f"{gaps.VERSION_LABELS[v]} ({'m − 2' if name == LIKE_FOR_LIKE else 'cells pooled'})":
             ratio.ratio for v, by_name in published.items()
             for name, ratio in by_name.items() if ratio.ratio is not None}  # fmt: skip
    return trend_figure(
        trend.fit, {f: [r.feature(f) for r in trend.used] for f in trend.features},
        trend.ratios, trend.ses, along=trend.features[0],
        at={f: trend.paper_point[f] for f in trend.features},
        at_label=paper_point_text(trend, short=True), published=shown,
        title=f"Lag ratio at FTA {trend.tau:g} vs {trend.features[0]}",
    )  # fmt: skip


# --------------------------------------------------------------------------- writing


def claim_inputs(cfg: Config, rows: Sequence[MapRow]) -> A3MapInputs:
    """The inputs of :mod:`tailmem.claims.a3_map`: every point's axes and pooled per-seed lag
    ratios per τ."""
    reference = {a: float(getattr(cfg.axes, a)[0]) for a in AXES}
    points = [
        MapPoint(r.label, {a: float(r.axis(a)) for a in AXES},
                 {tau: seed_ratios(r.ratio("pooled", tau)) for tau in TAUS})
        for r in rows
    ]  # fmt: skip
    return A3MapInputs(reference=reference, points=points)


def outputs(cfg: Config, rows: Sequence[MapRow]) -> Outputs:
    """``map.csv``, heat maps, trend figure, ``results.json``, the claims and the report from
    the points' rows (:func:`point_row`; edges decided across the grid here,
    :func:`with_edges`)."""
    rows = with_edges(rows)
    map_records = [r.record() for r in rows]
    map_rows = records(map_records)
    figures = []
    reference = {a: getattr(cfg.axes, a)[0] for a in AXES}
    for x, y in cfg.heat_maps:
        xs, ys = getattr(cfg.axes, x), getattr(cfg.axes, y)
        others = ", ".join(f"{AXIS_LABELS[a]} {v:g}" for a, v in reference.items()
                           if a not in (x, y))  # fmt: skip
        figures += [
            Figure(
                f"lag_ratio_{x}_{y}",
                heat_map_figure(cells(rows, x, y, ratio_cell("pooled", cfg.tau), reference),
                                (AXIS_LABELS[x], xs), (AXIS_LABELS[y], ys),
                                title=f"Adam/Muon exposure-lag ratio, FTA {cfg.tau:g}",
                                colorbar="lag ratio", center=1.0, log=True),
                f"Exposure-lag ratio (exposures Adam needs ÷ Muon's to bring a group to FTA "
                f"{cfg.tau:g}, pooled over groups: per seed the geometric mean over the groups "
                f"measured in every seed) over {AXIS_LABELS[x]} × {AXIS_LABELS[y]} ({others}): "
                "geometric mean over seeds [95 % t interval]; hatched ≥/≤: a bound where a "
                "crossing is not bracketed in every seed; red: Adam lags.",
            ),
            Figure(
                f"tail_gap_{x}_{y}",
                heat_map_figure(cells(rows, x, y, tail_cell, reference),
                                (AXIS_LABELS[x], xs), (AXIS_LABELS[y], ys),
                                title="Tail gap: rarest-group FTA at the end, Muon − Adam",
                                colorbar="FTA gap", center=0.0, digits=2),
                f"The tail gap — FTA Muon − Adam of the rarest group at the last evaluation, the "
                f"pre-specified cell — over {AXIS_LABELS[x]} × {AXIS_LABELS[y]} ({others}): "
                "mean over paired seeds [95 % t interval].",
            ),
        ]  # fmt: skip
    trend = fit(cfg, rows)
    published = paper_ratios(cfg.trend.tau)
    if trend.fitted:
        extra = trend.features[1:]
        figures.append(Figure(
            "lag_ratio_trend",
            trend_figure_of(trend, published),
            f"Exposure-lag ratio at FTA {trend.tau:g} {READING_WORDS[trend.reading]}, "
            f"frequency exponent {trend.exponent:g}, against {trend.features[0]}: geometric "
            f"mean over seeds ± SE, the fitted power law in {' and '.join(trend.features)} and "
            f"its {trend.level:.0%} band, extrapolated to {paper_point_text(trend)} (thick: "
            "confidence, thin: prediction interval)"
            + (f"; points moved to the paper's {', '.join(extra)} by the fitted slopes"
               if extra else "")
            + "; open markers: the paper's tables computed the same way.",
        ))  # fmt: skip
    inputs = claim_inputs(cfg, rows)
    claims = tuple(r for c in MAP_CLAIMS for r in c.evaluate(inputs))
    results = {
        "rows": map_rows, "trend": trend.to_json(),
        "paper": {v: {name: r.to_json() for name, r in by.items()} for v, by in published.items()},
        "reference": inputs.reference,
        "seed_ratios": {p.label: {f"{tau:g}": [_plain(v) for v in s.values]
                                  for tau, s in p.ratios.items()} for p in inputs.points},
        "edge_margins": {"ratio": RATIO_MARGIN, "tail_gap": GAP_MARGIN},
    }  # fmt: skip
    csvs = (
        Table("map.csv", map_rows, columns=column_docs(MapRecord, map_records)),
        summary_table(cfg, rows),
    )  # fmt: skip
    report = Report("The map: where Muon's tail edge over Adam appears (knowledge QA)",
                    summary(cfg, rows, trend, published, claims))  # fmt: skip
    return Outputs(csvs, tuple(figures), {"results.json": results}, claims, report)


def _plain(value: Any) -> Any:
    """A per-seed ratio for JSON: the number, a bound as ``{"value", "side"}``, or null."""
    return value if value is None or isinstance(value, float) else dataclasses.asdict(value)


def _ratio_text(row: LagRatio | None) -> str:
    """A lag ratio as a table cell: geometric mean [95 % t interval] where every seed measured
    it, else the bound of the seed-mean curves, else its status."""
    value, kind = ratio_value(row)
    if row is None:
        return "not measured"
    if value is None:
        return gaps.ratio_status(row)
    if kind != "measured":
        return f"{'≥' if kind == 'lower' else '≤'} {value:.2f}"
    interval = row.interval()
    return f"{value:.2f}" + ("" if interval is None else f" [{interval[0]:.2f}, {interval[1]:.2f}]")


def _tail_text(row: MapRow) -> str:
    if row.tail is None:
        return ""
    test = row.tail.test()
    interval = test.interval
    return f"{test.a.mean:+.3f}" + (
        "" if interval is None else f" [{interval[0]:+.3f}, {interval[1]:+.3f}]"
    )


def _lr_text(choice: ArmChoice | None) -> str:
    if choice is None or choice.rate is None:
        return ""
    return f"{choice.rate:g}" + ("*" if choice.at_edge else "")


EDGE = "edge"
"""The field of :class:`SummaryRow` whose header names the configured τ (:func:`summary_table`)."""


@dataclass(frozen=True)
class SummaryRow:
    """One point of the report's table (a row of ``map_summary.csv``), every number as text."""

    point: str = column(
        "d<width> L<layers> x<exposures per rarest fact> m<groups> rho<frequency exponent>"
    )
    facts_per_param: str = column(
        "6 · 2^m facts ÷ the blocks' parameters (no embedding, no head)", name="facts/param"
    )
    lag_low: str = column(
        f"pooled exposure-lag ratio Adam ÷ Muon at FTA {TAU_LOW:g} ({TAU_MIDDLE:g}, "
        f"{TAU_HIGH:g} alike): geometric mean over seeds [95 % two-sided t interval], or ≥ / ≤ "
        "a bound of the seed-mean curves where a crossing is not bracketed in every seed",
        name=f"lag τ {TAU_LOW:g}",
    )
    lag_middle: str = column(
        f"the pooled lag ratio at FTA {TAU_MIDDLE:g}", name=f"lag τ {TAU_MIDDLE:g}"
    )
    lag_high: str = column(f"the pooled lag ratio at FTA {TAU_HIGH:g}", name=f"lag τ {TAU_HIGH:g}")
    tail_gap: str = column(
        "the pre-specified cell: FTA Muon − Adam of the rarest group at the end, paired seed "
        "mean [95 % t interval]",
        name="tail gap",
    )
    edge: str = column(
        "Muon ahead / Adam ahead: the lag ratio above / below 1 or the tail gap above / below 0 "
        "beyond the 95 % t interval; no edge: both equivalent to none (ratio within ×/÷ "
        f"{RATIO_MARGIN:g}, gap within ±{GAP_MARGIN:g}, two one-sided tests); else not "
        "distinguished — each corrected by Holm across the grid's points"
    )
    peak_rarest_gap: str = column(
        "the largest seed-mean FTA gap Muon − Adam of the rarest group over training ± that one "
        "cell's SE: a maximum over many noisy cells, in no verdict",
        name="peak rarest gap (descriptive)",
    )
    lr_muon: str = column(
        "each arm's chosen LR; * at an end of the candidates tried (the budget ran out)",
        name="LR muon",
    )
    lr_adam: str = column("Adam's chosen LR (* as for Muon's)", name="LR adam")


def summary_rows(rows: Sequence[MapRow]) -> list[SummaryRow]:
    """The report's table: a point per row, its lag ratios, tail gap and edge as text, the
    descriptive peak rarest gap, facts per parameter and the chosen LRs (* at an end of the
    candidates tried)."""
    out = []
    for row in rows:
        peak = row.peak_rarest
        se = "" if peak is None or peak.se is None else f" ± {peak.se:.3f}"
        lag = {tau: _ratio_text(row.ratio("pooled", tau)) for tau in TAUS}
        out.append(SummaryRow(
            point=row.label, facts_per_param=f"{row.facts_per_param:.2e}",
            lag_low=lag[TAU_LOW], lag_middle=lag[TAU_MIDDLE], lag_high=lag[TAU_HIGH],
            tail_gap=_tail_text(row), edge="" if row.edge is None else row.edge.finding,
            peak_rarest_gap="" if peak is None else f"{peak.gap:+.3f}{se}",
            lr_muon=_lr_text(row.arms.get(LEAD)), lr_adam=_lr_text(row.arms.get(LAG)),
        ))  # fmt: skip
    return out


def summary_table(cfg: Config, rows: Sequence[MapRow]) -> Table:
    """``map_summary.csv`` (:func:`summary_rows`), its edge column headed by the τ it is judged
    at (``edge (τ 0.5)``)."""
    edge = f"edge (τ {cfg.tau:g})"

    def headed(record: Mapping[str, _V]) -> dict[str, _V]:
        return {edge if key == EDGE else key: value for key, value in record.items()}

    return Table("map_summary.csv", [headed(r) for r in records(summary_rows(rows))],
                 "Every point of the grid (all numbers: map.csv)",
                 headed(column_docs(SummaryRow)))  # fmt: skip


def _where(row: MapRow) -> str:
    p = row.planned.point
    return (f"width {p.width}, {p.depth} layers, {p.exposures:g} exposures, m = {p.m}, "
            f"exponent {p.frequency_exponent:g}")  # fmt: skip


def _edge_sentence(cfg: Config, rows: Sequence[MapRow]) -> str:
    """Where Muon's edge is shown, absent or neither (:func:`with_edges`)."""
    by: dict[str, list[MapRow]] = {}
    for row in rows:
        by.setdefault("not measured" if row.edge is None else row.edge.finding, []).append(row)
    listed = "; ".join(
        f"{finding} at {len(found)} point{'s' if len(found) != 1 else ''}"
        + ("" if finding in ("Muon ahead", "not distinguished") else
           " (" + "; ".join(_where(r) for r in found) + ")")
        for finding, found in by.items()
    )  # fmt: skip
    return (
        f"Muon's edge — the pooled lag ratio at FTA {cfg.tau:g} against 1 and the tail gap "
        f"against 0, beyond the 95 % t interval; none where both are equivalent to no edge (×/÷ "
        f"{RATIO_MARGIN:g}, ± {GAP_MARGIN:g} FTA); Holm across the {len(rows)} points: "
        f"{listed}."
    )


def _paper_text(ratio: Ratio) -> str:
    if ratio.ratio is not None:
        return f"{ratio.ratio:.2f}"
    if ratio.lower is not None:
        return f"≥ {ratio.lower:.2f}"
    if ratio.upper is not None:
        return f"≤ {ratio.upper:.2f}"
    return ratio.status


def summary(cfg: Config, rows: Sequence[MapRow], trend: Trend,
            published: Mapping[Version, Mapping[str, Ratio]],
            claims: Sequence[ClaimResult] = ()) -> str:  # fmt: skip
    """The report's paragraph: the grid, the largest lag ratio and tail gap, where Muon's edge
    is shown or absent, the extrapolation beside the paper's values, the LRs at an end of their
    candidates and the claims' verdicts."""
    axes = ", ".join(f"{AXIS_LABELS[a]} {getattr(cfg.axes, a)}" for a in AXES)
    points = f"{len(rows)} point{'s' if len(rows) != 1 else ''}"
    tuned = any(c.budget for r in rows for c in r.arms.values())
    how = " (tuned on tuning seeds apart from the evaluation seeds)" if tuned else ""
    parts = [f"{points} ({axes}), Muon vs Adam, each at its own learning rate{how}."]
    measured = [
        (r, value)
        for r in rows
        if (value := ratio_value(r.ratio("pooled", cfg.tau)))[1] == "measured"
    ]
    if measured:
        top, _ = max(measured, key=lambda item: item[1][0] or 0.0)
        parts.append(
            f"Largest lag ratio at FTA {cfg.tau:g}: "
            f"{_ratio_text(top.ratio('pooled', cfg.tau))} ({_where(top)})."
        )
    gapped = [r for r in rows if r.tail is not None]
    if gapped:
        top = max(gapped, key=lambda r: r.tail.test().a.mean if r.tail else 0.0)
        parts.append(f"Largest tail gap (rarest group at the end): {_tail_text(top)} "
                     f"({_where(top)}).")  # fmt: skip
    parts.append(_edge_sentence(cfg, rows))

    def versions(reading: str) -> str:
        return "; ".join(f"{gaps.VERSION_LABELS[v]} " + _paper_text(r[reading])
                         for v, r in published.items())  # fmt: skip

    paper = (
        f"{versions(LIKE_FOR_LIKE)} for group m − 2 on its cells, like for like; "
        f"{versions('paper_cells_pooled')} pooled over its cells (the groups it brackets, so "
        "it moves with one table cell)"
    )
    prediction = trend.prediction
    if trend.fitted and prediction is not None:
        lo, hi = prediction.confidence.low, prediction.confidence.high
        plo, phi = prediction.prediction.low, prediction.prediction.high
        parts.append(
            f"Trend (lag ratio at FTA {trend.tau:g} {READING_WORDS[trend.reading]} ∝ power law "
            f"in {' and '.join(trend.features)}, {len(trend.used)} points"
            + ("; left out: " + "; ".join(f"{p} ({why})" for p, why in trend.excluded)
               if trend.excluded else "")
            + (f"; {', '.join(trend.dropped)} dropped: collinear over this grid"
               if trend.dropped else "")
            + f") extrapolated to {paper_point_text(trend)}: {prediction.ratio:.2f} "
            f"({trend.level:.0%} confidence {lo:.2f}–{hi:.2f}, prediction {plo:.2f}–{phi:.2f}); "
            f"the paper's tables give {paper}."
        )  # fmt: skip
    else:
        parts.append(f"No trend fitted: {trend.reason}. The paper's tables give {paper}.")
    edges = [f"{r.label} ({', '.join(arms)})" for r in rows
             if (arms := [a for a, c in r.arms.items() if c.at_edge])]  # fmt: skip
    if edges:
        parts.append("Chosen LR at an end of the candidates tried: " + "; ".join(edges) + ".")
    for claim in claims:
        said = [t for t in (claim.ours, claim.reason) if t and t != claim.verdict]
        parts.append(
            f"Claim {claim.id}: {claim.verdict}" + (f" ({'; '.join(said)})." if said else ".")
        )
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)
