"""Issue 42 (reliability round five), by class: a resume verifies what it resumes (1); a name
the user chooses never becomes a path outside its folder or two runs' one folder (2); a
non-finite rate is refused before anything is written and a non-finite evaluation is a
divergence (3); what can be checked before the first step is (4); hostile YAML is refused
before it is built (5); no setting is silently dropped (6); the smaller ones (8)."""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
import multiprocessing
import shutil
import sys
from pathlib import Path
from typing import ClassVar

import pytest
import torch

from tailmem import api
from tailmem.cli import main
from tailmem.config import as_overrides, load_config, parse_override
from tailmem.errors import CheckpointError, ConfigError, DataError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa import grid
from tailmem.lm import store
from tailmem.lm.arms import Arm, select_arms
from tailmem.lm.config import ModelSection, OptimSection, TrainSection
from tailmem.lm.entries import Entry, Rates
from tailmem.lm.plan import Plan, run_plan, run_plans
from tailmem.lm.spec import RunResult, eval_divergence, read_results
from tailmem.lm.subrun import RunContext, RunTemplate, run_job
from tailmem.lm.sweeps import FAILED, choice_rows, trial_rows
from tailmem.lm.tuning import Sweep
from tailmem.models.gpt import GPT, gpt_config
from tailmem.names import MAX_FOLDER, MAX_NAME, folder_name
from tailmem.progress import tracking
from tailmem.provenance import config_digest, run_digest
from tailmem.runner import run_experiment
from tailmem.train import RandomWindows, TrainConfig, seed_everything, train
from tailmem.train.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
_names = itertools.count()


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tailmem: error: "), err
    return err[0]


def refused(args: list[str], capsys, out: Path | None = None) -> str:
    """Run the CLI: exit 2, one error line, and ``out`` never made."""
    assert main(args) == 2
    line = one_line(capsys)
    if out is not None:
        assert not out.exists(), f"{out} was written before the refusal"
    return line


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write modules of the user's into the working folder ``tmp_path``; returns a writer
    (name, source) → import name. ``sys.path`` and ``sys.modules`` are restored."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    written: list[str] = []

    def write(source: str, name: str | None = None) -> str:
        name = name or f"user_opt_r5_{next(_names)}"
        (tmp_path / f"{name}.py").write_text(source)
        written.append(name)
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


# ------------------------------------------------- class 1: a resume verifies what it resumes

HELPER = "SCALE = {scale}\n"
OPT = """
import torch
from {helper} import SCALE

class Opt(torch.optim.Optimizer):
    def __init__(self, params, lr):
        super().__init__(params, {{"lr": lr}})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad.sign(), alpha=-group["lr"] * SCALE)
"""


def _interrupted_run(run_dir: Path, data_seed: int = 0, steps: int = 8):
    """A tiny GPT trained ``steps`` steps with a checkpoint every 2, stopped after update 5
    (as a kill would): its checkpoint of step 4 is what a rerun resumes."""
    seed_everything(0)
    model = GPT(gpt_config("tiny", vocab_size=48, max_seq_len=16, n_layer=1, d_model=16,
                           n_head=2, d_ff=32))  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = RandomWindows(torch.arange(2000) % 48, 4, 16, seed=data_seed)
    cfg = TrainConfig(steps=steps, ckpt_every=2, log_every=2, progress=False, keep_ckpts=None)

    def stop(_: int) -> None:
        if len(list((run_dir / "ckpt").glob("step_*.pt"))) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(model, optimizer, data, cfg, run_dir, on_step=stop)
    return model, optimizer, cfg


def _resume(run_dir: Path, data_seed: int = 0):
    model, optimizer, cfg = _interrupted_args()
    data = RandomWindows(torch.arange(2000) % 48, 4, 16, seed=data_seed)
    return train(model, optimizer, data, cfg, run_dir)


def _interrupted_args():
    model = GPT(gpt_config("tiny", vocab_size=48, max_seq_len=16, n_layer=1, d_model=16,
                           n_head=2, d_ff=32))  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cfg = TrainConfig(steps=8, ckpt_every=2, log_every=2, progress=False, keep_ckpts=None)
    return model, optimizer, cfg


def _edit(path: Path, change) -> None:
    state = load_checkpoint(path)
    save_checkpoint(
        path, change({k: v for k, v in state.items() if k not in ("format", "version")})
    )


def _renamed(ckpt: Path) -> None:
    """The checkpoint of step 4 copied under the name of step 6."""
    shutil.copy(checkpoint_path(ckpt, 4), checkpoint_path(ckpt, 6))


def _renamed_and_edited(ckpt: Path) -> None:
    """The checkpoint of step 4 renamed step 2 with its step field edited to match."""
    checkpoint_path(ckpt, 2).unlink()
    checkpoint_path(ckpt, 4).rename(checkpoint_path(ckpt, 2))
    _edit(checkpoint_path(ckpt, 2), lambda s: {**s, "step": 2})


def _other_rng(ckpt: Path) -> None:
    def change(state):
        rng = dict(state["rng"][0])
        rng["torch"] = torch.Generator().manual_seed(123).get_state()
        return {**state, "rng": [rng]}

    _edit(checkpoint_path(ckpt, 4), change)


def _unverifiable(ckpt: Path) -> None:
    _edit(checkpoint_path(ckpt, 4), lambda s: {k: v for k, v in s.items() if k != "verify"})


@pytest.mark.parametrize(
    ("tamper", "fragment"),
    [
        (_renamed, "holds step 4, not the step 6 its name says"),
        (_renamed_and_edited, "holds step 2 but was written at step 4"),
        (_other_rng, "its RNG states are not those it was written with"),
        (_unverifiable, "records no step, RNG and data position to verify"),
    ],
    ids=["renamed", "renamed-and-edited", "other-rng", "older"],
)
def test_a_checkpoint_is_resumed_only_as_what_it_holds(tamper, fragment, tmp_path):
    run_dir = tmp_path / "run"
    _interrupted_run(run_dir)
    tamper(run_dir / "ckpt")
    with pytest.raises(CheckpointError) as info:
        _resume(run_dir)
    message = str(info.value)
    assert "\n" not in message and fragment in message and str(run_dir / "ckpt") in message


def test_a_resume_verifies_the_data_position_and_an_honest_resume_is_exact(tmp_path):
    """Resumed on other data, the batch of step 4 is not the one the checkpoint was written
    before: refused. Resumed on the same data, the run ends exactly as an uninterrupted one."""
    _interrupted_run(tmp_path / "run")
    with pytest.raises(CheckpointError, match=r"the batch of step 4 is not the one it was"):
        _resume(tmp_path / "run", data_seed=1)
    resumed = _resume(tmp_path / "run")
    assert resumed.ok and resumed.resumed_from == 4
    seed_everything(0)
    model, optimizer, cfg = _interrupted_args()
    data = RandomWindows(torch.arange(2000) % 48, 4, 16, seed=0)
    whole = train(model, optimizer, data, cfg, tmp_path / "whole")
    assert resumed.loss == whole.loss


def _qa_run(out: Path, module: str, *extra: str) -> list[str]:
    return ["run", "knowledge-qa", "--preset", "smoke", "--out", str(out), "workers=1",
            "train.steps=2", "train.eval_every=2", "arms=[muon, 'mine:*']",
            f"optim.mine.factory={module}:Opt", "optim.mine.lr=0.01", *extra]  # fmt: skip


def test_a_run_whose_user_code_changed_is_not_resumed_nor_called_complete(
    user_module, tmp_path, capsys
):
    """The digest of every file of the user's code the run imports — the factory's module and
    the helper module it imports — is recorded; when either changed, the rerun (of a complete
    run, or of a killed one) refuses in one line naming the factory; --force trains again."""
    helper = user_module(HELPER.format(scale=1.0), name=f"helper_r5_{next(_names)}")
    module = user_module(OPT.format(helper=helper))
    out = tmp_path / "run"
    assert main(_qa_run(out, module)) == 0
    record = (out / "config.yaml").read_text()
    assert f"user_code:\n  {module}:Opt: " in record
    # the spec of each of its sub-runs holds the digest too
    specs = [json.loads(p.read_text()) for p in out.glob("runs/*/mine/*/spec.json")]
    assert specs and all(s["hparams"]["mine"]["code"] in record for s in specs)
    # every sub-run the run reports is on disk
    results = read_results(out)
    assert results and all((out / key / "result.json").is_file() for key in results)
    capsys.readouterr()
    assert main(_qa_run(out, module)) == 0  # unchanged: found complete
    assert "already complete with this config" in capsys.readouterr().out
    (tmp_path / f"{helper}.py").write_text(HELPER.format(scale=2.0))  # the helper changes
    line = refused(_qa_run(out, module), capsys)
    assert f"the code of {module}:Opt has changed since this run was trained" in line
    (out / "COMPLETE").unlink()  # a killed run: resuming it is refused alike
    assert f"{module}:Opt has changed" in refused(_qa_run(out, module), capsys)
    assert main([*_qa_run(out, module), "--force"]) == 0


# ------------------------------------------------- class 2: a user's name becomes a path


def _config_file(tmp_path: Path, optim: dict, arms: list[str]) -> Path:
    """The smoke knowledge-QA config with ``optim`` sections added and ``arms`` set."""
    path = tmp_path / "mine.yaml"
    base = load_config(kqa.Config, "knowledge-qa", "smoke")
    text = json.dumps({"optim": {**base.optim.to_config(), **optim}, "arms": arms})
    path.write_text(text)  # JSON is YAML
    return path


@pytest.mark.parametrize(
    ("names", "fragment"),
    [
        (["../../evil"], "optim.../../evil: got '../../evil'; expected a name of at most"),
        (["a/b"], "optim.a/b: got 'a/b'"),
        ([".hidden"], "optim..hidden: got '.hidden'"),
        (["x" * (MAX_NAME + 1)], f"expected a name of at most {MAX_NAME}"),
        (["Muon"], "'Muon' is a built-in optimiser kind (as 'muon', on a disk that ignores"),
        (["mine", "Mine"], "optim: 'Mine' and 'mine' share one folder"),
    ],
    ids=["parent", "slash", "dot", "long", "builtin-case", "case-twins"],
)
def test_an_optimiser_name_that_is_no_folder_name_is_refused_before_anything_is_written(
    names, fragment, user_module, tmp_path, capsys
):
    module = user_module(OPT.format(helper="math").replace("from math import SCALE", "SCALE=1"))
    optim = {name: {"factory": f"{module}:Opt", "lr": 0.01} for name in names}
    path = _config_file(tmp_path, optim, ["muon", *(f"{n}:*" for n in names)])
    before = sorted(p for p in tmp_path.rglob("*") if "__pycache__" not in p.parts)
    line = refused(["run", "knowledge-qa", "--config", str(path), "--out", str(tmp_path / "o")],
                   capsys, tmp_path / "o")  # fmt: skip
    assert fragment in line
    after = sorted(p for p in tmp_path.rglob("*") if "__pycache__" not in p.parts)
    assert after == before  # nothing written anywhere, inside the folder or outside it


def test_arm_and_point_names_are_folder_names_distinct_on_any_disk():
    for bad in ("../x", "a/b", ".x", "", "y" * (MAX_NAME + 1)):
        with pytest.raises(ConfigError, match=r"^arms: got "):
            Arm(bad, bad, "adam:*")
    # a recipe names its arm by a folder-safe form, bounded, told apart by a digest
    long = [f"{'k' * 60}{end}:q,k,v,o adam:*" for end in "ab"]
    arms = select_arms([*long, "sgd:q,k adam:*"], {})
    assert [len(a.name) for a in arms] == [MAX_NAME, MAX_NAME, len("sgd-q_k+adam-all")]
    assert len({a.name for a in arms}) == 3
    with pytest.raises(ConfigError, match="arms: 'adam' is listed twice"):
        select_arms(["adam", "adam:*"], {"adam": Arm("adam", "Adam", "adam:*")})
    # grid points: '..' is a folder inside points/, letter case never shares one
    assert folder_name("..") == "_" and folder_name("../../x") == "_.._x"  # one folder, inside
    one, two = folder_name("w" * 200 + "1"), folder_name("w" * 200 + "2")
    assert one != two and len(one) == len(two) == MAX_FOLDER
    with pytest.raises(ConfigError, match="points: 'A' and 'a' share one folder"):
        grid.configure([grid.Point("a"), grid.Point("A")], "smoke")


def test_a_rule_or_rate_rule_name_that_is_no_folder_name_is_refused(tmp_path, capsys):
    rule = "rules={adam: {kind: adam_split, label: A, own: [0.003], shared: [0.003]}, "
    rule += "'../x': {kind: muon, label: M, own: [0.02], shared: [0.01]}}"
    out = tmp_path / "r"
    line = refused(["run", "rule-or-rate", "--preset", "smoke", "--out", str(out), rule,
                    "regime_rules=[adam]"], capsys, out)  # fmt: skip
    assert "arms: got '../x_" in line and "it names a folder" in line


# ---------------------------------------------------- class 3: non-finite numbers


@pytest.mark.parametrize(
    ("experiment", "override"),
    [
        ("knowledge-qa", "optim.adam.lr=.inf"),
        ("knowledge-qa", "optim.muon.lr=[0.01, .inf]"),
        ("ablation", "optim.adam.lr=-.inf"),
        ("optim-bench", "optim.sgd.lr=.nan"),
    ],
)
def test_a_non_finite_rate_is_refused_at_the_config_check(experiment, override, tmp_path, capsys):
    out = tmp_path / "run"
    line = refused(["run", experiment, "--preset", "smoke", "--out", str(out), override],
                   capsys, out)  # fmt: skip
    assert "expected a finite learning rate > 0" in line
    assert line.split("error: ")[1].startswith(override.split("=")[0])


def test_a_non_finite_rate_is_refused_from_a_config_file_and_the_python_api(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("optim:\n  adam: {lr: .inf}\n")
    out = tmp_path / "run"
    line = refused(["run", "knowledge-qa", "--config", str(path), "--out", str(out)], capsys, out)
    assert "optim.adam.lr: got inf; expected a finite learning rate > 0" in line
    with pytest.raises(ConfigError, match=r"optim\.muon\.lr: got inf; expected a finite"):
        api.run("knowledge-qa", "smoke", {"optim.muon.lr": float("inf")}, out=out)
    assert not out.exists()


def test_an_evaluation_with_a_non_finite_loss_is_a_divergence():
    evals = [{"step": 4, "loss_train": 2.0}, {"step": 8, "loss_train": "inf", "fta": [0.5]}]
    found = eval_divergence(evals)
    assert found is not None and found.step == 8 and found.loss is None
    assert "non-finite loss_train (inf)" in found.message
    assert eval_divergence(evals[:1]) is None and eval_divergence([]) is None
    assert eval_divergence([{"step": 2, "val_loss": float("nan")}]) is not None
    assert eval_divergence([{"step": 2, "fta": float("nan")}]) is None  # not a loss


class _Overflowing:
    """Token windows whose evaluation hook reports an infinite loss at the last step: every
    update is finite, the last evaluation is not."""

    vocab_size = 48
    identity: ClassVar[dict[str, str]] = {"data": "arange(2000) % 48, overflowing at the end"}

    def batches(self, seed, batch):
        return RandomWindows(torch.arange(2000) % 48, batch.batch_size, batch.seq_len, seed=seed)

    def hooks(self, model_cfg, ctx):
        return [lambda step, model: {"loss_train": float("inf") if step == 8 else 1.0}]

    def load(self, ctx):
        return self


def test_a_run_whose_last_evaluation_overflows_is_recorded_and_reported_as_diverged(
    tmp_path, capsys
):
    model = ModelSection(size="tiny", n_layer=1, n_head=2, d_model=16, d_ff=32)
    section = TrainSection(steps=8, batch_size=4, seq_len=16, warmup_steps=0, eval_every=4,
                           log_every=4, ckpt_every=0, schedule="constant")  # fmt: skip
    template = RunTemplate({"plain": model.build(48, "plain", 16)}, section,
                           OptimSection.defaults("adam"), _Overflowing.identity)  # fmt: skip
    context = RunContext(str(tmp_path), _Overflowing(), show_progress=False)
    arm = Arm("adam", "Adam", "adam:*")
    spec = template.spec(arm, "plain", {"adam": 1e-3}, 0, 8)
    result = run_job(spec, context)
    assert result.is_diverged and result.diverged is not None and result.diverged.step == 8
    assert result.final == {} and result.steps_done == 8
    stored = json.loads((context.path(spec) / "result.json").read_text())
    assert stored["status"] == "diverged"
    plan = Plan((Entry("plain", arm, Rates(fixed={"adam": 1e-3})),), (0,), 8, template,
                lambda r: None)  # fmt: skip

    def crash(_: RunResult) -> str:
        raise AssertionError("a diverged run's numbers are not summarised")

    run_plan(plan, context, 1, crash)
    assert "plain/adam adam=0.001 seed=0 steps=8: diverged at step 8 (reused)" in (
        capsys.readouterr().err
    )


def test_a_rate_that_overflows_the_weights_is_a_diverged_arm_not_a_traceback(tmp_path, capsys):
    """The issue's case: SGD at 1e30 with an evaluation after every update."""
    out = tmp_path / "run"
    args = ["run", "knowledge-qa", "--preset", "smoke", "--out", str(out), "arms=[sgd]",
            "optim.sgd.lr=1e30", "train.eval_every=1", "train.log_every=1", "train.steps=4",
            "workers=1"]  # fmt: skip
    assert main(args) == 0
    assert "diverged at step" in capsys.readouterr().err
    [entry] = json.loads((out / "results.json").read_text())["diverged"]
    assert entry["arm"] == "sgd"


# ------------------------------------------------ class 4: refused before the first step


def test_wandb_without_a_login_is_refused_before_the_folder(tmp_path, capsys, monkeypatch):
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    out = tmp_path / "run"
    args = ["run", "ablation", "--preset", "smoke", "--out", str(out), "train.log_to=[wandb]"]
    assert "train.log_to: wandb has no login on this machine" in refused(args, capsys, out)
    (tmp_path / "netrc").write_text("machine api.wandb.ai login user password " + "k" * 40)
    assert main(["config", "ablation", "--preset", "smoke", "train.log_to=[wandb]"]) == 0
    (tmp_path / "netrc").unlink()
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert main(["config", "ablation", "--preset", "smoke", "train.log_to=[wandb]"]) == 0


@pytest.mark.parametrize("problem", ["unwritable", "corrupt"])
def test_tune_store_that_cannot_take_the_choices_is_refused_before_any_trial(
    problem, tmp_path, capsys, monkeypatch
):
    if problem == "unwritable":
        (tmp_path / "a-file").write_text("")
        where = tmp_path / "a-file" / "tuned_rates.json"  # its folder is a file
    else:
        where = tmp_path / "tuned_rates.json"
        where.write_text('{"rates": [1, 2')
    monkeypatch.setattr(store, "PACKAGE_STORE", where)
    out = tmp_path / "tune"
    line = refused(["tune", "knowledge-qa", "--preset", "smoke", "--out", str(out), "--store",
                    "optim.muon.lr=[0.01,0.02]"], capsys, out)  # fmt: skip
    assert str(where) in line
    assert ("--store:" in line) == (problem == "unwritable")


def test_tune_with_nothing_to_tune_is_refused_and_leaves_no_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = refused(["tune", "rule-or-rate", "--preset", "smoke"], capsys, tmp_path / "runs")
    assert "nothing is tuned; expected a list of rates to tune" in line
    line = refused(["tune", "knowledge-qa", "--preset", "smoke"], capsys, tmp_path / "runs")
    assert "no learning rate of this run is tuned" in line


def test_a_plan_with_nothing_to_train_declares_no_progress_and_returns(tmp_path):
    template = RunTemplate({}, TrainSection(), OptimSection.defaults("adam"), {})
    plan = Plan((), (0,), 8, template, lambda r: None)
    with tracking(tmp_path):
        trained = run_plans({"": (plan, RunContext(str(tmp_path), data=None))}, 1,
                            lambda r: "")  # fmt: skip
    assert trained[""].results == {}


# ------------------------------------------------------------- class 5: hostile YAML

BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n" for a, b in itertools.pairwise("abcdefghij")
)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("seed: " + "[" * 5000 + "]" * 5000, "nested more than 64 deep"),
        ("".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "1\n",
         "nested more than 64 deep"),
        (BOMB, "holds more than 100000 values once its aliases are expanded"),
        ("seed: &a [1, *a]\n", "an alias refers to a collection inside itself"),
        ("train:\n  steps: 3\nseed: 1\ntrain:\n  steps: 4\n", "found key 'train' twice"),
        ("train: {steps: 3, steps: 4}\n", "found key 'steps' twice"),
        ("", "is empty; expected a mapping of config fields"),
        ("# only a comment\n", "is empty; expected a mapping of config fields"),
    ],
    ids=["flow-deep", "block-deep", "alias-bomb", "recursive", "dup-top", "dup-nested", "empty",
         "comments"],
)  # fmt: skip
def test_a_hostile_config_file_is_one_line_before_anything_is_built(
    text, fragment, tmp_path, capsys
):
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    out = tmp_path / "run"
    line = refused(["run", "ablation", "--config", str(path), "--out", str(out)], capsys, out)
    assert fragment in line and len(line) < 1000


def test_hostile_override_values_and_an_oversized_file_are_one_line(tmp_path, capsys):
    for value in ("{a: 1, a: 2}", "&a [1, *a]", "[" * 100 + "]" * 100):
        with pytest.raises(ConfigError, match="is not valid YAML"):
            parse_override(f"common={value}")
    path = tmp_path / "big.yaml"
    with open(path, "wb") as handle:
        handle.truncate(8_000_000)  # sparse: nothing is read before the refusal
    line = refused(["run", "ablation", "--config", str(path), "--out", str(tmp_path / "o")],
                   capsys, tmp_path / "o")  # fmt: skip
    assert "8000000 bytes" in line
    # anchors, aliases and merge keys of a sane size still read
    assert parse_override("x={a: &p {b: 1}, c: *p, d: {<<: *p, e: 2}}")[1] == {
        "a": {"b": 1}, "c": {"b": 1}, "d": {"b": 1, "e": 2}}  # fmt: skip


# ------------------------------------------------ class 6: no setting silently dropped


@pytest.mark.parametrize(
    "override",
    [
        "axes=[{name: w, levels: [{label: a, overrides: {optim.muon.lr: 0.5}}]}]",
        "axes=[{name: w, levels: [{label: a, overrides: {arms: [muon]}}]}]",
        "axes=[{name: w, levels: [{label: a, overrides: {workers: 4}}]}]",
        "walks=[{name: w, start: {optim.adam_split.lr: 0.1}, "
        "steps: [{label: x, revert: [optim.adam_split.lr]}]}]",
        "walks=[{name: w, start: {loss_on: all}, fixed: {arms: [adam]}, "
        "steps: [{label: x, revert: [loss_on]}]}]",
    ],
)
def test_a_point_setting_the_study_sets_itself_is_refused(override, tmp_path, capsys):
    out = tmp_path / "r"
    line = refused(["run", "rule-or-rate", "--preset", "smoke", "--out", str(out), override],
                   capsys, out)  # fmt: skip
    assert "rule-or-rate sets" in line and "itself; expected it left out of point" in line
    seed = "axes=[{name: w, levels: [{label: a, overrides: {seed: 3}}]}]"
    assert main(["config", "rule-or-rate", "--preset", "smoke", seed]) == 0  # applied


def test_an_arm_whose_every_tuning_trial_failed_is_reported_as_such(tmp_path, capsys):
    """Every candidate of SGD diverges: no rate is chosen, none evaluated; the tables say so
    and list every trial (Adam, beside it, tunes and is evaluated as usual)."""
    template = RunTemplate({"plain": ModelSection(size="tiny").build(48, "plain", 16)},
                           TrainSection(), OptimSection.defaults("adam", "sgd"), {})  # fmt: skip
    sweep = Sweep((1.0, 2.0), (1000, 1001), 10, "final_loss", max_extend=1)
    entries = tuple(Entry("plain", Arm(k, k, f"{k}:*"), Rates(swept=(k,)), sweep)
                    for k in ("adam", "sgd"))  # fmt: skip

    def fake_train(job, context, on_steps):
        ok = "sgd" not in job.lrs
        evals = [{"step": job.steps, "score": 1.0}] if ok else []
        return RunResult(
            digest=job.digest, key=job.key, arm=job.arm.name, recipe=job.arm.recipe,
            ffn=job.ffn, lrs=job.lrs, seed=job.seed, steps=job.steps,
            status="complete" if ok else "diverged", message="", steps_done=job.steps,
            final_loss=-((job.lrs.get("adam", 0.0) - 2.0) ** 2), tokens=0, evals=evals,
            final=evals[-1] if ok else {}, diverged=None, wall_seconds=0.0,
        )  # fmt: skip

    plan = Plan(entries, (0,), 10, template, lambda r: r.final_loss)
    trained = run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "",
                       train=fake_train)  # fmt: skip
    assert trained.failed == [("plain", "sgd")]
    assert ("plain", "sgd") not in trained.best and not trained.seed_runs.get(("plain", "sgd"))
    assert trained.best[("plain", "adam")] == {"adam": 2.0}
    rows = {r.arm: r.record() for r in choice_rows(trained)}
    assert rows["sgd"]["chosen"] == FAILED and rows["sgd"]["edge"] == ""
    assert rows["sgd"]["trials"] == 6 == rows["sgd"]["budget"]  # widened once, then gave up
    assert rows["adam"]["chosen"] == 2.0
    sgd_trials = [r for r in trial_rows(trained) if r.arm == "sgd"]
    assert len(sgd_trials) == 6 and not any(r.chosen for r in sgd_trials)
    assert {r.status for r in sgd_trials} == {"diverged"}


@pytest.mark.slow
def test_an_optimiser_diverging_in_every_tuning_trial_stays_on_the_leaderboard(tmp_path):
    out = tmp_path / "bench"
    assert main(["run", "optim-bench", "--preset", "smoke", "--out", str(out),
                 "optim.sgd.lr=[1e30,1e31]", "levels=[{label: bpe}]",
                 "common.tuning.max_extend=0"]) == 0  # fmt: skip
    with open(out / "leaderboard.csv", newline="") as handle:
        board = {row["optimizer"]: row for row in csv.DictReader(handle)}
    assert board["sgd"]["placement"].startswith("diverged in every tuning trial")
    assert board["sgd"]["lr"] == ""
    with open(out / "points" / "bpe" / "tuning.csv", newline="") as handle:
        [sgd] = [row for row in csv.DictReader(handle) if row["arm"] == "sgd"]
    assert sgd["chosen"] == FAILED


def test_an_override_inside_an_earlier_mapping_override_is_refused(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"'tuning.only=true' changes a key of 'tuning=\{only"):
        load_config(kqa.Config, "knowledge-qa", "smoke", ["tuning={only: false}",
                                                           "tuning.only=true"])  # fmt: skip
    cfg = load_config(kqa.Config, "knowledge-qa", "smoke",
                      ["model={size: tiny, n_layer: 1}", "model.n_head=2"])  # fmt: skip
    assert (cfg.model.n_layer, cfg.model.n_head) == (1, 2)  # a key it does not set adds to it
    out = tmp_path / "tune"
    line = refused(["tune", "knowledge-qa", "--preset", "smoke", "--out", str(out),
                    "tuning={only: false}"], capsys, out)  # fmt: skip
    assert "tuning: tailmem tune sets tuning.rates, inside it; expected it left out" in line


def test_tracking_enters_no_run_digest(tmp_path, capsys):
    cfg = load_config(kqa.Config, "knowledge-qa", "smoke")
    tracked = load_config(kqa.Config, "knowledge-qa", "smoke", ["train.log_to=[tensorboard]"])
    from tailmem.config import to_dict

    assert run_digest("knowledge-qa", cfg) == config_digest("knowledge-qa", to_dict(cfg))
    assert run_digest("knowledge-qa", tracked) == run_digest("knowledge-qa", cfg)
    out = tmp_path / "run"
    smoke = ["run", "ablation", "--preset", "smoke", "--out", str(out), "workers=1",
             "train.steps=2"]  # fmt: skip
    assert main(smoke) == 0
    _, status = run_experiment(
        "ablation", "smoke", ["workers=1", "train.steps=2", "train.log_to=[tensorboard]"], out=out
    )
    assert status == "skipped"


# ------------------------------------------------------------- class 8: the smaller ones


def test_the_missing_rate_refusal_names_tune_store(tmp_path, capsys):
    empty = tmp_path / "tuned_rates.json"
    store.write_store(empty, [])
    out = tmp_path / "run"
    line = refused(["run", "knowledge-qa", "--preset", "smoke", "--out", str(out),
                    "optim.muon.lr=[0.01,0.02]", "tuning.rates=stored",
                    f"tuning.store={empty}"], capsys, out)  # fmt: skip
    assert "holds no rate tuned for exactly this config" in line and "--store" in line


def _stored_rate(key: str) -> store.StoredRate:
    return store.StoredRate(key, "study", "smoke", "plain", "adam", 1.0, {"adam": 1e-3}, None,
                            "score", (), 2, None, "0", "today", "test")  # fmt: skip


def _writer(path: str, prefix: str, count: int) -> None:
    for i in range(count):
        store.write_store(path, [_stored_rate(f"{prefix}-{i}")])


def test_two_writers_of_one_store_keep_every_entry(tmp_path):
    path = tmp_path / "tuned_rates.json"
    ctx = multiprocessing.get_context("fork")  # the writers only read and write one file
    writers = [ctx.Process(target=_writer, args=(str(path), name, 15)) for name in "abc"]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
        assert writer.exitcode == 0
    assert len(store.load_store(path)) == 45


def test_api_run_takes_a_mapping_or_key_value_strings_and_refuses_anything_else(tmp_path):
    assert as_overrides({"train.steps": 8, "arms": ["muon", "adam:*"]}) == [
        "train.steps=8", "arms=[muon, 'adam:*']"]  # fmt: skip
    assert as_overrides(("seed=1",)) == ["seed=1"]
    out = tmp_path / "run"
    for bad in ("train.steps=8", [("train.steps", 8)], 8, {"a=b": 1}):
        with pytest.raises(ConfigError, match=r"^overrides: .*expected a mapping \{key: value\}"):
            api.run("ablation", "smoke", bad, out=out)
    assert not out.exists()
    view = api.run("ablation", "smoke", {"train.steps": 2, "workers": 1}, out=out)
    assert view.config["train"]["steps"] == 2


def test_an_ensemble_refuses_inputs_without_or_with_the_wrong_member_dimension():
    cfg = gpt_config("tiny", vocab_size=32, max_seq_len=16, n_layer=1)
    ensemble, single = GPT(cfg, members=3), GPT(cfg)
    ids = torch.randint(0, 32, (3, 2, 8))
    assert ensemble(ids, ids)[1].shape == (3,)
    for bad in (ids[0], ids[:2], torch.cat([ids, ids[:1]])):
        with pytest.raises(DataError, match=r"expected \(members=3, B, T\)"):
            ensemble(bad)
    with pytest.raises(DataError, match="targets of shape"):
        ensemble(ids, ids[:, :1])
    with pytest.raises(DataError, match=r"doc_ids of shape \(2, 8\); expected \(3, 2, 8\)"):
        ensemble(ids, doc_ids=ids[0])
    with pytest.raises(DataError, match=r"got inputs of shape \(3, 2, 8\); expected \(B, T\)"):
        single(ids)
    with pytest.raises(DataError, match="positions of shape"):
        single(ids[0], positions=torch.arange(9))
    torch.testing.assert_close(ensemble.member(1)(ids[1])[0], ensemble(ids)[0][1])
