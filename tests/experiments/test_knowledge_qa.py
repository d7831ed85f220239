"""knowledge-qa: the smoke preset end to end (two workers, three arms at set rates), tuning end to
end (`tailmem tune`, then a run at the stored rates), resume, bad configs, and the pieces it is
built from (fast loss/eval path against the model's own forward, FTA evaluator against the data
set's own grouping, run scheduling, tables and claim rules on constructed results)."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
import time

import numpy as np
import pytest
import torch

from tailmem.claims.a3 import CHANCE_TOL
from tailmem.claims.core import PAPER_A_QA
from tailmem.claims.registry import claims_of, read_claims
from tailmem.cli import main
from tailmem.columns import records
from tailmem.config import load_config
from tailmem.data.bios import BiosConfig, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.errors import ConfigError
from tailmem.experiments import get_study
from tailmem.experiments.knowledge_qa import SCORES, Config, score_of
from tailmem.experiments.knowledge_qa.arms import ARMS
from tailmem.experiments.knowledge_qa.curves import PlanCurves
from tailmem.experiments.knowledge_qa.fta import (
    FTAEvaluator,
    QABatches,
    QAData,
    answer_loss_sum,
    describe_fta,
    logits_at,
    sample_questions,
)
from tailmem.experiments.knowledge_qa.tables import claims, gap_rows, mean_std, tail_table
from tailmem.lm.config import ModelSection, OptimSection, TrainSection
from tailmem.lm.plan import Plan, TrainedPlan, run_plan
from tailmem.lm.spec import Divergence, RunResult
from tailmem.lm.store import load_store, write_store
from tailmem.lm.subrun import RunContext, RunTemplate, run_job, template
from tailmem.lm.sweeps import choice_rows, trial_rows
from tailmem.lm.tuning import TuningSection
from tailmem.models.gpt import GPT, GPTConfig, count_params
from tailmem.rundir import RunDir
from tailmem.runner import run_experiment
from tailmem.train import token_loss_sum
from tailmem.train.distributed import DistContext

SMALL = dict(m=4, n_first_names=40, n_surnames=60, n_cities=30, n_universities=40)
SMALL |= dict(n_majors=20, n_employers=30, vocab_size=512)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke preset run once into a temp folder: (run dir, status, wall seconds)."""
    out = tmp_path_factory.mktemp("kqa") / "smoke"
    start = time.perf_counter()
    run, status = run_experiment("knowledge-qa", "smoke", out=out)
    return run, status, time.perf_counter() - start


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return build_dataset(BiosConfig(**SMALL), tmp_path_factory.mktemp("kqa-data"))


def _read_csv(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


# --------------------------------------------------------------------------- end to end


def test_smoke_preset_writes_every_output(smoke, strict_json):
    run, status, _ = smoke
    cfg = load_config(Config, "knowledge-qa", "smoke")
    assert cfg.arms == ["muon", "adam_split", "adam"]  # the fair reference, then paper A's
    assert all(not cfg.optim[k].tuned for k in ("muon", "adam", "adam_split"))  # set rates
    assert status == "ran" and run.is_complete
    for name in (
        "results.json",
        "claims.json",
        "report.json",
        "head_tail_gap.csv",
        "tail_table_long.csv",
        "tail_table_plain.csv",
        "gap_plain.csv",
        "lag_ratio_plain.csv",
    ):
        assert run.file(name).is_file(), name
    assert not run.file("peak_gap_plain.csv").exists()  # now gap_<ffn>.csv: tail and peak
    for stem in ("fta_by_group_plain", "fta_final_plain", "lag_ratio_plain",
                 "lag_ratio_plain_adam", "fta_vs_exposures_plain_adam"):  # fmt: skip
        for ext in ("png", "svg"):
            assert run.file(f"{stem}.{ext}").stat().st_size > 1000
    # Set rates: no trial, so no tuning figure, and the empty tuning tables are not listed.
    assert not run.file("lr_sweep_plain.png").exists() and not run.file("tuned_rates.json").exists()
    layout = run.read_json("report.json")
    for item in layout["figures"] + layout["tables"]:
        assert run.file(item["file"]).is_file()
    assert not {"tuning.csv", "lr_sweep.csv"} & {t["file"] for t in layout["tables"]}
    assert "Rarest group" in layout["summary"]
    # The unpublished choices the run made, as qa-sensitivity names them.
    assert (
        "loss on answer tokens, answers as BPE tokens, packed items attending to earlier"
        in (layout["summary"])
    )
    assert strict_json(run.path) == []  # every JSON (progress, metrics, results) is strict
    # The gap measures lead the report: the fair pair (Muon vs Adam on the hidden matrices at
    # its own rate), then paper A's (Muon vs all-Adam) with its suffix; every explained column
    # is a header of its table.
    assert [f["file"] for f in layout["figures"][:4]] == [
        "fta_vs_exposures_plain.png",
        "lag_ratio_plain.png",
        "fta_vs_exposures_plain_adam.png",
        "lag_ratio_plain_adam.png",
    ]
    summary_text = layout["summary"]
    fair = summary_text.index("Adam (own rate) behind Muon (fair comparison, plain FFN)")
    assert fair < summary_text.index("Adam behind Muon (paper A's comparison") < (
        summary_text.index("Rarest")
    )  # fmt: skip
    for item in layout["tables"]:
        header = set(next(csv.reader(run.file(item["file"]).open())))
        merged = item.get("mean_se", {})  # the report shows each mean and its SE as one column
        assert all(set(sources) <= header for sources in merged.values()), item["file"]
        assert set(item.get("columns", {})) <= header | set(merged), item["file"]
    assert [t["file"] for t in layout["tables"][:3]] == [
        "lag_ratio_summary_plain.csv", "lag_ratio_summary_plain_adam.csv", "gap_plain.csv",
    ]  # fmt: skip
    # the tail table's notes come from its row class; a merged "Muon EM" shows its mean's note
    tail = layout["tables"][3]
    assert tail["mean_se"]["Muon EM"] == ["Muon EM mean", "Muon EM SE"]
    assert tail["columns"]["Muon EM mean"].startswith("whole-answer exact match")

    results = run.read_json("results.json")
    m, steps_total, every = cfg.data.m, cfg.train.steps, cfg.train.eval_every
    assert len(results["runs"]) == len(cfg.arms) * cfg.seeds
    assert results["tuning"] == {"score": "answer_loss", "choices": [], "trials": []}
    rate = {kind: cfg.optim[kind].lr for kind in ("muon", "adam", "adam_split")}
    assert results["best_lr"] == {  # the preset's set rates, the rest at Adam's
        "plain/muon": {"adam": rate["adam"], "muon": rate["muon"]},
        "plain/adam_split": {"adam": rate["adam"], "adam_split": rate["adam_split"]},
        "plain/adam": {"adam": rate["adam"]},
    }
    for result in results["runs"]:
        assert result["status"] == "complete"
        steps = [e["step"] for e in result["evals"]]
        assert steps == list(range(0, steps_total + 1, every))  # step 0: the initialised model
        for e in result["evals"]:
            assert len(e["fta"]) == len(e["em"]) == m + 1
            assert all(0.0 <= v <= 1.0 for v in e["fta"]) and 0.0 <= e["fta_all"] <= 1.0
            assert all(em <= fta for em, fta in zip(e["em"], e["fta"], strict=True))
            assert e["em_all"] <= e["fta_all"]
            assert e["loss_train"] > 0  # the answer loss weighted as training: the score
        # Each arm's first-seed run keeps its final checkpoint (for `tailmem diagnose`).
        assert [p.name for p in run.file(result["key"]).glob("ckpt/*")] == ["step_000040.pt"]
    assert len(list(run.path.glob("runs/*/*/*/ckpt"))) == len(cfg.arms)
    runs = {r["arm"]: r for r in results["runs"]}
    # Adam on the hidden matrices at Adam's own rate is Adam: the twin differs by its rate alone.
    assert runs["adam_split"]["evals"] == runs["adam"]["evals"]
    assert 0 < results["chance_fta"] < 1
    measures = results["gap_measures"]["plain"]
    assert [(p["lead"], p["lag"], p["status"]) for p in measures["pairs"]] == [
        ("muon", "adam_split", "measured"),
        ("muon", "adam", "measured"),
        ("adam_split", "adam", "measured"),
    ]
    pair = measures["pairs"][0]
    assert pair["steps"] == list(range(0, steps_total + 1, every))
    assert sorted(measures["paper"]) == ["arxiv-v2", "iclr"]
    n_rows = (m + 2) * 3  # groups and pooled, three taus
    assert len(pair["lag_ratio"]) == n_rows
    lag_rows = _read_csv(run.file("lag_ratio_plain.csv"))
    assert [r["source"] for r in lag_rows].count("tailmem") == n_rows * 3  # three pairs
    summary = _read_csv(run.file("lag_ratio_summary_plain.csv"))
    assert [r["group"] for r in summary[: m + 2]] == [*map(str, range(m + 1)), "pooled"]
    gap = _read_csv(run.file("gap_plain.csv"))
    ours = [r for r in gap if r["source"] == "tailmem"]
    assert [(r["lead"], r["lag"]) for r in ours] == [
        (p["lead"], p["lag"]) for p in measures["pairs"]
    ]
    assert float(ours[0]["peak_gap"]) == pytest.approx(pair["peak_gap"]["overall"]["gap"], abs=1e-4)
    assert float(ours[0]["tail_gap"]) == pytest.approx(pair["tail_gap"]["gap"], abs=1e-4)
    assert int(ours[0]["tail_group"]) == m and pair["peak_gap"]["descriptive"] is True
    final_rarest = runs["muon"]["evals"][-1]["fta"][m] - runs["adam_split"]["evals"][-1]["fta"][m]
    assert pair["tail_gap"]["gap"] == pytest.approx(final_rarest)
    final = results["final_by_group"]["plain"]["adam"]
    assert final["em"] == pytest.approx(runs["adam"]["evals"][-1]["em"], abs=1e-5)

    table = _read_csv(run.file("tail_table_plain.csv"))
    assert len(table) == len(cfg.table_fracs) * len(cfg.tail_offsets)
    assert [int(r["group"]) for r in table[:3]] == [m - o for o in cfg.tail_offsets]
    assert [int(r["step"]) for r in table[::3]] == [round(f * steps_total) for f in cfg.table_fracs]
    for arm in cfg.arms:
        label = ARMS[arm].label
        for row in table:
            assert 0 <= float(row[f"{label} mean"]) <= 1 and row[f"{label} SE"] == ""  # one seed
    # The paper's cells beside ours at 20 %: groups 13 and 15 at 2k steps; none for group 14.
    assert [r["paper Muon"] for r in table[:3]] == ["0.386", "", "0.14"]
    # The table's last row is the rarest group at the end: the same number as the run's history.
    assert float(table[-1]["Adam mean"]) == pytest.approx(
        runs["adam"]["evals"][-1]["fta"][m], abs=1e-5
    )

    found = read_claims(run)
    by_id = {c.id: c for c in found}
    assert by_id["A3.gated.tail_muon_vs_adam"].verdict == "not measured"  # plain FFN only
    assert by_id["A3.plain.sgd_below_adam"].verdict == "not measured"  # no SGD arm in smoke
    # The smoke model has not learned the head groups (FTA near chance): what it measures is
    # inconclusive, never "not reproduced".
    heads = [np.mean(r["evals"][-1]["fta"][: cfg.head_groups]) for r in results["runs"]]
    assert max(heads) <= results["chance_fta"] + CHANCE_TOL
    measured = [c for c in found if c.verdict != "not measured"]
    assert measured and all(c.verdict == "inconclusive" and "chance" in c.reason for c in measured)


TUNED = [
    "arms=[muon,adam]", "optim.muon.lr=[0.02,0.05]", "optim.adam.lr=[1e-3,3e-3]",
    "tuning.steps=4", "tuning.max_extend=1", "train.steps=8", "workers=1",
]  # fmt: skip
"""The smoke preset with two arms that tune (Muon borrowing Adam's chosen rate) on 4-step trials,
evaluated on 8 steps: each 2-point grid is widened once (its winner sits at an end), so 3 points
× 2 tuning seeds."""


def test_tune_then_evaluate_fresh_seeds_at_the_stored_rates(tmp_path, capsys):
    """`tailmem tune` trains the trials alone and writes the choices with their provenance; a run
    at ``tuning.rates=stored`` reading them trains no trial and evaluates its seeds there."""
    cache = f"cache_dir={tmp_path / 'data'}"
    tune = tmp_path / "tune"
    assert (
        main(["tune", "knowledge-qa", "--preset", "smoke", *TUNED, cache, "--out", str(tune)]) == 0
    )
    printed = capsys.readouterr().out
    assert RunDir(tune).incomplete_reason() is None  # reading the choices changed no file
    trials = _read_csv(tune / "lr_sweep.csv")
    assert len(trials) == 2 * 3 * 2
    assert {r["seed"] for r in trials} == {"1000", "1001"}  # tuning seeds, never seed 0
    # Only trials were trained: every run folder is a 4-step tuning run.
    folders = sorted(p.name for p in tune.glob("runs/plain/*/*"))
    assert len(folders) == 12 and all(f.endswith("steps4") and "seed100" in f for f in folders)
    assert not (tune / "results.json").exists()
    choices = {r["arm"]: r for r in _read_csv(tune / "tuning.csv")}
    stored = {r.arm: r for r in load_store(tune / "tuned_rates.json").values()}
    for arm, grid in (("muon", (0.02, 0.05)), ("adam", (1e-3, 3e-3))):
        mine = [r for r in trials if r["arm"] == arm]
        points = list(dict.fromkeys(float(r["point"]) for r in mine))
        assert points[:2] == list(grid) and len(points) == 3  # widened once, beyond the winner
        assert [r["extended"] for r in mine].count("True") == 2  # the third point, both seeds
        means = {float(r["point"]): float(r["point_score"]) for r in mine}
        for point, mean in means.items():  # the mean over the tuning seeds ranks a point
            scores = [float(r["score"]) for r in mine if float(r["point"]) == point]
            assert mean == pytest.approx(sum(scores) / 2) and all(s < 0 for s in scores)
        best = max(means, key=lambda p: means[p])
        assert {float(r["point"]) for r in mine if r["chosen"] == "True"} == {best}
        row = choices[arm]
        assert (row["trials"], row["budget"], row["tuning_seeds"]) == ("6", "6", "1000 1001")
        assert (row["score"], row["source"]) == ("answer_loss", "this run")
        assert float(row["chosen"]) == best
        rate = stored[arm]
        assert (rate.point, rate.score, rate.budget) == (best, "answer_loss", 6)
        assert len(rate.trials) == 6
        assert rate.study == "knowledge-qa" and rate.preset == "smoke"
        assert f"plain/{arm}: {best:g} (6/6 trials, score answer_loss" in printed
    assert stored["muon"].lrs["adam"] == stored["adam"].lrs["adam"]  # Adam's choice, borrowed

    evaluate = tmp_path / "evaluate"
    store = f"tuning.store={tune / 'tuned_rates.json'}"
    at_stored = [*TUNED, cache, "tuning.rates=stored", store]
    run, status = run_experiment("knowledge-qa", "smoke", at_stored, out=evaluate)
    assert status == "ran" and run.is_complete
    # No trial: only the evaluation seed's runs, at the stored rates.
    evaluated = sorted(p.name for p in evaluate.glob("runs/plain/*/*"))
    assert len(evaluated) == 2 and all(f.endswith("-seed0-steps8") for f in evaluated)
    results = run.read_json("results.json")
    assert results["best_lr"] == {f"plain/{arm}": dict(rate.lrs) for arm, rate in stored.items()}
    rows = _read_csv(run.file("tuning.csv"))
    assert {r["arm"]: float(r["chosen"]) for r in rows} == {a: r.point for a, r in stored.items()}
    assert all(r["source"].startswith("stored (smoke, ") for r in rows)
    assert all(r["trials"] == "6" for r in rows)  # the stored tuning's cost
    assert len(_read_csv(run.file("lr_sweep.csv"))) == 12  # its trials, shown from the store
    assert {"tuning.csv", "lr_sweep.csv"} <= {
        t["file"] for t in run.read_json("report.json")["tables"]
    }
    # Another tuning problem (a different trial length) finds nothing stored: refused in one
    # line before anything is written.
    longer = [o if o != "tuning.steps=4" else "tuning.steps=8" for o in TUNED]
    other = [*longer, cache, "tuning.rates=stored", store]
    with pytest.raises(ConfigError) as err:
        run_experiment("knowledge-qa", "smoke", other, out=tmp_path / "refused")
    assert "holds no rate tuned for exactly this config for plain/adam, plain/muon" in str(
        err.value
    )
    assert "\n" not in str(err.value) and not (tmp_path / "refused").exists()


def test_tune_missing_re_tunes_only_the_arms_a_changed_optimiser_trains(tmp_path, capsys):
    """Changing Muon's settings re-keys the Muon arm's tuning problem and no other: `tailmem
    tune --missing` trains the Muon trials alone, at Adam's stored choice, and a run at
    ``tuning.rates=stored`` then finds both."""
    cache = f"cache_dir={tmp_path / 'data'}"
    first = tmp_path / "first"
    assert main(["tune", "knowledge-qa", "--preset", "smoke", *TUNED, cache, "--out",
                 str(first)]) == 0  # fmt: skip
    held = tmp_path / "rates.json"
    write_store(held, load_store(first / "tuned_rates.json").values(), merge=False)
    store = f"tuning.store={held}"
    rescaled = [*TUNED, cache, store, "optim.muon.scale=none"]
    with pytest.raises(ConfigError, match="plain/muon") as err:
        run_experiment("knowledge-qa", "smoke", [*rescaled, "tuning.rates=stored"],
                       out=tmp_path / "refused")  # fmt: skip
    assert "plain/adam" not in str(err.value)  # Adam's rate is still stored
    again = tmp_path / "again"
    capsys.readouterr()
    assert main(["tune", "knowledge-qa", "--preset", "smoke", *rescaled, "--missing", "--out",
                 str(again)]) == 0  # fmt: skip
    assert "plain/adam" not in capsys.readouterr().out
    folders = {p.parent.name for p in again.glob("runs/plain/*/*")}
    assert folders == {"muon"}  # no Adam trial
    new = load_store(again / "tuned_rates.json")
    assert [r.arm for r in new.values()] == ["muon"]
    adam = next(r for r in load_store(held).values() if r.arm == "adam")
    assert next(iter(new.values())).lrs["adam"] == adam.lrs["adam"]  # borrowed from the store
    write_store(held, new.values())
    run, status = run_experiment("knowledge-qa", "smoke", [*rescaled, "tuning.rates=stored"],
                                 out=tmp_path / "evaluate")  # fmt: skip
    assert status == "ran" and run.is_complete
    code = main(["tune", "optim-bench", "--preset", "smoke", "--missing", "--out",
                 str(tmp_path / "bench")])  # fmt: skip
    assert code == 2 and "--missing: optim-bench tunes at grid points" in capsys.readouterr().err


def test_rerun_after_deleting_complete_reuses_finished_runs(smoke, tmp_path):
    run, _, first_wall = smoke
    copy = tmp_path / "again"
    shutil.copytree(run.path, copy)
    (copy / "COMPLETE").unlink()
    metrics = sorted(copy.glob("runs/*/*/*/metrics.jsonl"))
    before = {p: p.stat().st_mtime_ns for p in metrics}
    start = time.perf_counter()
    again, status = run_experiment("knowledge-qa", "smoke", out=copy)
    assert status == "resumed" and again.is_complete
    assert {p: p.stat().st_mtime_ns for p in metrics} == before  # no run was trained again
    assert time.perf_counter() - start < first_wall
    old, new = run.read_json("results.json"), again.read_json("results.json")
    assert old["runs"] == new["runs"] and old["best_lr"] == new["best_lr"]


TINY_TRAIN = {"steps": 20, "batch_size": 2, "seq_len": 64, "warmup_steps": 0, "eval_every": 4,
              "log_every": 4, "eval_batch_size": 64, "schedule": "constant"}  # fmt: skip


def _tiny_study(root, dataset, **train):
    """How a worker runs the tiny study's runs (its context) and what they share (template)."""
    data = QAData(str(dataset.path), dataset.fingerprint, "answer", 64)
    context = RunContext(
        str(root), data, loss_fn=answer_loss_sum, describe=describe_fta, show_progress=False
    )
    model = ModelSection(size="tiny", n_layer=1, n_head=2, d_model=16, d_ff=32)
    section = TrainSection(**{**TINY_TRAIN, **train})
    runs = template(data.load(DistContext()), model, section, OptimSection.defaults("adam"),
                    ["plain"])  # fmt: skip
    return context, runs


def test_interrupted_run_resumes_from_its_checkpoint(tmp_path, dataset, monkeypatch):
    context, runs = _tiny_study(tmp_path / "clean", dataset, ckpt_every=8)
    job = runs.spec(ARMS["adam"], "plain", {"adam": 3e-3}, 0, 20)
    clean = run_job(job, context)

    original = QABatches.batch

    def crash(self, step, rank=0, world_size=1):
        if step == 13:
            raise RuntimeError("simulated crash")
        return original(self, step, rank, world_size)

    context, _ = _tiny_study(tmp_path / "crashed", dataset, ckpt_every=8)
    monkeypatch.setattr(QABatches, "batch", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_job(job, context)
    path = context.path(job)
    assert not (path / "result.json").exists() and (path / "ckpt" / "step_000008.pt").is_file()
    monkeypatch.setattr(QABatches, "batch", original)
    trained = []
    resumed = run_job(job, context, trained.append)
    assert resumed.evals == clean.evals and resumed.final_loss == clean.final_loss
    assert [e["step"] for e in resumed.evals] == [4, 8, 12, 16, 20]
    assert sum(trained) == 12  # steps 9..20; the first 8 came from the checkpoint
    assert resumed.ok and not resumed.reused and resumed.key == job.key
    again = run_job(job, context)
    assert again == resumed and again.reused  # complete: reused as is


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("arms=[muon,bogus]", "arms: unknown arm 'bogus'"),
        ("arms=[adam,adam]", "at most once"),
        ("ffn=swiglu", "ffn: got 'swiglu'"),
        ("table_fracs=[1.5]", "table_fracs"),
        ("optim.adam.lr=[]", "optim.adam.lr: got []"),
        ("optim.adam.lr=[1e-3,1e-3]", "optim.adam.lr: got [0.001, 0.001]"),
        # the old sweep section is gone: grids are optim.<kind>.lr, trial lengths tuning.steps
        ("sweep.adam=[1e-3]", "unknown config field 'sweep'; expected one of: seed, seeds"),
        ("sweep.steps=10", "unknown config field 'sweep'; expected one of: seed, seeds"),
        ("tuning.seeds=1", "tuning.seeds: got 1; expected >= 2"),
        ("tuning.score=fta", "tuning.score: got 'fta'; expected one of answer_loss, fta_all"),
        ("tuning.max_extend=1", "tuning.max_extend: no learning rate of this run is tuned"),
        ("model.size=huge", "model.size"),
        ("data.m=0", "m: got 0"),
    ],
)
def test_bad_config_is_one_line_config_error(override, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(Config, "knowledge-qa", "smoke", [override])
    message = str(info.value)
    assert fragment in message and "\n" not in message


def test_presets_validate_and_paper_model_builds_on_meta():
    assert get_study("knowledge-qa").config is Config
    cpu = load_config(Config, "knowledge-qa", "cpu")
    assert sorted(cpu.arms) == sorted(ARMS) and "adam_split" in cpu.arms
    assert cpu.seeds >= 3 and cpu.ffn == "both"
    assert cpu.workers == 2 and cpu.train.threads == 1
    # The cpu preset evaluates at stored rates; its tuning: 2 seeds, the answer loss, 2 widenings.
    assert cpu.tuning == TuningSection(seeds=2, score="answer_loss", max_extend=2, rates="stored")
    sweeps = [e.sweep for e in cpu.entries() if e.sweep is not None]
    assert len(sweeps) == 2 * len(ARMS)  # every arm of both FFN types tunes one rate
    assert {s.budget for s in sweeps} == {(3 + 2) * 2}  # the same budget for every arm
    assert {s.seeds for s in sweeps} == {(1000, 1001)}  # apart from the seeds 0-2 evaluated
    small = cpu.model.build(1578, "plain", cpu.train.seq_len)  # the map's choice: heads of 64
    assert (small.d_model, small.n_layer, small.head_dim) == (256, 2, 64)
    paper = load_config(Config, "knowledge-qa", "paper")
    assert paper.data.m == 15 and paper.train.steps == 10_000 and paper.ffn == "both"
    assert sorted(paper.arms) == sorted(ARMS) and paper.tuning.rates == "sweep"
    # The 2k-step tuning trials warm up for the same 2% as the 10k-step seed runs.
    assert paper.tuning.steps == 2000
    assert paper.train.loop_config(paper.tuning.steps, seed=0).warmup_steps == 40
    assert {e.sweep.steps for e in paper.entries() if e.sweep is not None} == {2000}
    for ffn in ("plain", "gated"):
        with torch.device("meta"):
            model = GPT(paper.model.build(1578, ffn, paper.train.seq_len))
        blocks = sum(p.numel() for n, p in model.named_parameters() if n.startswith("blocks."))
        assert blocks == pytest.approx(84.9e6, rel=0.01)  # the 12 x 768 "NanoGPT 160M" blocks
    cfg = paper.model.build(50304, "plain", paper.train.seq_len)
    assert count_params(cfg) == pytest.approx(162.2e6, rel=0.01)


# --------------------------------------------------------------------------- pieces


def test_fast_loss_and_logits_match_the_full_forward():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=97, n_layer=2, n_head=2, d_model=32, d_ff=64, max_seq_len=24))
    x = torch.randint(0, 97, (3, 24))
    y = torch.randint(0, 97, (3, 24))
    y[torch.rand(3, 24) < 0.7] = -100
    fast = answer_loss_sum(model, x, y)
    fast.backward()
    fast_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    full = token_loss_sum(model, x, y)
    full.backward()
    torch.testing.assert_close(fast, full)
    for a, p in zip(fast_grads, model.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad, atol=1e-6, rtol=1e-5)
    positions = torch.tensor([0, 23, 7])
    expected = model(x)[0][torch.arange(3), positions]
    torch.testing.assert_close(logits_at(model, x, positions), expected)


class _Oracle(torch.nn.Module):
    """Predicts the right first token for the questions whose prompt it has been told to know."""

    def __init__(self, dataset, known):
        super().__init__()
        self.vocab = dataset.vocab_size
        self.answers = {}
        for i in np.flatnonzero(known):
            self.answers[tuple(dataset.eval_prompt(i).tolist())] = int(dataset.eval_first_token[i])

    def forward(self, idx):
        logits = torch.zeros(*idx.shape, self.vocab)
        for b, row in enumerate(idx.tolist()):
            for t in range(len(row)):
                answer = self.answers.get(tuple(row[: t + 1]))
                if answer is not None:
                    logits[b, t, answer] = 1.0
                else:
                    logits[b, t, 0] = 0.5  # token 0 (a byte) never starts an answer
        return logits, None


def test_fta_evaluator_matches_the_data_sets_grouping(dataset):
    rng = np.random.default_rng(0)
    known = rng.random(len(dataset.eval_items)) < np.linspace(0.9, 0.1, len(dataset.eval_items))
    oracle = _Oracle(dataset, known)
    out = FTAEvaluator(dataset, batch_size=7)(0, oracle)
    np.testing.assert_allclose(out["fta"], dataset.fta_by_group(known), atol=1e-5)
    assert out["fta_all"] == pytest.approx(known.mean(), abs=1e-5)


def test_an_eval_sample_asks_the_same_questions_per_group_and_weighs_fta_all(dataset):
    rng = np.random.default_rng(1)
    known = rng.random(len(dataset.eval_items)) < np.linspace(0.9, 0.1, len(dataset.eval_items))
    oracle = _Oracle(dataset, known)
    sampled = FTAEvaluator(dataset, batch_size=7, sample=10)
    asked = sample_questions(dataset.eval_group, 10, dataset.cfg.seed)
    sizes = np.bincount(dataset.eval_group)  # m = 4: 6, 6, 12, 24, 48 questions
    np.testing.assert_array_equal(np.bincount(dataset.eval_group[asked]), np.minimum(sizes, 10))
    assert not np.array_equal(asked, sample_questions(dataset.eval_group, 10, 1))  # the seed's
    out = sampled(0, oracle)
    by_group = [known[asked][dataset.eval_group[asked] == g].mean() for g in range(len(sizes))]
    np.testing.assert_allclose(out["fta"], by_group, atol=1e-5)
    weighted = float(np.dot(by_group, sizes) / sizes.sum())
    assert out["fta_all"] == pytest.approx(weighted, abs=1e-5)
    assert out["fta_all"] != pytest.approx(known[asked].mean(), abs=1e-3)  # not the plain mean
    assert sampled(5, oracle) == out  # the same questions every time
    # a sample as large as every group asks every question: the full evaluation, number for number
    assert FTAEvaluator(dataset, batch_size=7, sample=48)(0, oracle) == FTAEvaluator(
        dataset, batch_size=7
    )(0, oracle)
    whole = QAData(str(dataset.path), dataset.fingerprint, "answer", 64)
    part = dataclasses.replace(whole, eval_sample=10)
    assert "eval_sample" not in whole.load(DistContext()).identity  # older runs keep theirs
    assert part.load(DistContext()).identity == {**whole.load(DistContext()).identity,
                                                 "eval_sample": 10}  # fmt: skip
    with pytest.raises(ConfigError, match=r"^eval_sample: got 0; expected null"):
        load_config(Config, "knowledge-qa", "smoke", ["eval_sample=0"])


def test_qa_batches_mask_targets_and_shard_rows(dataset):
    stream = QATrainStream(dataset, batch_size=4, seq_len=64, seed=3)
    source = QABatches(stream)
    x, y, mask = stream.batch(5)
    bx, by = source.batch(5)
    np.testing.assert_array_equal(bx.numpy(), x)
    np.testing.assert_array_equal(by.numpy(), np.where(mask, y, -100))
    halves = [source.batch(5, rank, 2) for rank in (0, 1)]
    np.testing.assert_array_equal(torch.cat([h[1] for h in halves]).numpy(), by.numpy())


MODEL = GPTConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=64)


def _template(cfg):
    """The runs of ``cfg`` (a tiny model; no data: the runs below are not trained)."""
    return RunTemplate({ffn: MODEL for ffn in cfg.ffns}, cfg.train, cfg.optim, {})


def _fake_result(job, fta_final, status="complete"):
    """A run whose FTA grows linearly to ``fta_final`` and whose answer loss is 1 − FTA."""
    evals = [
        {
            "step": s,
            "fta": [v * s / job.steps for v in fta_final],
            "fta_all": float(np.mean(fta_final)) * s / job.steps,
            "em": [0.5 * v * s / job.steps for v in fta_final],
            "em_all": 0.5 * float(np.mean(fta_final)) * s / job.steps,
            "loss_train": 1.0 - float(np.mean(fta_final)) * s / job.steps,
        }
        for s in range(job.steps // 10, job.steps + 1, job.steps // 10)
    ]
    ok = status == "complete"
    return RunResult(
        digest=job.digest, key=job.key, arm=job.arm.name, recipe=job.arm.recipe, ffn=job.ffn,
        lrs=job.lrs, seed=job.seed, steps=job.steps, status=status, message="",
        steps_done=job.steps if ok else 3, final_loss=0.0 if ok else None, tokens=0,
        evals=evals if ok else [], final=evals[-1] if ok else {},
        diverged=None if ok else Divergence(4, None, "loss is nan"), wall_seconds=1.0,
    )  # fmt: skip


def test_the_answer_loss_score_is_minus_the_last_weighted_answer_loss():
    cfg = Config(optim=OptimSection.defaults("adam"))
    job = _template(cfg).spec(ARMS["adam"], "plain", {"adam": 1e-3}, 1000, 100)
    result = _fake_result(job, [1.0, 0.5, 0.0])
    assert list(SCORES) == ["answer_loss", "fta_all"]  # the default first
    assert score_of("answer_loss")(result) == pytest.approx(-0.5)
    assert score_of("fta_all")(result) == pytest.approx(0.5)
    assert score_of("answer_loss")(_fake_result(job, [1.0], status="diverged")) is None
    nan = dataclasses.replace(result, evals=[{**result.evals[-1], "loss_train": float("nan")}])
    assert score_of("answer_loss")(nan) is None


def test_plan_tunes_in_borrowing_order_on_tuning_seeds_and_evaluates_fresh_seeds(tmp_path):
    optim = {"muon": {"lr": [0.01, 0.02]}, "adam": {"lr": [1e-3, 3e-3]},
             "adam_split": {"lr": [1e-3, 3e-3]}, "sgd": {"lr": [0.1, 0.3]}}  # fmt: skip
    cfg = Config(arms=list(ARMS), seeds=3, optim=OptimSection.from_config(optim, "optim"),
                 train=TrainSection(steps=100), tuning=TuningSection(max_extend=1))  # fmt: skip
    cfg.validate()
    runs = _template(cfg)
    plan = Plan(tuple(cfg.entries()), (0, 1, 2), 100, runs, score_of("answer_loss"))
    # Each arm tunes the kind training most of its hidden matrices and borrows the others'
    # rates from the arm that trains every hidden matrix with that kind.
    needs = {e.arm.name: (e.arm.tuned, e.rates.lenders) for e in plan.entries}
    assert needs == {
        "muon": ("muon", ("adam",)),
        "adam_split": ("adam_split", ("adam",)),
        "adam": ("adam", ()),
        "sgd": ("sgd", ()),
        "muon_vo_ffn": ("muon", ("adam",)),
        "muon_qk": ("adam", ("muon",)),
    }
    trained = []

    def fake_run(job, context, on_steps):
        trained.append(job)
        lr = job.lrs[job.arm.tuned]
        if job.arm.name == "sgd":  # its larger rate diverges; every other run scores alike
            return _fake_result(job, [0.5] * 5, status="diverged" if lr == 0.3 else "complete")
        # Quality peaks at the grid's top point (0.02 for Muon, 3e-3 for Adam): the winner
        # sits at an end, so the sweep widens one point beyond it, which is worse.
        good = lr in (0.02, 3e-3)
        return _fake_result(job, [1.0, 1.0, 0.9, 0.8 if good else 0.5, 0.7 if good else 0.2])

    done = run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=fake_run)
    # Per arm: 3 points (2 declared, 1 widened) × 2 tuning seeds, then 3 evaluation seeds.
    assert len(trained) == len(set(trained)) == len(ARMS) * (3 * 2 + 3)
    assert done.best[("plain", "adam")] == {"adam": 3e-3}
    assert done.best[("plain", "adam_split")] == {"adam": 3e-3, "adam_split": 3e-3}
    assert done.best[("plain", "muon")] == {"muon": 0.02, "adam": 3e-3}
    assert done.best[("plain", "muon_qk")] == {"muon": 0.02, "adam": 3e-3}
    # SGD: 0.3 diverged (ranked last), 0.1 won at the low end, widened to 0.0333, which ties
    # with it: the point tried first keeps it, now interior.
    assert done.best[("plain", "sgd")] == {"sgd": 0.1}
    sgd = done.choices["plain", "sgd"]
    assert sgd.points == (0.1, 0.3, 0.03333) and sgd.means[1] is None and sgd.edge is None
    muon = done.choices["plain", "muon"]
    assert muon.points == (0.01, 0.02, 0.04) and muon.point == 0.02 and muon.edge is None
    for entry, jobs in done.seed_runs.items():  # fresh seeds at the chosen rates
        assert [(j.seed, j.steps, dict(j.lrs)) for j in jobs] == [
            (s, 100, done.best[entry]) for s in (0, 1, 2)
        ]
        tuning = {seed for _, seed, _ in done.states[entry].trials}
        assert tuning == {1000, 1001}
    # An arm that borrows a rate starts its trials only after its lender's last trial.
    for arm, (_, lenders) in needs.items():
        for lender in lenders:
            last = max(i for i, j in enumerate(trained) if j.arm.name == lender and j.seed >= 1000)
            first = min(i for i, j in enumerate(trained) if j.arm.name == arm)
            assert first > last, (arm, lender)
    rows = trial_rows(done)
    sgd_rows = [r for r in rows if r.arm == "sgd" and r.point == 0.3]
    assert [(r.score, r.point_score, r.status) for r in sgd_rows] == [(None, None, "diverged")] * 2
    qk = [r for r in rows if r.arm == "muon_qk" and r.chosen]
    assert {(r.swept, r.seed) for r in qk} == {("adam", 1000), ("adam", 1001)}
    record = records(qk[:1])[0]  # every kind of the plan in a column of its own
    assert (record["lr_adam"], record["lr_muon"], record["lr_sgd"]) == (3e-3, 0.02, None)
    assert record["score"] == pytest.approx(-(1 - np.mean([1.0, 1.0, 0.9, 0.8, 0.7])))
    choices = {r.arm: r for r in choice_rows(done)}
    assert {(r.trials, r.budget, r.tuning_seeds) for r in choices.values()} == {
        (6, 6, (1000, 1001))
    }
    assert choices["muon_qk"].chosen == 3e-3 and choices["muon_qk"].source == "this run"
    job = runs.spec(ARMS["muon_qk"], "plain", {"adam": 3e-3, "muon": 0.02}, 1, 100)
    assert job.key == "runs/plain/muon_qk/muon0.02-adam0.003-seed1-steps100"
    assert job.lrs == {"muon": 0.02, "adam": 3e-3}  # registry order


def _plan_with(finals: dict[str, list[list[float]]], steps=100) -> TrainedPlan:
    """A finished plan at set rates whose seed runs end with the given per-seed FTA vectors."""
    n_seeds = len(next(iter(finals.values())))
    cfg = Config(arms=list(finals), seeds=n_seeds, train=TrainSection(steps=steps),
                 optim=OptimSection.defaults("muon", "adam", "sgd"))  # fmt: skip
    plan = Plan(tuple(cfg.entries()), tuple(range(n_seeds)), steps, _template(cfg),
                lambda r: 0.0)  # fmt: skip
    results = {}
    for (_, arm), state in plan.status({}).items():
        for job, fta in zip(state.seed_runs, finals[arm], strict=True):
            results[job] = _fake_result(job, fta)
    return TrainedPlan(plan, results)


def _claims(plan: TrainedPlan, *args, **kwargs):
    """Every A3 claim of ``plan``, its curves read."""
    return claims(plan, PlanCurves.read(plan), *args, **kwargs)


def test_tables_gap_and_claim_rules_on_constructed_results():
    finals = {
        "muon": [[1, 1, 1, 1.0, 0.99], [1, 1, 1, 0.96, 0.93], [1, 1, 1, 0.98, 0.96]],
        "adam": [[1, 1, 1, 0.60, 0.31], [1, 1, 1, 0.50, 0.21], [1, 1, 1, 0.55, 0.26]],
        "sgd": [  # the rarest group follows Adam's seeds (paired: the claims pair by seed)
            [0.6, 0.6, 0.5, 0.2, 0.11],
            [0.6, 0.6, 0.5, 0.2, 0.02],
            [0.6, 0.6, 0.5, 0.2, 0.07],
        ],
        "muon_vo_ffn": [[1, 1, 1, 0.92, 0.91], [1, 1, 1, 0.92, 0.89], [1, 1, 1, 0.92, 0.91]],
        "muon_qk": [[1, 1, 1, 0.6, 0.31]] * 3,
    }
    plan = _plan_with(finals)
    curves = PlanCurves.read(plan)
    rows = records(tail_table(plan, curves, "plain", [0.5, 1.0], [2, 0], m=4))  # the CSV records
    assert [(r["step"], r["group"]) for r in rows] == [(50, 2), (50, 4), (100, 2), (100, 4)]
    # Numbers in numeric columns: Muon's rarest group 0.99, 0.93, 0.96 → 0.96 ± 0.03/√3.
    assert rows[-1]["Muon mean"] == pytest.approx(0.96) and rows[-1]["paper Muon"] == 0.976
    assert rows[-1]["Muon SE"] == pytest.approx(0.03 / np.sqrt(3), abs=1e-5)
    assert rows[-1]["Muon EM mean"] == pytest.approx(0.48)  # the fake EM is half the FTA
    assert rows[-1]["Muon EM SE"] == pytest.approx(0.015 / np.sqrt(3), abs=1e-5)
    assert rows[0]["Adam mean"] == pytest.approx(0.5) and rows[0]["Adam SE"] == 0.0  # halfway
    assert rows[0]["paper Adam"] == 0.298  # m − 2 at 50 %: the paper's group 13 at 5k steps
    gaps = {g.arm: g for g in gap_rows(plan, curves, "plain", head_groups=3)}
    assert gaps["adam"].gap_mean == pytest.approx(1 - 0.26)
    assert gaps["adam"].em_rarest_mean == pytest.approx(0.13)
    assert gaps["adam"].em_all == pytest.approx(0.5 * np.mean([0.782, 0.742, 0.762]), abs=1e-4)
    assert gaps["adam"].gap_std == pytest.approx(np.std([0.69, 0.79, 0.74], ddof=1), abs=1e-4)
    found = {c.id: c for c in claims(plan, curves, m=4, head_groups=3, chance=0.01)}
    verdicts = {cid: c.verdict for cid, c in found.items()}
    assert list(verdicts) == [c.id for c in claims_of("knowledge-qa")]  # the registry's, in order
    # Rarest group: Muon 0.96 ± 0.017, Adam 0.26 ± 0.029 (SE over 3 seeds).
    assert verdicts["A3.plain.tail_muon_vs_adam"] == "reproduced"
    assert found["A3.plain.tail_muon_vs_adam"].seeds == [0, 1, 2]
    assert "Muon 0.96 ± 0.017" in found["A3.plain.tail_muon_vs_adam"].ours
    assert verdicts["A3.plain.head_all_optimisers"] == "not reproduced"  # SGD head 0.567
    assert verdicts["A3.plain.muon_vo_ffn_like_muon"] == "reproduced"  # t = 0.643/0.70 = 0.92
    assert verdicts["A3.plain.muon_qk_like_adam"] == "reproduced"  # t = 0.05/0.70 = 0.07
    assert verdicts["A3.plain.sgd_below_adam"] == "reproduced"  # 0.07 vs 0.26
    # Both 0.5 at step 50: no difference, but the floored SE leaves the interval around 0, so a
    # direction claim stays undecided (not reproduced needs Muon below Adam beyond the interval).
    assert verdicts["A3.plain.midtail_halfway"] == "inconclusive"
    assert verdicts["A3.gated.tail_muon_vs_adam"] == "not measured"

    # t = 0.15/0.70 = 0.21 sits inside [−0.25, 0.25] as a point, but within 2 SE of the
    # three arms' noise (SE of the edge contrast 0.025 FTA) of the band's edge: undecided
    near = _plan_with({**finals, "muon_qk": [[1, 1, 1, 0.6, 0.41]] * 3})
    found = {c.id: c for c in _claims(near, m=4, head_groups=3, chance=0.01)}
    assert found["A3.plain.muon_qk_like_adam"].verdict == "inconclusive"

    no_gap = _plan_with({a: [[1, 1, 1, 0.5, 0.4]] * 3 for a in finals})
    found = {c.id: c for c in _claims(no_gap, m=4, head_groups=3, chance=0.01)}
    # The published gap is paper A's 160M model's: not measured in this model's setting.
    magnitude = found["A3.plain.tail_gap_magnitude"]
    assert magnitude.verdict == "not measured" and "in its setting" in magnitude.reason
    at_paper = {c.id: c for c in _claims(no_gap, 4, 3, 0.01, model=PAPER_A_QA)}
    # On the paper's model, Muon = Adam is short of the published gap beyond noise; the
    # direction alone stays undecided (refuting it needs Muon below Adam beyond the interval).
    assert at_paper["A3.plain.tail_gap_magnitude"].verdict == "not reproduced"
    assert found["A3.plain.tail_muon_vs_adam"].verdict == "inconclusive"
    hybrid = found["A3.plain.muon_vo_ffn_like_muon"]  # nothing to place it between
    assert hybrid.verdict == "inconclusive" and "Muon − Adam not resolved" in hybrid.reason

    # Two seeds: no arm comparison is decided.
    two = {c.id: c for c in _claims(_plan_with({a: v[:2] for a, v in finals.items()}), 4, 3, 0.01)}
    assert two["A3.plain.tail_muon_vs_adam"].verdict == "inconclusive"
    assert "seed" in two["A3.plain.tail_muon_vs_adam"].reason


def test_a_model_at_chance_is_inconclusive_on_every_claim_it_measures():
    chance = 0.05
    flat = _plan_with({a: [[chance] * 5] * 3 for a in ("muon", "adam", "sgd")})
    measured = [c for c in _claims(flat, 4, 3, chance) if c.verdict != "not measured"]
    assert measured and all(c.verdict == "inconclusive" for c in measured)
    assert all("chance" in c.reason for c in measured)


def test_mean_std_uses_the_sample_deviation_and_zero_for_one_seed():
    mean, std = mean_std([[0.2, 0.4], [0.4, 0.8]])
    np.testing.assert_allclose(mean, [0.3, 0.6])
    np.testing.assert_allclose(std, [np.std([0.2, 0.4], ddof=1), np.std([0.4, 0.8], ddof=1)])
    mean, std = mean_std([[0.5, 0.7]])
    np.testing.assert_allclose(std, [0.0, 0.0])


def test_run_directory_of_a_changed_setup_is_cleared(tmp_path, dataset):
    context, runs = _tiny_study(tmp_path, dataset)
    job = runs.spec(ARMS["adam"], "plain", {"adam": 1e-3}, 0, 8)
    path = context.path(job)
    path.mkdir(parents=True)
    (path / "spec.json").write_text(json.dumps({"digest": "something else"}))
    (path / "stale.txt").write_text("old")
    result = run_job(job, context)
    assert not (path / "stale.txt").exists() and (path / "result.json").is_file()
    stored = json.loads((path / "spec.json").read_text())
    assert stored["arm"]["name"] == "adam" and stored["digest"] == job.digest
    adam = {"lr": 1e-3, "betas": [0.8, 0.95], "eps": 1e-8, "weight_decay": 0.0}
    assert stored["hparams"] == {"adam": adam}  # the registry's defaults at the run's rate
    assert [e["step"] for e in result.evals] == [4, 8]
    assert RunResult.from_json(json.loads((path / "result.json").read_text())) == result
