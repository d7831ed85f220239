"""qa-sensitivity and its engine: LR grids widened until the choice is interior, per-point
overrides, every point's runs on one pool, the headline claim's flip rule, and the smoke study
end to end."""

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

from tailmem import progress
from tailmem.claims.a3_sensitivity import (
    CLAIMS,
    READING,
    REFERENCE,
    A3SensitivityInputs,
    judge,
)
from tailmem.claims.paper_a_qa_tables import VERSIONS
from tailmem.cli import main
from tailmem.errors import ConfigError
from tailmem.experiments.knowledge_qa import Config, gaps, grid, tables
from tailmem.experiments.knowledge_qa.arms import ARMS
from tailmem.experiments.qa_sensitivity import lr_status
from tailmem.lm.config import OptimSection, TrainSection
from tailmem.lm.plan import Entry, Plan, run_plan
from tailmem.lm.spec import Divergence, RunResult
from tailmem.lm.subrun import RunContext, RunTemplate
from tailmem.models.gpt import GPTConfig
from tailmem.report.render import write_report

LAG = CLAIMS[0]
MODEL = GPTConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=64)
GRIDS = {"muon": {"lr": [0.01, 0.02, 0.05]}, "adam": {"lr": [1e-3, 3e-3, 1e-2]}}
"""Three-point grids around the rates the fake runs below prefer (0.02 and 3e-3)."""


# --------------------------------------------------------------------------- interior LRs


def _complete(job, evals, wall_seconds=0.0):
    """The complete run of ``job`` with evaluation history ``evals``."""
    return RunResult(
        digest=job.digest, key=job.key, arm=job.arm.name, recipe=job.arm.recipe, ffn=job.ffn,
        lrs=job.lrs, seed=job.seed, steps=job.steps, status="complete", message="",
        steps_done=job.steps, final_loss=0.0, tokens=0, evals=evals, final=evals[-1],
        diverged=None, wall_seconds=wall_seconds,
    )  # fmt: skip


def _result(job, fta_all):
    """A finished run scored ``fta_all`` (one evaluation, five groups)."""
    evals = [{"step": job.steps, "fta": [fta_all] * 5, "fta_all": fta_all, "em": [0.0] * 5,
              "em_all": 0.0}]  # fmt: skip
    return _complete(job, evals)


def _peaked_at(peaks):
    """A fake train whose score falls with the distance of the swept rate from ``peaks[kind]``
    (in octaves), recording every job it trains."""
    trained = []

    def train(job, context, on_steps):
        trained.append(job)
        on_steps(job.steps)
        kind = job.arm.tuned
        return _result(job, 1.0 / (1.0 + math.log2(job.lrs[kind] / peaks[kind]) ** 2))

    return train, trained


def _adam_plan(grid_points, max_extend):
    entry = Entry("plain", ARMS["adam"], tuple(grid_points), lambda p, best: {"adam": p})
    runs = RunTemplate({"plain": MODEL}, TrainSection(), OptimSection.defaults("adam"), {})
    return Plan([entry], lambda e, p, r: r.metric("fta_all"), [0, 1], 10, 0, 10, runs,
                max_extend=max_extend)  # fmt: skip


@pytest.mark.parametrize(
    ("peak", "max_extend", "added", "chosen", "edge"),
    [
        (16.0, 3, [8.0, 16.0, 32.0], 16.0, False),  # found beyond the top end: interior
        (16.0, 2, [8.0, 16.0], 16.0, True),  # out of extensions: still at the (new) edge
        (0.25, 2, [0.5, 0.25], 0.25, True),  # below the grid, extended downwards
        (2.0, 2, [], 2.0, False),  # already interior: the declared grid, nothing added
    ],
)
def test_a_grid_grows_beyond_the_end_its_winner_sits_at(
    tmp_path, peak, max_extend, added, chosen, edge
):
    plan = _adam_plan([1.0, 2.0, 4.0], max_extend)
    train, trained = _peaked_at({"adam": peak})
    with progress.tracking(tmp_path) as tracker:
        run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=train)
        assert tracker.total == sum(job.steps for job in trained)  # the total grew with them
    points = [p for p, _ in plan.sweeps["plain", "adam"]]
    assert points == [1.0, 2.0, 4.0, *added]
    assert plan.chosen["plain", "adam"] == chosen and plan.extended.get(
        ("plain", "adam"), 0
    ) == len(added)
    # Seed 0 is the winning sweep run; seed 1 runs at the winner: one more run than the sweep.
    assert len(trained) == len(points) + 1 == plan.total_runs()
    assert trained[-1].lrs == {"adam": chosen} and trained[-1].seed == 1
    rows = tables.sweep_rows(plan)
    (row,) = [r for r in rows if r["chosen"]]
    assert row["grid_edge"] is edge
    assert [r["extended"] for r in rows] == [False] * 3 + [True] * len(added)


def test_knowledge_qa_plans_with_interior_choices_train_the_same_runs_with_widening(tmp_path):
    optim = OptimSection.from_config(GRIDS, "optim")
    cfg = Config(arms=["muon", "adam"], seeds=2, train=TrainSection(steps=10), optim=optim)
    template = RunTemplate({"plain": MODEL}, cfg.train, cfg.optim, {})
    runs = {}
    for max_extend in (0, 2):
        plan = Plan(cfg.entries(), lambda e, p, r: r.metric("fta_all"), [0, 1], 10, 0, 10,
                    template, max_extend=max_extend)  # fmt: skip
        train, trained = _peaked_at({"muon": 0.02, "adam": 3e-3})  # the grids' middles
        run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=train)
        runs[max_extend] = (trained, plan.best)
    assert runs[0] == runs[2]
    assert runs[0][1][("plain", "muon")] == {"muon": 0.02, "adam": 3e-3}


def test_the_lr_columns_name_an_arms_choice_even_when_its_seed_runs_all_diverged(tmp_path):
    """The sensitivity table reads the completed plan (diverged seed runs left out): an arm
    whose every seed run diverged still chose its rate in the sweep."""
    optim = OptimSection.from_config(GRIDS, "optim")
    cfg = Config(arms=["muon", "adam"], seeds=2, train=TrainSection(steps=10), optim=optim)
    template = RunTemplate({"plain": MODEL}, cfg.train, cfg.optim, {})
    # Sweep runs of 5 steps, seed runs of 10: Adam's seed runs diverge, its sweep does not.
    plan = Plan(cfg.entries(), lambda e, p, r: r.metric("fta_all"), [0, 1], 10, 0, 5, template)
    peaked, _ = _peaked_at({"muon": 0.02, "adam": 3e-3})

    def train(job, context, on_steps):
        done = peaked(job, context, on_steps)
        if job.arm.name != "adam" or job.steps != 10:
            return done
        return dataclasses.replace(
            done, status="diverged", final={}, diverged=Divergence(3, None, "loss is nan")
        )

    run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=train)
    point = grid.PointResult(grid.Point("base"), cfg, plan.completed(), None, 0.0, {}, {})
    assert point.plan.arms == ["muon"]  # Adam's entry is left out of the tables
    assert lr_status(point, "plain", "muon") == (0.02, "interior")
    assert lr_status(point, "plain", "adam") == (3e-3, "interior")


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
    with pytest.raises(ConfigError, match="used by no other point"):
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
    score = 1.0 if lr in (0.02, 3e-3) else 0.5  # the sweep prefers the grids' middles
    evals = []
    for step in range(0, job.steps + 1, job.steps // 10):
        fta = min(1.0, k * step / job.steps)
        evals.append({"step": step, "fta": [fta] * 5, "fta_all": score, "em": [fta / 2] * 5,
                      "em_all": fta / 2})  # fmt: skip
    on_steps(job.steps)
    record = {"point": Path(context.root).name, "pid": os.getpid(), "start": started,
              "end": time.time()}  # fmt: skip
    path = Path(context.root) / job.key / "record.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return _complete(job, evals, wall_seconds=0.3)


def test_every_point_trains_on_one_pool_and_measures_its_own_gap(tmp_path):
    common = {"seeds": 3, "arms": ["muon", "adam"], "train.steps": 20, "train.eval_every": 2,
              "optim.muon.lr": [0.01, 0.02, 0.05], "optim.adam.lr": [1e-3, 3e-3, 1e-2]}  # fmt: skip
    points = [grid.Point("base"), grid.Point("all tokens", {"loss_on": "all"})]
    results = grid.run_points(grid.configure(points, "smoke", common), tmp_path, 2, fake_qa_train)
    records = [json.loads(p.read_text()) for p in tmp_path.glob("points/*/runs/**/record.json")]
    assert {r["point"] for r in records} == {"base", "all_tokens"}
    assert len(records) == 2 * (3 + 3 + 2 + 2)  # per point: two 3-point sweeps, 2 more seeds each
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
        (pair,) = [p for p in point.measures["plain"]["pairs"] if p["lead"] == "muon"]
        per_group = [r for r in pair["lag_ratio"] if r["group"] != "pooled"]
        for row in per_group:  # every crossing bracketed: the exact ratio in every seed
            assert row["n_measured"] == 3 and row["mean"] == pytest.approx(K_MUON / K_ADAM)
    assert results["all tokens"].config.loss_on == "all"


def test_a_shared_lr_point_runs_muon_at_the_rate_adam_chose(tmp_path):
    common = {"seeds": 3, "arms": ["muon", "adam"], "train.steps": 20, "train.eval_every": 2,
              "optim.adam.lr": [1e-3, 3e-3, 1e-2]}  # fmt: skip
    point = grid.Point("shared", {"optim.muon.scale": "match_rms_adamw"}, shared_lr=True)
    configs = grid.configure([point], "smoke", common)
    (result,) = grid.run_points(configs, tmp_path, 1, fake_qa_train).values()
    assert result.plan.best["plain", "adam"] == {"adam": 3e-3}
    assert result.plan.best["plain", "muon"] == {"muon": 3e-3, "adam": 3e-3}
    assert [job.lrs for job in result.plan.seed_runs["plain", "muon"]] == [
        {"muon": 3e-3, "adam": 3e-3}
    ] * 3


# --------------------------------------------------------------------------- the claim


def _entries(values):
    """Per-seed ratios as recorded: a number, ("lower", x) for a censored seed, None: neither."""
    out = []
    for v in values:
        if v is None:
            out.append({"ratio": None, "lower": None, "upper": None})
        elif isinstance(v, tuple):
            out.append({"ratio": None, "lower": None, "upper": None, v[0]: v[1]})
        else:
            out.append({"ratio": v, "lower": v, "upper": v})
    return out


def test_the_headline_is_decided_at_the_base_and_a_level_that_decides_otherwise_flips_it():
    paper = 2.5
    threshold = LAG["fraction"] * paper
    high = [threshold * 2.0, threshold * 2.1, threshold * 1.9]
    low = [threshold * 0.4, threshold * 0.45, threshold * 0.35]
    assert judge(_entries(high), threshold).verdict == "reproduced"
    assert judge(_entries(low), threshold).verdict == "not reproduced"
    assert judge(_entries([threshold * 0.4, threshold * 1.5, None]), threshold).verdict == (
        "inconclusive"
    )
    spread = [threshold * 0.9, threshold * 1.3, threshold * 1.1]  # the t interval straddles it
    found = judge(_entries(spread), threshold)
    assert found.verdict == "inconclusive" and "t interval" in found.reason
    # a censored seed (Adam never reached τ) stays as its lower bound: it confirms, never refutes
    assert judge(_entries([*high[:2], ("lower", threshold * 1.8)]), threshold).verdict == (
        "reproduced"
    )
    assert judge(_entries([*low[:2], ("lower", threshold * 0.4)]), threshold).verdict == (
        "inconclusive"
    )

    def inputs(base, level):
        tau = f"{LAG['tau']:g}"
        return A3SensitivityInputs(
            paper={REFERENCE: {READING: {tau: {"ratio": paper, "lower": paper, "upper": paper}}}},
            base="base",
            base_choices=["b = x"],
            points={"base": {READING: {tau: _entries(base)}},
                    "b: y": {READING: {tau: _entries(level)}}},
            levels=[{"factor": "b", "level": "y", "point": "b: y"}],
        )  # fmt: skip

    (kept,) = LAG.evaluate(inputs(high, high))
    assert kept.verdict == "reproduced" and kept.details["threshold"] == threshold
    assert kept.ours.startswith("base (b = x): ") and "; b = y: " in kept.ours
    (flipped,) = LAG.evaluate(inputs(high, low))
    assert flipped.verdict == "inconclusive" and "b = y says the opposite" in flipped.reason
    (undecided,) = LAG.evaluate(inputs(low, spread))  # an undecided level flips nothing
    assert undecided.verdict == "not reproduced"


def test_the_paper_ratio_the_headline_is_judged_against_is_like_for_like():
    """The verdict's reading is group m − 2 on the paper's own cells: 2.59 at FTA 0.5 in both
    versions of the tables, not the pooled 4.13 (v2) that falls to 1.16 with one cell changed."""
    tau = LAG["tau"]
    readings = {v: gaps.paper_readings(v, "plain", (tau,)) for v in VERSIONS}
    group = {v: r[READING][tau]["ratio"] for v, r in readings.items()}
    pooled = {v: r["paper_cells_pooled"][tau]["ratio"] for v, r in readings.items()}
    assert group["arxiv-v2"] == pytest.approx(group["iclr"])  # both versions agree
    assert pooled["arxiv-v2"] > 1.5 * group["arxiv-v2"] > pooled["iclr"]  # pooled: unstable
    assert max(pooled.values()) > group["arxiv-v2"]  # pooled exceeds the per-group ratio


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
    assert rows[0]["lag_0.3"] == rows[2]["lag_0.3"]  # the base runs serve every factor
    assert rows[3]["muon_lr_grid"] == "shared" and rows[3]["muon_lr"] == rows[3]["adam_lr"]
    assert (out / "lag_ratio_by_level.png").stat().st_size > 0
    (claim,) = json.loads((out / "claims.json").read_text())
    assert claim["id"] == LAG.id and "loss target = all tokens" in claim["ours"]
    assert claim["ours"].startswith("base (loss target = answer, learning rates = each its own)")
    report = json.loads((out / "report.json").read_text())
    assert report["tables"][0]["file"] == "sensitivity.csv"
    html = write_report(tmp_path).read_text()
    assert "Knowledge QA sensitivity" in html
    assert '<img alt="Exposure-lag ratio of Adam behind Muon' in html
    assert "One factor changed at a time from the base" in html
    assert "(sens/lag_ratio_by_level.png)" in (tmp_path / "report.md").read_text()
