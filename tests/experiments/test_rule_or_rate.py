"""Update rule or learning rate: the factorial's arms and equal tuning, the share of the edge a
rate split recovers, the two claims on synthetic inputs, and the study end to end at smoke."""

from __future__ import annotations

import csv
import dataclasses
import json
import math

import numpy as np
import pytest

from tailmem.claims.registry import CLAIMS
from tailmem.claims.rule_or_rate import RuleOrRateInputs
from tailmem.experiments.rule_or_rate.arms import (
    ADAM_SHARED,
    factorial_arms,
    factorial_entries,
)
from tailmem.lm.tuning import TuningSection
from tailmem.metrics.share import share

RULES = {"muon": ("muon", "Muon"), "adam": ("adam_split", "Adam"), "sign": ("signgd", "SignGD")}


def test_every_arm_tunes_one_rate_with_the_same_budget_and_own_arms_borrow_adams_rest():
    arms = factorial_arms(RULES)
    assert arms[0].name == ADAM_SHARED and arms[0].arm.recipe == "adam:*"
    grids = {a.name: [1e-3, 2e-3, 4e-3] for a in arms}
    entries = factorial_entries("plain", arms, grids, TuningSection(), 0, 100, {"s": ""})
    assert {e.arm.name for e in entries} == {
        "adam_shared", "adam_own", "muon_shared", "muon_own", "sign_shared", "sign_own"
    }  # fmt: skip
    budgets = {e.sweep.budget for e in entries if e.sweep is not None}
    assert budgets == {(3 + 2) * 2} and all(e.sweep is not None for e in entries)
    by = {e.arm.name: e for e in entries}
    assert by["muon_own"].rates.borrowed == {"adam": (ADAM_SHARED, "adam")}
    assert by["muon_own"].rates.at(0.01, {ADAM_SHARED: {"adam": 3e-3}}) == {
        "adam": 3e-3, "muon": 0.01
    }  # fmt: skip
    assert by["muon_shared"].rates.at(2e-3, {}) == {"muon": 2e-3, "adam": 2e-3}
    assert by["adam_own"].arm.tuned == "adam_split"  # Adam on the hidden matrices, own rate
    one = factorial_entries("plain", arms, {a.name: [1e-3] for a in arms}, TuningSection(), 0,
                            100, {"s": ""})  # fmt: skip
    assert all(e.sweep is None for e in one)  # a one-point grid is a set rate


def test_the_share_is_the_ratio_of_paired_means_with_a_delta_method_interval():
    whole = [1.0, 1.2, 0.8, 1.1, 0.9]
    exact = share([0.5 * w for w in whole], whole)
    assert exact.share == pytest.approx(0.5) and exact.se == pytest.approx(0.0, abs=1e-12)
    # coverage of the 95 % interval under noise, simulated (paired, correlated seeds)
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(400):
        w = rng.normal(1.0, 0.1, 5)
        p = 0.3 * w + rng.normal(0.0, 0.05, 5)
        found = share(p.tolist(), w.tolist())
        hits += found.low is not None and found.high is not None and found.low <= 0.3 <= found.high
    assert 0.88 <= hits / 400 <= 0.99
    assert share([], []).share is None and share([1.0], [0.0]).share is None


def _inputs(**logs) -> RuleOrRateInputs:
    values = {int(k[1:]): v for k, v in logs.items()}
    return RuleOrRateInputs(log_ratios=values, resolution=dict.fromkeys(values, 0.01),
                            seeds=[0, 1, 2])  # fmt: skip


def test_rule_not_rate_needs_a_lead_beyond_noise_and_is_refuted_by_an_equivalence():
    claim = CLAIMS["A3.beyond.rule_not_rate"]
    lead = math.log(1.6)
    found = {r.id: r.verdict for r in claim.evaluate(_inputs(
        d128=[lead - 0.05, lead, lead + 0.05],  # Adam-own needs 1.6x: the rule
        d256=[-0.02, 0.0, 0.02],  # equivalent within x1.25: the edge was the rate
        d512=[-0.4, 0.3, 0.9],  # noise
    ))}  # fmt: skip
    assert found == {
        "A3.beyond.rule_not_rate.d128": "reproduced",
        "A3.beyond.rule_not_rate.d256": "not reproduced",
        "A3.beyond.rule_not_rate.d512": "inconclusive",
    }
    assert math.log(claim["margin"]) > 0.1  # d256's spread sits well inside the declared margin


def test_the_fair_edge_trend_is_decided_by_its_slope_interval():
    claim = CLAIMS["D.wen.fair_edge_shrinks"]

    def verdict(edges):
        logs = {f"d{w}": [e - 0.02, e, e + 0.02] for w, e in edges.items()}
        (result,) = claim.evaluate(_inputs(**logs))
        return result.verdict

    assert verdict({128: 0.6, 256: 0.4, 512: 0.2}) == "reproduced"
    assert verdict({128: 0.2, 256: 0.4, 512: 0.6}) == "not reproduced"
    assert verdict({128: 0.4, 256: 0.5, 512: 0.35}) == "inconclusive"
    assert verdict({128: 0.6, 256: 0.4}) == "inconclusive"  # two widths: no trend


def test_the_smoke_study_writes_the_factorial_and_the_regime_table(tmp_path):
    from tailmem.runner import run_experiment

    run, _ = run_experiment("rule-or-rate", "smoke", ["workers=1"], out=tmp_path / "r")
    with open(run.path / "factorial.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["arm"] == ADAM_SHARED and len(rows) == 6
    with open(run.path / "regime.csv") as fh:
        regime = list(csv.DictReader(fh))
    assert [r["point"] for r in regime] == ["base", "width: d 64", "reference"]
    # The regime table's rarest-group FTA is the factorial's at the base, and its gap and share
    # follow from those three numbers (one seed: paired gap = difference of the means).
    final = {r["arm"]: float(r["rarest_fta"]) for r in rows}
    base = regime[0]
    for arm in ("adam_shared", "adam_own", "muon_own"):
        assert float(base[f"rarest_{arm}"]) == pytest.approx(final[arm], abs=1e-4)
    assert float(base["rarest_gap"]) == pytest.approx(final["muon_own"] - final["adam_own"],
                                                      abs=1e-4)  # fmt: skip
    lead = final["muon_own"] - final["adam_shared"]
    if lead > 0:
        share = (final["adam_own"] - final["adam_shared"]) / lead
        assert float(base["rarest_share"]) == pytest.approx(share, abs=1e-3)
    else:
        assert base["rarest_share"] == ""
    report = json.loads((run.path / "report.json").read_text())
    assert {f["file"] for f in report["figures"]} >= {"factorial.png", "share.png"}


def test_the_first_answer_gives_the_rarest_groups_share_and_gap_beside_the_lags():
    from tailmem.experiments.rule_or_rate.outputs import RegimeRow, answers

    lags = (0.59, -0.24, 1.42, 1.09, 0.79, 1.50, "not distinguished", 1.23, 1.13)
    row = RegimeRow("base", "—", "base", "tune", 128, *lags, 0.48, 0.69, 0.81, 0.12, 0.03, None)
    share = (0.69 - 0.48) / (0.81 - 0.48)  # what RarestFinal.share computes
    (said,) = answers(dataclasses.replace(row, rarest_share=share), None, [])
    assert said.answer == "not distinguished"  # the lag share's interval covers 0.5
    assert "recovers 0.59 [-0.24, 1.42]" in said.evidence
    assert "closes 0.64 of Muon's lead and Muon keeps 0.12 ± 0.03 (paired SE)" in said.evidence
    (one_seed,) = answers(
        dataclasses.replace(row, rarest_share=share, rarest_gap_se=None), None, []
    )
    assert "Muon keeps 0.12 (one seed)" in one_seed.evidence
