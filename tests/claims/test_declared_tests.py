"""Issue 40, item 2: every rule runs the test it declares. One test per class of defect, each
on synthetic inputs that the rules before misjudged (the old verdict is named in each):

1. an equivalence is two one-sided tests at the declared 5 % per side;
2. a family of tests that answer one question is corrected by Holm;
3. arms that share their seeds are compared paired;
4. one SE per statistic, printed as it was decided on;
5. no margin typed twice: the lag margin is read from its claim;
6. ratios on the log scale (and a reversed edge is no vanished one);
7. a share of two differences carries Fieller's interval;
8. a bound the paper measured on its own model is judged on that model only;
9. a claim is tested in its own setting;
10. ``tailmem claims`` states every rule's test, level per side, family and correction.
"""

import dataclasses
import math
import statistics

import pytest
from scipy import stats

from tailmem.claims import rule_or_rate
from tailmem.claims.a1 import A1Inputs
from tailmem.claims.a2 import variance_ratio
from tailmem.claims.a3 import A3Inputs
from tailmem.claims.a3_qk import A3QKInputs, QKLag
from tailmem.claims.a3_sensitivity import (
    READING,
    REFERENCE,
    A3SensitivityInputs,
    LevelPoint,
    SeedRatios,
)
from tailmem.claims.core import compare_seeds
from tailmem.claims.listing import as_markdown, entry
from tailmem.claims.registry import CLAIMS
from tailmem.claims.related import ORTHOGONAL_REGIME, BenchMemory, EmbeddingsInputs
from tailmem.claims.rule_or_rate import RuleOrRateInputs
from tailmem.claims.share import share
from tailmem.experiments.knowledge_qa.answers import lag_verdict
from tailmem.metrics.qa_gaps import LagRatio, Ratio

SEEDS = [0, 1, 2]


def _one(claim_id, inputs):
    (result,) = CLAIMS[claim_id].evaluate(inputs)
    return result


def _qa(tails, **extra):
    """Knowledge-QA inputs, plain FFN, 3 groups (1 head group learned), per arm the rarest
    group's FTA per seed (the same seeds: paired)."""
    fta = {arm: {"final": [[1.0, 0.8, t] for t in tail]} for arm, tail in tails.items()}
    return A3Inputs(ffn="plain", seeds=SEEDS, rarest=2, head_groups=1, chance_fta=0.01, fta=fta,
                    **extra)  # fmt: skip


# --------------------------------------------------------------------------- 1. TOST per side


def test_1_behaves_like_is_two_one_sided_tests_at_5_percent_each():
    """Old: each edge of the hybrid's band was a 95 % two-sided interval (2.5 % per side):
    edges at one-sided p 0.034 and 0.031 were inconclusive. TOST at 5 % per side decides."""
    muon, adam = [0.90, 0.91, 0.89], [0.30, 0.32, 0.31]
    x = [m + d for m, d in zip(muon, (-0.08, 0.0, 0.056), strict=True)]  # t ≈ 1.0, noisy
    result = _one("A3.plain.muon_vo_ffn_like_muon", _qa({"muon": muon, "adam": adam,
                                                          "muon_vo_ffn": x}))  # fmt: skip
    p_lo, p_hi = result.details["p_inside"]
    assert 0.025 < p_lo < 0.05 and 0.025 < p_hi < 0.05
    assert result.verdict == "reproduced"  # old: inconclusive


# --------------------------------------------------------------------------- 2. Holm


def _ratios(mean_log, spread=0.02):
    return SeedRatios(tuple(math.exp(mean_log + d) for d in (-spread, 0.0, spread)))


def test_2_a_flip_among_the_levels_counts_after_holm():
    """Old: any level deciding the opposite of the base at its own 95 % flipped the verdict —
    one of five levels at p ≈ 0.02 made the claim inconclusive. The levels answer one
    question together (does any choice flip it?): after Holm (0.05/5) that level is no flip."""
    from tailmem.claims.core import PAPER_A_QA

    lag = CLAIMS["A3.sensitivity.lag"]
    tau, paper = lag["tau"], 2.59
    threshold = lag["fraction"] * paper
    base = _ratios(math.log(threshold) + 0.6)
    # one level below the threshold at p ≈ 0.02 (t 7 on df 2), four clearly above it
    low = SeedRatios(tuple(math.exp(math.log(threshold) - 0.14 + d) for d in (-0.03, 0.0, 0.03)))
    points = {"base": base, "l0": low, **{f"l{k}": base for k in range(1, 5)}}
    inputs = A3SensitivityInputs(
        paper={REFERENCE: {READING: {tau: paper}}}, base="base",
        points={name: {READING: {tau: r}} for name, r in points.items()},
        levels=[LevelPoint("f", f"v{k}", f"l{k}") for k in range(5)], model=PAPER_A_QA,
    )  # fmt: skip
    level = compare_seeds([math.log(v) for v in low.values], math.log(threshold))
    assert level.verdict == "not reproduced" and 0.01 < level.p < 0.05
    assert _one("A3.sensitivity.lag", inputs).verdict == "reproduced"  # old: inconclusive


def _lag(logs):
    seeds = tuple(Ratio("measured", math.exp(v), math.exp(v), math.exp(v)) for v in logs)
    return LagRatio("pooled", 0.5, seeds, seeds[0])


def test_2_the_regime_tables_verdicts_are_one_family():
    """Old: each point's fair verdict at its own 5 %: seven points at p ≈ 0.02 each read
    'faster'. One question (at which points does Muon lead?), one family: Holm keeps none."""
    from tailmem.experiments.knowledge_qa.answers import lag_verdicts

    point = _lag([0.30, 0.36, 0.42])  # t ≈ 6.9 on df 2: p ≈ 0.02
    assert lag_verdict(point)[0] == "faster"
    family = lag_verdicts({f"p{k}": point for k in range(7)})
    assert {verdict for verdict, _ in family.values()} == {"not distinguished"}
    clear = _lag([0.50, 0.51, 0.52])
    assert lag_verdicts({"a": clear, "b": point})["a"][0] == "faster"


# --------------------------------------------------------------------------- 3. paired seeds


def test_3_arms_that_share_seeds_are_compared_paired():
    """Old: Welch's unpaired test added the seeds' shared noise twice: full Muon 0.05 nats
    below all-Adam in every seed, the seeds 0.3 nats apart, was inconclusive."""
    adam, full = [3.90, 4.10, 3.80], [3.85, 4.04, 3.76]
    inputs = A1Inputs(ffn="plain", seeds=SEEDS, losses={"adam": adam, "full": full})
    result = _one("A1.full_beats_adam", inputs)
    assert result.verdict == "reproduced"  # old: inconclusive
    assert compare_seeds(adam, full).verdict == "inconclusive"


# --------------------------------------------------------------------------- 4. one SE


def test_4_the_se_printed_is_the_se_decided_on():
    """Old: seeds that agree exactly printed '± 0' beside a verdict decided on the floored SE;
    the width trend's slope was printed with no SE, its answer with another."""
    c = compare_seeds([0.5, 0.5, 0.5], [0.4, 0.4, 0.4], resolution=0.05)
    floor = 0.05 / math.sqrt(3)
    assert f"± {floor:.2g}" in str(c.a) and f"± {floor:.2g}" in str(c.b)
    logs = {64: [0.25, 0.30, 0.35], 128: [0.18, 0.22, 0.20], 256: [0.05, 0.10, 0.15]}
    inputs = RuleOrRateInputs(log_ratios=logs, resolution={}, seeds=SEEDS)
    result = _one("D.wen.fair_edge_shrinks", inputs)
    assert f"± {result.details['se']:.3f} SE" in result.ours


# --------------------------------------------------------------------------- 5. margins


def test_5_the_lag_margin_is_read_from_its_claim(monkeypatch):
    """Old: knowledge-QA's answers and the benchmark typed ×1.25 again beside the claim's:
    changing the claim's margin changed no other verdict."""
    ratio = _lag([math.log(1.5) + d for d in (-0.01, 0.0, 0.01)])
    assert lag_verdict(ratio)[0] == "faster"
    wider = dataclasses.replace(rule_or_rate.RULE_NOT_RATE, tolerances={"margin": 2.0})
    monkeypatch.setattr(rule_or_rate, "RULE_NOT_RATE", wider)
    assert rule_or_rate.lag_margin() == 2.0
    assert lag_verdict(ratio)[0] == "faster"  # a difference still decides first
    near = _lag([math.log(1.05) + d for d in (-0.2, 0.0, 0.2)])
    assert lag_verdict(near)[0] == "equivalent"  # within ×2, not within ×1.25


# --------------------------------------------------------------------------- 6. log scale


def _tail(ratios):
    tau = CLAIMS["A3.beyond.qk_task"]["tau"]
    row = QKLag(2, tau, None, {"measured": len(ratios)}, SeedRatios(tuple(ratios)))
    return A3QKInputs(seeds=list(range(len(ratios))), rarest=2, lags=[row])


def test_6_a_lag_ratio_is_judged_on_the_log_scale_and_a_reversed_edge_has_not_vanished():
    """Old: the mean of the linear ratios below ×1.25 — Adam needing half Muon's exposures
    read as 'Muon's edge vanishes'. On the log scale Adam is faster beyond the margin."""
    half = _one("A3.beyond.qk_task", _tail([0.51, 0.52, 0.48]))
    assert half.verdict == "not reproduced" and "reversed" in half.ours  # old: reproduced
    # the mean of the ratios (1.23) is below ×1.25, their geometric mean is not near 1
    skewed = [0.9, 0.9, 1.9]
    assert statistics.fmean(skewed) < CLAIMS["A3.beyond.qk_task"]["max_ratio"]
    assert _one("A3.beyond.qk_task", _tail(skewed)).verdict == "inconclusive"


# --------------------------------------------------------------------------- 7. Fieller


def test_7_a_share_of_gains_carries_fiellers_interval():
    """Old: g(VO+FFN)/g(full) was printed as a bare ratio of seed means."""
    adam, full, vo_ffn = [3.90, 4.10, 3.80], [3.50, 3.72, 3.41], [3.60, 3.78, 3.52]
    inputs = A1Inputs(ffn="plain", seeds=SEEDS,
                      losses={"adam": adam, "full": full, "vo_ffn": vo_ffn})  # fmt: skip
    result = _one("A1.vo_ffn_recovers_full", inputs)
    found = share([a - v for a, v in zip(adam, vo_ffn, strict=True)],
                  [a - f for a, f in zip(adam, full, strict=True)])  # fmt: skip
    assert result.details["share"] == {"share": found.share, "low": found.low, "high": found.high}
    assert f"[{found.low:.3f}, {found.high:.3f}] (Fieller" in result.ours


# --------------------------------------------------------------------------- 8. the paper's model


def test_8_the_papers_gap_is_judged_on_the_papers_model_only():
    """Old: our 2-layer model on m = 7 groups was held to the gap paper A measured on its 160M
    model at m = 15 (not reproduced at the cpu preset)."""
    from tailmem.claims.core import PAPER_A_QA, Scale

    tails = {"muon": [0.90, 0.92, 0.91], "adam": [0.62, 0.63, 0.61]}
    small = _one("A3.plain.tail_gap_magnitude", _qa(tails))
    assert small.verdict == "not measured" and "not measured in its setting" in small.reason
    cpu = _one("A3.plain.tail_gap_magnitude", _qa(tails, model=Scale(2, 256, 7)))
    assert cpu.verdict == "not measured" and "2 × 256, m = 7" in cpu.reason
    paper = _one("A3.plain.tail_gap_magnitude", _qa(tails, model=PAPER_A_QA))
    assert paper.verdict == "not reproduced"


# --------------------------------------------------------------------------- 9. own setting


def test_9_spectral_gd_is_measured_only_with_orthonormal_embeddings_at_d_ge_k():
    """Old: judged on the benchmark's d < K memory with Gaussian embeddings."""
    outside = EmbeddingsInputs(regimes={"d_lt_k": BenchMemory(seeds=SEEDS, paces=[])})
    result = _one("vasudeva.spectral_gd", outside)
    assert result.verdict == "not measured" and "not measured in its setting" in result.reason
    assert CLAIMS["vasudeva.spectral_gd"].experiment == "assoc-embeddings"
    assert ORTHOGONAL_REGIME in CLAIMS["vasudeva.spectral_gd"].rule or "d ≥ K" in (
        CLAIMS["vasudeva.spectral_gd"].rule
    )


def test_9_the_width_trend_rests_on_the_seeds_not_on_one_residual_degree_of_freedom():
    """Old: 3 widths left the slope's interval 1 degree of freedom (t 12.7): a clear fall of
    the edge with width, each width's seeds tight about it, was inconclusive."""
    logs = {64: [0.25, 0.30, 0.35], 128: [0.15, 0.20, 0.25], 256: [0.05, 0.10, 0.15]}
    result = _one("D.wen.fair_edge_shrinks", RuleOrRateInputs(log_ratios=logs, resolution={},
                                                              seeds=SEEDS))  # fmt: skip
    assert result.verdict == "reproduced" and result.details["df"] > 3  # old: inconclusive
    bent = {64: [0.29, 0.30, 0.31], 128: [0.49, 0.50, 0.51], 256: [0.09, 0.10, 0.11]}
    found = _one("D.wen.fair_edge_shrinks", RuleOrRateInputs(log_ratios=bent, resolution={},
                                                             seeds=SEEDS))  # fmt: skip
    assert found.details["lack_of_fit_p"] < 0.05 and found.details["df"] == 1
    assert found.verdict == "inconclusive"


def test_the_paired_variance_test_inverts_to_its_interval():
    """The Pitman–Morgan interval of Adam's seed variance over Muon's is the set of ratios ρ
    the paired test of σ²_Adam = ρ·σ²_Muon does not reject: at each end the test's p is 5 %."""
    muon = [0.90, 0.93, 0.91, 0.95, 0.92]
    adam = [0.70, 0.80, 0.69, 0.88, 0.74]
    found = variance_ratio(muon, adam)
    assert found is not None and found.ratio == pytest.approx(
        statistics.variance(adam) / statistics.variance(muon)
    )
    for rho in (found.low, found.high):
        scaled = [math.sqrt(rho) * m for m in muon]
        at_end = variance_ratio(scaled, adam)
        assert at_end is not None and at_end.p == pytest.approx(0.05, abs=1e-6)
    d = [a - m for a, m in zip(adam, muon, strict=True)]
    s = [a + m for a, m in zip(adam, muon, strict=True)]
    r = statistics.correlation(d, s)
    t = r * math.sqrt(3) / math.sqrt(1 - r * r)
    assert found.p == pytest.approx(2 * stats.t.sf(abs(t), 3))


# --------------------------------------------------------------------------- 10. the listing


def test_10_tailmem_claims_states_every_rules_test_level_family_and_correction():
    """Old: the listing named the check function only; the test behind it was in the code."""
    checked = [c for c in CLAIMS.values() if c.check is not None]
    assert checked and all(c.declared is not None for c in checked)
    for claim in checked:
        row = entry(claim)
        assert row["test"] and row["level per side"] and row["family"] and row["correction"]
    hybrid = entry(CLAIMS["A3.plain.muon_vo_ffn_like_muon"])
    assert hybrid["level per side"] == "5 %" and "Holm" in hybrid["correction"]
    assert entry(CLAIMS["A1.full_beats_adam"])["level per side"] == "2.5 %"
    text = as_markdown(list(CLAIMS.values()))
    assert "| test | level per side | family | correction |" in text
