"""Issue 29, item 4: the rules an audit found wrong, each re-derived from its published
statement, on synthetic inputs that the rule before misjudged (the old verdict and its numbers
are in each test's docstring)."""

import math

import pytest

from tailmem.claims.b import BInputs
from tailmem.claims.core import log_factor_slope
from tailmem.claims.registry import CLAIMS

# --------------------------------------------------------------------------- B.preconditioner

P = [0.14, 0.035, 0.0156, 0.0088]
"""Per-item frequencies of four groups (the smoke spectrum: a factor 16 from head to tail)."""


def _curves(gd_times, muon_times, steps=200):
    noiseless = {
        "group_item_p": P,
        "gd_group_half_times": gd_times,
        "muon_group_half_times": muon_times,
        # what the rule before read: Muon's late exponential rates, equal within 5 %, and the
        # final gaps, GD's far above 10× Muon's
        "muon_group_rates_over_eta": [1.0, 1.0, 0.99, 0.98],
        "gd_group_slopes": [-1.0] * 4,
        "gd_final_gap": 0.5,
        "muon_final_gap": 6.55e-12,
    }
    return BInputs(config={"curve_steps": steps}, noiseless=noiseless, matching={},
                   noisy_fits=[], steps_to_target={}, gd_stability=[],
                   block_symmetry={})  # fmt: skip


def _preconditioner(gd_times, muon_times, steps=200):
    (result,) = CLAIMS["B.preconditioner"].evaluate(_curves(gd_times, muon_times, steps))
    return result


def test_b_preconditioner_is_judged_on_the_frequency_dependence_it_removes():
    """Old: Muon's late rates within 5 % and GD's final gap > 10× Muon's — any GD gap above
    6.6e-11 against Muon's 6.55e-12 — so every input here was reproduced. New: the exponent of
    each group's speed (1/time to halve its loss) against its frequency: GD's ≈ 1 (time ∝
    1/p_j), a preconditioned one ≈ 0, within the trend tolerance 1/ln 16 = 0.36."""
    gd = [round(2 * P[0] / p) for p in P]  # 2, 8, 18, 32: speed ∝ p_j
    assert log_factor_slope([p / P[-1] for p in P]) == pytest.approx(1 / math.log(P[0] / P[-1]))
    equal = _preconditioner(gd, [34, 34, 35, 37])
    assert equal.verdict == "reproduced" and "Muon +0.0" in equal.ours and "GD +1.0" in equal.ours
    # Muon learning the rare groups later in proportion to their rarity (its late rates still
    # equal): the old rule passed it; no preconditioning happened.
    ordered = _preconditioner(gd, [10, 25, 40, 60])
    assert ordered.verdict == "not reproduced"
    # GD's groups learned at once: there is no frequency ordering for a preconditioner to
    # remove, so the run says nothing about it (old: reproduced on the gap).
    flat = _preconditioner([20, 20, 21, 21], [34, 34, 35, 37])
    assert flat.verdict == "inconclusive" and "nothing to precondition" in flat.reason
    # A Muon group never learned: its speed is at most 1/steps, an exponent that can refute
    # (here it does) but not confirm.
    assert _preconditioner(gd, [34, 34, 35, None], steps=36).verdict == "inconclusive"
    assert _preconditioner(gd, [5, 5, 5, None], steps=200).verdict == "not reproduced"
