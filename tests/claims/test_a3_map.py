"""A3.map.uniform: the lag ratio at the paper's power law vs the grid's most uniform exponent."""

import pytest

from tailmem.claims.a3_map import CLAIMS, A3MapInputs

(CLAIM,) = CLAIMS
REFERENCE = {"width": 128, "depth": 2, "exposures": 6.0, "m": 7, "frequency_exponent": 1.0}


def _entry(value):
    """A per-seed ratio as the map records it: a number, ``("lower", x)`` for a censored seed
    (Adam never reached the level: the ratio is at least x), or None (neither)."""
    if value is None:
        return {"ratio": None, "lower": None, "upper": None}
    if isinstance(value, tuple):
        side, bound = value
        return {"ratio": None, "lower": None, "upper": None, side: bound}
    return {"ratio": value, "lower": value, "upper": value}


def _results(ratios_by_exponent, other_width=None):
    """One point per exponent at the reference, plus (optionally) a point at another width."""
    rows, seeds = [], {}
    for exponent, ratios in ratios_by_exponent.items():
        label = f"rho{exponent:g}"
        rows.append({**REFERENCE, "frequency_exponent": exponent, "point": label})
        seeds[label] = {"0.5": [_entry(r) for r in ratios]}
    if other_width is not None:  # a more uniform point, but not at the reference width
        rows.append({**REFERENCE, "width": other_width, "frequency_exponent": 0.0, "point": "w"})
        seeds["w"] = {"0.5": [_entry(r) for r in (9.0, 9.1, 9.2)]}
    return A3MapInputs(reference=REFERENCE, rows=rows, seed_ratios=seeds)


def _verdict(results):
    (result,) = CLAIM.evaluate(results)
    return result


@pytest.mark.parametrize(
    ("uniform", "verdict"),
    [
        ([1.1, 1.2, 1.15], "reproduced"),  # 2.0 vs 1.15: shrinks, far beyond 2 SE
        ([2.6, 2.7, 2.65], "not reproduced"),  # grows on uniform data
        ([1.5, 2.5, 2.0], "inconclusive"),  # within 2 SE
        ([1.1, None, None], "inconclusive"),  # seeds with neither a ratio nor a bound
        ([1.1, 1.2, 1.15, None], "inconclusive"),  # such a seed is not dropped
    ],
)
def test_power_law_vs_the_most_uniform_exponent_decides_beyond_two_se(uniform, verdict):
    result = _verdict(_results({1.0: [1.9, 2.0, 2.1], 0.25: [9.0, 9.0, 9.1], 0.0: uniform}))
    assert result.verdict == verdict, result
    assert result.details["exponent"] == 0.0  # the flattest, not 0.25


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
