"""qa-sensitivity and its engine: each arm's tuned rate read from the tuning phase (where it
sits among the candidates, its cost), per-point overrides, every point's runs on one pool, the
headline claim on the log scale with its flip rule, and the smoke study end to end."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest

from tailmem.claims.a3_sensitivity import (
    CLAIMS,
    READING,
    REFERENCE,
    A3SensitivityInputs,
    LevelPoint,
    SeedRatios,
    judge,
)
from tailmem.claims.core import PAPER_A_QA, Bound, MeanSE, t_quantile
from tailmem.claims.paper_a_qa_tables import VERSIONS
from tailmem.cli import main
from tailmem.columns import column_docs, records
from tailmem.errors import ConfigError
from tailmem.experiments import headline_questions
from tailmem.experiments.knowledge_qa import Config, gaps, grid, score_of
from tailmem.experiments.knowledge_qa.curves import PlanCurves
from tailmem.experiments.qa_map.measures import ArmChoice, arm_choice
from tailmem.experiments.qa_sensitivity import PointMeasures, SensitivityRow, sensitivity_row
from tailmem.lm.config import OptimSection, TrainSection
from tailmem.lm.plan import Plan, run_plan
from tailmem.lm.spec import Divergence, RunResult
from tailmem.lm.subrun import RunContext, RunTemplate
from tailmem.lm.tuning import TuningSection
from tailmem.metrics.qa_gaps import Gap, LagRatio, Ratio, published_measures
from tailmem.models.gpt import GPTConfig
from tailmem.report.render import write_report
from tailmem.studies import Provenance

LAG = CLAIMS[0]
MODEL = GPTConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=64)
GRIDS = {"muon": {"lr": [0.01, 0.02, 0.05]}, "adam": {"lr": [1e-3, 3e-3, 1e-2]}}
"""Three-point grids around the rates the fake runs below prefer (0.02 and 3e-3)."""


# --------------------------------------------------------------------------- tuned rates


def _complete(job, evals, wall_seconds=0.0):
    """The complete run of ``job`` with evaluation history ``evals``."""
    return RunResult(
        digest=job.digest, key=job.key, arm=job.arm.name, recipe=job.arm.recipe, ffn=job.ffn,
        lrs=job.lrs, seed=job.seed, steps=job.steps, status="complete", message="",
        steps_done=job.steps, final_loss=0.0, tokens=0, evals=evals, final=evals[-1],
        diverged=None, wall_seconds=wall_seconds,
    )  # fmt: skip


def _peaked_at(peaks):
    """A fake train whose answer loss (the tuning score's) grows with the distance of the tuned
    rate from ``peaks[kind]`` (in octaves), recording every job it trains."""
    trained = []

    def train(job, context, on_steps):
        trained.append(job)
        on_steps(job.steps)
        kind = job.arm.tuned
        loss = 1.0 + math.log2(job.lrs[kind] / peaks[kind]) ** 2
        evals = [{"step": job.steps, "fta": [0.5] * 5, "fta_all": 0.5, "em": [0.0] * 5,
                  "em_all": 0.0, "loss_train": loss}]  # fmt: skip
        return _complete(job, evals)

    return train, trained


def _point(cfg, plan):
    return grid.PointResult(grid.Point("base"), cfg, plan, None, 0.0, {}, {}, PlanCurves.read(plan))


def _trained(tmp_path, cfg, train, seeds=(0, 1)):
    template = RunTemplate({"plain": MODEL}, cfg.train, cfg.optim, {})
    plan = Plan(tuple(cfg.entries()), tuple(seeds), cfg.train.steps, template,
                score_of("answer_loss"))  # fmt: skip
    return run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=train)


@pytest.mark.parametrize(
    ("peak", "max_extend", "added", "chosen", "where"),
    [
        (16.0, 3, [8.0, 16.0, 32.0], 16.0, "interior"),  # found beyond the top end: interior
        (16.0, 2, [8.0, 16.0], 16.0, "highest edge"),  # out of extensions: still at the edge
        (0.25, 2, [0.5, 0.25], 0.25, "lowest edge"),  # below the grid, extended downwards
        (2.0, 2, [], 2.0, "interior"),  # already interior: the declared grid, nothing added
    ],
)
def test_an_arms_choice_says_where_it_sits_among_the_candidates_tried_and_what_it_cost(
    tmp_path, peak, max_extend, added, chosen, where
):
    optim = OptimSection.from_config({"adam": {"lr": [1.0, 2.0, 4.0]}}, "optim")
    cfg = Config(arms=["adam"], seeds=2, train=TrainSection(steps=10), optim=optim,
                 tuning=TuningSection(max_extend=max_extend))  # fmt: skip
    train, trained = _peaked_at({"adam": peak})
    plan = _trained(tmp_path, cfg, train)
    tried = [1.0, 2.0, 4.0, *added]
    assert arm_choice(_point(cfg, plan), "plain", "adam") == ArmChoice(
        chosen, where, 2 * len(tried), 2 * (3 + max_extend)
    )
    # every candidate on both tuning seeds, none of them an evaluation seed; then the two seeds
    trials = [job for job in trained if job.seed not in (0, 1)]
    assert sorted({job.seed for job in trials}) == [1000, 1001]
    assert [job.lrs["adam"] for job in trials[::2]] == tried
    assert [(job.seed, job.lrs) for job in trained[len(trials):]] == [
        (0, {"adam": chosen}), (1, {"adam": chosen})
    ]  # fmt: skip


def test_a_fixed_rate_is_set_not_tuned_and_a_shared_one_names_its_lender(tmp_path):
    optim = OptimSection.from_config({"muon": {"lr": 0.02}, "adam": {"lr": 3e-3}}, "optim")
    cfg = Config(arms=["muon", "adam"], seeds=2, train=TrainSection(steps=10), optim=optim)
    train, trained = _peaked_at({"muon": 0.02, "adam": 3e-3})
    plan = _trained(tmp_path, cfg, train)
    assert len(trained) == 4  # the seed runs alone
    assert arm_choice(_point(cfg, plan), "plain", "muon") == ArmChoice(0.02, "set")
    shared = grid.PointResult(grid.Point("s", shared_lr=True), cfg, plan, None, 0.0, {}, {},
                              PlanCurves.read(plan))  # fmt: skip
    assert arm_choice(shared, "plain", "muon").where == "shared"
    assert arm_choice(shared, "plain", "sgd") == ArmChoice(None, "not run")


def test_the_lr_columns_name_an_arms_choice_even_when_its_seed_runs_all_diverged(tmp_path):
    """The sensitivity table reads the completed plan (diverged seed runs left out): an arm
    whose every seed run diverged still chose its rate in its tuning trials."""
    optim = OptimSection.from_config(GRIDS, "optim")
    cfg = Config(arms=["muon", "adam"], seeds=2, train=TrainSection(steps=10), optim=optim,
                 tuning=TuningSection(steps=5))  # fmt: skip
    # Trials of 5 steps, seed runs of 10: Adam's seed runs diverge, its trials do not.
    peaked, _ = _peaked_at({"muon": 0.02, "adam": 3e-3})

    def train(job, context, on_steps):
        done = peaked(job, context, on_steps)
        if job.arm.name != "adam" or job.steps != 10:
            return done
        return dataclasses.replace(
            done, status="diverged", final={}, diverged=Divergence(3, None, "loss is nan")
        )

    point = _point(cfg, _trained(tmp_path, cfg, train).completed())
    assert point.plan.arms == ["muon"]  # Adam's entry is left out of the tables
    assert arm_choice(point, "plain", "muon") == ArmChoice(0.02, "interior", 6, 10)
    assert arm_choice(point, "plain", "adam") == ArmChoice(3e-3, "interior", 6, 10)


# --------------------------------------------------------------------------- the engine


def test_points_apply_their_overrides_over_the_preset_and_refuse_bad_ones():
    points = [
        grid.Point("base"),
        grid.Point(
            "b", {"optim.adam.betas": [0.9, 0.95], "train.batch_size": 16, "train.steps": 20}
        ),
    ]
    configs = grid.configure(points, "smoke", {"seeds": 3})  # fmt: skip
    base, other = configs["base"][1], configs["b"][1]
    assert base.optim["adam"].hparams.betas == (0.8, 0.95)
    assert other.optim["adam"].hparams.betas == (0.9, 0.95)
    assert (base.train.batch_size, base.train.steps) == (4, 40)
    assert (other.train.batch_size, other.train.steps) == (16, 20)
    assert base.seeds == other.seeds == 3 and other.model == base.model
    with pytest.raises(ConfigError, match=r"^point 'x': unknown config field 'optim.adam.betaz'"):
        grid.configure([grid.Point("x", {"optim.adam.betaz": 0.9})], "smoke")
    with pytest.raises(ConfigError, match=r"^point 'x': optim.muon.scale: got 'big'"):
        grid.configure([grid.Point("x", {"optim.muon.scale": "big"})], "smoke")
    with pytest.raises(ConfigError, match=r"points: 'a/b' and 'a b' share one folder"):
        grid.configure([grid.Point("a b"), grid.Point("a/b")], "smoke")
    with pytest.raises(ConfigError, match="shared_lr needs muon and adam"):
        grid.configure([grid.Point("x", {"arms": ["adam"]}, shared_lr=True)], "smoke")


K_MUON, K_ADAM = 4.0, 1.5
"""FTA of the fake runs below rises linearly in the step at these rates (per run length)."""


def fake_qa_train(job, context, on_steps):
    """A knowledge-QA run whose FTA of every group is ``min(1, k * step / steps)``, ``k`` by
    arm (so Adam needs K_MUON / K_ADAM times Muon's exposures in every group); it sleeps a
    little and records when it ran, in which process, and for which point."""
    started = time.time()
    time.sleep(0.3)
    k = K_MUON if job.arm.name == "muon" else K_ADAM
    lr = job.lrs[job.arm.tuned]
    loss = 1.0 if lr in (0.02, 3e-3) else 2.0  # the tuning prefers the grids' middles
    evals = []
    for step in range(0, job.steps + 1, job.steps // 10):
        fta = min(1.0, k * step / job.steps)
        evals.append({"step": step, "fta": [fta] * 5, "fta_all": fta, "em": [fta / 2] * 5,
                      "em_all": fta / 2, "loss_train": loss})  # fmt: skip
    on_steps(job.steps)
    record = {"point": Path(context.root).name, "pid": os.getpid(), "start": started,
              "end": time.time()}  # fmt: skip
    path = Path(context.root) / job.key / "record.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return _complete(job, evals, wall_seconds=0.3)


STARTED_BY = Provenance("smoke", "run qa-sensitivity --preset smoke")
"""The provenance the runner would pass these points' study."""


def test_every_point_trains_on_one_pool_and_measures_its_own_gap(tmp_path):
    common = {"seeds": 3, "arms": ["muon", "adam"], "train.steps": 20, "train.eval_every": 2,
              "optim.muon.lr": [0.01, 0.02, 0.05], "optim.adam.lr": [1e-3, 3e-3, 1e-2]}  # fmt: skip
    points = [grid.Point("base"), grid.Point("all tokens", {"loss_on": "all"})]
    configs = grid.configure(points, "smoke", common)
    results = grid.run_points(configs, tmp_path, 2, fake_qa_train, provenance=STARTED_BY)
    records = [json.loads(p.read_text()) for p in tmp_path.glob("points/*/runs/**/record.json")]
    assert {r["point"] for r in records} == {"base", "all_tokens"}
    # per point and arm: 3 candidates on 2 tuning seeds, then the 3 evaluation seeds
    assert len(records) == 2 * 2 * (3 * 2 + 3)
    # One pool of two workers: runs of the two points were in flight at the same time.
    overlap = [
        (a, b)
        for a in records
        for b in records
        if a["point"] != b["point"] and a["start"] < b["end"] and b["start"] < a["end"]
    ]
    assert overlap and len({r["pid"] for r in records}) == 2
    for point in results.values():
        assert point.plan.best["plain", "muon"] == {"muon": 0.02, "adam": 3e-3}
        pair = point.measures["plain"].pair("muon", "adam")
        assert pair is not None and pair.seeds == (0, 1, 2)
        for row in pair.lag_ratios:  # every crossing bracketed: the exact ratio in every seed
            assert row.complete and row.ratio == pytest.approx(K_MUON / K_ADAM)
        pooled = pair.ratio(0.5)
        assert pooled is not None and pooled.groups == (0, 1, 2, 3, 4)
    assert results["all tokens"].config.loss_on == "all"
    # Each point's choices record the provenance its study passed in (not this process's argv).
    for folder in tmp_path.glob("points/*"):
        stored = json.loads((folder / "tuned_rates.json").read_text())["rates"].values()
        assert {(r["preset"], r["command"]) for r in stored} == {
            (STARTED_BY.preset, STARTED_BY.command)
        }


def test_a_shared_lr_point_runs_muon_at_the_rate_adam_chose(tmp_path):
    common = {"seeds": 3, "arms": ["muon", "adam"], "train.steps": 20, "train.eval_every": 2,
              "optim.adam.lr": [1e-3, 3e-3, 1e-2]}  # fmt: skip
    point = grid.Point("shared", {"optim.muon.scale": "match_rms_adamw"}, shared_lr=True)
    configs = grid.configure([point], "smoke", common)
    (result,) = grid.run_points(configs, tmp_path, 1, fake_qa_train, provenance=STARTED_BY).values()
    assert result.plan.best["plain", "adam"] == {"adam": 3e-3}
    assert result.plan.best["plain", "muon"] == {"muon": 3e-3, "adam": 3e-3}
    assert [job.lrs for job in result.plan.seed_runs["plain", "muon"]] == [
        {"muon": 3e-3, "adam": 3e-3}
    ] * 3


# --------------------------------------------------------------------------- the claim


def _ratios(values, resolution=0.0):
    """Per-seed ratios: a number, ("lower", x) for a censored seed, None: neither."""
    return SeedRatios(
        tuple(Bound(v[1], v[0]) if isinstance(v, tuple) else v for v in values), resolution
    )


def test_the_headline_is_decided_on_the_log_scale_and_a_level_that_decides_otherwise_flips_it():
    paper = 2.5
    threshold = LAG["fraction"] * paper
    high = [threshold * 2.0, threshold * 2.1, threshold * 1.9]
    low = [threshold * 0.4, threshold * 0.45, threshold * 0.35]
    assert judge(_ratios(high), threshold).verdict == "reproduced"
    assert judge(_ratios(low), threshold).verdict == "not reproduced"
    assert judge(_ratios([threshold * 0.4, threshold * 1.5, None]), threshold).verdict == (
        "inconclusive"
    )
    spread = [threshold * 0.9, threshold * 1.3, threshold * 1.1]  # the t interval straddles it
    found = judge(_ratios(spread), threshold)
    assert found.verdict == "inconclusive" and "t interval" in found.reason
    # a censored seed (Adam never reached τ) stays as its lower bound: it confirms, never refutes
    assert judge(_ratios([*high[:2], ("lower", threshold * 1.8)]), threshold).verdict == (
        "reproduced"
    )
    assert judge(_ratios([*low[:2], ("lower", threshold * 0.4)]), threshold).verdict == (
        "inconclusive"
    )

    def inputs(base, level):
        tau = LAG["tau"]
        return A3SensitivityInputs(
            paper={REFERENCE: {READING: {tau: paper}}},
            base="base",
            base_choices=["b = x"],
            points={"base": {READING: {tau: _ratios(base)}},
                    "b: y": {READING: {tau: _ratios(level)}}},
            levels=[LevelPoint("b", "y", "b: y")], model=PAPER_A_QA,
        )  # fmt: skip

    (kept,) = LAG.evaluate(inputs(high, high))
    assert kept.verdict == "reproduced" and kept.details["threshold"] == threshold
    assert kept.ours.startswith("base (b = x): ") and "; b = y: " in kept.ours
    assert "Adam behind Muon" in kept.ours  # the direction, reported beside the magnitude
    (flipped,) = LAG.evaluate(inputs(high, low))
    assert flipped.verdict == "inconclusive" and "b = y says the opposite" in flipped.reason
    (undecided,) = LAG.evaluate(inputs(low, spread))  # an undecided level flips nothing
    assert undecided.verdict == "not reproduced" and "Adam ahead of Muon" in undecided.ours
    # the magnitude fails while the direction holds: Adam behind, by less than the threshold
    short = [threshold * 0.85, threshold * 0.9, threshold * 0.88]
    (behind,) = LAG.evaluate(inputs(short, short))
    assert behind.verdict == "not reproduced" and "Adam behind Muon" in behind.ours


def test_the_threshold_is_judged_with_a_95_percent_t_interval_of_log_ratios_floored():
    """Three seeds whose mean log ratio sits 2.1 SE above the threshold's log are not decided
    (the 95 % t quantile at 2 degrees of freedom is 4.30, not 2); seeds that agree exactly are
    decided only as far as the interpolation's resolution allows."""
    threshold = LAG["fraction"] * 2.5
    logs = np.array([-1.0, 0.0, 1.0]) * 0.05
    se = float(np.std(logs, ddof=1) / math.sqrt(3))
    at_2_1_se = [threshold * math.exp(2.1 * se + x) for x in logs]
    found = judge(_ratios(at_2_1_se), threshold)
    assert found.verdict == "inconclusive" and found.df == 2
    assert found.half_width == pytest.approx(t_quantile(2) * se)
    beyond = [threshold * math.exp(4.5 * se + x) for x in logs]
    assert judge(_ratios(beyond), threshold).verdict == "reproduced"
    same = [threshold * 1.1] * 3  # three seeds crossing at the same interpolated exposure
    assert judge(_ratios(same), threshold).verdict == "inconclusive"  # SE 0: no noise estimate
    assert judge(_ratios(same, resolution=0.01), threshold).verdict == "reproduced"
    floored = judge(_ratios(same, resolution=0.1), threshold)  # log 1.1 < 4.30 · 0.1/√3
    assert floored.verdict == "inconclusive"
    assert floored.se == pytest.approx(0.1 / math.sqrt(3))


def test_the_paper_ratio_the_headline_is_judged_against_is_like_for_like():
    """The verdict's reading is group m − 2 on the paper's own cells: 2.59 at FTA 0.5 in both
    versions of the tables. Pooled over the cells — the geometric mean over the groups they
    bracket — it is group 13 alone in arXiv v2 but groups 13 and 15 in the ICLR version, so it
    moves with one table cell; the claim's reasoning gives these numbers."""
    tau = LAG["tau"]
    readings = {v: gaps.paper_readings(v, "plain", (tau,)) for v in VERSIONS}
    group = {v: r[READING][tau].ratio for v, r in readings.items()}
    pooled = {v: r["paper_cells_pooled"][tau].ratio for v, r in readings.items()}
    assert group["arxiv-v2"] == pytest.approx(group["iclr"])  # both versions agree
    assert pooled["arxiv-v2"] == pytest.approx(group["arxiv-v2"])  # group 13 alone
    iclr = published_measures("iclr", "plain", [("muon", "adam")]).pair("muon", "adam")
    rarest = iclr.cell(tau, 15).of_mean.ratio  # Adam reaches 0.5 on group 15 in the ICLR table
    assert pooled["iclr"] == pytest.approx(math.sqrt(group["iclr"] * rarest))
    assert pooled["iclr"] < 0.8 * group["iclr"]
    for value in (group["arxiv-v2"], pooled["iclr"]):
        assert f"({value:.2f})" in LAG.why or f"({value:.2f} at" in LAG.why


# --------------------------------------------------------------------------- the study


def test_smoke_study_end_to_end_writes_the_table_figure_claims_and_report_section(tmp_path):
    out = tmp_path / "sens"
    assert main(["run", "qa-sensitivity", "--preset", "smoke", "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "sensitivity.csv").open()))
    assert [(r["factor"], r["base"]) for r in rows] == [
        ("loss target", "True"), ("loss target", "False"),
        ("learning rates", "True"), ("learning rates", "False"),
    ]  # fmt: skip
    for row in rows:
        assert row["n_seeds"] == "3"
        for column in ("peak_gap", "rarest_fta_gap", "second_fta_gap", "rarest_em_gap"):
            assert np.isfinite(float(row[column])), (column, row)
        for tau in ("0.3", "0.5", "0.8"):  # a ratio has its interval, or neither
            assert bool(row[f"lag_{tau}"]) == bool(row[f"lag_{tau}_lo"]) == bool(
                row[f"lag_{tau}_hi"])  # fmt: skip
            if row[f"lag_{tau}"]:
                assert float(row[f"lag_{tau}_lo"]) <= float(row[f"lag_{tau}"]) <= float(
                    row[f"lag_{tau}_hi"])  # fmt: skip
    assert rows[0]["lag_0.3"] == rows[2]["lag_0.3"]  # the base runs serve every factor
    assert rows[3]["muon_lr_where"] == "shared" and rows[3]["muon_lr"] == rows[3]["adam_lr"]
    assert rows[0]["muon_lr_where"] == "set" and rows[0]["muon_trials"] == ""  # nothing tuned
    # the table's rarest-group gap is the gap measures' pre-specified tail cell
    results = json.loads((out / "results.json").read_text())
    for row, label in zip(rows[:2], ("base", "loss target: all tokens"), strict=True):
        (pair,) = results["points"][label]["gap_measures"]["plain"]["pairs"]
        tail = pair["tail_gap"]
        assert float(row["rarest_fta_gap"]) == pytest.approx(tail["gap"], abs=1e-4)
        assert float(row["rarest_fta_gap_se"]) == pytest.approx(tail["se"], abs=1e-4)
    assert (out / "lag_ratio_by_level.png").stat().st_size > 0
    (claim,) = json.loads((out / "claims.json").read_text())
    # the paper's ratio is its 160M model's: the smoke model is not its setting
    assert claim["id"] == LAG.id and claim["verdict"] == "not measured"
    assert "not measured in its setting" in claim["reason"]
    report = json.loads((out / "report.json").read_text())
    assert report["tables"][0]["file"] == "sensitivity.csv"
    html = write_report(tmp_path, headline_questions()).read_text()
    assert "Knowledge QA sensitivity" in html
    assert '<img alt="Exposure-lag ratio of Adam behind Muon' in html
    assert "One factor changed at a time from the base" in html
    assert "(sens/lag_ratio_by_level.png)" in (tmp_path / "report.md").read_text()


def test_a_levels_row_holds_its_measures_under_the_tables_headers():
    """sensitivity.csv's row of one level: each arm's rate and tuning, the lag ratios per
    reading and τ (geometric mean, 95 % t interval, status) under the CSV's headers, the final
    gaps and the peak; a reading not measured is named so, its numbers empty."""
    seeds = tuple(Ratio("measured", v, v, v, 0.01) for v in (1.8, 2.0, 2.2))
    mean = (1.8 * 2.0 * 2.2) ** (1 / 3)
    pooled = LagRatio("pooled", 0.5, seeds, Ratio("measured", mean, mean, mean, 0.01), (0, 1, 2))
    found = PointMeasures(
        arms={"muon": ArmChoice(0.02, "interior", 6, 6), "adam": ArmChoice(3e-3, "lowest edge")},
        n_seeds=3,
        readings={"pooled": {0.5: pooled}},
        finals={("fta", "rarest"): MeanSE(0.41234, 0.05, 3)},
        peak=Gap(4, 50.0, 0.6, None),
    )
    (record,) = records([sensitivity_row("loss", "all", False, found)])
    assert list(record) == list(column_docs(SensitivityRow))  # every column documented
    low, high = pooled.interval()
    assert (record["lag_0.5"], record["lag_0.5_lo"], record["lag_0.5_hi"]) == (
        round(mean, 4), round(low, 4), round(high, 4),
    )  # fmt: skip
    assert record["lag_0.5_status"] == "measured" and record["lag_0.3_status"] == "not measured"
    assert record["m2_lag_0.8"] is None and record["m2_lag_0.8_status"] == "not measured"
    assert (record["muon_lr"], record["muon_trials"], record["adam_trials"]) == (0.02, "6/6", "")
    assert record["adam_lr_where"] == "lowest edge" and record["n_seeds"] == 3
    assert (record["rarest_fta_gap"], record["rarest_fta_gap_se"]) == (0.4123, 0.05)
    assert record["second_em_gap"] is None
    assert (record["peak_gap"], record["peak_gap_se"], record["peak_group"]) == (0.6, None, 4)
