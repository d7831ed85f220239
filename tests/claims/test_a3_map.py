"""A3.map.uniform: the lag ratio at the paper's power law vs the grid's most uniform exponent,
on the log scale with a 95 % t interval and the interpolation's resolution as the SE floor."""

import math

import pytest

from tailmem.claims.a3_map import CLAIMS, A3MapInputs, MapPoint
from tailmem.claims.a3_sensitivity import SeedRatios
from tailmem.claims.core import Bound, t_quantile, welch_df

(CLAIM,) = CLAIMS
TAU = CLAIM["tau"]
REFERENCE = {"width": 128, "depth": 2, "exposures": 6.0, "m": 7, "frequency_exponent": 1.0}


def _ratios(values, resolution=0.0):
    """Per-seed ratios as the map records them: a number, ``("lower", x)`` for a censored seed
    (Adam never reached the level: the ratio is at least x), or None (neither)."""
    return SeedRatios(
        tuple(Bound(v[1], v[0]) if isinstance(v, tuple) else v for v in values), resolution
    )


def _results(ratios_by_exponent, other_width=None, resolution=0.0):
    """One point per exponent at the reference, plus (optionally) a point at another width."""
    found = [
        MapPoint(f"rho{exponent:g}", {**REFERENCE, "frequency_exponent": exponent},
                 {TAU: _ratios(ratios, resolution)})
        for exponent, ratios in ratios_by_exponent.items()
    ]  # fmt: skip
    if other_width is not None:  # a more uniform point, but not at the reference width
        axes = {**REFERENCE, "width": other_width, "frequency_exponent": 0.0}
        found.append(MapPoint("w", axes, {TAU: _ratios((9.0, 9.1, 9.2))}))
    return A3MapInputs(reference=REFERENCE, points=found)


def _verdict(results):
    (result,) = CLAIM.evaluate(results)
    return result


@pytest.mark.parametrize(
    ("uniform", "verdict"),
    [
        ([1.1, 1.2, 1.15], "reproduced"),  # 2.0 vs 1.15: shrinks, far beyond the interval
        ([2.6, 2.7, 2.65], "not reproduced"),  # grows on uniform data
        ([1.5, 2.5, 2.0], "inconclusive"),  # within the 95 % t interval
        ([1.1, None, None], "inconclusive"),  # seeds with neither a ratio nor a bound
        ([1.1, 1.2, 1.15, None], "inconclusive"),  # such a seed is not dropped
    ],
)
def test_power_law_vs_the_most_uniform_exponent_decides_beyond_the_t_interval(uniform, verdict):
    result = _verdict(_results({1.0: [1.9, 2.0, 2.1], 0.25: [9.0, 9.0, 9.1], 0.0: uniform}))
    assert result.verdict == verdict, result
    assert result.details["exponent"] == 0.0  # the flattest, not 0.25


def test_the_difference_is_of_log_ratios_with_welch_degrees_of_freedom():
    """Shrinking from 2 to 1.65 is a log difference of 0.19; with log spreads of 0.1 and 0.05
    the Welch interval (df ≈ 2.9, t ≈ 3.2) reaches past it, although 2 SE (the old rule) would
    not."""
    power = [2.0 * math.exp(x) for x in (-0.1, 0.0, 0.1)]
    uniform = [1.65 * math.exp(x) for x in (-0.05, 0.0, 0.05)]
    result = _verdict(_results({1.0: power, 0.0: uniform}))
    se_power, se_uniform = 0.1 / math.sqrt(3), 0.05 / math.sqrt(3)
    se = math.hypot(se_power, se_uniform)
    df = welch_df([(se_power**2, 3), (se_uniform**2, 3)])
    assert result.details["log_difference"] == pytest.approx(math.log(2.0 / 1.65))
    assert result.details["se_log"] == pytest.approx(se) and result.details["df"] == pytest.approx(
        df
    )
    assert 2 * se < math.log(2.0 / 1.65) < t_quantile(df) * se
    assert result.verdict == "inconclusive"


def test_seeds_that_agree_exactly_are_floored_at_the_interpolation_resolution():
    exact = _results({1.0: [1.5] * 3, 0.0: [1.2] * 3})
    assert _verdict(exact).verdict == "inconclusive"  # SE 0: no noise estimate
    assert _verdict(_results({1.0: [1.5] * 3, 0.0: [1.2] * 3}, resolution=0.01)).verdict == (
        "reproduced"
    )
    coarse = _verdict(_results({1.0: [1.5] * 3, 0.0: [1.2] * 3}, resolution=0.1))
    assert coarse.verdict == "inconclusive" and coarse.details["resolution"] == 0.1


def test_only_points_at_the_reference_of_the_other_axes_count():
    result = _verdict(_results({1.0: [1.9, 2.0, 2.1], 0.25: [1.0, 1.1, 1.05]}, other_width=256))
    assert result.verdict == "reproduced" and result.details["exponent"] == 0.25


def test_a_grid_without_an_exponent_below_one_does_not_measure_it():
    result = _verdict(_results({1.0: [1.9, 2.0, 2.1]}))
    assert result.verdict == "not measured"
    assert "no frequency exponent below 1" in result.reason
    assert _verdict(_results({0.0: [1.0, 1.0, 1.1]})).verdict == "not measured"


def test_censored_seeds_count_as_bounds_in_their_own_direction_only():
    """Adam never reaching the level in a seed is the largest lag, not a missing value: it
    stays, as a lower bound. At the power law it can confirm that the gap shrinks (the true
    ratio there is even larger) but not refute it; on uniform data the other way round."""
    censored = [1.9, 2.0, 2.1, ("lower", 1.8)]
    flat = [1.1, 1.2, 1.15, 1.1]
    result = _verdict(_results({1.0: censored, 0.0: flat}))
    assert result.verdict == "reproduced" and "1 censored" in result.ours
    grows = _verdict(_results({1.0: flat, 0.0: censored}))
    assert grows.verdict == "not reproduced"  # uniform's true ratio is larger still
    cannot_refute = _verdict(_results({1.0: [1.1, 1.2, ("lower", 1.0)], 0.0: [2.0, 2.1, 1.9]}))
    assert cannot_refute.verdict == "inconclusive" and "cannot refute" in cannot_refute.reason
    cannot_confirm = _verdict(_results({1.0: [2.0, 2.1, 1.9], 0.0: [1.1, 1.2, ("lower", 1.0)]}))
    assert cannot_confirm.verdict == "inconclusive" and "cannot confirm" in cannot_confirm.reason
