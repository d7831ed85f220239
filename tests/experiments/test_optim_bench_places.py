"""The leaderboard's places on synthetic boards: the primary statistic is the rarest group's final
FTA paired by seed (places the pooled exposure lag misjudged), equivalence needs an equivalence
test within the declared FTA margin, an SE of 0 is floored, Holm's rule governs the level's
family, a seed lost is not dropped, and a run whose positive control (all-Adam against Muon)
does not separate places nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tailmem.claims.bench import FTA_MARGIN
from tailmem.claims.core import equivalence
from tailmem.experiments.optim_bench.places import (
    ADAM,
    ALL_ADAM,
    MUON,
    PLACES,
    UNDER_TUNED,
    UNDERPOWERED,
    decide_level,
    difference_test,
    paired,
    place_all,
    positive_control,
    reference_finding,
    tail_values,
    tuned_within,
)
from tailmem.metrics.qa_gaps import POOLED, FTACurves, lag_ratios

RESOLUTION = 1 / 384
"""One question of the rarest group at the cpu preset (6 attributes × 64 people)."""
SEEDS = (0, 1, 2, 3, 4)


def diffs(centre: float, spread: float, n: int = 5) -> list[float]:
    """``n`` per-seed FTA differences spread evenly over ``centre ± spread``."""
    return [centre + spread * (2 * i / (n - 1) - 1) for i in range(n)]


def measured(centre: float, spread: float, n: int = 5):
    """The difference and equivalence tests of :func:`diffs`."""
    return difference_test(diffs(centre, spread, n), RESOLUTION)


def test_a_clear_optimiser_is_placed_by_each_rule():
    """Muon − X and X − Adam per seed (rarest-group final FTA)."""
    tests = {
        "muon_like": (measured(0.005, 0.01), measured(0.3, 0.01)),
        "adam_like": (measured(0.3, 0.01), measured(-0.005, 0.01)),
        "between": (measured(0.15, 0.01), measured(0.15, 0.01)),
        "ahead": (measured(-0.18, 0.02), measured(0.4, 0.02)),
        "behind": (measured(0.4, 0.02), measured(-0.2, 0.02)),
        "noisy": (measured(0.05, 0.2), measured(0.05, 0.2)),
    }
    places = {name: p.place for name, p in place_all(tests).items()}
    assert places == {
        "muon_like": "equivalent to Muon",
        "adam_like": "equivalent to Adam",
        "between": "between",
        "ahead": "ahead of Muon",
        "behind": "behind Adam",
        "noisy": "not distinguished",
    }


def test_an_equivalence_that_also_resolves_a_difference_says_both():
    """X within the margin of Muon (or Adam) yet apart from it beyond the t test: the place is
    the equivalence, and its words name the difference too, never hiding it."""
    tests = {
        "near_muon": (measured(0.03, 0.005, n=8), measured(0.3, 0.01, n=8)),
        "near_adam": (measured(0.3, 0.01, n=8), measured(0.03, 0.005, n=8)),
        "muon_like": (measured(0.005, 0.01, n=8), measured(0.3, 0.01, n=8)),
    }
    placed = place_all(tests)
    assert [placed[n].place for n in tests] == ["equivalent to Muon", "equivalent to Adam",
                                                "equivalent to Muon"]  # fmt: skip
    assert placed["near_muon"].described == (
        "equivalent to Muon, trailing it by a difference the t test resolves"
    )
    assert placed["near_adam"].described == (
        "equivalent to Adam, leading it by a difference the t test resolves"
    )
    assert placed["muon_like"].described == "equivalent to Muon"


def test_an_order_resting_on_a_rate_at_a_grid_end_is_undecided():
    """X shown behind while its own rate sat at a grid end, or ahead of a reference whose rate
    did: a better rate may lie beyond, so the place is undecided; an order the end cannot
    overturn (X ahead while X is at an end) stands."""
    tests = {
        "between": (measured(0.15, 0.01), measured(0.15, 0.01)),
        "behind": (measured(0.4, 0.02), measured(-0.2, 0.02)),
        "ahead": (measured(-0.18, 0.02), measured(0.4, 0.02)),
        "muon_like": (measured(0.005, 0.01), measured(0.3, 0.01)),
    }
    placed = place_all(tests)
    own = tuned_within(placed, {"between": "highest", "behind": "lowest", "ahead": "highest"})
    assert {n: p.place for n, p in own.items()} == {
        "between": UNDER_TUNED, "behind": UNDER_TUNED, "ahead": "ahead of Muon",
        "muon_like": "equivalent to Muon",
    }  # fmt: skip
    assert "between, but between's rate sat at the highest end" in own["between"].reason
    muon_short = tuned_within(placed, {"muon": "highest"})
    assert muon_short["ahead"].place == UNDER_TUNED and muon_short["between"].place == "between"
    adam_short = tuned_within(placed, {"adam_split": "lowest"})
    assert adam_short["between"].place == UNDER_TUNED
    assert adam_short["behind"].place == "behind Adam"
    control = positive_control(measured(0.27, 0.05))
    trails = measured(0.3, 0.01)  # Muon − adam_split: adam_split trails
    assert reference_finding(trails, control).finding == "trails Muon"
    assert reference_finding(trails, control, {"adam_split": "lowest"}).finding.startswith(
        UNDER_TUNED
    )
    assert reference_finding(trails, control, {"muon": "highest"}).finding == "trails Muon"


def test_a_gap_of_a_few_points_with_a_wide_spread_is_not_equivalent():
    """Muon − X of 0.03 ± 0.03 over 3 seeds: no difference shown, and its 90 % interval is not
    inside ±0.05 either — not distinguished, never "equivalent" for want of a difference."""
    placed = place_all({"x": (measured(0.03, 0.05, n=3), measured(0.3, 0.01, n=3))})["x"]
    assert placed.vs_muon is not None and placed.vs_muon.p_equivalent > 0.05
    assert placed.place == "not distinguished"


def test_seeds_that_agree_exactly_are_floored_at_the_resolution():
    """Three seeds at exactly the same FTA difference: the SE is the resolution of a difference
    of two FTAs / √3, not 0."""
    exact = difference_test([0.01, 0.01, 0.01], RESOLUTION)
    assert exact is not None
    assert exact.se == pytest.approx(math.hypot(RESOLUTION, RESOLUTION) / math.sqrt(3))
    assert exact.finding == "equivalent"  # 0.01 ± 0.002 lies well inside ±0.05


def test_holm_across_the_level_can_withhold_a_place_one_test_alone_would_give():
    """An equivalence at p ≈ 0.007 stands alone (after X − Adam's difference, it needs p <
    0.05/3); among twenty noise-only optimisers it needs p < 0.05/83 and the place is
    withheld."""
    marginal = (difference_test([0.0, 0.01, -0.01], RESOLUTION), measured(0.3, 0.01, n=3))
    alone = place_all({"x": marginal})["x"]
    crowd = {f"n{i}": (measured(0.05, 0.3, n=3), measured(0.05, 0.3, n=3)) for i in range(20)}
    among = place_all({"x": marginal, **crowd})["x"]
    assert alone.vs_muon is not None and 0.05 / 83 < alone.vs_muon.p_equivalent < 0.05 / 3
    assert alone.place == "equivalent to Muon"
    assert among.place != "equivalent to Muon"


def test_a_seed_lost_by_one_arm_leaves_the_comparison_unmeasured_not_shorter():
    a = {s: (0.8, 0.5) for s in SEEDS}
    b = {s: (0.5, 0.3) for s in SEEDS if s != 3}  # seed 3 diverged
    assert paired(a, b, 0, SEEDS) is None
    assert paired(a, a, 1, SEEDS) == [0.0] * 5
    placed = place_all({"x": (difference_test(None, RESOLUTION), measured(0.3, 0.01))})
    assert placed["x"].place == "not distinguished" and "every seed" in placed["x"].reason


def test_the_reference_finding_needs_an_equivalence_to_share_muons_edge():
    control = positive_control(measured(0.27, 0.05))
    assert control.separated
    assert reference_finding(measured(0.005, 0.01), control).finding == (
        "shares Muon's tail edge (equivalent within the margin)"
    )
    # within the margin and resolved too: both are said, neither hides the other
    near = measured(0.03, 0.005, n=8)
    assert near.p_equivalent < 0.05 and near.p_different < 0.05
    both = reference_finding(near, control).finding
    assert both.startswith("shares Muon's") and "trailing it by a difference" in both
    assert reference_finding(measured(0.3, 0.02), control).finding == "trails Muon"
    assert reference_finding(measured(-0.3, 0.02), control).finding == "leads Muon"
    assert reference_finding(measured(0.02, 0.2), control).finding == "not distinguished"
    assert reference_finding(None, control).finding == "not measured in every seed"


def test_the_area_under_the_rarest_curve_is_its_mean_fta_over_the_exposures_trained():
    """Evaluations at 0, 1, 3 exposures with FTA 0, 0.5, 0.9: trapezoids (0.25 + 1.4) ÷ 3."""
    values = tail_values([7], np.array([[0.0, 0.5, 0.9]]), np.array([0.0, 1.0, 3.0]))
    assert values[7] == (0.9, pytest.approx((0.5 * 1 / 2 + (0.5 + 0.9) * 2 / 2) / 3))


# --------------------------------------------------------------------------- synthetic boards


def board(finals: dict[str, tuple[float, float]], seed: int = 0) -> FTACurves:
    """Four frequency groups over 21 evaluations, 5 seeds, every arm alike in the three head
    groups (each learned to FTA 1 by 30–70 % of training, its pace 1 ± 3 % per seed) and unlike
    in the rarest: a straight climb from 0 to its final FTA, drawn per seed from ``finals``
    (mean, SD). Group g is seen 2^(3 − g) times per unit of training."""
    rng = np.random.default_rng(seed)
    steps = np.linspace(0.0, 1.0, 21)
    exposures = np.array([2.0 ** (3 - g) * steps for g in range(4)])
    fta = {}
    for arm, (mean, sd) in finals.items():
        per_seed = []
        for _ in SEEDS:
            head = [np.clip(steps / (0.3 + 0.2 * g) * rng.normal(1.0, 0.03), 0, 1)
                    for g in range(3)]  # fmt: skip
            final = float(np.clip(rng.normal(mean, sd), 0.0, 1.0))
            per_seed.append([*head, final * steps])
        fta[arm] = np.array(per_seed)
    return FTACurves(fta, steps, exposures, seeds=SEEDS)


def level(curves: FTACurves):
    values = {arm: tail_values(SEEDS, fta[:, -1, :], curves.exposures[-1])
              for arm, fta in curves.fta.items()}  # fmt: skip
    return decide_level(values, SEEDS, RESOLUTION)


def old_primary(curves: FTACurves, lead: str, lag: str):
    """The pooled lag's place test the benchmark used before: TOST of the per-seed log ratio at
    τ 0.5 pooled over the groups measured in every seed, within ×1.25."""
    pooled = next(r for r in lag_ratios(curves, lead, lag, (0.5,)) if r.group == POOLED)
    return pooled, equivalence(pooled.log_values(), math.log(1.25), resolution=pooled.resolution)


def test_the_pooled_lag_calls_all_adam_muons_equal_where_the_rarest_group_separates_them():
    """All-Adam's rarest group ends at 0.45 and never reaches FTA 0.5 in most seeds, so the
    pooled lag drops that group and, on the head groups alone, calls all-Adam equivalent to
    Muon; the rarest group's final FTA, paired by seed, separates them (the positive control)
    and places all-Adam behind Adam at its own rate, and a SOAP-like optimiser ahead of Muon
    whose pooled lag is also "equivalent"."""
    curves = board({MUON: (0.74, 0.02), ADAM: (0.70, 0.02), ALL_ADAM: (0.45, 0.02),
                    "soap": (0.92, 0.01)})  # fmt: skip
    pooled, old = old_primary(curves, MUON, ALL_ADAM)
    assert 3 not in pooled.groups  # the rarest group is the one it leaves out
    assert old.finding == "equivalent"
    assert old_primary(curves, MUON, "soap")[1].finding == "equivalent"
    found = level(curves)
    assert found.control.separated and found.control.test is not None
    assert found.control.test.mean == pytest.approx(0.29, abs=0.03)
    assert found.placed[ALL_ADAM].place == "behind Adam"
    assert found.placed["soap"].place == "ahead of Muon"
    assert found.placed_auc["soap"].place == "ahead of Muon"  # the second statistic agrees
    assert found.finding.finding == "trails Muon"  # Adam-own 0.04 behind Muon, SD 0.028


def test_a_run_whose_positive_control_does_not_separate_places_nothing():
    """All-Adam's rarest group as good as Muon's (a run too short or too small to show the
    tail): every place, and the finding on Adam-own, is undecided — even SOAP's, which the same
    tests would place ahead of Muon if the control had separated."""
    curves = board({MUON: (0.74, 0.02), ADAM: (0.70, 0.02), ALL_ADAM: (0.74, 0.05),
                    "soap": (0.92, 0.01)})  # fmt: skip
    found = level(curves)
    assert not found.control.separated
    assert "underpowered" in found.control.text()
    assert {p.place for p in found.placed.values()} == {UNDERPOWERED}
    assert {p.place for p in found.placed_auc.values()} == {UNDERPOWERED}
    assert found.finding.finding == UNDERPOWERED
    raw = place_all({"soap": (found.placed["soap"].vs_muon, found.placed["soap"].vs_adam)})
    assert raw["soap"].place == "ahead of Muon"
    assert UNDERPOWERED not in PLACES


def test_the_power_of_a_level_is_computed_from_the_sd_it_observed():
    """The level's SD is the median over challengers of the seed SD of Muon − X (rarest final
    FTA), and the seeds it needs come from it (tailmem.claims.bench.seeds_for_power)."""
    from tailmem.claims.bench import family_level, seeds_for_power

    curves = board({MUON: (0.74, 0.02), ADAM: (0.70, 0.02), ALL_ADAM: (0.45, 0.02),
                    "soap": (0.92, 0.01)})  # fmt: skip
    values = {arm: tail_values(SEEDS, fta[:, -1, :], curves.exposures[-1])
              for arm, fta in curves.fta.items()}  # fmt: skip
    found = decide_level(values, SEEDS, RESOLUTION)
    sds = [float(np.std([values[MUON][s][0] - values[x][s][0] for s in SEEDS], ddof=1))
           for x in (ALL_ADAM, "soap")]  # fmt: skip
    assert found.power.sd == pytest.approx(float(np.median(sds)))
    assert found.power.alpha_per_test == pytest.approx(0.05 / 8)
    assert found.power.seeds_needed == seeds_for_power(found.power.sd, FTA_MARGIN,
                                                       family_level(2))  # fmt: skip
    assert found.power.seeds_run == 5 and found.power.margin == FTA_MARGIN


def test_a_censored_rarest_crossing_is_kept_as_its_bound_not_dropped():
    """Seed 1 of the lagging arm never brings the rarest group to FTA 0.5: its ratio is at
    least 2.0 (the run's end over Muon's crossing), kept as that bound and counted as such; a
    seed with neither a value nor a bound leaves the summary empty."""
    from tailmem.experiments.optim_bench.board import censored_lag
    from tailmem.metrics.qa_gaps import LagRatio, Ratio

    seeds = (Ratio("measured", 1.5, 1.5, 1.5), Ratio("not reached", None, lower=2.0))
    lag = LagRatio(3, 0.5, seeds, Ratio("undetermined"))
    assert censored_lag(lag) == (pytest.approx(math.sqrt(1.5 * 2.0), abs=1e-4), "1 ≥")
    lost = LagRatio(3, 0.5, (*seeds, Ratio("undetermined")), Ratio("undetermined"))
    assert censored_lag(lost) == (None, "")
    assert censored_lag(None) == (None, "")
