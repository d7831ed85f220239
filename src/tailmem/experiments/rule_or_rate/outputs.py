"""The study's tables, figures, claims and report (:mod:`tailmem.experiments.rule_or_rate`).

Everything is read from the finished points (:class:`~tailmem.experiments.knowledge_qa.grid.
PointResult`): the factorial (:class:`FactorialRow`, the base point), the regime table
(:class:`RegimeRow`, one per point), the width trend extrapolated to paper A's 12 × 768 model,
and the answers stated first in the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tailmem.claims.registry import evaluate
from tailmem.claims.rule_or_rate import RuleOrRateInputs
from tailmem.columns import column, column_docs, records
from tailmem.experiments.knowledge_qa import grid, tables
from tailmem.experiments.knowledge_qa.answers import lag_verdict
from tailmem.experiments.rule_or_rate import walk
from tailmem.experiments.rule_or_rate.arms import ADAM_SHARED, OWN, REST
from tailmem.experiments.rule_or_rate.config import BASE, NAME, Config, axis_of
from tailmem.metrics.lag_trend import TrendError, fit_trend
from tailmem.metrics.qa_gaps import POOLED, TAUS, LagRatio
from tailmem.metrics.share import Share, share
from tailmem.outputs import Answer, Figure, Outputs, Report, Table
from tailmem.plotting import legend_outside, pyplot

TAU = 0.5
"""The FTA level of the headline numbers (the middle of the paper's three)."""
MUON_OWN, ADAM_OWN = "muon_own", "adam_own"
PAPER_WIDTH = 768
"""Paper A's 160M model: 12 layers × d 768."""


def pairs(arms: Sequence[str]) -> list[tuple[str, str]]:
    """Every arm against Adam-shared and against Adam-own (the arm leads: the ratio is the
    exposures the Adam arm needs ÷ the arm's)."""
    out = []
    for ref in (ADAM_SHARED, ADAM_OWN):
        if ref in arms:
            out += [(arm, ref) for arm in arms if arm not in (ref, ADAM_SHARED)]
    if ADAM_OWN in arms and ADAM_SHARED in arms:
        out.append((ADAM_OWN, ADAM_SHARED))
    return list(dict.fromkeys(out))


def _ratio(point: grid.PointResult, lead: str, lag: str, tau: float = TAU) -> LagRatio | None:
    measures = point.measures.get(point.config.ffns[0])
    pair = None if measures is None else measures.pair(lead, lag)
    return None if pair is None else pair.ratio(tau, POOLED)


def _paired_logs(
    point: grid.PointResult, a: tuple[str, str], b: tuple[str, str], tau: float
) -> tuple[list[float], list[float]]:
    """The per-seed log ratios of two pairs over the seeds both measured."""
    measures = point.measures.get(point.config.ffns[0])
    if measures is None:
        return [], []
    first, second = measures.pair(*a), measures.pair(*b)
    if first is None or second is None:
        return [], []
    ra, rb = first.ratio(tau, POOLED), second.ratio(tau, POOLED)
    if ra is None or rb is None:
        return [], []
    xa = {s: r.log for s, r in zip(first.seeds, ra.seeds, strict=True) if r.log is not None}
    xb = {s: r.log for s, r in zip(second.seeds, rb.seeds, strict=True) if r.log is not None}
    seeds = [s for s in xa if s in xb]
    return [xa[s] for s in seeds], [xb[s] for s in seeds]


def rate_share(point: grid.PointResult, tau: float = TAU) -> Share:
    """The share of Muon's edge over Adam-shared that Adam-own recovers (paired seeds)."""
    part, whole = _paired_logs(point, (ADAM_OWN, ADAM_SHARED), (MUON_OWN, ADAM_SHARED), tau)
    return share(part, whole)


def _interval(ratio: LagRatio | None) -> tuple[float | None, float | None, float | None]:
    return (None, None, None) if ratio is None else ratio.summary()


@dataclass(frozen=True)
class FactorialRow:
    """One arm of the factorial (a row of ``factorial.csv``)."""

    arm: str = column("update rule and rate structure (rule_shared, rule_own)")
    label: str = column("its name for people")
    rule: str = column("the update rule on the hidden matrices")
    structure: str = column("shared: one rate for every parameter; own: the hidden matrices' own")
    lr_hidden: float | None = column("the chosen rate of the hidden matrices")
    lr_rest: float | None = column("the rate of Adam on the rest (embedding, head, norms)")
    lr_edge: str = column("lowest/highest: the choice sits at an end of the candidates tried")
    tuning_trials: int = column("trials its tuning ran (the same budget for every arm)")
    vs_adam_shared: float | None = column(
        f"Adam-shared's exposures ÷ this arm's to bring FTA to τ {TAU:g}, pooled over groups, "
        "geometric mean over paired seeds (> 1: the arm learns the tail faster)"
    )
    vs_adam_shared_low: float | None = column("its 95 % t interval, low end")
    vs_adam_shared_high: float | None = column("its 95 % t interval, high end")
    vs_adam_own: float | None = column("the same against Adam-own (Adam at its own rate)")
    vs_adam_own_low: float | None = column("its 95 % t interval, low end")
    vs_adam_own_high: float | None = column("its 95 % t interval, high end")
    vs_adam_shared_03: float | None = column("vs_adam_shared at τ 0.3")
    vs_adam_shared_08: float | None = column("vs_adam_shared at τ 0.8")
    rarest_fta: float | None = column("final FTA of the rarest group, mean over seeds")
    rarest_fta_se: float | None = column("its SE")
    second_fta: float | None = column("final FTA of the second-rarest group, mean over seeds")
    second_fta_se: float | None = column("its SE")
    rarest_em: float | None = column("final whole-answer exact match of the rarest group")
    rarest_em_se: float | None = column("its SE")


def _final(
    point: grid.PointResult, arm: str, metric: str, group: int
) -> tuple[float | None, float | None]:
    curve = point.curves.arm(point.config.ffns[0], arm)
    return tables.final_mean_se(curve, point.plan.steps, metric, group)


def factorial_rows(cfg: Config, point: grid.PointResult) -> list[FactorialRow]:
    """The base point's arms."""
    plan, ffn = point.plan, point.config.ffns[0]
    rows = []
    for arm in plan.arms:
        rule, structure = arm.rsplit("_", 1)
        best = plan.best.get((ffn, arm), {})
        kind = cfg.rules[rule].kind if structure == OWN else None
        hidden = best.get(kind) if kind is not None else next(
            (v for k, v in best.items() if k != REST), best.get(REST))  # fmt: skip
        s, s_low, s_high = _interval(_ratio(point, arm, ADAM_SHARED))
        o, o_low, o_high = _interval(_ratio(point, arm, ADAM_OWN))
        rf, rf_se = _final(point, arm, "fta", -1)
        sf, sf_se = _final(point, arm, "fta", -2)
        re_, re_se = _final(point, arm, "em", -1)
        rows.append(FactorialRow(
            arm=arm, label=plan.arm(arm).label, rule=rule, structure=structure,
            lr_hidden=hidden, lr_rest=best.get(REST), lr_edge=plan.edge((ffn, arm)) or "",
            tuning_trials=plan.tuning_cost((ffn, arm))[0],
            vs_adam_shared=s, vs_adam_shared_low=s_low, vs_adam_shared_high=s_high,
            vs_adam_own=o, vs_adam_own_low=o_low, vs_adam_own_high=o_high,
            vs_adam_shared_03=_interval(_ratio(point, arm, ADAM_SHARED, TAUS[0]))[0],
            vs_adam_shared_08=_interval(_ratio(point, arm, ADAM_SHARED, TAUS[-1]))[0],
            rarest_fta=rf, rarest_fta_se=rf_se, second_fta=sf, second_fta_se=sf_se,
            rarest_em=re_, rarest_em_se=re_se,
        ))  # fmt: skip
    return rows


@dataclass(frozen=True)
class RegimeRow:
    """One point of the study (a row of ``regime.csv``)."""

    point: str = column("base, an axis level, or the reference point")
    axis: str = column("the regime axis the point varies (one at a time from the base)")
    level: str = column("the level of that axis")
    rates: str = column("tune: its rates tuned there; base: the base point's rates reused")
    width: int = column("the model width d")
    share: float | None = column(
        f"share of Muon's edge over Adam-shared that Adam-own recovers (τ {TAU:g}; 1: all of it "
        "is the learning rate, 0: none)"
    )
    share_low: float | None = column("its 95 % Fieller interval (paired seeds), low end")
    share_high: float | None = column("its 95 % t interval, high end")
    muon_vs_adam_own: float | None = column(
        "Adam-own's exposures ÷ Muon-own's (the fair edge; > 1: Muon faster), geometric mean"
    )
    muon_vs_adam_own_low: float | None = column("its 95 % t interval, low end")
    muon_vs_adam_own_high: float | None = column("its 95 % t interval, high end")
    fair_verdict: str = column(
        "faster / equivalent (within ×1.25) / slower / not distinguished: Muon against Adam-own"
    )
    muon_vs_adam_shared: float | None = column("Adam-shared's exposures ÷ Muon-own's (paper A's)")
    adam_own_vs_shared: float | None = column("Adam-shared's exposures ÷ Adam-own's (the rate)")
    rarest_adam_shared: float | None = column("final FTA of the rarest group, Adam-shared, mean")
    rarest_adam_own: float | None = column("the same, Adam-own")
    rarest_muon_own: float | None = column("the same, Muon-own")
    rarest_gap: float | None = column(
        "Muon-own − Adam-own in the rarest group's final FTA, mean over paired seeds (the fair "
        "gap where the tail is, which the pooled lag dilutes with the head groups)"
    )
    rarest_gap_se: float | None = column("its SE over paired seeds")
    rarest_share: float | None = column(
        "(Adam-own − Adam-shared) ÷ (Muon-own − Adam-shared) in the rarest group's final FTA: the "
        "share of Muon's lead that Adam's own rate closes there (empty without a lead)"
    )


def width_of(point: grid.PointResult) -> int:
    """The model width d of a point."""
    qa = point.config
    return qa.model.build(1024, qa.ffns[0], qa.train.seq_len).d_model


@dataclass(frozen=True)
class RarestFinal:
    """The rarest group's final FTA of Adam-shared, Adam-own and Muon-own at one point."""

    adam_shared: float | None
    adam_own: float | None
    muon_own: float | None
    gap: float | None
    gap_se: float | None

    @property
    def share(self) -> float | None:
        """The share of Muon-own's lead over Adam-shared that Adam-own closes."""
        if self.adam_shared is None or self.adam_own is None or self.muon_own is None:
            return None
        lead = self.muon_own - self.adam_shared
        return round((self.adam_own - self.adam_shared) / lead, 4) if lead > 0 else None


def rarest_final(point: grid.PointResult) -> RarestFinal:
    """The rarest group's final FTA per arm (mean over seeds) and the tail gap of Muon-own over
    Adam-own (the typed measures' pre-specified cell: mean and SE over paired seeds)."""
    measures = point.measures.get(point.config.ffns[0])
    pair = None if measures is None else measures.pair(MUON_OWN, ADAM_OWN)
    tail = None if pair is None else pair.tail_gap
    adam_shared, adam_own, muon_own = (
        _final(point, arm, "fta", -1)[0] for arm in (ADAM_SHARED, ADAM_OWN, MUON_OWN)
    )
    return RarestFinal(adam_shared, adam_own, muon_own, None if tail is None else tail.gap,
                       None if tail is None else tail.se)  # fmt: skip


def regime_rows(cfg: Config, points: Mapping[str, grid.PointResult]) -> list[RegimeRow]:

    rows = []
    for label, point in points.items():
        found = axis_of(cfg, label)
        axis, level = found if found is not None else (label, label)
        sh = rate_share(point)
        m, m_low, m_high = _interval(_ratio(point, MUON_OWN, ADAM_OWN))
        verdict, _ = lag_verdict(_ratio(point, MUON_OWN, ADAM_OWN))
        rarest = rarest_final(point)
        rows.append(RegimeRow(
            label, axis if label != BASE else "—", level, cfg.rates_of(label),
            width_of(point),
            sh.share, sh.low, sh.high, m, m_low, m_high, verdict,
            _interval(_ratio(point, MUON_OWN, ADAM_SHARED))[0],
            _interval(_ratio(point, ADAM_OWN, ADAM_SHARED))[0],
            rarest.adam_shared, rarest.adam_own, rarest.muon_own, rarest.gap, rarest.gap_se,
            rarest.share,
        ))  # fmt: skip
    return rows


def width_points(cfg: Config, rows: Sequence[RegimeRow]) -> list[RegimeRow]:
    """The base and the width axis's tuned levels (one row per width)."""

    keep = [r for r in rows if r.point == BASE or (r.axis == "width" and r.rates == "tune")]
    return sorted(keep, key=lambda r: r.width)


def claim_inputs(points: Mapping[str, grid.PointResult], rows: Sequence[RegimeRow]) -> Any:
    """The fair edge's per-seed logs at every width (base and width levels)."""
    logs: dict[int, list[float]] = {}
    resolution: dict[int, float] = {}
    seeds: set[int] = set()
    for row in rows:
        ratio = _ratio(points[row.point], MUON_OWN, ADAM_OWN)
        if ratio is None or not ratio.complete:
            continue
        logs[row.width] = ratio.log_values()
        resolution[row.width] = ratio.resolution
        seeds |= set(points[row.point].plan.seeds)
    return RuleOrRateInputs(log_ratios=logs, resolution=resolution, seeds=sorted(seeds))


@dataclass(frozen=True)
class Extrapolation:
    """The fair edge's power law in width and its prediction at paper A's width."""

    slope: float
    slope_se: float
    ratio: float
    low: float
    high: float
    n_points: int


def extrapolate(
    points: Mapping[str, grid.PointResult], rows: Sequence[RegimeRow]
) -> Extrapolation | None:
    """Fit ``log ratio = b0 + b·log d`` through the widths' fair edges, each with the SE of its
    mean log ratio over seeds (:func:`~tailmem.metrics.lag_trend.fit_trend`), and predict at
    d = :data:`PAPER_WIDTH` with the 95 % prediction interval; None with fewer than 3 widths
    measured."""
    found = [(r.width, _ratio(points[r.point], MUON_OWN, ADAM_OWN)) for r in rows]
    usable = [(w, r) for w, r in found if r is not None and r.ratio and r.se_log]
    if len(usable) < 3:
        return None
    widths = [float(w) for w, _ in usable]
    ratios = [float(r.ratio or 1.0) for _, r in usable]
    se = [float(r.se_log or 0.0) * q for (_, r), q in zip(usable, ratios, strict=True)]
    try:
        fit = fit_trend({"width": widths}, ratios, se)
    except TrendError:
        return None
    at = fit.predict({"width": float(PAPER_WIDTH)})
    slope, slope_se = fit.slope("width")
    return Extrapolation(slope, slope_se, at.ratio, at.prediction.low, at.prediction.high,
                         len(usable))  # fmt: skip


SHARE_RANGE = (-0.5, 1.5)
"""The share axis shown: a share outside it (where Muon barely leads Adam-shared, so the
ratio's denominator is near 0) is drawn at the edge with its value written beside it."""


def _share_mark(ax: Any, y: float, row: RegimeRow, colour: str, horizontal: bool) -> None:
    """One point's lag share with its 95 % interval (clipped to :data:`SHARE_RANGE`) and its
    rarest-group FTA share (a hollow diamond); ``horizontal``: the share on the x axis."""
    lo, hi = SHARE_RANGE
    if row.share is not None:
        low = row.share if row.share_low is None else row.share_low
        high = row.share if row.share_high is None else row.share_high
        span = [max(low, lo), min(high, hi)]
        shown = min(max(row.share, lo), hi)
        xy = (span, [y, y]) if horizontal else ([y, y], span)
        ax.plot(*xy, color=colour, linewidth=2, alpha=0.6)
        ax.plot(*((shown, y) if horizontal else (y, shown)), "o", color=colour)
        if shown != row.share:
            ax.annotate(f"{row.share:.1f}", (shown, y) if horizontal else (y, shown),
                        fontsize=7, xytext=(3, 3), textcoords="offset points")  # fmt: skip
    if row.rarest_share is not None:
        shown = min(max(row.rarest_share, lo), hi)
        ax.plot(*((shown, y) if horizontal else (y, shown)), "D", mfc="none", color=colour)


def share_figure(rows: Sequence[RegimeRow], widths: Sequence[RegimeRow]) -> Any:
    """Left: the share of Muon's edge over Adam-shared that Adam's own rate recovers at every
    point — in exposures (dot, 95 % interval) and in the rarest group's final FTA (diamond); 1
    is all of it the rate, 0 none. Right: the same against width (the tuned width points)."""
    plt = pyplot()
    fig, (ax, wax) = plt.subplots(1, 2, figsize=(10.0, 1.2 + 0.3 * max(len(rows), 1)),
                                  gridspec_kw={"width_ratios": [3, 2]})  # fmt: skip
    for y, row in enumerate(rows):
        _share_mark(ax, y, row, "tab:blue" if row.rates == "tune" else "tab:grey", True)
    ax.set_yticks(range(len(rows)), [r.point for r in rows], fontsize=7)
    for x in (0.0, 1.0):
        ax.axvline(x, color="grey", linestyle=":", linewidth=1)
    ax.set_xlim(SHARE_RANGE[0] - 0.05, SHARE_RANGE[1] + 0.05)
    ax.set(xlabel=f"share recovered by Adam's own rate (0: the rule, 1: the rate); dot: "
           f"exposures at τ {TAU:g}, diamond: rarest FTA", title="Every point (grey: the "
           "base's rates reused)")  # fmt: skip
    ax.grid(alpha=0.3, axis="x")
    for row in widths:
        _share_mark(wax, float(row.width), row, "tab:blue", False)
    wax.set_xscale("log", base=2)
    wax.set_xticks([r.width for r in widths], [str(r.width) for r in widths])
    for level in (0.0, 1.0):
        wax.axhline(level, color="grey", linestyle=":", linewidth=1)
    wax.set_ylim(SHARE_RANGE[0] - 0.05, SHARE_RANGE[1] + 0.05)
    wax.set(xlabel="model width d", ylabel="share recovered by the rate split",
            title="Against width (tuned at each)")  # fmt: skip
    wax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def factorial_figure(rows: Sequence[FactorialRow]) -> Any:
    """Each arm's tail speed-up over Adam-shared with its 95 % interval, by rule and rate."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    shown = [r for r in rows if r.vs_adam_shared is not None or r.arm == ADAM_SHARED]
    for y, row in enumerate(shown):
        x = 1.0 if row.arm == ADAM_SHARED else row.vs_adam_shared
        low = x if row.vs_adam_shared_low is None else row.vs_adam_shared_low
        high = x if row.vs_adam_shared_high is None else row.vs_adam_shared_high
        colour = "tab:blue" if row.structure == OWN else "tab:orange"
        ax.plot([low, high], [y, y], color=colour, linewidth=2, alpha=0.6)
        ax.plot([x], [y], "o", color=colour, label=f"{row.structure} rate")
    ax.set_yticks(range(len(shown)), [r.label for r in shown], fontsize=7)
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set(xlabel=f"tail speed-up over Adam-shared: its exposures ÷ the arm's (τ {TAU:g}, "
           "pooled; higher is better)", title="The factorial: update rule × rate")  # fmt: skip
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    legend_outside(ax, handles=list(unique.values()), labels=list(unique))
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig


def answers(
    base: RegimeRow | None, trend: Extrapolation | None, claims: Sequence[Any]
) -> list[Answer]:
    """The report's first-screen answers: at the base scale, rule or rate; the width trend."""
    out = []
    if base is not None and base.share is not None:
        low, high = base.share_low, base.share_high
        if low is not None and low > 0.5:
            verdict = "mostly the learning rate"
        elif high is not None and high < 0.5:
            verdict = "mostly the update rule"
        else:
            verdict = "not distinguished"
        edge = "—" if base.muon_vs_adam_own is None else f"{base.muon_vs_adam_own:.2f}"
        rarest = (
            ""
            if base.rarest_share is None or base.rarest_gap is None
            else f"; in the rarest group's final FTA (Adam-shared {base.rarest_adam_shared:.2f}, "
            f"Adam-own {base.rarest_adam_own:.2f}, Muon-own {base.rarest_muon_own:.2f}) Adam's own "
            f"rate closes {base.rarest_share:.2f} of Muon's lead and Muon keeps "
            f"{base.rarest_gap:.2f}"
            + (
                " (one seed)"
                if base.rarest_gap_se is None
                else f" ± {base.rarest_gap_se:.2f} (paired SE)"
            )
        )
        question = f"At d = {base.width}, is Muon's tail edge its update rule or its learning rate?"
        evidence = (
            f"Adam's own rate on the hidden matrices recovers {base.share:.2f} [{low:.2f}, "
            f"{high:.2f}] of Muon's edge over Adam at one rate; with equal tuning freedom "
            f"Adam-own still needs {edge}× Muon's exposures ({base.fair_verdict}){rarest}"
            if low is not None and high is not None
            else f"share {base.share:.2f}"
        )
        out.append(Answer(question, verdict, evidence, verdict))
    trend_claim = next((c for c in claims if c.id == "D.wen.fair_edge_shrinks"), None)
    if trend is not None and trend_claim is not None:
        out.append(Answer(
            "Does the fair edge (Muon vs Adam at its own rate) shrink with width, and what "
            "does its trend predict at paper A's 12 × 768 model?",
            trend_claim.verdict,
            f"fitted exponent {trend.slope:+.2f} ± {trend.slope_se:.2f} over {trend.n_points} "
            f"widths; predicted Adam-own ÷ Muon exposures at d = {PAPER_WIDTH}: "
            f"{trend.ratio:.2f} (95 % prediction interval {trend.low:.2f}–{trend.high:.2f})",
            trend_claim.verdict,
        ))  # fmt: skip
    return out


def outputs(cfg: Config, points: Mapping[str, grid.PointResult]) -> Outputs:
    """Every table, figure, the claims, ``results.json`` and the report."""
    base = points[BASE]
    factorial = factorial_rows(cfg, base)
    regime = regime_rows(cfg, points)
    widths = width_points(cfg, regime)
    trend = extrapolate(points, widths)
    claims = tuple(evaluate(NAME, claim_inputs(points, widths)))
    walked = walk.walk_points(cfg, points)
    moved = walk.moves(walked)
    ratios = grid.lag_ratio_rows(points)
    csvs: tuple[Table, ...] = (
        Table("factorial.csv", records(factorial),
              "The factorial: update rule × rate structure", column_docs(FactorialRow)),
        Table("regime.csv", records(regime), "Every point: the share the rate split recovers "
              "and the fair edge", column_docs(RegimeRow)),
        Table("lag_ratio.csv", records(ratios), columns=column_docs(grid.PointLagRatio, ratios)),
    )  # fmt: skip
    if walked:
        csvs += (Table("walk.csv", records([walk.row(p) for p in walked]), "The one-factor "
                       "walks: every arm's rarest-group FTA at every step", column_docs(
                           walk.WalkRow)),)  # fmt: skip
    figures: tuple[Figure, ...] = (
        Figure("factorial", factorial_figure(factorial),
               "The factorial at the base point: each arm's tail speed-up over Adam at one rate "
               "(Adam-shared's exposures ÷ the arm's, τ 0.5, pooled), 95 % interval; blue: the "
               "hidden matrices at their own rate, orange: one rate for every parameter"),
        Figure("share", share_figure(regime, widths),
               "The share of Muon's edge over Adam at one rate that Adam's own rate on the "
               "hidden matrices recovers (0: the edge is the update rule; 1: it is the learning "
               "rate): in exposures to FTA 0.5 (dot, 95 % interval over paired seeds, clipped "
               "to -0.5..1.5) and in the rarest group's final FTA (diamond); at every point, "
               "and against width"),
    )  # fmt: skip
    if walked:
        figures += (Figure("walk", walk.walk_figure(walked),
                           "The one-factor walks from the independent implementation's settings "
                           "to the base: the rarest group's final FTA of Adam at one rate, Adam "
                           "at its own rate and Muon at its own, 95 % t intervals over the "
                           "evaluation seeds, every point tuned and trained for the same "
                           "epochs"),)  # fmt: skip
    base_row = next((r for r in regime if r.point == BASE), None)
    said = tuple(walk.answers(walked, moved)) + tuple(answers(base_row, trend, claims))
    results = {
        "factorial": records(factorial), "regime": records(regime),
        "trend": None if trend is None else trend.__dict__,
        "shares": {label: rate_share(p).__dict__ for label, p in points.items()},
        "walk_moves": [m.__dict__ for m in moved],
    }  # fmt: skip
    summary = [
        f"The factorial at the base point ({len(factorial)} arms, {len(base.plan.seeds)} "
        f"evaluation seeds, every arm tuning one rate on tuning seeds apart); "
        f"{len(regime) - 1} further points: one regime axis at a time and "
        f"{len(cfg.walks)} one-factor walks."
    ]
    summary += [f"{a.question} {a.answer}: {a.evidence}." for a in said]
    summary += [f"{c.id}: {c.verdict} — {c.ours}." for c in claims]
    if cfg.note:
        summary.append(cfg.note.strip())
    report = Report("Update rule or learning rate? The controlled study of Muon's tail edge",
                    " ".join(summary), said)  # fmt: skip
    return Outputs(csvs, figures, {"results.json": results}, claims, report)
