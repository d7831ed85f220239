"""Gap measures of the knowledge QA: lag ratios, peak gaps, exposures, the published tables."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from tailmem.claims.paper_a_qa_tables import published_fta
from tailmem.data.bios import BiosConfig, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.metrics.qa_gaps import (
    POOLED,
    Crossing,
    FTACurves,
    exposures_per_group,
    fta_crossing,
    gap_measures,
    lag_ratio,
    monotone_envelope,
    paper_curves,
)

SELECTIONS = np.array([2, 1])
STEPS = np.arange(0, 161)


def _knots(rng):
    """An increasing piecewise-linear FTA curve: knots at exposures 0, 4, ..., 40."""
    values = np.sort(rng.uniform(0.0, 1.0, 11))
    values[0], values[-1] = 0.0, 1.0
    return np.arange(0, 41, 4), values


def _stretched_curves(stretch):
    """Muon's FTA is f(exposures); Adam's, seed i, is f(exposures / stretch[i]).

    f is piecewise linear with knots at multiples of 4 (flat at 1 beyond 40); with stretches of
    1, 2 or 4 every knot of either curve is an exposure of the grid (group 0: even exposures,
    group 1: every integer), so linear interpolation recovers both curves exactly and each of
    Adam's crossings is exactly ``stretch`` times Muon's.
    """
    rng = np.random.default_rng(0)
    exposures = exposures_per_group(SELECTIONS, STEPS, steps_per_epoch=1.0)
    muon, adam = [], []
    for factor in stretch:
        knots, values = _knots(rng)
        muon.append(np.interp(exposures, knots, values))
        adam.append(np.interp(exposures / factor, knots, values))
    return FTACurves({"muon": np.array(muon), "adam": np.array(adam)}, STEPS, exposures)


def test_adam_stretched_twice_in_exposures_gives_ratio_two_at_every_tau():
    out = gap_measures(_stretched_curves([2.0, 2.0, 2.0]), taus=(0.3, 0.5, 0.8))
    (pair,) = out.measured
    assert (pair.lead, pair.lag) == ("muon", "adam")
    rows = pair.lag_ratios
    assert {(r.group, r.tau) for r in rows} == {
        (g, t) for g in (0, 1, POOLED) for t in (0.3, 0.5, 0.8)
    }
    for row in rows:
        assert row.n_measured == 3 and row.complete
        assert row.ratio == pytest.approx(2.0, rel=1e-12)
        assert row.of_mean.status == "measured"
        assert all(s.ratio == pytest.approx(2.0, rel=1e-12) for s in row.seeds)
        # the seeds agree exactly: the SE is the interpolation's resolution, not 0
        assert row.se_log == pytest.approx(row.resolution / np.sqrt(3)) and row.se_log > 0
    assert pair.ratio(0.5, POOLED).groups == (0, 1)
    json.dumps(out.to_json(), allow_nan=False)


def test_seed_spread_is_the_geometric_mean_and_se_of_the_log_ratios():
    stretch = [1.0, 2.0, 4.0]  # each divides the grid's spacing of knots (4 exposures)
    out = gap_measures(_stretched_curves(stretch), taus=(0.5,))
    row = out.measured[0].ratio(0.5, 1)
    assert [s.ratio for s in row.seeds] == pytest.approx(stretch, rel=1e-12)
    logs = np.log(stretch)
    assert row.ratio == pytest.approx(2.0)  # exp(mean(log 1, log 2, log 4))
    assert row.se_log == pytest.approx(np.std(logs, ddof=1) / np.sqrt(3))
    low, high = row.interval()
    half = stats.t.ppf(0.975, 2) * row.se_log
    assert (low, high) == pytest.approx((2.0 * np.exp(-half), 2.0 * np.exp(half)))


def test_pooled_is_the_mean_of_per_group_log_ratios_over_groups_measured_in_every_seed():
    """Group 0 lags 2x and group 1 lags 8x in every seed: pooled is their geometric mean, 4 —
    not the first crossing of all points as one curve, which follows the earliest group."""
    rng = np.random.default_rng(1)
    exposures = exposures_per_group(SELECTIONS, STEPS, steps_per_epoch=1.0)
    muon, adam = [], []
    for _ in range(3):
        knots, values = _knots(rng)
        muon.append(np.interp(exposures, knots, values))
        adam.append(np.stack([np.interp(exposures[0] / 2.0, knots, values),
                              np.interp(exposures[1] / 8.0, knots, values)]))  # fmt: skip
    curves = FTACurves({"muon": np.array(muon), "adam": np.array(adam)}, STEPS, exposures)
    pair = gap_measures(curves, taus=(0.3,)).measured[0]
    assert pair.ratio(0.3, 0).ratio == pytest.approx(2.0)
    assert pair.ratio(0.3, 1).ratio == pytest.approx(8.0)
    assert pair.ratio(0.3, POOLED).ratio == pytest.approx(4.0)
    assert [s.ratio for s in pair.ratio(0.3, POOLED).seeds] == pytest.approx([4.0] * 3)


def test_crossing_reads_the_monotone_envelope_and_interpolates_linearly():
    exposures = np.array([0.0, 10.0, 20.0, 30.0, 40.0])
    crossing = fta_crossing(exposures, np.array([0.1, 0.2, 0.6, 0.9, 1.0]), 0.5)
    assert (crossing.exposure, crossing.low, crossing.high) == (17.5, 10.0, 20.0)
    assert crossing.resolution == pytest.approx(10.0 / (np.sqrt(12) * 17.5))
    # a single noisy evaluation touching τ early does not decide the crossing: the isotonic fit
    # pools (0.6, 0.4) into 0.5, 0.5, and the envelope reaches 0.55 only after them
    spike = fta_crossing(exposures, np.array([0.1, 0.6, 0.4, 0.9, 0.95]), 0.55)
    assert spike.status == "crossed" and spike.exposure == pytest.approx(20 + 0.05 / 0.4 * 10)
    exact = fta_crossing(exposures, np.array([0.0, 0.5, 0.7, 0.8, 0.9]), 0.5)
    assert exact.exposure == 10.0
    early = fta_crossing(exposures, np.array([0.6, 0.7, 0.8, 0.9, 1.0]), 0.5)
    assert (early.exposure, early.status) == (0.0, "before first")
    never = fta_crossing(exposures, np.array([0.1, 0.2, 0.3, 0.4, 0.45]), 0.5)
    assert (never.exposure, never.status) == (40.0, "not reached")


def test_monotone_envelope_is_the_isotonic_least_squares_fit():
    fitted = monotone_envelope(np.array([0.0, 0.6, 0.4, 0.9, 0.7, 1.0]))
    assert fitted == pytest.approx([0.0, 0.5, 0.5, 0.8, 0.8, 1.0])


def test_an_arm_that_never_reaches_tau_gives_none_a_bound_and_no_nan():
    exposures = exposures_per_group([1], [1, 2, 3, 4], steps_per_epoch=1.0)
    muon = np.array([[[0.2, 0.6, 0.9, 1.0]]])  # crosses 0.5 at 1.75, 0.8 at 2.67
    adam = np.array([[[0.1, 0.2, 0.4, 0.55]]])  # crosses 0.5 at 3.67, never 0.8
    out = gap_measures(FTACurves({"muon": muon, "adam": adam}, [1, 2, 3, 4], exposures))
    json.dumps(out.to_json(), allow_nan=False)  # no non-finite number anywhere
    pair = out.measured[0]
    half = pair.ratio(0.5, 0)
    assert half.ratio == pytest.approx((3 + 1 / 1.5) / 1.75) and half.se_log is None
    far = pair.ratio(0.8, 0)
    assert far.ratio is None and far.se_log is None and far.seeds[0].status == "not reached"
    assert far.seeds[0].lower == pytest.approx(4 / (2 + 0.2 / 0.3))
    assert far.seeds[0].upper is None
    assert pair.ratio(0.8, POOLED).groups == ()  # no group measured: nothing pooled
    assert pair.ratio(0.8, POOLED).seeds[0].status == "undetermined"
    assert pair.ratio(0.3, 0).n_measured == 1  # Muon is past 0.3 only after its first point


@pytest.mark.parametrize(
    ("lead", "lag", "status", "lower", "upper"),
    [
        ((2.0, "crossed"), (6.0, "crossed"), "measured", 3.0, 3.0),
        ((2.0, "before first"), (6.0, "crossed"), "lower bound", 3.0, None),
        ((2.0, "crossed"), (6.0, "before first"), "upper bound", None, 3.0),
        ((2.0, "before first"), (6.0, "before first"), "undetermined", None, None),
        ((2.0, "crossed"), (6.0, "not reached"), "not reached", 3.0, None),
        ((2.0, "not reached"), (6.0, "crossed"), "not reached", None, 3.0),
        ((2.0, "not reached"), (6.0, "not reached"), "not reached", None, None),
    ],
)
def test_lag_ratio_bounds_follow_where_each_crossing_can_lie(lead, lag, status, lower, upper):
    out = lag_ratio(Crossing(*lead), Crossing(*lag))
    assert (out.status, out.lower, out.upper) == (status, lower, upper)
    assert out.ratio == (3.0 if status == "measured" else None)


def test_tail_gap_is_the_rarest_final_cell_and_the_peak_is_descriptive():
    rng = np.random.default_rng(3)
    adam = rng.uniform(0, 0.5, (4, 3, 6))
    gap = np.zeros((3, 6))
    gap[0, 1], gap[1, 4], gap[2, 5] = 0.2, 0.35, 0.3
    noise = rng.normal(0, 0.01, (4, 3, 6))
    muon = adam + gap + noise
    steps = np.arange(1, 7) * 10
    curves = FTACurves(
        {"muon": muon, "adam": adam}, steps, exposures_per_group([4, 2, 1], steps, 1.0)
    )
    pair = gap_measures(curves).measured[0]
    diff = (muon - adam).mean(axis=0)
    for k, row in enumerate(pair.peak_per_group):
        j = int(np.argmax(diff[k]))
        assert (row.group, row.step) == (k, steps[j])
        assert row.gap == pytest.approx(diff[k, j])
        paired = muon[:, k, j] - adam[:, k, j]
        assert row.se == pytest.approx(np.std(paired, ddof=1) / 2)
    assert (pair.peak_gap.group, pair.peak_gap.step) == (1, 50.0)
    assert (pair.tail_gap.group, pair.tail_gap.step) == (2, 60.0)
    assert pair.tail_gap.gap == pytest.approx(diff[2, -1])
    assert pair.to_json()["peak_gap"]["descriptive"] is True


def test_exposures_count_the_trainings_of_each_fact_at_whole_epochs(tmp_path):
    """After e whole epochs of the real stream every fact of group g was trained e * S_g times."""
    small = dict(m=4, n_first_names=40, n_surnames=60, n_cities=30, n_universities=40)
    ds = build_dataset(BiosConfig(**small, n_majors=20, n_employers=30, vocab_size=1024), tmp_path)
    stream = QATrainStream(ds, batch_size=3, seq_len=64, seed=0)
    steps = np.array([1, 2]) * stream.steps_per_epoch
    expected = exposures_per_group(ds.selections_per_group(), steps, stream.steps_per_epoch)
    person, attr = ds.arrays["item_person"], ds.arrays["item_attr"].astype(np.int64)
    trained = np.zeros(ds.n_people * 6)
    for epoch in range(2):
        items = stream.item_order(epoch)
        np.add.at(trained, person[items] * 6 + attr[items], 1)
        per_fact = trained.reshape(-1, 6)
        for g in range(ds.n_groups):
            assert (per_fact[ds.group_of_person == g] == expected[g, epoch]).all()
    with pytest.raises(ValueError, match="steps_per_epoch"):
        exposures_per_group([1], [1], 0.0)


def test_curves_reject_bad_shapes_and_non_finite_values():
    exposures = exposures_per_group([1], [1, 2], 1.0)
    with pytest.raises(ValueError, match="strictly increasing"):
        FTACurves({"a": np.zeros((1, 1, 2))}, [2, 1], exposures)
    with pytest.raises(ValueError, match=r"fta\['b'\] must have shape"):
        FTACurves({"a": np.zeros((1, 1, 2)), "b": np.zeros((2, 1, 2))}, [1, 2], exposures)
    with pytest.raises(ValueError, match="non-finite"):
        FTACurves({"a": np.full((1, 1, 2), np.nan)}, [1, 2], exposures)
    with pytest.raises(ValueError, match="no FTA for"):
        gap_measures(FTACurves({"a": np.zeros((1, 1, 2))}, [1, 2], exposures), pairs=[("a", "x")])
    with pytest.raises(ValueError, match="seeds has"):
        FTACurves({"a": np.zeros((2, 1, 2))}, [1, 2], exposures, seeds=(0,))


# --------------------------------------------------------------------------- the paper's tables


def _paper_ratios(version, ffn="plain"):
    out = gap_measures(paper_curves(version, ffn), pairs=[("muon", "adam")])
    return out, {(r.group, r.tau): r.of_mean for r in out.measured[0].lag_ratios}


def test_paper_lag_ratios_from_the_arxiv_v2_tables():
    """Worked by hand from the table (exposures of group g at step s ∝ 2**(15 - g) * s)."""
    out, rows = _paper_ratios("arxiv-v2")
    # group 13, 0.5: Muon 2000 + 0.114/0.578 * 3000; Adam 5000 + 0.202/0.592 * 5000
    muon, adam = 2000 + 0.114 / 0.578 * 3000, 5000 + 0.202 / 0.592 * 5000
    assert rows[13, 0.5].ratio == pytest.approx(adam / muon)
    assert rows[13, 0.8].ratio == pytest.approx(2.23, abs=0.005)
    # group 13, 0.3: Muon is past it at 2k -> at least (Adam's crossing) / 2000
    assert rows[13, 0.3].status == "lower bound"
    assert rows[13, 0.3].lower == pytest.approx((5000 + 0.002 / 0.592 * 5000) / 2000)
    # group 15: Adam never reaches 0.3 (0.264 at 10k) -> more than 10000 / Muon's crossing
    assert rows[15, 0.3].status == "not reached" and rows[15, 0.3].ratio is None
    assert rows[15, 0.3].lower == pytest.approx(10000 / (2000 + 0.16 / 0.18 * 3000))
    # pooled: the geometric mean over the groups measured — only group 13 at 0.5 and 0.8
    # (Muon is past τ in group 11 at its first step; group 15's Adam never reaches τ)
    for tau in (0.5, 0.8):
        assert out.measured[0].ratio(tau, POOLED).groups == (13,)
        assert rows[POOLED, tau].ratio == pytest.approx(rows[13, tau].ratio)
    assert out.measured[0].ratio(0.3, POOLED).groups == ()
    peak = out.measured[0].peak_gap
    assert (peak.group, peak.step, peak.gap) == (15, 10000.0, pytest.approx(0.712))


def test_iclr_version_differs_only_in_adams_rarest_group_at_10k():
    v2, iclr = published_fta("arxiv-v2"), published_fta("iclr")
    changed = [(key, arm) for key in v2 for arm in v2[key] if v2[key][arm] != iclr[key][arm]]
    assert changed == [(("plain", 10000, 15), "adam")]
    assert iclr["plain", 10000, 15]["adam"] == 0.558
    _, rows = _paper_ratios("iclr")
    assert rows[15, 0.3].ratio == pytest.approx(1.53, abs=0.005)
    assert rows[15, 0.5].ratio == pytest.approx(1.47, abs=0.005)
    assert rows[13, 0.5] == _paper_ratios("arxiv-v2")[1][13, 0.5]
    gated, _ = _paper_ratios("iclr", "gated")
    assert gated.groups == (15,)
    json.dumps(gated.to_json(), allow_nan=False)
    with pytest.raises(ValueError, match="version"):
        published_fta("v3")
