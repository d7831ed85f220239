"""Issue 32 (reliability round four), by class: a user's optimiser is imported, built and stepped
once in the preflight, so whatever its code does wrong is one line, exit 2, nothing written (1);
a script writes tracked files only from a complete cpu results folder (3); a refused run leaves
no folder (4); the last CLI holes are closed (5). Issue 33, items 5 and 6: a user's config file,
own optimiser modules from the working directory, and ``--preset`` required by ``run``."""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

import pytest

from tailmem.cli import main
from tailmem.errors import ConfigError, DataError

_names = itertools.count()


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tailmem: error: "), err
    return err[0]


def refused(args: list[str], capsys, out: Path | None = None) -> str:
    """Run the CLI, expect exit 2 and one error line; ``out`` must not exist afterwards."""
    assert main(args) == 2
    line = one_line_error(capsys)
    if out is not None:
        assert not out.exists(), f"{out} was written before the refusal"
    return line


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write a module of the user's into the working directory (``tmp_path``); returns its
    import name. ``sys.path`` and ``sys.modules`` are restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    written: list[str] = []

    def write(source: str) -> str:
        name = f"user_opt_{next(_names)}"
        (tmp_path / f"{name}.py").write_text(source)
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


# ------------------------------------------- class 1: a user's optimiser, tried in the preflight

STEP = """
import torch

class Opt(torch.optim.Optimizer):
    def __init__(self, params, lr, momentum=0.9, sizes=None):
        super().__init__(params, {"lr": lr, "momentum": momentum})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                %s
"""
SANE = STEP % 'p.add_(p.grad, alpha=-group["lr"] * group["momentum"])'

USER_FAILURES = [
    ("raise RuntimeError('boom')\n", "importing '{m}' raised RuntimeError: boom"),
    ("def broken(:\n", "importing '{m}' raised SyntaxError: invalid syntax"),
    ("import sys\nsys.exit(3)\n", "importing '{m}' raised SystemExit: 3"),
    ("class Opt:\n    def __init__(self, params, lr):\n        pass\n",
     "the factory returned an object of class Opt; expected a torch.optim.Optimizer"),
    ("def Opt(params, lr):\n    return None\n", "the factory returned None"),
    ("def Opt(params, lr):\n    raise RuntimeError('no')\n",
     "building it with {{'lr': 0.01}} raised RuntimeError: no"),
    ("def Opt(params, lr):\n    raise ValueError('no')\n",
     "building it with {{'lr': 0.01}} raised ValueError: no"),
    (STEP % "p.data = p.data.reshape(-1)",
     "its step changed the shape of parameter blocks.0.attn.q.weight from (8, 8) to (64,)"),
    (STEP % "p.data = p.data.double()",
     "its step changed the dtype of parameter blocks.0.attn.q.weight"),
    (STEP % "raise SystemExit(4)", "its step with {{'lr': 0.01}} raised SystemExit: 4"),
]  # fmt: skip


@pytest.mark.parametrize(
    "study",
    [
        ("knowledge-qa", "arms=[muon, adam, 'mine:q,k,v,o,w_in,w_gate,w_out adam:*']"),
        ("ablation", "arms=[full, adam, 'mine:q,k,v,o,w_in,w_out adam:*']"),
        ("icl-regression", "arms=[muon, adam, 'mine:q,k,v,o,w_in,w_out adam:*']"),
        ("optim-bench", "optimizers=[muon, adam_split, adam, mine]"),
    ],
    ids=lambda s: s[0],
)
@pytest.mark.parametrize(("source", "fragment"), USER_FAILURES)
def test_whatever_a_user_optimiser_does_wrong_is_one_line_before_the_folder(
    study, source, fragment, user_module, tmp_path, capsys
):
    experiment, arms = study
    module = user_module(source)
    out = tmp_path / "run"
    line = refused(
        ["run", experiment, "--preset", "smoke", "--out", str(out), arms,
         f"optim.mine.factory={module}:Opt", "optim.mine.lr=0.01"],
        capsys, out,
    )  # fmt: skip
    assert "optim.mine" in line and module in line
    assert fragment.format(m=module) in line


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("optim.mine.momentum=abc",
         "its step with {'lr': 0.01, 'momentum': 'abc'} raised TypeError"),
        ("optim.mine.sizes=[[1,.nan]]", "optim.mine.sizes: got [[1, nan]]; expected finite"),
        ("optim.mine.sizes={a: [.inf]}", "optim.mine.sizes: got {'a': [inf]}; expected finite"),
    ],
)  # fmt: skip
def test_a_hyperparameter_of_the_wrong_kind_is_refused_before_any_arm_trains(
    override, fragment, user_module, tmp_path, capsys
):
    module = user_module(SANE)
    out = tmp_path / "run"
    line = refused(
        ["run", "knowledge-qa", "--preset", "smoke", "--out", str(out),
         "arms=[muon, adam, 'mine:q,k,v,o,w_in,w_gate,w_out adam:*']",
         f"optim.mine.factory={module}:Opt", "optim.mine.lr=0.01", override],
        capsys, out,
    )  # fmt: skip
    assert fragment in line


KWARGS = """
import torch

class Base(torch.optim.Optimizer):
    def __init__(self, params, lr, beta=0.5):
        super().__init__(params, {"lr": lr, "beta": beta})

class Opt(Base):
    '''Takes **kwargs like pytorch-optimizer's classes: what it does not name it may ignore.'''

    def __init__(self, params, lr=1e-3, weight_decay=0.0, **kwargs):
        super().__init__(params, lr, beta=kwargs.pop("beta", 0.5))
        self.defaults.update(kwargs)
        for group in self.param_groups:
            group.setdefault("weight_decay", weight_decay)
            group.update(kwargs)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            scale = group.get("gamma", 1.0)
            for p in group["params"]:
                p.add_(p.grad, alpha=-group["lr"] * scale)
"""


@pytest.mark.parametrize(
    ("override", "accepted"),
    [
        ("optim.mine.weight_decay=0.1", True),  # its own parameter
        ("optim.mine.beta=0.7", True),  # a base class's parameter, passed on
        ("optim.mine.gamma=0.5", True),  # only **kwargs takes it, and its step reads it
        ("optim.mine.weight_decya=0.1", False),  # a typo: taken by **kwargs, never read
    ],
)
def test_a_name_only_kwargs_takes_must_be_read_by_the_step(
    override, accepted, user_module, tmp_path, capsys
):
    module = user_module(KWARGS)
    out = tmp_path / "run"
    args = ["config", "knowledge-qa", "--preset", "smoke"]  # the config is fine either way
    from tailmem.runner import prepare

    overrides = [
        "arms=[muon, adam, 'mine:q,k,v,o,w_in,w_gate,w_out adam:*']",
        f"optim.mine.factory={module}:Opt",
        "optim.mine.lr=0.01",
        override,
    ]
    assert main([*args, *overrides]) == 0
    capsys.readouterr()
    if accepted:
        prepare("knowledge-qa", "smoke", overrides)
        return
    line = refused(["run", *args[1:], "--out", str(out), *overrides], capsys, out)
    assert line.startswith(
        f"tailmem: error: arm 'mine': optim.mine.weight_decya: {module}:Opt takes it only "
        "through **kwargs, and neither its constructor (nor a base class's) names it nor its "
        "step reads it, so it would be silently ignored; expected one of: beta, lr, weight_decay"
    )


def test_pytorch_optimizer_typo_is_refused_and_its_real_names_pass(tmp_path, capsys):
    pytest.importorskip("pytorch_optimizer")
    from tailmem.runner import prepare

    base = [
        "arms=[muon, adam, 'lamb:q,k,v,o,w_in,w_gate,w_out adam:*']",
        "optim.lamb.factory=pytorch_optimizer:Lamb",
        "optim.lamb.lr=0.01",
    ]
    prepare("knowledge-qa", "smoke", [*base, "optim.lamb.weight_decay=0.1"])
    out = tmp_path / "run"
    line = refused(
        ["run", "knowledge-qa", "--preset", "smoke", "--out", str(out), *base,
         "optim.lamb.foo=1"],
        capsys, out,
    )  # fmt: skip
    assert "optim.lamb.foo: pytorch_optimizer:Lamb takes it only through **kwargs" in line


def test_the_trial_leaves_the_callers_random_state_alone(user_module):
    import torch

    from tailmem.runner import prepare

    module = user_module(SANE)
    overrides = [
        "arms=[muon, adam, 'mine:q,k,v,o,w_in,w_gate,w_out adam:*']",
        f"optim.mine.factory={module}:Opt",
        "optim.mine.lr=[0.01, 0.02]",
    ]
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    prepare("knowledge-qa", "smoke", overrides)
    assert torch.equal(torch.rand(3), expected)


# --------------------------------------------------- class 4: a refused run leaves no folder


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_a_cache_where_no_folder_can_be_made_is_refused_before_the_run_folder(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("TAILMEM_CACHE", "/proc/x")
    out = tmp_path / "x"
    line = refused(["run", "ablation", "--preset", "smoke", "--out", str(out)], capsys, out)
    assert line == (
        "tailmem: error: TAILMEM_CACHE: /proc/x (its nearest existing folder /proc) cannot hold "
        "a new folder (No such file or directory); expected a folder this user can write (set "
        "data.cache_dir or TAILMEM_CACHE to another)"
    )


def test_a_damaged_shared_data_cache_leaves_no_run_folder(tmp_path, capsys):
    from tailmem.config import load_config
    from tailmem.data.bios import build_dataset
    from tailmem.experiments import knowledge_qa

    cache = tmp_path / "cache"
    data = build_dataset(load_config(knowledge_qa.Config, "knowledge-qa", "smoke").data, cache)
    array = data.path / "attr_values.npy"
    array.write_bytes(array.read_bytes()[:-1] + bytes([array.read_bytes()[-1] ^ 1]))
    out = tmp_path / "new" / "run"
    line = refused(
        ["run", "knowledge-qa", "--preset", "smoke", "--out", str(out), f"cache_dir={cache}"],
        capsys,
    )
    assert f"data cache {data.path} is corrupt (attr_values.npy does not match" in line
    assert not (tmp_path / "new").exists()  # nor the parent the run would have made


def _failing(fake_experiment, monkeypatch, error: BaseException, writes: bool) -> None:
    def run(cfg, run_dir) -> None:
        if writes:
            run_dir.write_json("partial.json", {"steps_done": 1})
        raise error

    monkeypatch.setattr(fake_experiment, "run", run)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (DataError("data set broken; expected another"), 2),
        (KeyboardInterrupt(), 130),
    ],
)
def test_a_run_that_fails_before_producing_anything_leaves_no_trace(
    error, code, fake_experiment, tmp_path, capsys, monkeypatch
):
    _failing(fake_experiment, monkeypatch, error, writes=False)
    out = tmp_path / "a" / "b"
    assert main(["run", "fake", "--preset", "smoke", "--out", str(out)]) == code
    assert not (tmp_path / "a").exists()
    empty = tmp_path / "empty"  # a folder the user made stays, empty
    empty.mkdir()
    assert main(["run", "fake", "--preset", "smoke", "--out", str(empty)]) == code
    assert empty.is_dir() and not list(empty.iterdir())


def test_a_run_that_failed_after_producing_output_keeps_it_to_resume(
    fake_experiment, tmp_path, capsys, monkeypatch
):
    _failing(fake_experiment, monkeypatch, KeyboardInterrupt(), writes=True)
    out = tmp_path / "run"
    assert main(["run", "fake", "--preset", "smoke", "--out", str(out)]) == 130
    assert (out / "partial.json").is_file() and (out / "config.yaml").is_file()


# ------------------------------------------------------------- class 5: the last CLI holes


@pytest.mark.parametrize("only", ["", ",", " , "])
def test_reproduce_only_naming_nothing_is_refused(only, tmp_path, capsys):
    out = tmp_path / "results"
    line = refused(["reproduce", "--preset", "smoke", "--only", only, "--out", str(out)], capsys)
    assert line.startswith("tailmem: error: --only: names no experiment; expected names from: ")
    assert not out.exists()


@pytest.mark.parametrize("command", ["run", "config"])
def test_preset_takes_a_name_never_a_path(command, fake_experiment, tmp_path, capsys):
    other = tmp_path / "any.yaml"  # any YAML file: a path to it is not a preset
    other.write_text("steps: 3\n")
    out = tmp_path / "run"
    for preset in (str(other), str(other.with_suffix("")), "../fake/smoke", "./cpu"):
        args = [command, "fake", "--preset", preset]
        line = refused([*args, "--out", str(out)] if command == "run" else args, capsys, out)
        assert line == (
            f"tailmem: error: unknown preset {preset!r} for fake; expected one of: smoke, cpu "
            "(a YAML file of your own: --config FILE)"
        )


def test_the_python_api_takes_preset_names_only(fake_experiment, tmp_path):
    from tailmem.errors import ConfigError
    from tailmem.runner import run_experiment

    with pytest.raises(ConfigError, match=r"unknown preset '\.\./fake/smoke' for fake"):
        run_experiment("fake", "../fake/smoke", out=tmp_path / "run")
    with pytest.raises(ConfigError, match="no preset given for fake; expected --preset smoke"):
        run_experiment("fake", out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_slurm_is_refused_where_there_is_none(tmp_path, capsys, monkeypatch):
    pytest.importorskip("submitit")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no sbatch, srun, ... here
    out = tmp_path / "results"
    line = refused(
        ["reproduce", "--preset", "smoke", "--only", "assoc-capacity", "--launcher", "slurm",
         "--out", str(out)],
        capsys, out,
    )  # fmt: skip
    assert line == (
        "tailmem: error: --launcher slurm: this machine has no Slurm (sbatch, srun, sacct, "
        "scancel not found on PATH); expected a Slurm login node, or --launcher local"
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ["run", "fake", "--preset", "smoke", "--out", "OUT"],
        ["reproduce", "--preset", "smoke", "--only", "fake", "--out", "OUT"],
        ["diagnose", "NOPE", "--out", "OUT"],
    ],
)
def test_an_output_nothing_can_be_written_to_is_refused_before_any_work(
    args, fake_experiment, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "out"
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        code = main([str(out) if a == "OUT" else a for a in args])
    assert code == 2
    assert capsys.readouterr().err == (
        "tailmem: error: standard output: No space left on device; expected an output that can "
        "be written (a terminal, a pipe, or a file on a disk with space)\n"
    )
    assert not out.exists()


def test_a_raw_pickle_is_refused_without_torchs_warnings(tmp_path):
    import pickle
    import warnings

    from tailmem.errors import CheckpointError
    from tailmem.models.hf_loading import load_state_dict_from_dir
    from tailmem.train.checkpoint import load_checkpoint

    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps({"a": 1}, protocol=4))
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text('{"model_type": "gpt2", "n_layer": 1, "n_head": 1}')
    (hf / "pytorch_model.bin").write_bytes(raw.read_bytes())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(CheckpointError, match="weights_only loading refuses"):
            load_checkpoint(raw)
        with pytest.raises(DataError, match="refused by weights-only loading"):
            load_state_dict_from_dir(hf)
    assert [str(w.message) for w in caught] == []


# ------------------------------------------- issue 33, item 5: a config file of the user's own


def test_run_without_a_preset_is_refused_with_the_presets_listed(tmp_path, capsys):
    out = tmp_path / "run"
    line = refused(["run", "assoc-two-group", "--out", str(out)], capsys, out)
    assert line.startswith(
        "tailmem: error: run assoc-two-group: no preset given; expected --preset smoke | cpu | "
        "paper (smoke "
    )
    assert line.endswith(", or --config FILE (a YAML file of your own)")


@pytest.mark.parametrize(
    "experiment",
    ["assoc-two-group", "knowledge-qa", "qa-sensitivity", "qa-map", "ablation", "optim-bench"],
)
@pytest.mark.parametrize("preset", ["smoke", "paper"])
def test_a_printed_config_is_a_config_file_of_the_same_config(experiment, preset, tmp_path, capsys):
    assert main(["config", experiment, "--preset", preset]) == 0
    printed = capsys.readouterr().out
    mine = tmp_path / "mine.yaml"
    mine.write_text(printed)
    assert main(["config", experiment, "--config", str(mine)]) == 0
    assert capsys.readouterr().out == printed


def test_a_config_file_runs_like_a_preset_and_is_recorded_by_path_and_digest(
    fake_experiment, tmp_path, capsys
):
    import hashlib

    import yaml

    mine = tmp_path / "mine.yaml"
    mine.write_text("steps: 4\ninner:\n  width: 3\n")
    out = tmp_path / "run"
    assert main(["run", "fake", "--config", str(mine), "--out", str(out), "inner.rate=0.125"]) == 0
    record = yaml.safe_load((out / "config.yaml").read_text())
    assert record["preset"] == "custom"
    assert record["config_file"] == {
        "path": str(mine),
        "sha256": hashlib.sha256(mine.read_bytes()).hexdigest(),
    }
    assert record["config"]["steps"] == 4
    assert record["config"]["inner"] == {"width": 3, "rate": 0.125}
    # the packaged preset spelled out in a file is the same config: the same run, skipped
    assert main(["run", "fake", "--preset", "smoke", "--out", str(tmp_path / "a")]) == 0
    spelled = tmp_path / "smoke.yaml"
    capsys.readouterr()
    assert main(["config", "fake", "--preset", "smoke"]) == 0
    spelled.write_text(capsys.readouterr().out)
    assert main(["run", "fake", "--config", str(spelled), "--out", str(tmp_path / "a")]) == 0
    assert "already complete with this config" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "--config {f}: no such file; expected a YAML file of fake's config fields"),
        ("DIR", "--config {f} is not a file; expected a YAML file of fake's config fields"),
        (b"steps: [1,\n", "--config {f} is not valid YAML"),
        (b"- 1\n- 2\n", "--config {f} must contain a mapping of config fields"),
        (b"steps: \xff\n", "--config {f} is not UTF-8 text (invalid start byte at byte 7)"),
        (b"stesp: 3\n", "unknown config field 'stesp'"),
        (b"steps: 0\n", "steps: got 0; expected a positive integer"),
    ],
)
@pytest.mark.parametrize("command", ["run", "config"])
def test_a_bad_config_file_is_one_line_and_writes_nothing(
    command, content, fragment, fake_experiment, tmp_path, capsys
):
    mine = tmp_path / "mine.yaml"
    if content == "DIR":
        mine.mkdir()
    elif content is not None:
        mine.write_bytes(content)
    out = tmp_path / "run"
    args = [command, "fake", "--config", str(mine)]
    line = refused([*args, "--out", str(out)] if command == "run" else args, capsys, out)
    assert fragment.format(f=mine) in line


def test_a_preset_and_a_config_file_together_are_refused(fake_experiment, tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text("steps: 4\n")
    out = tmp_path / "run"
    line = refused(
        ["run", "fake", "--preset", "smoke", "--config", str(mine), "--out", str(out)], capsys, out
    )
    assert line == (
        f"tailmem: error: --preset smoke and --config {mine}: got both; expected one (a preset "
        "name, or a YAML file of your own)"
    )


# ------------------------------------------ class 3: scripts write tracked files from runs only

ROOT = Path(__file__).resolve().parents[1]
TRACKED = [ROOT / "docs" / "results_cpu.json", ROOT / "docs" / "results.md",
           *sorted((ROOT / "docs" / "gallery").glob("*.png"))]  # fmt: skip


@pytest.fixture
def readme_script(tmp_path, monkeypatch):
    """scripts/readme_results.py with its outputs pointed at copies (the tracked files are
    checked unchanged as well)."""
    import shutil

    import script_module

    script = script_module.load("scripts/readme_results.py")
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    monkeypatch.setattr(script, "ROOT", copy)
    for name in ("VALUES", "TEMPLATE", "PAGE", "GALLERY_DIR"):
        monkeypatch.setattr(script, name, copy / getattr(script, name).relative_to(ROOT))
    before = {p: p.read_bytes() for p in TRACKED}
    copies = [copy / p.relative_to(ROOT) for p in TRACKED]
    copied = {p: p.read_bytes() for p in copies}
    yield script
    assert {p: p.read_bytes() for p in TRACKED} == before
    assert [p for p in copies if p.read_bytes() != copied[p]] == []


def script_error(script, args, capsys) -> str:
    assert script.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("readme_results: error: "), err
    return err[0].removeprefix("readme_results: error: ")


def test_collect_refuses_a_missing_or_foreign_folder(readme_script, tmp_path, capsys):
    missing = tmp_path / "nope"
    assert script_error(readme_script, ["collect", str(missing)], capsys) == (
        f"{missing} is not a folder; expected a results folder of tailmem reproduce --preset "
        "cpu, or one of its runs"
    )
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my own files")
    assert script_error(readme_script, ["collect", str(mine)], capsys).startswith(
        f"{mine} was not written by tailmem reproduce; expected a results folder"
    )


def test_collect_refuses_a_smoke_results_folder(readme_script, fake_experiment, tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["run", "fake", "--preset", "smoke", "--out", str(out / "fake")]) == 0
    capsys.readouterr()
    assert script_error(readme_script, ["collect", str(out)], capsys) == (
        f"{out / 'fake'} is a run of fake at preset 'smoke'; expected cpu runs (the results "
        "page shows the cpu results)"
    )


def test_collect_refuses_an_incomplete_or_partial_cpu_folder(
    readme_script, fake_experiment, tmp_path, capsys
):
    out = tmp_path / "results"
    assert main(["run", "fake", "--preset", "cpu", "--out", str(out / "fake")]) == 0
    capsys.readouterr()
    shown = ", ".join(readme_script.page_studies())
    assert script_error(readme_script, ["collect", str(out)], capsys).startswith(
        f"{out} holds no run of {shown}; expected a run of every study"
    )
    (out / "fake" / "results.json").write_text("{}")  # no longer what COMPLETE certifies
    assert script_error(readme_script, ["collect", str(out)], capsys) == (
        f"{out / 'fake'} is not a complete run ({out / 'fake' / 'results.json'} does not match "
        "the hash recorded in COMPLETE); expected finished runs"
    )


def test_update_refuses_a_results_folder_a_smoke_run_or_an_incomplete_one(
    readme_script, fake_experiment, tmp_path, capsys
):
    out = tmp_path / "results"
    assert main(["run", "fake", "--preset", "smoke", "--out", str(out / "fake")]) == 0
    capsys.readouterr()
    assert script_error(readme_script, ["update", str(tmp_path)], capsys) == (
        f"{tmp_path} is not a run folder; expected a finished run of one study"
    )
    assert script_error(readme_script, ["update", str(out / "fake")], capsys) == (
        f"{out / 'fake'} is a run at preset 'smoke'; expected a cpu run"
    )
    (out / "fake" / "results.json").write_text("{}")
    assert script_error(readme_script, ["update", str(out / "fake")], capsys).startswith(
        f"{out / 'fake'} is not a complete run ("
    )


def test_render_refuses_a_damaged_results_file(readme_script, capsys):
    values = readme_script.VALUES
    saved = values.read_bytes()
    values.write_text('{"runs": {}, "values": {"commit": "x"}}')
    named = readme_script.PLACEHOLDER.findall(readme_script.TEMPLATE.read_text())
    missing = sorted(set(named) - {"commit"})
    assert "ablation.commit" in missing and "knowledge-qa.commit" in missing
    assert script_error(readme_script, ["render"], capsys).startswith(
        f"the template names values the runs did not give: {', '.join(missing[:4])}"
    )
    values.write_text("{not json")
    assert script_error(readme_script, ["render"], capsys).startswith(
        f"{values} is not a results file"
    )
    values.write_bytes(saved)  # the fixture checks the copies are as they were


ENTRY_POINTS = sorted(
    p.relative_to(ROOT)
    for folder in ("scripts", "benchmarks")
    for p in (ROOT / folder).glob("*.py")
    if '__name__ == "__main__"' in p.read_text()
)


@pytest.mark.parametrize("path", ENTRY_POINTS, ids=str)
def test_every_script_refuses_a_bad_flag_in_one_line(path, capsys, monkeypatch):
    import importlib.util
    import runpy

    if path.name == "import_cycles.py":  # dependency-free: it checks src without importing it
        assert runpy.run_path(str(ROOT / path))["main"](["x", "/no/such/src"]) == 2
        assert capsys.readouterr().err == (
            "import_cycles: error: /no/such/src holds no tailmem package; expected the src "
            "folder of a tailmem checkout\n"
        )
        return
    spec = importlib.util.spec_from_file_location(f"entry_{path.stem}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look it up
    monkeypatch.syspath_prepend(str((ROOT / path).parent))  # as when run: its folder first
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", [path.name, "--no-such-flag"])
    assert "script_main(" in (ROOT / path).read_text()  # the CLI's contract at its door
    with pytest.raises(SystemExit) as exit_info:
        module.main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ": error: " in err[0], err


def test_a_scripts_bad_input_is_one_line_and_a_bug_keeps_its_traceback(capsys):
    from tailmem.cli import script_main
    from tailmem.errors import ConfigError

    def refuse() -> None:
        raise ConfigError("--points: got ''; expected some of base")

    def interrupted() -> None:
        raise KeyboardInterrupt

    def bug() -> None:
        raise ZeroDivisionError

    assert script_main(refuse, "x.py") == 2
    assert capsys.readouterr().err == "x.py: error: --points: got ''; expected some of base\n"
    assert script_main(interrupted, "x.py") == 130
    assert capsys.readouterr().err == "x.py: interrupted\n"
    with pytest.raises(ZeroDivisionError):
        script_main(bug, "x.py")


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ("", "--points: got ''; expected some of base, "),
        ("base", "--points base: only these rows would replace the committed table"),
    ],
)
def test_the_scale_sweep_never_rewrites_its_table_with_fewer_rows(points, message, capsys):
    import runpy

    script = runpy.run_path(str(ROOT / "scripts" / "qa_scale_sweep.py"))
    with pytest.raises(ConfigError, match=re.escape(message)):
        script["selected"](points, str(ROOT / "scripts" / "qa_scale_sweep.md"))


# ------------------------------ issue 33, item 6: own optimiser modules from the working folder

MYPKG = {
    "mypkg/__init__.py": "",
    "mypkg/opt.py": SANE.replace("class Opt(", "class MyOptimizer("),
}
ENTRY = """import sys
from tailmem.cli import main
if __name__ == "__main__":  # as pip's console script: sys.path[0] is this folder, not the cwd
    sys.exit(main())
"""


def test_a_package_in_the_working_folder_is_importable_as_a_factory(tmp_path):
    import os
    import subprocess

    for name, text in {**MYPKG, "bin/tailmem_entry.py": ENTRY}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "bin" / "tailmem_entry.py"), "config", "knowledge-qa",
         "--preset", "smoke", "arms=[muon, adam, 'mine:q,k,v,o,w_in,w_gate,w_out adam:*']",
         "optim.mine.factory=mypkg.opt:MyOptimizer", "optim.mine.lr=0.01"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "factory: mypkg.opt:MyOptimizer" in done.stdout


def _import_in_child(name: str) -> str:
    import importlib

    return importlib.import_module(name).__name__


def test_a_spawned_worker_imports_the_working_folders_factory_too(user_module, tmp_path):
    import multiprocessing

    from tailmem.runner import prepare

    for name, text in MYPKG.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    prepare(
        "knowledge-qa",
        "smoke",
        [
            "arms=[muon, adam, 'mine:q,k,v,o,w_in,w_gate,w_out adam:*']",
            "optim.mine.factory=mypkg.opt:MyOptimizer",
            "optim.mine.lr=0.01",
        ],
    )
    with multiprocessing.get_context("spawn").Pool(1) as pool:  # what the study's pool uses
        assert pool.apply(_import_in_child, ("mypkg.opt",)) == "mypkg.opt"
    sys.modules.pop("mypkg.opt", None)
    sys.modules.pop("mypkg", None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "fake", "--preset", "smoke", "--out", ""], "--out: got an empty path"),
        (["reproduce", "--preset", "smoke", "--out", " "], "--out: got an empty path"),
        (["config", "fake", "--config", ""], "--config: got an empty path; expected a YAML"),
        (["report", ""], "DIR: got an empty path"),
        (["diagnose", ""], "PATH: got an empty path"),
    ],
)
def test_an_empty_path_is_refused_not_read_as_this_folder(
    args, message, fake_experiment, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    assert message in refused(args, capsys)
    assert sorted(tmp_path.iterdir()) == before


def test_the_python_api_refuses_an_empty_out(fake_experiment, tmp_path, monkeypatch):
    from tailmem.reproduce import reproduce
    from tailmem.runner import run_experiment

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="out: got an empty path"):
        run_experiment("fake", "smoke", out="")
    with pytest.raises(ConfigError, match="out: got an empty path"):
        reproduce("smoke", only=["fake"], out="")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs"]
