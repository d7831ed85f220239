"""PAPERS.md A3 (ICLR camera-ready): Muon's advantage shrinks as the data become uniform;
measured by ``qa-map`` where its grid varies the frequency exponent.

The camera-ready adds the statement that Muon's edge over Adam on the heavy-tailed QA shrinks
as the frequencies become uniform (the reviewers' question). The map measures the exposure-lag
ratio of Adam behind Muon — pooled: per seed the geometric mean over the groups measured in
every seed (:mod:`tailmem.metrics.qa_gaps`) — at every frequency exponent of its grid; the rule
compares the paper's power law (exponent 1) with the most uniform exponent of the grid, the
other axes at their reference values. Both sides are ours, computed alike, so the pooled reading
is like for like here (no paper number enters). The comparison is of per-seed log ratios, a
censored seed kept as its bound, with a two-sided 95 % Student-t interval (Welch degrees of
freedom) and every SE floored at the interpolation's resolution
(:func:`~tailmem.claims.a3_sensitivity.judge_log`).

The check reads :class:`A3MapInputs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tailmem.claims.a3_sensitivity import SeedRatios, judge_log
from tailmem.claims.core import (
    CONFIDENCE,
    MIN_SEEDS,
    TWO_SIDED,
    Claim,
    ClaimInputs,
    Declared,
    Outcome,
    decided,
    declares,
    inconclusive,
    unmeasured,
)

EXPERIMENT = "qa-map"
SOURCE = "A3, ICLR camera-ready: 'the advantage shrinks as data become uniform'"
OTHER_AXES = ("width", "depth", "exposures", "m")
EXPONENT = "frequency_exponent"


@dataclass(frozen=True)
class MapPoint:
    """One point of the map as the check reads it: its label, its value on every axis and its
    pooled lag ratio per τ over seeds."""

    label: str
    axes: Mapping[str, float]
    ratios: Mapping[float, SeedRatios] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class A3MapInputs(ClaimInputs):
    """What ``qa-map`` gives the check."""

    reference: Mapping[str, float] = field(default_factory=dict)
    """Axis → its reference value (the first of its list)."""
    points: Sequence[MapPoint] = ()
    """Every point of the grid."""


@declares(Declared(
    "Welch t of the per-seed log lag ratios, exponent 1 against the flattest (unpaired: the two "
    "points train on different data), censored seeds kept as bounds", TWO_SIDED,
))  # fmt: skip
def check_uniform(claim: Claim, inputs: A3MapInputs) -> Outcome:
    """Pooled lag ratio at ``tau``, exponent 1 vs the grid's smallest exponent (the other axes
    at their reference values), on the log scale: larger at exponent 1 beyond the 95 % t
    interval is reproduced, smaller beyond it not reproduced, else inconclusive (a censored
    seed counts at its bound and supports a verdict in its own direction only)."""
    reference = inputs.reference
    at_reference = [
        p for p in inputs.points if all(p.axes[axis] == reference.get(axis) for axis in OTHER_AXES)
    ]
    by_exponent = {p.axes[EXPONENT]: p for p in at_reference}
    flattest = min(by_exponent, default=None)
    if 1.0 not in by_exponent or flattest is None or flattest >= 1.0:
        return unmeasured(
            f"the grid has no frequency exponent below 1 beside exponent 1 at the reference "
            f"point (exponents: {sorted(by_exponent)})"
        )
    tau = claim["tau"]
    power = by_exponent[1.0].ratios.get(tau, SeedRatios())
    uniform = by_exponent[flattest].ratios.get(tau, SeedRatios())
    comparison = judge_log(power, uniform)
    details = {"exponent": flattest, "power_law": list(power.values),
               "uniform": list(uniform.values), "confidence": CONFIDENCE, "df": comparison.df,
               "log_difference": comparison.difference, "se_log": comparison.se,
               "resolution": max(power.resolution, uniform.resolution)}  # fmt: skip
    ours = f"log lag ratio, exponent 1 vs {flattest:g}: {comparison}"
    if comparison.verdict == "inconclusive":
        return inconclusive(ours, comparison.reason, details=details)
    return decided(comparison.verdict == "reproduced", ours, details=details)


CLAIMS: list[Claim] = [
    Claim(
        "A3.map.uniform",
        EXPERIMENT,
        SOURCE,
        "Muon's edge over Adam on the QA facts shrinks as the frequencies become uniform: Adam "
        "lags Muon by fewer exposures (FTA {tau}, all groups pooled) on uniform data than on "
        "the paper's power law",
        "stated without numbers (ICLR camera-ready)",
        "pooled exposure-lag ratio at FTA {tau} (per seed the geometric mean over the groups "
        "measured in every seed), per seed on the log scale (a censored seed kept as its "
        "bound): at frequency exponent 1 minus at the grid's smallest exponent (other axes at "
        "their reference values), each SE floored at the interpolation's resolution, over ≥ 3 "
        "seeds: above 0 beyond the 95 % two-sided Student-t interval (Welch df) → reproduced, "
        "below 0 beyond it → not reproduced, else inconclusive (also when the bounds point the "
        "other way); not measured when the grid has no exponent below 1",
        {"tau": 0.5},
        check=check_uniform,
        why="'Shrinks' names a direction and no size, so the rule asks only for the sign "
        "beyond the noise over seeds (no margin: any shrinking counts); τ 0.5 is the middle "
        "level of the QA gap measures. Both points are ours, computed alike, so the pooled "
        "reading is like for like here. The log scale: a lag ratio is a quotient of "
        "exposures, so 'fewer exposures' is a difference of log ratios. A seed whose Adam "
        "never reached τ is the largest lag, not a missing value: it stays, as a lower bound.",
        min_seeds=MIN_SEEDS,
    )
]
