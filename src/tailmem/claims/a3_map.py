"""PAPERS.md A3 (ICLR camera-ready): Muon's advantage shrinks as the data become uniform;
measured by ``qa-map`` where its grid varies the frequency exponent.

The camera-ready adds the statement that Muon's edge over Adam on the heavy-tailed QA shrinks
as the frequencies become uniform (the reviewers' question). The map measures the exposure-lag
ratio of Adam behind Muon (every group and evaluation pooled) at every frequency exponent of its
grid; the rule compares the paper's power law (exponent 1) with the most uniform exponent of the
grid, the other axes at their reference values. Both sides are ours, computed alike, so the
pooled reading is like for like here (no paper number enters); a censored seed is kept as its
bound (:func:`~tailmem.claims.core.compare_seeds`).

The check reads :class:`A3MapInputs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tailmem.claims.core import (
    MIN_SEEDS,
    Claim,
    ClaimInputs,
    Outcome,
    bound_of,
    compare_seeds,
    decided,
    inconclusive,
    unmeasured,
)

EXPERIMENT = "qa-map"
SOURCE = "A3, ICLR camera-ready: 'the advantage shrinks as data become uniform'"
OTHER_AXES = ("width", "depth", "exposures", "m")


@dataclass(frozen=True, kw_only=True)
class A3MapInputs(ClaimInputs):
    """What ``qa-map`` gives the check (taken from its ``results.json`` mapping)."""

    reference: Mapping[str, float] = field(default_factory=dict)
    """Axis → its reference value (the first of its list)."""
    rows: Sequence[Mapping[str, Any]] = ()
    """One mapping per point: its axes (``width``, ``depth``, ``exposures``, ``m``,
    ``frequency_exponent``) and ``point``, its label."""
    seed_ratios: Mapping[str, Mapping[str, Sequence[Mapping[str, float | None]]]] = field(
        default_factory=dict
    )
    """Point label → ``str(tau)`` → per-seed pooled lag ratio as ``ratio`` / ``lower`` /
    ``upper`` (a censored seed: its bound; neither: all None)."""


def check_uniform(claim: Claim, inputs: A3MapInputs) -> Outcome:
    """Pooled lag ratio at ``tau``, exponent 1 vs the grid's smallest exponent (the other axes
    at their reference values): larger at exponent 1 beyond 2 SE over seeds is reproduced,
    smaller beyond 2 SE not reproduced, else inconclusive (:func:`compare_seeds`: a censored
    seed counts at its bound and supports a verdict in its own direction only)."""
    reference = inputs.reference
    at_reference = [
        row for row in inputs.rows if all(row[axis] == reference.get(axis) for axis in OTHER_AXES)
    ]
    by_exponent = {row["frequency_exponent"]: row["point"] for row in at_reference}
    flattest = min(by_exponent, default=None)
    if 1.0 not in by_exponent or flattest is None or flattest >= 1.0:
        return unmeasured(
            f"the grid has no frequency exponent below 1 beside exponent 1 at the reference "
            f"point (exponents: {sorted(by_exponent)})"
        )
    key = f"{claim['tau']:g}"

    def ratios(exponent: float) -> list[Mapping[str, float | None]]:
        return list(inputs.seed_ratios[by_exponent[exponent]][key])

    power, uniform = ratios(1.0), ratios(flattest)
    details = {"exponent": flattest, "power_law": power, "uniform": uniform}
    comparison = compare_seeds([bound_of(r) for r in power], [bound_of(r) for r in uniform])
    ours = f"exponent 1 vs {flattest:g}: {comparison}"
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
        "pooled exposure-lag ratio at FTA {tau}, per seed (a censored seed kept as its bound): "
        "at frequency exponent 1 minus at the grid's smallest exponent (other axes at their "
        "reference values), reproduced when > 2 SE of both points' noise over ≥ 3 seeds, not "
        "reproduced when < −2 SE, else inconclusive (also when the bounds point the other "
        "way); not measured when the grid has no exponent below 1",
        {"tau": 0.5},
        check=check_uniform,
        why="'Shrinks' names a direction and no size, so the rule asks only for the sign "
        "beyond the noise over seeds; τ 0.5 is the middle level of the QA gap measures. Both "
        "points are ours, computed alike, so the pooled reading is like for like here. A seed "
        "whose Adam never reached τ is the largest lag, not a missing value: it stays, as a "
        "lower bound.",
        min_seeds=MIN_SEEDS,
    )
]
