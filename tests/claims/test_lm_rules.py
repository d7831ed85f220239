"""The LM studies' rules as pure functions of their typed inputs (the experiments call them
next)."""

import dataclasses

import pytest

from tailmem.claims import a1, a3
from tailmem.claims.a1 import A1Inputs
from tailmem.claims.a3 import A3Inputs
from tailmem.claims.capacity_measured import CapacityRow, Trained
from tailmem.claims.registry import CLAIMS
from tailmem.claims.related import CapacityInputs


def _ablation(losses, **extra):
    return dataclasses.replace(A1Inputs(ffn="plain", seeds=[0, 1, 2], losses=losses), **extra)


def test_a1_single_seed_difference_is_inconclusive_and_three_seeds_decide():
    one = _ablation({"o": [3.77], "v": [3.83]}, seeds=[0])
    (result,) = CLAIMS["A1.o_beats_v"].evaluate(one)
    assert result.verdict == "inconclusive" and "seed" in result.reason
    three = _ablation({"o": [3.77, 3.78, 3.76], "v": [3.83, 3.85, 3.82]})
    (result,) = CLAIMS["A1.o_beats_v"].evaluate(three)
    assert result.verdict == "reproduced" and result.seeds == [0, 1, 2] and "±" in result.ours
    noisy = _ablation({"o": [3.77, 3.90, 3.70], "v": [3.83, 3.75, 3.86]})
    assert CLAIMS["A1.o_beats_v"].evaluate(noisy)[0].verdict == "inconclusive"
    gated = dataclasses.replace(three, ffn="gated")
    assert CLAIMS["A1.o_beats_v"].evaluate(gated)[0].verdict == "not measured"


def test_a1_model_at_chance_is_inconclusive():
    chance = 7.0
    at_chance = _ablation(
        {"full": [7.0, 7.01, 6.99], "adam": [7.2, 7.21, 7.19]}, chance_loss=chance
    )
    (result,) = CLAIMS["A1.full_beats_adam"].evaluate(at_chance)
    assert result.verdict == "inconclusive" and "chance" in result.reason


def test_a1_tail_gain_is_relative_not_absolute():
    # The same 5% relative gain on both buckets: the tail's absolute gain is larger (its loss
    # is larger), which the old absolute rule counted as a reproduction.
    head, tail = [2.0, 2.1, 1.9], [8.0, 8.4, 7.6]
    buckets = {
        "adam": {"head": head, "tail": tail},
        "full": {"head": [x * 0.95 for x in head], "tail": [x * 0.95 for x in tail]},
    }
    results = _ablation({"full": [3.0] * 3, "adam": [3.2] * 3}, buckets=["head", "tail"],
                        bucket_losses=buckets)  # fmt: skip
    (result,) = CLAIMS["A1.beyond.tail_gain"].evaluate(results)
    assert result.verdict == "inconclusive"  # equal relative gains: no tail advantage resolved
    assert "tail" in result.rule and "relative" in result.rule


def _qa(fta, chance=0.01):
    return A3Inputs(ffn="plain", seeds=[0, 1, 2], rarest=4, head_groups=2, chance_fta=chance,
                    fta=fta)  # fmt: skip


def _arm(head, tail, jitter=0.01):
    return {"final": [[head, head, 0.5, 0.5, tail + k * jitter] for k in (-1, 0, 1)]}


def test_a3_vo_ffn_beyond_muon_is_not_like_muon():
    claim = CLAIMS["A3.plain.muon_vo_ffn_like_muon"]
    lo, hi = a3._band(claim)
    fta = {"muon": _arm(1.0, 0.57), "adam": _arm(1.0, 0.12, jitter=0.015)}
    # the hybrid's seeds move apart from the other arms' (paired: shared noise cancels)
    beyond = fta | {"muon_vo_ffn": _arm(1.0, 0.57 + (hi - 1 + 0.2) * 0.45, jitter=0.02)}
    (result,) = claim.evaluate(_qa(beyond))
    assert result.verdict == "not reproduced" and "t = " in result.ours
    near = fta | {"muon_vo_ffn": _arm(1.0, 0.55, jitter=0.02)}
    assert claim.evaluate(_qa(near))[0].verdict == "reproduced"
    assert lo < 1 < hi


def test_a3_model_at_chance_is_inconclusive():
    chance = 0.01
    fta = {arm: _arm(chance, chance, jitter=0.0) for arm in a3.ARMS}
    for cid in ("A3.plain.tail_muon_vs_adam", "A3.plain.sgd_below_adam",
                "A3.plain.head_all_optimisers"):  # fmt: skip
        (result,) = CLAIMS[cid].evaluate(_qa(fta, chance))
        assert result.verdict == "inconclusive" and "chance" in result.reason, cid


def test_a3_published_values_name_both_paper_versions():
    (result,) = CLAIMS["A3.plain.tail_muon_vs_adam"].evaluate(_qa({}))
    assert result.verdict == "not measured"
    assert f"{a3.CAMERA_READY_ADAM_RAREST}" in result.published and "arXiv v2" in result.published
    assert a3.A3_PUBLISHED_FTA["plain"][(1.0, 0)]["adam"] == pytest.approx(0.264)  # the v2 table


def test_a1_gain_fraction_waits_for_full_gain():
    losses = {"full": [3.5, 3.6, 3.4], "adam": [3.55, 3.45, 3.6], "vo_ffn": [3.5, 3.5, 3.5]}
    (result,) = CLAIMS["A1.vo_ffn_recovers_full"].evaluate(_ablation(losses))
    assert result.verdict == "inconclusive" and "g(full)" in result.reason
    assert a1.CHANCE_MARGIN > 0


def test_a3_claims_are_checked_against_their_own_ffn():
    fta = {arm: _arm(1.0, 0.85 if arm.startswith("muon") else 0.2, 0.02 if arm == "muon" else 0.01)
           for arm in a3.ARMS}  # fmt: skip
    results = a3.evaluate_per_ffn({"plain": _qa(fta)})
    by_id = {r.id: r for r in results}
    assert {c.id for c in CLAIMS.values() if c.experiment == "knowledge-qa"} == set(by_id)
    assert by_id["A3.plain.tail_muon_vs_adam"].verdict == "reproduced"
    gated = by_id["A3.gated.tail_muon_vs_adam"]
    assert gated.verdict == "not measured" and "gated FFN was not run" in gated.reason


def _trained(d, error, best_lr):
    row = CapacityRow(d=d, optimizer="gd", error=error, best_lr=best_lr, lr_grid_edge="",
                      loss=0.0, tail_mass_beyond_d=0.0)  # fmt: skip
    return Trained(row, [error])


def test_capacity_at_chance_and_grid_edges_are_inconclusive():
    claim = CLAIMS["cabannes.capacity"]
    grid = [0.1, 1.0, 10.0]
    chance = 0.8
    rows = [_trained(d, chance, 1.0) for d in (4, 8, 16)]
    inputs = CapacityInputs(zipf_exponent=2.0, optimizers=["gd"], lr_grid={"gd": grid},
                            rows=rows, chance_error=chance)  # fmt: skip
    (result,) = claim.evaluate(inputs)
    assert result.verdict == "inconclusive" and "chance" in result.reason
    edge = [_trained(d, 1.0 / d, grid[-1]) for d in (16, 4, 8)]  # any order: sorted by d
    (result,) = claim.evaluate(dataclasses.replace(inputs, rows=edge))
    assert result.verdict == "inconclusive" and "grid" in result.reason
    assert "d = 4: η = 10 (highest)" in result.reason
    inner = [_trained(d, 1.0 / d, grid[1]) for d in (8, 16, 4)]
    (result,) = claim.evaluate(dataclasses.replace(inputs, rows=inner))
    assert result.verdict == "reproduced" and "fitted exponent -1.000" in result.ours
    assert [r["d"] for r in result.details["rows"]] == [4, 8, 16]
    assert result.details["rows"][0]["errors_per_lr"] == [0.25]  # results.json's row


def test_a3_head_level_is_decided_beyond_the_t_interval_and_refuted_after_holm():
    claim = CLAIMS["A3.plain.head_all_optimisers"]
    floor = claim["floor"]

    def heads(values):
        return {"final": [[v, v, 0.5, 0.5, 0.2] for v in values]}

    clear = {arm: heads([floor + 0.05, floor + 0.06, floor + 0.04]) for arm in a3.ARMS}
    assert claim.evaluate(_qa(clear))[0].verdict == "reproduced"
    # One arm straddles the floor (mean above it, but within the t interval): undecided.
    noisy = clear | {"sgd": heads([floor + 0.08, floor - 0.07, floor + 0.02])}
    (result,) = claim.evaluate(_qa(noisy))
    assert result.verdict == "inconclusive" and "sgd" in result.reason
    # One arm of five below the floor: t = 4.04 at df 2, one-sided p = 0.028 — below its own
    # 5 % but not below 0.05/5, Holm's bar for the smallest of five p-values; far below, refuted.
    low = clear | {"sgd": heads([floor - 0.02, floor - 0.05, floor - 0.035])}
    assert claim.evaluate(_qa(low))[0].verdict == "inconclusive"
    far = clear | {"sgd": heads([floor - 0.15, floor - 0.16, floor - 0.14])}
    assert claim.evaluate(_qa(far))[0].verdict == "not reproduced"


def test_a1_tail_gain_without_bucket_losses_is_not_measured():
    """Losses of full Muon and all-Adam without their per-bucket losses (an old run, or a
    config without buckets) leave the claim not measured; it used to raise a KeyError."""
    losses = {"full": [3.0, 3.1, 2.9], "adam": [3.2, 3.3, 3.1]}
    results = _ablation(losses, buckets=["head", "tail"])
    (result,) = CLAIMS["A1.beyond.tail_gain"].evaluate(results)
    assert result.verdict == "not measured" and "bucketed losses" in result.reason
    partial = dataclasses.replace(results, bucket_losses={"adam": {"head": [2.0] * 3}})
    assert CLAIMS["A1.beyond.tail_gain"].evaluate(partial)[0].verdict == "not measured"


def test_a3_arm_behind_at_a_grid_end_is_inconclusive():
    """An arm that chose its rate at an end of its tuning grid (widening spent) may only be
    under-tuned: a verdict that puts it behind is undecided; one that puts the other arm
    behind stands (knowledge-qa's gated Muon sat at the top of its grid, behind Adam)."""
    fta = {"muon": _arm(1.0, 0.56), "adam": _arm(1.0, 0.74, jitter=0.012),
           "sgd": _arm(1.0, 0.30, jitter=0.011)}  # fmt: skip
    tail = CLAIMS["A3.plain.tail_muon_vs_adam"]
    assert tail.evaluate(_qa(fta))[0].verdict == "not reproduced"
    at_top = dataclasses.replace(_qa(fta), edges={"muon": "highest"})
    (result,) = tail.evaluate(at_top)
    assert result.verdict == "inconclusive" and "highest end" in result.reason
    assert "grid" in tail.rule
    # Adam at its grid's end and ahead: Muon behind stands
    adam_edge = dataclasses.replace(_qa(fta), edges={"adam": "lowest"})
    assert tail.evaluate(adam_edge)[0].verdict == "not reproduced"
    # SGD+M behind Adam: reproduced, unless SGD+M's rate sat at a grid end
    sgd = CLAIMS["A3.plain.sgd_below_adam"]
    assert sgd.evaluate(_qa(fta))[0].verdict == "reproduced"
    sgd_edge = dataclasses.replace(_qa(fta), edges={"sgd": "lowest"})
    assert sgd.evaluate(sgd_edge)[0].verdict == "inconclusive"
    # a hybrid's position between Muon and Adam moves with any of the three arms' rates
    hybrid = CLAIMS["A3.plain.muon_vo_ffn_like_muon"]
    near = {"muon": _arm(1.0, 0.57), "adam": _arm(1.0, 0.12, jitter=0.015),
            "muon_vo_ffn": _arm(1.0, 0.55, jitter=0.02)}  # fmt: skip
    assert hybrid.evaluate(_qa(near))[0].verdict == "reproduced"
    edged = dataclasses.replace(_qa(near), edges={"muon_vo_ffn": "highest"})
    assert hybrid.evaluate(edged)[0].verdict == "inconclusive"
