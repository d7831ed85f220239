"""Update rule or learning rate: the factorial's arms and equal tuning, the share of the edge a
rate split recovers, the two claims on synthetic inputs, and the study end to end at smoke."""

from __future__ import annotations

import csv
import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats

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


def test_the_share_is_the_ratio_of_paired_means_with_fiellers_interval():
    whole = [1.0, 1.2, 0.8, 1.1, 0.9]
    exact = share([0.5 * w for w in whole], whole)
    assert exact.share == pytest.approx(0.5)
    assert exact.low == pytest.approx(0.5) and exact.high == pytest.approx(0.5)
    # coverage of the 95 % interval under noise, simulated (paired, correlated seeds), where
    # the edge is resolved
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(400):
        w = rng.normal(1.0, 0.1, 5)
        p = 0.3 * w + rng.normal(0.0, 0.05, 5)
        found = share(p.tolist(), w.tolist())
        assert found.defined
        hits += found.low <= 0.3 <= found.high
    assert 0.92 <= hits / 400 <= 0.98
    assert share([], []).share is None and share([1.0], [0.0]).share is None


def test_an_unresolved_edge_leaves_the_share_not_defined_where_the_delta_method_invents_one():
    # the whole's mean is well inside its noise: the delta method gave a finite interval
    # (about 6.7 [-14.6, 28.0] in a run); no bounded interval covers the ratio at 95 %
    whole, part = [0.05, -0.02, 0.04], [0.3, 0.1, 0.0]
    found = share(part, whole)
    assert found.share == pytest.approx((0.4 / 3) / (0.07 / 3))
    assert not found.defined and found.low is None and found.high is None
    assert found.verdict() == "not defined" and "not defined" in found.text()


def test_fiellers_interval_is_the_set_a_t_test_does_not_reject():
    rng = np.random.default_rng(3)
    w = rng.normal(1.0, 0.2, 4)
    p = 0.6 * w + rng.normal(0.0, 0.1, 4)
    found = share(p.tolist(), w.tolist())
    t = stats.t.ppf(0.975, 3)
    for rho in (found.low, found.high):
        d = p - rho * w  # at the ends, |mean / se| is exactly t
        assert abs(d.mean() / (d.std(ddof=1) / 2)) == pytest.approx(t, rel=1e-9)
    for rho in (found.low - 0.05, found.high + 0.05):
        d = p - rho * w
        assert abs(d.mean() / (d.std(ddof=1) / 2)) > t


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
    assert sorted(r["point"] for r in regime) == ["base", "smoke walk: 0 start", "width: d 64"]
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
    assert {f["file"] for f in report["figures"]} >= {"factorial.png", "share.png", "walk.png"}
    # the walk's table: its start, then the base it ends at, each arm's interval beside
    with open(run.path / "walk.csv") as fh:
        walked = list(csv.DictReader(fh))
    assert [(r["step"], r["point"]) for r in walked] == [("0", "smoke walk: 0 start"),
                                                         ("1", "base")]  # fmt: skip
    assert walked[0]["factor"] == "start" and walked[1]["factor"] == "RoPE, answer loss"
    assert walked[1]["adam_shared"] == base["rarest_adam_shared"]
    assert report["answers"][0]["question"].endswith("(walk at smoke walk)")


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


# --------------------------------------------------------------------------- the walks


def _walk(**change):
    from tailmem.experiments.rule_or_rate import Walk, WalkStep

    fields = dict(
        name="w",
        start={"model.pos_encoding": "learned", "loss_on": "all", "model.qk_norm": False},
        steps=[WalkStep("RoPE", ["model.pos_encoding"]), WalkStep("rest", ["loss_on",
               "model.qk_norm"])],
    )  # fmt: skip
    return Walk(**(fields | change))


def test_a_walk_reverts_the_start_one_factor_a_step_and_ends_at_the_base():
    from tailmem.experiments.rule_or_rate.config import BASE

    walk = _walk()
    walk.validate()
    assert walk.labels() == ["w: 0 start", "w: 1 + RoPE", BASE]
    first, second = walk.points()
    assert first.overrides == walk.start
    assert second.overrides == {"loss_on": "all", "model.qk_norm": False}
    fixed = _walk(fixed={"model.d_model": 64})
    assert fixed.labels()[-1] == "w: 2 + rest"  # a walk under its own changes ends at its own
    assert fixed.points()[-1].overrides == {"model.d_model": 64}


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([("RoPE", ["model.pos_encoding"])],
         r"start keys \['loss_on', 'model.qk_norm'\] are never"),
        ([("a", ["model.pos_encoding", "loss_on", "model.qk_norm"]), ("b", ["loss_on"])],
         r"\['loss_on'\] reverted by more than one step"),
        ([("a", ["model.pos_encoding", "loss_on", "model.qk_norm", "seed"])],
         r"steps revert \['seed'\], which start does not set"),
        ([("a", ["model.pos_encoding", "loss_on", "model.qk_norm"]), ("b", [])],
         "each reverting at least one key"),
    ],
)  # fmt: skip
def test_a_walk_that_does_not_end_at_the_base_is_refused_in_one_line(steps, message):
    from tailmem.errors import ConfigError
    from tailmem.experiments.rule_or_rate import WalkStep

    walk = _walk(steps=[WalkStep(label, revert) for label, revert in steps])
    with pytest.raises(ConfigError, match=message):
        walk.validate()


def test_every_point_of_the_cpu_walks_trains_the_same_epochs_of_its_own_data():
    from tailmem.config import load_config
    from tailmem.experiments import knowledge_qa as kqa
    from tailmem.experiments import rule_or_rate as ror

    cfg = load_config(ror.Config, "rule-or-rate", "cpu", ["rates=sweep"])
    configs = cfg.configs()
    walked = [label for walk in cfg.walks for label in walk.labels()]
    assert len(walked) > 10 and all(label in configs for label in walked)
    for _, qa in configs.values():
        assert qa.epochs is not None
        kqa.check_epochs(qa)  # train.steps is exactly that many whole epochs
    start = configs[cfg.walks[0].labels()[0]][1]
    assert start.data.name_tokens == "single" and start.tuning.rest_lr == 1e-3


def test_walk_moves_are_welch_tests_holm_corrected_per_walk_and_arm():
    from tailmem.experiments.rule_or_rate.walk import ARMS, WalkPoint, moves
    from tailmem.metrics.share import share as ratio

    def point(index, level):
        values = {arm: {s: level[arm] + 0.01 * s for s in range(3)} for arm in ARMS}
        return WalkPoint("w", index, f"f{index}", f"w: {index}", "plain", 100, values,
                         ratio([], []), {a: {} for a in ARMS}, {a: "" for a in ARMS},
                         None)  # fmt: skip

    flat = dict.fromkeys(ARMS, 0.1)
    jump = flat | {"adam_shared": 0.6}
    found = moves([point(0, flat), point(1, flat), point(2, jump)])
    by = {(m.arm, m.index): m for m in found}
    jumped = by[("adam_shared", 2)]
    assert jumped.beyond_noise and jumped.change == pytest.approx(0.5)
    assert not by[("adam_shared", 1)].beyond_noise and not by[("muon_own", 2)].beyond_noise
    # Holm: the two steps' p-values of one arm form one family
    p = [by[("adam_shared", i)].p for i in (1, 2)]
    assert by[("adam_shared", 2)].beyond_noise == (min(p) <= 0.05 / 2)
