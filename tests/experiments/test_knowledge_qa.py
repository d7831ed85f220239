"""knowledge-qa: the smoke preset end to end (two workers), resume, bad configs, and the pieces it
is built from (fast loss/eval path against the model's own forward, FTA evaluator against the
data set's own grouping, run scheduling, tables and claim rules on constructed results)."""

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
from tailmem.claims.registry import claims_of, read_claims
from tailmem.config import load_config
from tailmem.data.bios import BiosConfig, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.errors import ConfigError
from tailmem.experiments import get_experiment
from tailmem.experiments.knowledge_qa import Config
from tailmem.experiments.knowledge_qa.arms import ARMS
from tailmem.experiments.knowledge_qa.fta import (
    FTAEvaluator,
    QABatches,
    QAData,
    answer_loss_sum,
    describe_fta,
    logits_at,
    sample_questions,
)
from tailmem.experiments.knowledge_qa.tables import (
    FAILED_SCORE,
    claims,
    gap_rows,
    mean_std,
    score,
    sweep_rows,
    tail_table,
)
from tailmem.lm.config import ModelSection, OptimSection, TrainSection
from tailmem.lm.plan import Plan, run_plan
from tailmem.lm.spec import Divergence, RunResult
from tailmem.lm.subrun import RunContext, RunTemplate, run_job, template
from tailmem.models.gpt import GPT, GPTConfig, count_params
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
    assert status == "ran" and run.is_complete
    for name in (
        "results.json",
        "claims.json",
        "report.json",
        "lr_sweep.csv",
        "head_tail_gap.csv",
        "tail_table_long.csv",
        "tail_table_plain.csv",
    ):
        assert run.file(name).is_file(), name
    for stem in ("fta_by_group_plain", "fta_final_plain", "lr_sweep_plain", "lag_ratio_plain"):
        for ext in ("png", "svg"):
            assert run.file(f"{stem}.{ext}").stat().st_size > 1000
    layout = run.read_json("report.json")
    for item in layout["figures"] + layout["tables"]:
        assert run.file(item["file"]).is_file()
    assert "Rarest group" in layout["summary"]
    # The unpublished choices the run made, as qa-sensitivity names them.
    assert (
        "loss on answer tokens, answers as BPE tokens, packed items attending to earlier"
        in (layout["summary"])
    )
    assert strict_json(run.path) == []  # every JSON (progress, metrics, results) is strict
    # The gap measures lead the report; every explained column is a header of its table.
    assert [f["file"] for f in layout["figures"][:2]] == [
        "fta_vs_exposures_plain.png",
        "lag_ratio_plain.png",
    ]
    assert layout["summary"].index("Exposure-lag ratio") < layout["summary"].index("Rarest")
    for item in layout["tables"]:
        header = next(csv.reader(run.file(item["file"]).open()))
        assert set(item.get("columns", {})) <= set(header), item["file"]
    assert layout["tables"][0]["columns"] and "Muon EM" in layout["tables"][2]["columns"]

    results = run.read_json("results.json")
    m, steps_total, every = cfg.data.m, cfg.train.steps, cfg.train.eval_every
    assert len(results["runs"]) == len(cfg.arms) * cfg.seeds
    for result in results["runs"]:
        assert result["status"] == "complete"
        steps = [e["step"] for e in result["evals"]]
        assert steps == list(range(0, steps_total + 1, every))  # step 0: the initialised model
        for e in result["evals"]:
            assert len(e["fta"]) == len(e["em"]) == m + 1
            assert all(0.0 <= v <= 1.0 for v in e["fta"]) and 0.0 <= e["fta_all"] <= 1.0
            assert all(em <= fta for em, fta in zip(e["em"], e["fta"], strict=True))
            assert e["em_all"] <= e["fta_all"]
        # Each arm's first-seed run keeps its final checkpoint (for `tailmem diagnose`).
        assert [p.name for p in run.file(result["key"]).glob("ckpt/*")] == ["step_000040.pt"]
    assert len(list(run.path.glob("runs/*/*/*/ckpt"))) == len(cfg.arms)  # not the losing LR's
    assert 0 < results["chance_fta"] < 1
    measures = results["gap_measures"]["plain"]
    (pair,) = measures["pairs"]
    assert (pair["lead"], pair["lag"], pair["status"]) == ("muon", "adam", "measured")
    assert pair["steps"] == list(range(0, steps_total + 1, every))
    assert sorted(measures["paper"]) == ["arxiv-v2", "iclr"]
    n_rows = (m + 2) * 3  # groups and pooled, three taus
    assert len(pair["lag_ratio"]) == n_rows
    lag_rows = _read_csv(run.file("lag_ratio_plain.csv"))
    assert [r["source"] for r in lag_rows].count("tailmem") == n_rows
    summary = _read_csv(run.file("lag_ratio_summary_plain.csv"))
    assert [r["group"] for r in summary[: m + 2]] == [*map(str, range(m + 1)), "pooled"]
    (ours, *_) = _read_csv(run.file("peak_gap_plain.csv"))
    assert float(ours["peak_gap"]) == pytest.approx(pair["peak_gap"]["overall"]["gap"], abs=1e-4)
    (adam_run,) = [r for r in results["runs"] if r["arm"] == "adam"]
    final = results["final_by_group"]["plain"]["adam"]
    assert final["em"] == pytest.approx(adam_run["evals"][-1]["em"], abs=1e-5)

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
    (adam,) = [r for r in results["runs"] if r["arm"] == "adam"]
    assert float(table[-1]["Adam mean"]) == pytest.approx(adam["evals"][-1]["fta"][m], abs=1e-5)

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

    sweep = _read_csv(run.file("lr_sweep.csv"))
    assert len(sweep) == len(cfg.optim["muon"].grid) + len(cfg.optim["adam"].grid)
    # An lr column per kind the arms use (the preset's SGD rate reaches no run: no column).
    assert [c for c in sweep[0] if c.startswith("lr_")] == ["lr_muon", "lr_adam"]
    chosen = [r for r in sweep if r["chosen"] == "True"]
    assert sorted(r["arm"] for r in chosen) == ["adam", "muon"]
    for arm in ("adam", "muon"):
        mine = [float(r["fta_all"]) for r in sweep if r["arm"] == arm]
        best = next(float(r["fta_all"]) for r in chosen if r["arm"] == arm)
        assert best == max(mine)


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
        ("sweep.adam=[1e-3]", "unknown config field 'sweep.adam'"),  # the grid is optim.adam.lr
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
    module = get_experiment("knowledge-qa")
    assert module.NAME == "knowledge-qa"
    cpu = load_config(Config, "knowledge-qa", "cpu")
    assert sorted(cpu.arms) == sorted(ARMS) and cpu.seeds >= 3 and cpu.ffn == "both"
    assert cpu.workers == 2 and cpu.train.threads == 1
    small = cpu.model.build(1578, "plain", cpu.train.seq_len)  # the map's choice: heads of 64
    assert (small.d_model, small.n_layer, small.head_dim) == (256, 2, 64)
    paper = load_config(Config, "knowledge-qa", "paper")
    assert paper.data.m == 15 and paper.train.steps == 10_000 and paper.ffn == "both"
    assert sorted(paper.arms) == sorted(ARMS)
    # The 2k-step sweep runs warm up for the same 2% as the 10k-step seed runs.
    assert paper.train.loop_config(paper.sweep_steps, seed=0).warmup_steps == 40
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
    evals = [
        {
            "step": s,
            "fta": [v * s / job.steps for v in fta_final],
            "fta_all": float(np.mean(fta_final)) * s / job.steps,
            "em": [0.5 * v * s / job.steps for v in fta_final],
            "em_all": 0.5 * float(np.mean(fta_final)) * s / job.steps,
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


def test_plan_orders_sweeps_by_dependency_and_reuses_the_winning_sweep_run(tmp_path):
    optim = {"muon": {"lr": [0.01, 0.02]}, "adam": {"lr": [1e-3, 3e-3]}, "sgd": {"lr": [0.1]}}
    cfg = Config(arms=list(ARMS), seeds=3, optim=OptimSection.from_config(optim, "optim"),
                 train=TrainSection(steps=100))  # fmt: skip
    runs = _template(cfg)
    plan = Plan(cfg.entries(), lambda e, p, r: score(r), [0, 1, 2], 100, 0, 100, runs)
    # Each arm tunes the kind training most of its hidden matrices and borrows the others'
    # rates from the arm that trains every hidden matrix with that kind.
    needs = {e.arm.name: (e.arm.tuned, e.needs) for e in plan.entries}
    assert needs == {
        "muon": ("muon", ("adam",)),
        "adam": ("adam", ()),
        "sgd": ("sgd", ()),
        "muon_vo_ffn": ("muon", ("adam",)),
        "muon_qk": ("adam", ("muon",)),
    }
    trained = []

    def fake_run(job, context, on_steps):
        trained.append(job)
        lr = job.lrs[job.arm.tuned]
        if job.arm.name == "sgd":
            return _fake_result(job, [0.5] * 5, status="diverged")
        # Quality peaks at the middle of each grid's scale: 0.02 for Muon, 3e-3 for Adam.
        good = lr in (0.02, 3e-3)
        return _fake_result(job, [1.0, 1.0, 0.9, 0.8 if good else 0.5, 0.7 if good else 0.2])

    run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "", train=fake_run)
    assert len(trained) == len(set(trained)) == plan.total_runs()
    assert plan.best[("plain", "adam")] == {"adam": 3e-3}
    assert plan.best[("plain", "muon")] == {"muon": 0.02, "adam": 3e-3}
    assert plan.best[("plain", "muon_qk")] == {"muon": 0.02, "adam": 3e-3}
    assert plan.best[("plain", "sgd")] == {"sgd": 0.1}  # the only grid point, though diverged
    order = [(j.arm.name, j.seed) for j in trained]
    # Arms that borrow an LR start their sweep only after the arm they borrow from is tuned.
    for arm in ARMS:
        for dep in needs[arm][1]:
            dep_sweep_done = max(
                i for i, j in enumerate(trained) if j.arm.name == dep and j.seed == 0
            )
            first = min(i for i, j in enumerate(trained) if j.arm.name == arm)
            assert first > dep_sweep_done, (arm, dep, order)
    # The winning sweep run is seed 0's run: 2 more seeds per arm, not 3.
    assert sum(j.arm.name == "adam" for j in trained) == len(cfg.optim["adam"].grid) + 2
    rows = sweep_rows(plan)
    assert [r["fta_all"] for r in rows if r["arm"] == "sgd"] == [FAILED_SCORE]
    assert [r["status"] for r in rows if r["arm"] == "sgd"] == ["diverged"]
    (qk,) = [r for r in rows if r["arm"] == "muon_qk" and r["chosen"]]
    assert (qk["swept"], qk["lr_adam"], qk["lr_muon"], qk["lr_sgd"]) == ("adam", 3e-3, 0.02, None)
    job = runs.spec(ARMS["muon_qk"], "plain", {"adam": 3e-3, "muon": 0.02}, 1, 100)
    assert job.key == "runs/plain/muon_qk/muon0.02-adam0.003-seed1-steps100"
    assert job.lrs == {"muon": 0.02, "adam": 3e-3}  # registry order


def _plan_with(finals: dict[str, list[list[float]]], steps=100):
    """A finished plan whose seed runs end with the given per-seed FTA vectors."""
    n_seeds = len(next(iter(finals.values())))
    cfg = Config(arms=list(finals), seeds=n_seeds, train=TrainSection(steps=steps),
                 optim=OptimSection.defaults("muon", "adam", "sgd"))  # fmt: skip
    runs = _template(cfg)
    plan = Plan(cfg.entries(), lambda e, p, r: 0, list(range(n_seeds)), steps, 0, steps, runs)
    for arm, per_seed in finals.items():
        jobs = [
            runs.spec(ARMS[arm], "plain", {k: 0.01 for k in ARMS[arm].kinds}, s, steps)
            for s in range(len(per_seed))
        ]
        plan.seed_runs[("plain", arm)] = jobs
        for job, fta in zip(jobs, per_seed, strict=True):
            plan.results[job] = _fake_result(job, fta)
    return plan


def test_tables_gap_and_claim_rules_on_constructed_results():
    finals = {
        "muon": [[1, 1, 1, 1.0, 0.99], [1, 1, 1, 0.96, 0.93], [1, 1, 1, 0.98, 0.96]],
        "adam": [[1, 1, 1, 0.60, 0.31], [1, 1, 1, 0.50, 0.21], [1, 1, 1, 0.55, 0.26]],
        "sgd": [
            [0.6, 0.6, 0.5, 0.2, 0.11],
            [0.6, 0.6, 0.5, 0.2, 0.13],
            [0.6, 0.6, 0.5, 0.2, 0.12],
        ],
        "muon_vo_ffn": [[1, 1, 1, 0.92, 0.91], [1, 1, 1, 0.92, 0.89], [1, 1, 1, 0.92, 0.91]],
        "muon_qk": [[1, 1, 1, 0.6, 0.31]] * 3,
    }
    plan = _plan_with(finals)
    rows = tail_table(plan, "plain", [0.5, 1.0], [2, 0], m=4)
    assert [(r["step"], r["group"]) for r in rows] == [(50, 2), (50, 4), (100, 2), (100, 4)]
    # Numbers in numeric columns: Muon's rarest group 0.99, 0.93, 0.96 → 0.96 ± 0.03/√3.
    assert rows[-1]["Muon mean"] == pytest.approx(0.96) and rows[-1]["paper Muon"] == 0.976
    assert rows[-1]["Muon SE"] == pytest.approx(0.03 / np.sqrt(3), abs=1e-5)
    assert rows[-1]["Muon EM mean"] == pytest.approx(0.48)  # the fake EM is half the FTA
    assert rows[-1]["Muon EM SE"] == pytest.approx(0.015 / np.sqrt(3), abs=1e-5)
    assert rows[0]["Adam mean"] == pytest.approx(0.5) and rows[0]["Adam SE"] == 0.0  # halfway
    assert rows[0]["paper Adam"] == 0.298  # m − 2 at 50 %: the paper's group 13 at 5k steps
    gaps = {g["arm"]: g for g in gap_rows(plan, "plain", head_groups=3)}
    assert gaps["adam"]["gap_mean"] == pytest.approx(1 - 0.26)
    assert gaps["adam"]["em_rarest_mean"] == pytest.approx(0.13)
    assert gaps["adam"]["em_all"] == pytest.approx(0.5 * np.mean([0.782, 0.742, 0.762]), abs=1e-4)
    assert gaps["adam"]["gap_std"] == pytest.approx(np.std([0.69, 0.79, 0.74], ddof=1), abs=1e-4)
    found = {c.id: c for c in claims(plan, m=4, head_groups=3, chance=0.01)}
    verdicts = {cid: c.verdict for cid, c in found.items()}
    assert list(verdicts) == [c.id for c in claims_of("knowledge-qa")]  # the registry's, in order
    # Rarest group: Muon 0.96 ± 0.017, Adam 0.26 ± 0.029 (SE over 3 seeds).
    assert verdicts["A3.plain.tail_muon_vs_adam"] == "reproduced"
    assert found["A3.plain.tail_muon_vs_adam"].seeds == [0, 1, 2]
    assert "Muon 0.96 ± 0.017" in found["A3.plain.tail_muon_vs_adam"].ours
    assert verdicts["A3.plain.head_all_optimisers"] == "not reproduced"  # SGD head 0.567
    assert verdicts["A3.plain.muon_vo_ffn_like_muon"] == "reproduced"  # t = 0.643/0.70 = 0.92
    assert verdicts["A3.plain.muon_qk_like_adam"] == "reproduced"  # t = 0.05/0.70 = 0.07
    assert verdicts["A3.plain.sgd_below_adam"] == "reproduced"  # 0.12 vs 0.26
    assert verdicts["A3.plain.midtail_halfway"] == "not reproduced"  # both 0.5 at step 50
    assert verdicts["A3.gated.tail_muon_vs_adam"] == "not measured"

    # t = 0.15/0.70 = 0.21 sits inside [−0.25, 0.25] as a point, but within 2 SE of the
    # three arms' noise (SE of the edge contrast 0.025 FTA) of the band's edge: undecided
    near = _plan_with({**finals, "muon_qk": [[1, 1, 1, 0.6, 0.41]] * 3})
    found = {c.id: c for c in claims(near, m=4, head_groups=3, chance=0.01)}
    assert found["A3.plain.muon_qk_like_adam"].verdict == "inconclusive"

    no_gap = _plan_with({a: [[1, 1, 1, 0.5, 0.4]] * 3 for a in finals})
    found = {c.id: c for c in claims(no_gap, m=4, head_groups=3, chance=0.01)}
    assert found["A3.plain.tail_muon_vs_adam"].verdict == "not reproduced"
    hybrid = found["A3.plain.muon_vo_ffn_like_muon"]  # nothing to place it between
    assert hybrid.verdict == "inconclusive" and "Muon − Adam not resolved" in hybrid.reason

    # Two seeds: no arm comparison is decided.
    two = {c.id: c for c in claims(_plan_with({a: v[:2] for a, v in finals.items()}), 4, 3, 0.01)}
    assert two["A3.plain.tail_muon_vs_adam"].verdict == "inconclusive"
    assert "seed" in two["A3.plain.tail_muon_vs_adam"].reason


def test_a_model_at_chance_is_inconclusive_on_every_claim_it_measures():
    chance = 0.05
    flat = _plan_with({a: [[chance] * 5] * 3 for a in ("muon", "adam", "sgd")})
    measured = [c for c in claims(flat, 4, 3, chance) if c.verdict != "not measured"]
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
