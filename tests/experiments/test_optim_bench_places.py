"""The leaderboard's places on synthetic lag ratios the old rule misjudged: equivalence needs an
equivalence test, an SE of 0 is floored, and Holm's rule governs the level's family."""

from __future__ import annotations

import math

import pytest

from tailmem.experiments.optim_bench.places import (
    EQUIVALENCE_MARGIN,
    PLACES,
    place_all,
    reference_finding,
)
from tailmem.metrics.qa_gaps import POOLED, LagRatio, Ratio

RESOLUTION = 0.02
"""Per-seed SD of a log ratio from interpolating between evaluations (every seed here)."""


def lag(*values: float, resolution: float = RESOLUTION) -> LagRatio:
    """A pooled lag ratio measured in every seed at ``values``."""
    seeds = tuple(Ratio("measured", v, v, v, resolution) for v in values)
    mean = math.exp(sum(math.log(v) for v in values) / len(values))
    return LagRatio(POOLED, 0.5, seeds, Ratio("measured", mean, mean, mean))


def around(centre: float, spread: float, n: int = 5) -> LagRatio:
    """``n`` seeds spread symmetrically in log around ``centre``."""
    offsets = [spread * (2 * i / (n - 1) - 1) for i in range(n)]
    return lag(*(centre * math.exp(d) for d in offsets))


def test_one_and_a_half_times_muon_with_se_0_3_is_not_equivalent_to_muon():
    """The old rule called this "shares Muon's tail edge" (within 2 SE of 1)."""
    wide = lag(1.2, 1.5, 1.8)  # 1.5 ± about 0.17 × Muon's exposures over 3 seeds
    placed = place_all({"x": (wide, around(1.3, 0.3))})["x"]
    assert placed.place != "equivalent to Muon" and placed.place in PLACES
    assert placed.vs_muon is not None and placed.vs_muon.p_equivalent > 0.05


def test_a_clear_optimiser_is_placed_by_each_rule():
    ratios = {
        "muon_like": (around(1.01, 0.02), around(1.9, 0.02)),
        "adam_like": (around(1.9, 0.02), around(1.0, 0.02)),
        "between": (around(1.4, 0.02), around(1.4, 0.02)),
        "ahead": (around(0.6, 0.02), around(3.0, 0.02)),
        "behind": (around(3.0, 0.02), around(0.6, 0.02)),
        "noisy": (around(1.2, 0.8), around(1.5, 0.8)),
    }
    places = {name: p.place for name, p in place_all(ratios).items()}
    assert places == {
        "muon_like": "equivalent to Muon",
        "adam_like": "equivalent to Adam",
        "between": "between",
        "ahead": "ahead of Muon",
        "behind": "behind Adam",
        "noisy": "not distinguished",
    }


def test_a_ratio_not_measured_in_every_seed_is_not_distinguished():
    partial = LagRatio(POOLED, 0.5, (Ratio("measured", 1.0), Ratio("not reached")), Ratio("x"))
    placed = place_all({"x": (partial, around(2.0, 0.02)), "y": (None, around(2.0, 0.02))})
    assert {p.place for p in placed.values()} == {"not distinguished"}
    assert "every seed" in placed["x"].reason


def test_seeds_that_agree_exactly_are_floored_at_the_resolution():
    """Three seeds at exactly 1.02 × Muon: the SE is the interpolation's resolution / √3, not 0,
    and with a resolution as wide as the margin no equivalence can be shown."""
    exact = lag(1.02, 1.02, 1.02, resolution=0.5)
    placed = place_all({"x": (exact, around(2.0, 0.02))})["x"]
    assert placed.vs_muon is not None
    assert placed.vs_muon.se == pytest.approx(0.5 / math.sqrt(3))
    assert placed.place == "not distinguished"


def test_holm_across_the_level_can_withhold_a_place_one_test_alone_would_give():
    """An equivalence at p ≈ 0.01 stands alone; among twenty optimisers of noise-only tests it
    needs p < 0.05/… and the place is withheld."""
    marginal = lag(1.0, 1.06, 0.95)
    alone = place_all({"x": (marginal, around(1.9, 0.02, n=3))})["x"]
    crowd = {f"n{i}": (around(1.3, 0.9, n=3), around(1.3, 0.9, n=3)) for i in range(20)}
    among = place_all({"x": (marginal, around(1.9, 0.02, n=3)), **crowd})["x"]
    assert alone.vs_muon is not None and 0.001 < alone.vs_muon.p_equivalent < 0.05 / 3
    assert alone.place == "equivalent to Muon"
    assert among.place != "equivalent to Muon"


def test_the_reference_finding_needs_an_equivalence_to_share_muons_edge():
    assert reference_finding(around(1.02, 0.02)).finding.startswith("shares Muon's tail edge")
    assert reference_finding(around(1.9, 0.02)).finding == "trails Muon"
    assert reference_finding(lag(1.0, 1.6, 0.8)).finding == "not distinguished"
    assert reference_finding(None).finding == "not measured in every seed"
    assert pytest.approx(1.25) == EQUIVALENCE_MARGIN
