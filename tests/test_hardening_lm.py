"""Issue 13 for the LM studies: bad configs refused before anything is written (one line, exit
2), divergence recorded as a result and reused, sweep runs that never share a folder, and
crafted resume checkpoints refused in one line naming the file."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from tailmem.claims.core import divergence_reason
from tailmem.config import load_config
from tailmem.errors import CheckpointError, ConfigError
from tailmem.experiments import ablation
from tailmem.lm import preflight as lm_preflight
from tailmem.lm.arms import Arm
from tailmem.lm.config import ModelSection, OptimSection, TrainSection
from tailmem.lm.entries import Entry, Rates
from tailmem.lm.plan import Plan, run_plan
from tailmem.lm.spec import Divergence, RunResult, diverged_runs
from tailmem.lm.subrun import RunContext, RunTemplate, run_job
from tailmem.lm.tuning import Sweep
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.runner import prepare, run_experiment
from tailmem.train import RandomWindows, TrainConfig, seed_everything, train
from tailmem.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def corpus_cache(tmp_path_factory):
    """One corpus cache for the ablation and spectra runs of this module (built once)."""
    return tmp_path_factory.mktemp("corpus-cache")


def strict_load(path):
    """json.loads that refuses NaN / Infinity, as a strict parser does."""

    def refuse(name):
        raise ValueError(f"{path} holds {name}")

    return json.loads(path.read_text(), parse_constant=refuse)


# ------------------------------------------------------------------ refused before writing


def test_parameter_count_on_meta_equals_the_built_model():
    for size, ffn, layers in (
        ("tiny", "plain", 3),
        ("cpu-small", "gated", 1),
        ("tiny", "gated", 5),
    ):
        model_cfg = ModelSection(size=size, n_layer=layers).build(300, ffn, 40)
        built = sum(p.numel() for p in GPT(model_cfg).parameters())
        assert lm_preflight.parameter_count(model_cfg) == built


def test_memory_check_refuses_exactly_what_exceeds_the_machine(monkeypatch):
    cfg = load_config(ablation.Config, "ablation", "smoke")
    model_cfg = cfg.model.build(lm_preflight.MIN_VOCAB, cfg.ffn, cfg.train.seq_len)
    need = lm_preflight.run_bytes(cfg, model_cfg)
    params = lm_preflight.parameter_count(model_cfg)
    rows_tokens = cfg.train.batch_size * cfg.train.seq_len
    per_token = lm_preflight.MIN_VOCAB + model_cfg.n_layer * model_cfg.d_model
    assert need == 4 * (3 * params + rows_tokens * per_token)
    need += lm_preflight.seed_list_bytes(cfg.seeds)  # the study's list of seeds
    monkeypatch.setattr("tailmem.resources.available_memory", lambda: need)
    ablation.preflight(cfg)  # fits exactly: never refused
    monkeypatch.setattr("tailmem.resources.available_memory", lambda: need - 1)
    with pytest.raises(ConfigError, match="needs about"):
        ablation.preflight(cfg)


def test_qa_seq_len_bound_is_below_every_item_and_the_corrected_config_passes(tmp_path):
    from tailmem.data.bios import build_dataset
    from tailmem.data.stream import QATrainStream
    from tailmem.experiments import knowledge_qa

    cfg = load_config(knowledge_qa.Config, "knowledge-qa", "smoke")
    with pytest.raises(ConfigError) as info:
        knowledge_qa.preflight(load_config(knowledge_qa.Config, "knowledge-qa", "smoke",
                                           ["train.seq_len=9"]))  # fmt: skip
    bound = int(str(info.value).split("expected at least ")[1].split()[0])
    knowledge_qa.preflight(load_config(knowledge_qa.Config, "knowledge-qa", "smoke",
                                       [f"train.seq_len={bound}"]))  # fmt: skip
    dataset = build_dataset(cfg.data, tmp_path / "data")
    with pytest.raises(ConfigError) as real:
        QATrainStream(dataset, 4, 1, 0, "answer")
    needed = int(str(real.value).split("at least ")[1].split()[0])
    assert needed >= bound  # the real data needs at least what preflight asks for
    QATrainStream(dataset, 4, needed, 0, "answer")
    prepare("knowledge-qa", "smoke", [f"train.seq_len={needed}"])


# ------------------------------------------------------------------ divergence is a result


def test_a_diverged_arm_is_recorded_listed_and_reused(tmp_path, capsys, corpus_cache):
    out = tmp_path / "run"
    overrides = ["workers=1", "arms=[full,adam]", "optim.muon.lr=1e30",
                 f"data.cache_dir={corpus_cache}"]  # fmt: skip
    run, status = run_experiment("ablation", "smoke", overrides, out=out)
    assert status == "ran" and run.is_complete
    results = strict_load(out / "results.json")
    claims = {c["id"]: c for c in strict_load(out / "claims.json")}
    [entry] = results["diverged"]
    assert (
        entry["arm"] == "full" and entry["reason"] == f"arm full diverged at step {entry['step']}"
    )
    # A claim that needs the diverged arm says so instead of "not run".
    full_vs_adam = claims["A1.full_beats_adam"]
    assert full_vs_adam["verdict"] == "not measured" and full_vs_adam["reason"] == entry["reason"]
    sub = out / entry["key"]
    stored = strict_load(sub / "result.json")
    marker = json.loads((sub / "diverged.json").read_text())
    assert stored["status"] == "diverged" and stored["diverged"]["step"] == marker["step"]
    assert stored["final_loss"] is None and stored["final_loss_status"] == "nan"
    assert (sub / "nan_diagnostics.json").is_file()
    rows = {row["arm"]: row for row in results["table"]}
    assert rows["full"]["status"] == "diverged" and rows["full"]["ours_val_loss"] is None
    assert rows["adam"]["status"] == "complete" and math.isfinite(rows["adam"]["ours_val_loss"])
    lines = capsys.readouterr().err
    assert f"full muon=1e+30 adam=0.005 seed=0 steps=24: diverged at step {marker['step']}" in lines
    # A resumed run reuses both runs: the diverged one is a result like the other.
    before = (sub / "result.json").read_bytes()
    (out / "COMPLETE").unlink()  # interrupted before it was marked complete
    _, status = run_experiment("ablation", "smoke", overrides, out=out)
    err = capsys.readouterr().err
    assert status == "resumed" and err.count("(reused)") == 2
    assert f"diverged at step {marker['step']} (reused)" in err
    assert (sub / "result.json").read_bytes() == before
    assert strict_load(out / "results.json")["diverged"] == results["diverged"]


TINY = GPTConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=32)
RUNS = RunTemplate({"plain": TINY}, TrainSection(), OptimSection.defaults("adam"), {})


def _fake_result(spec, status, score):
    """The result of ``spec``: complete, or diverged at update 4 (the score then stored in
    ``final_loss``, as a diverged run's last finite loss would be)."""
    ok = status == "complete"
    evals = [{"step": spec.steps, "score": score}] if ok else []
    return RunResult(
        digest=spec.digest, key=spec.key, arm=spec.arm.name, recipe=spec.arm.recipe,
        ffn=spec.ffn, lrs=spec.lrs, seed=spec.seed, steps=spec.steps, status=status,
        message="" if ok else "loss is nan at step 4", steps_done=spec.steps if ok else 3,
        final_loss=score, tokens=0, evals=evals, final=evals[-1] if ok else {},
        diverged=None if ok else Divergence(4, None, "loss is nan at step 4"), wall_seconds=0.0,
    )  # fmt: skip


def test_diverged_sweep_points_rank_last_whatever_their_score(tmp_path, capsys):
    arm = Arm("adam", "Adam", "adam:*")

    def fake_train(job, context, on_steps):
        lr = job.lrs["adam"]
        return _fake_result(job, "diverged" if lr == 3.0 else "complete", lr)

    # Scored by final_loss (higher is better here): 3.0 would win, but its trials diverged.
    sweep = Sweep((1.0, 2.0, 3.0), (1000, 1001), 10, "final_loss", max_extend=0)
    entry = Entry("plain", arm, Rates(swept=("adam",)), sweep)
    plan = Plan((entry,), (0,), 10, RUNS, lambda r: r.final_loss)
    trained = run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "",
                       train=fake_train)  # fmt: skip
    assert trained.best[("plain", "adam")] == {"adam": 2.0}
    choice = trained.choices["plain", "adam"]
    assert choice.means == (1.0, 2.0, None) and choice.edge is None
    diverged = diverged_runs(list(trained.results.values()))
    assert [d.reason for d in diverged] == ["arm adam diverged at step 4"] * 2  # both seeds
    assert {d.seed for d in diverged} == {1000, 1001}  # tuning trials, not seed runs
    stopped = next(r for r in trained.results.values() if r.seed == 1000 and r.is_diverged)
    assert diverged[0].to_json() == {  # its results.json entry, in the order written
        "arm": "adam", "ffn": "plain", "seed": 1000, "lrs": {"adam": 3.0}, "key": stopped.key,
        "step": 4, "reason": "arm adam diverged at step 4",
    }  # fmt: skip
    assert list(diverged[0].to_json()) == ["arm", "ffn", "seed", "lrs", "key", "step", "reason"]
    assert divergence_reason(diverged, ["full", "adam"]) == "arm adam diverged at step 4"
    assert divergence_reason(diverged, ["full", "qk"]) is None
    err = capsys.readouterr().err
    assert "plain/adam adam=3 seed=1000 steps=10: diverged at step 4 (0s)" in err
    assert trained.completed().seed_results(("plain", "adam"))[0].lrs == {"adam": 2.0}


def test_sweep_rates_beyond_four_digits_never_share_a_folder():
    arm = Arm("adam", "Adam", "adam:*")
    a = RUNS.spec(arm, "plain", {"adam": 1.00001e-3}, 0, 10)
    b = RUNS.spec(arm, "plain", {"adam": 1.00002e-3}, 0, 10)
    assert a.key != b.key and a.key.startswith("runs/plain/adam/adam0.001-")
    assert a.digest != b.digest and a != b
    assert RUNS.spec(arm, "plain", {"adam": 1e-3}, 0, 10).key == (
        "runs/plain/adam/adam0.001-seed0-steps10"
    )
    again = RUNS.spec(arm, "plain", {"adam": 1.00001e-3}, 0, 10)
    assert a.key == again.key and a == again and hash(a) == hash(again)  # stable


# ------------------------------------------------------------------ crafted checkpoints


def _tiny_run(run_dir, steps=4):
    seed_everything(0)
    model = GPT(ModelSection(size="tiny").build(48, "plain", 16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = RandomWindows(torch.arange(2000) % 48, 4, 16, seed=0)
    cfg = TrainConfig(steps=steps, ckpt_every=2, log_every=2, progress=False)
    return train(model, optimizer, data, cfg, run_dir), (model, optimizer, data, cfg)


def _craft(state):
    return {k: v for k, v in state.items() if k not in ("format", "version")}


CRAFTED = [
    (lambda s: {k: v for k, v in s.items() if k != "loop"}, "field 'loop' is no such field"),
    (lambda s: {k: v for k, v in s.items() if k != "rng"}, "field 'rng' is no such field"),
    (lambda s: {**s, "base_lrs": ["fast"]}, "field 'base_lrs' is ['fast']"),
    (lambda s: {**s, "step": -5}, "is at step -5; expected a step in 0..4"),
    (lambda s: {**s, "step": 99}, "is at step 99; expected a step in 0..4"),
    (lambda s: {**s, "loop": {"tokens": 1}}, "malformed RNG, data or loop state"),
    (
        lambda s: {**s, "model": {**s["model"], "embed.weight": torch.zeros(3, 3)}},
        "does not match the model",
    ),
    (
        lambda s: {**s, "optimizer": _bad_moment(s["optimizer"])},
        "optimiser state 'exp_avg' has shape (2,)",
    ),
]


def _bad_moment(opt_state):
    state = {i: dict(v) for i, v in opt_state["state"].items()}
    state[0]["exp_avg"] = torch.zeros(2)
    return {**opt_state, "state": state}


class _TinyMaterials:
    """Token windows of a fixed stream: the least data a sub-run trains on."""

    def __init__(self):
        self.vocab_size = 48
        self.identity = {"data": "windows of arange(2000) % 48"}

    def batches(self, seed, batch):
        return RandomWindows(torch.arange(2000) % 48, batch.batch_size, batch.seq_len, seed=seed)

    def hooks(self, model_cfg, ctx):
        return []


class _TinyData:
    def load(self, ctx):
        return _TinyMaterials()


def _tiny_runs(root):
    """The context and the spec template of one-layer runs on :class:`_TinyData`."""
    model = ModelSection(size="tiny", n_layer=1, n_head=2, d_model=16, d_ff=32)
    train_section = TrainSection(steps=8, batch_size=4, seq_len=16, warmup_steps=0, eval_every=4,
                                 log_every=4, ckpt_every=4, schedule="constant")  # fmt: skip
    models = {"plain": model.build(48, "plain", 16)}
    template = RunTemplate(models, train_section, OptimSection.defaults("adam"),
                           _TinyMaterials().identity)  # fmt: skip
    return RunContext(str(root), _TinyData(), show_progress=False), template


def test_a_checkpoint_copied_from_another_learning_rate_is_refused_not_resumed(tmp_path):
    """Same study, same arm, seed and length; only the learning rate differs. The copy used to
    be resumed: B reported A's weights (and trained on at A's learning rate) as its own."""
    arm = Arm("adam", "Adam", "adam:*")
    context, template = _tiny_runs(tmp_path)
    a = template.spec(arm, "plain", {"adam": 1e-3}, 0, 8)
    b = template.spec(arm, "plain", {"adam": 3e-3}, 0, 8)
    result_a = run_job(a, context)
    assert result_a.ok
    copied = context.path(b) / "ckpt"
    shutil.copytree(context.path(a) / "ckpt", copied)
    with pytest.raises(CheckpointError) as info:
        run_job(b, context)
    message = str(info.value)
    assert "\n" not in message and str(copied / "step_000008.pt") in message
    assert f"written by run '{a.key} spec " in message and f"expected run '{b.key} spec " in message
    assert not (context.path(b) / "result.json").exists()
    shutil.rmtree(copied)  # what the message says to do: B then trains from scratch
    result_b = run_job(b, context)
    assert result_b.ok and result_b.final_loss != result_a.final_loss


@pytest.mark.parametrize(("change", "fragment"), CRAFTED)
def test_crafted_resume_checkpoints_are_one_line_naming_the_file(tmp_path, change, fragment):
    result, (model, optimizer, data, cfg) = _tiny_run(tmp_path / "run")
    assert result.ok
    path = latest_checkpoint(tmp_path / "run" / "ckpt")
    save_checkpoint(path, change(_craft(load_checkpoint(path))))
    with pytest.raises(CheckpointError) as info:
        train(model, optimizer, data, cfg, tmp_path / "run")
    message = str(info.value)
    assert str(path) in message and fragment in message and "\n" not in message


@pytest.mark.parametrize("arms", ["[muon,adam]", "[muon]"])
def test_knowledge_qa_completes_when_an_arm_diverges_before_its_first_evaluation(tmp_path, arms):
    out = tmp_path / "run"
    # Adam's rate one number: the muon arm alone then borrows nothing (a grid would need the
    # adam arm to choose it).
    overrides = ["workers=1", f"arms={arms}", "optim.muon.lr=[1e30]", "optim.adam.lr=3e-3",
                 "train.steps=8"]  # fmt: skip
    run, status = run_experiment("knowledge-qa", "smoke", overrides, out=out)
    assert status == "ran" and run.is_complete
    results = strict_load(out / "results.json")
    assert [(d["arm"], d["reason"]) for d in results["diverged"]] == [
        ("muon", "arm muon diverged at step 2")
    ]
    claims = strict_load(out / "claims.json")
    assert claims  # written, strict
    assert (out / "tail_table_plain.csv").exists() == (arms == "[muon,adam]")


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"rope_base": "abc"}, "GPTConfig.rope_base must be a number, got 'abc'"),
        ({"rope_base": math.nan}, "GPTConfig.rope_base must be finite, got nan"),
        ({"rope_base": math.inf}, "GPTConfig.rope_base must be finite, got inf"),
        ({"init_std": math.nan}, "GPTConfig.init_std must be finite"),
        ({"norm_eps": 0.0}, "GPTConfig.norm_eps must be > 0"),
        ({"n_head": True}, "GPTConfig.n_head must be a positive integer, got True"),
        ({"n_head": 0}, "GPTConfig.n_head must be a positive integer, got 0"),
        ({"qk_norm": "maybe"}, "GPTConfig.qk_norm and tie_weights must be true or false"),
    ],
)
def test_gpt_config_refuses_wrong_types_and_nonfinite_values(override, fragment):
    from tailmem.models.gpt import gpt_config

    with pytest.raises(ConfigError) as info:
        gpt_config("tiny", vocab_size=64, **override)
    assert fragment in str(info.value)


def test_spectra_completes_when_every_muon_run_diverges(tmp_path, corpus_cache):
    out = tmp_path / "run"
    overrides = ["workers=1", "seeds=1", "train.steps=8", "optim.muon.lr=1e30",
                 f"data.cache_dir={corpus_cache}"]  # fmt: skip
    run, status = run_experiment("spectra", "smoke", overrides, out=out)
    assert status == "ran" and run.is_complete
    results = strict_load(out / "results.json")
    assert [d["arm"] for d in results["diverged"]] == ["muon"]
    assert results["status"] == {"muon": ["diverged"], "adam": ["complete"]}
    strict_load(out / "claims.json")


def test_an_older_failed_result_is_trained_again_not_reused(tmp_path):
    from tailmem.lm import subrun

    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "spec.json").write_text(json.dumps({"digest": "d1"}))
    spec = RUNS.spec(Arm("adam", "Adam", "adam:*"), "plain", {"adam": 1e-3}, 0, 10)
    whole = {s: _fake_result(spec, s, 1.0).to_json() for s in ("complete", "diverged")}
    cases = [({**whole["complete"], "status": "failed"}, False), ([1, 2], False),
             ({"status": "complete"}, False),  # not a whole result: trained again
             (whole["diverged"], True), (whole["complete"], True)]  # fmt: skip
    for stored, reused in cases:
        (sub / "result.json").write_text(json.dumps(stored))
        assert (subrun._reusable(sub, "d1") == stored) is reused
