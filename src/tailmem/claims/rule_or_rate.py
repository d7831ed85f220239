"""PAPERS.md A3 and D — is Muon's tail edge its update rule or its learning rate? Measured by
``rule-or-rate``.

Paper A attributes Muon's tail edge to its update rule but compares Muon (two tuned rates) with
Adam at one rate. With equal tuning freedom — Adam on the hidden matrices at a rate of its own
over the same Adam-trained rest (Adam-own) — the attribution predicts that Muon still leads.
The fair-tuning literature (PAPERS.md D) splits on how that edge moves with scale: Wen et al.
(arXiv 2509.02046) see Muon's gain shrink under fair tuning (1.4× at 0.1B to 1.1× at 1.2B);
Qiu et al. (arXiv 2512.05620) see it kept. The checks read :class:`RuleOrRateInputs`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats as _scipy_stats

from tailmem.claims.core import (
    ALPHA,
    MIN_SEEDS,
    MIN_TREND_POINTS,
    TWO_SIDED,
    Claim,
    ClaimInputs,
    Declared,
    Outcome,
    declares,
    equivalence,
    floored_se,
    inconclusive,
    mean_se,
    t_quantile,
    unmeasured,
    welch_df,
)

EXPERIMENT = "rule-or-rate"
SOURCE_RULE = "D (equal tuning freedom); A3 (thesis: the update rule)"
SOURCE_WEN = "D (Wen et al. 2025, arXiv 2509.02046)"


@dataclass(frozen=True, kw_only=True)
class RuleOrRateInputs(ClaimInputs):
    """Per model width: the per-seed log exposure-lag ratio of Adam-own behind Muon-own (τ 0.5,
    pooled over groups; positive: Muon leads) and its interpolation resolution (the floor of a
    seed SD), and the seeds. A width whose ratio is not measured in every seed is absent."""

    log_ratios: Mapping[int, Sequence[float]]
    """Per model width, the per-seed log lag ratio of Adam-own behind Muon-own."""
    resolution: Mapping[int, float]
    """Per model width, the SD of a per-seed log ratio from interpolating between evaluations."""
    seeds: Sequence[int]
    """The evaluation seeds behind the ratios."""


def lag_margin() -> float:
    """The equivalence margin on an exposure-lag ratio (×1.25), read from
    ``A3.beyond.rule_not_rate``: the one copy every lag verdict uses (knowledge-QA's answers,
    rule-or-rate's regime table, optim-bench's descriptive lag)."""
    return RULE_NOT_RATE["margin"]


@declares(Declared(
    "per width, the per-seed log lag ratios (paired seeds): a two-sided t test of a lead, df "
    "n − 1, and two one-sided t tests (TOST) of equivalence within ×margin", TWO_SIDED,
    level_note=" per side of the lead's test; 5 % per side of the equivalence (TOST)",
))  # fmt: skip
def check_rule_not_rate(claim: Claim, inputs: RuleOrRateInputs) -> list[Outcome]:
    """Per width: Muon leads Adam-own beyond the 95 % t interval → reproduced; the two are
    equivalent within ×``margin`` (two one-sided tests), or Adam-own leads beyond it → not
    reproduced; otherwise inconclusive."""
    margin = claim["margin"]
    out = []
    for width, values in sorted(inputs.log_ratios.items()):
        test = equivalence(values, math.log(margin), resolution=inputs.resolution.get(width, 0.0))
        ratio = math.exp(test.mean)
        ours = (f"Adam-own needs {ratio:.2f}× Muon's exposures at d = {width} (log ratio "
                f"{test.mean:+.3f} ± {test.se:.3f} SE, {len(values)} seeds)")  # fmt: skip
        kw: dict[str, Any] = {"variant": f"d{width}", "seeds": list(inputs.seeds),
              "details": {"log_ratio": test.mean, "se": test.se, "p_different": test.p_different,
                          "p_equivalent": test.p_equivalent}}  # fmt: skip
        if len(values) < MIN_SEEDS:
            out.append(inconclusive(ours, f"{len(values)} seeds; the rule needs ≥ {MIN_SEEDS}",
                                    **kw))  # fmt: skip
        elif test.p_different < ALPHA and test.mean > 0:
            out.append(Outcome("reproduced", ours, **kw))
        elif test.p_equivalent < ALPHA or (test.p_different < ALPHA and test.mean < 0):
            out.append(Outcome("not reproduced", ours, **kw))
        else:
            out.append(inconclusive(ours, "neither a lead beyond the 95 % interval nor an "
                                    f"equivalence within ×{margin:g}", **kw))  # fmt: skip
    if not out:
        return [unmeasured("no width measured Muon-own and Adam-own in every seed",
                           variant="none")]  # fmt: skip
    return out


@dataclass(frozen=True)
class EdgeTrend:
    """The slope of the fair edge (mean log lag ratio) against log width, weighted by each
    width's SE over seeds (:func:`edge_trend`): the slope, its one SE, its degrees of freedom,
    the half-width of its 95 % interval, the lack-of-fit p-value (χ² of the points about the
    line against their own noise) and the widths fitted. The one statistic of the width
    trend: the claim decides on it and every text that prints the slope prints its SE."""

    slope: float
    se: float
    df: float
    half_width: float
    lack_of_fit_p: float
    widths: tuple[int, ...]

    @property
    def scaled(self) -> bool:
        """Whether the points scatter about the line beyond their noise (lack of fit at 5 %):
        the SE is then scaled by that scatter, on n − 2 degrees of freedom."""
        return self.lack_of_fit_p < ALPHA

    def text(self) -> str:
        low, high = self.slope - self.half_width, self.slope + self.half_width
        return (f"{self.slope:+.3f} ± {self.se:.3f} SE (95 % interval {low:+.3f} to {high:+.3f}, "
                f"df {self.df:.1f})")  # fmt: skip


def edge_trend(inputs: RuleOrRateInputs) -> EdgeTrend | str:
    """The weighted least-squares slope of each width's mean log lag ratio against log width,
    or why there is none (fewer than :data:`MIN_TREND_POINTS` widths with an SE).

    Each width's mean has a known-form variance, its SE² over n seeds (floored at the
    interpolation's resolution), so the slope's variance is Σ cᵢ²·SEᵢ² with the WLS weights
    cᵢ, and its degrees of freedom are the Welch–Satterthwaite ones of that sum (each SE on
    nᵢ − 1): with 3 widths of 3 seeds about 4–6, where the residual scatter about the line
    gives 1 (t 12.7: a slope that can never be decided). The line is checked against the
    points' noise: when χ² of the residuals exceeds its 95 % point on n − 2 degrees of freedom
    (the points scatter more than their seeds say — no straight line), the SE is scaled by
    √(χ²/(n − 2)) and the degrees of freedom are n − 2, the residuals' own."""
    points = []
    for width, values in sorted(inputs.log_ratios.items()):
        if len(values) < 2:
            continue
        stats = mean_se(values)
        se = floored_se(stats, inputs.resolution.get(width, 0.0))
        if se > 0:
            points.append((width, math.log(width), stats.mean, se, stats.n))
    if len(points) < MIN_TREND_POINTS:
        return (f"{len(points)} width(s) with a measured fair edge; a trend needs ≥ "
                f"{MIN_TREND_POINTS}")  # fmt: skip
    w = [1 / se**2 for *_, se, _ in points]
    sw = sum(w)
    xbar = sum(wi * p[1] for wi, p in zip(w, points, strict=True)) / sw
    ybar = sum(wi * p[2] for wi, p in zip(w, points, strict=True)) / sw
    sxx = sum(wi * (p[1] - xbar) ** 2 for wi, p in zip(w, points, strict=True))
    coef = [wi * (p[1] - xbar) / sxx for wi, p in zip(w, points, strict=True)]
    slope = sum(c * p[2] for c, p in zip(coef, points, strict=True))
    chi2 = sum(wi * (p[2] - ybar - slope * (p[1] - xbar)) ** 2
               for wi, p in zip(w, points, strict=True))  # fmt: skip
    dof = len(points) - 2
    lack = float(_scipy_stats.chi2.sf(chi2, dof))
    parts = [((c * p[3]) ** 2, p[4]) for c, p in zip(coef, points, strict=True)]
    se = math.sqrt(sum(v for v, _ in parts))
    df = welch_df(parts)
    if lack < ALPHA:
        se, df = se * math.sqrt(chi2 / dof), float(dof)
    half = t_quantile(df) * se
    return EdgeTrend(slope, se, df, half, lack, tuple(p[0] for p in points))


@declares(Declared(
    "weighted least-squares slope of the mean log lag ratio against log width, its SE from the "
    "widths' seeds (Welch–Satterthwaite df; scaled by the scatter, n − 2 df, when the line does "
    "not fit), t test", TWO_SIDED,
))  # fmt: skip
def check_fair_edge_shrinks(claim: Claim, inputs: RuleOrRateInputs) -> Outcome:
    """The slope of the fair edge against log width (:func:`edge_trend`): below 0 beyond its
    95 % t interval → reproduced, above 0 → not reproduced, else inconclusive; fewer than 3
    widths → inconclusive."""
    trend = edge_trend(inputs)
    if isinstance(trend, str):
        return inconclusive("—", trend)
    widths = ", ".join(str(w) for w in trend.widths)
    ours = f"slope of the fair edge (log lag) against log width {trend.text()}, widths {widths}"
    if trend.scaled:
        ours += ("; the widths scatter about the line beyond their noise (χ² p "
                 f"{trend.lack_of_fit_p:.3g}): SE scaled")  # fmt: skip
    kw: dict[str, Any] = {"seeds": list(inputs.seeds),
                          "details": {"slope": trend.slope, "se": trend.se, "df": trend.df,
                                      "lack_of_fit_p": trend.lack_of_fit_p}}  # fmt: skip
    if trend.slope + trend.half_width < 0:
        return Outcome("reproduced", ours, **kw)
    if trend.slope - trend.half_width > 0:
        return Outcome("not reproduced", ours, **kw)
    return inconclusive(ours, "the 95 % interval of the slope covers 0", **kw)


RULE_NOT_RATE = Claim(
    "A3.beyond.rule_not_rate",
    EXPERIMENT,
    SOURCE_RULE,
    "With equal tuning freedom (Adam on the hidden matrices at a rate of its own), Muon "
    "still learns the rare facts faster: its tail edge is its update rule, not its rate",
    "— (paper A compares Muon with Adam at one rate; no fair-tuning number was published)",
    "per width: the exposure-lag ratio of Adam-own behind Muon-own (τ 0.5, pooled over "
    "groups), per-seed logs over ≥ 3 paired seeds: reproduced when above 1 beyond the 95 % "
    "t interval; not reproduced when within ×{margin} of 1 by two one-sided tests at 5 % "
    "(or below 1 beyond the interval); otherwise inconclusive",
    {"margin": 1.25},
    variant="width",
    check=check_rule_not_rate,
    min_seeds=MIN_SEEDS,
    why="'faster' is a direction, so any lead beyond noise reproduces it; 'not the rate' is "
    "refuted only by showing no lead — an equivalence within ×1.25, the margin below every "
    "lag the paper calls a difference (its smallest reported ratio is ≥ 1.5).",
)
"""The equivalence margin's one copy (:func:`lag_margin`)."""

CLAIMS: list[Claim] = [
    RULE_NOT_RATE,
    Claim(
        "D.wen.fair_edge_shrinks",
        EXPERIMENT,
        SOURCE_WEN,
        "Under fair tuning Muon's advantage shrinks as the model grows (Wen et al.: 1.4× at "
        "0.1B to 1.1× at 1.2B)",
        "a falling trend (loss speed-up, 0.1B → 1.2B)",
        "the weighted least-squares slope of the fair edge (mean log lag ratio of Adam-own "
        "behind Muon-own, τ 0.5, pooled) against log width over ≥ 3 widths, its SE from the "
        "widths' seeds (each width's SE over its seeds, Welch–Satterthwaite degrees of freedom) "
        "— scaled by the scatter about the line, on n − 2 degrees of freedom, when a χ² test "
        "at 5 % finds the points off the line — and its 95 % t interval: reproduced when below "
        "0, not reproduced when above 0, otherwise inconclusive",
        check=check_fair_edge_shrinks,
        min_seeds=MIN_SEEDS,
        why="'shrinks with scale' is an O(·)-like trend statement: judged by the sign of a "
        "fitted slope beyond its interval, never by a threshold taken from our measurement; "
        "width is the scale the cpu preset can vary (Wen et al. vary parameters and data). The "
        "slope's noise is the widths' seed noise: the residuals of 3 widths leave 1 degree of "
        "freedom (t 12.7), with which no slope could be decided, so they serve only to check "
        "that a line fits.",
    ),
]
