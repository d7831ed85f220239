"""Issue 21, items 2, 3 and 6: one preflight refuses what a run cannot do before its folder exists;
a folder's COMPLETE certifies only what its run wrote, ``--force`` removes what tailmem wrote,
and every writing command takes the folder's writer lock and only writes folders of its kind;
messages name what the user can type."""

import json
import os
import socket
import time
from pathlib import Path

import pytest
import torch

from tailmem.cli import main
from tailmem.config import load_config
from tailmem.errors import ConfigError
from tailmem.lm.arms import Arm, select_arms
from tailmem.resources import check_devices
from tailmem.rundir import RunDir, claim
from tailmem.runner import run_experiment
from tailmem.typecheck import SEED_MAX


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tailmem: error: "), err
    return err[0]


def refused(args: list[str], capsys, out: Path | None = None) -> str:
    """Run the CLI, expect exit 2 and one error line; ``out`` must not exist afterwards."""
    assert main(args) == 2
    line = one_line_error(capsys)
    if out is not None:
        assert not out.exists(), f"{out} was created before the refusal"
    return line


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The files written, removed or rewritten between two snapshots (their names: a failure
    prints these, not the bytes of every figure)."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


# ------------------------------------------------------------------ class 1: one preflight


SMOKE_RUN = ["run", "--preset", "smoke"]


def _run(experiment: str, out: Path, *overrides: str) -> list[str]:
    return ["run", experiment, "--preset", "smoke", "--out", str(out), *overrides]


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"TAILMEM_CACHE": "/etc/hostname"}, "TAILMEM_CACHE: /etc/hostname is a file"),
        ({"TAILMEM_CACHE": "/etc/hostname/sub"}, "cannot be made: /etc/hostname is a file"),
        ({"WORLD_SIZE": "2", "RANK": "0"}, "MASTER_ADDR, MASTER_PORT are not set"),
        (
            {"WORLD_SIZE": "2", "RANK": "5", "LOCAL_RANK": "0", "MASTER_ADDR": "localhost",
             "MASTER_PORT": "29500"},
            "RANK: got 5; expected 0..1",
        ),
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE: got 'two'; expected an integer"),
        (
            {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0",
             "MASTER_ADDR": "no-such-host.invalid", "MASTER_PORT": "29500"},
            "MASTER_ADDR: 'no-such-host.invalid' cannot be resolved",
        ),
    ],
)  # fmt: skip
def test_environment_is_checked_before_the_run_folder_exists(
    env, fragment, tmp_path, capsys, monkeypatch
):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "run"
    assert fragment in refused(_run("ablation", out), capsys, out)


def test_a_failed_distributed_start_is_one_line(monkeypatch):
    from tailmem.train import distributed

    env = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "localhost",
           "MASTER_PORT": "29500"}  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    def busy(**kwargs):
        raise RuntimeError("The server socket has failed to listen on any local network address.")

    monkeypatch.setattr(distributed.dist, "init_process_group", busy)
    with pytest.raises(ConfigError) as info:
        distributed.init_distributed("cpu")
    assert str(info.value).startswith(
        "starting torch.distributed (gloo, rank 0 of 2, master localhost:29500) failed: The "
        "server socket has failed"
    )


def test_a_cache_on_a_read_only_file_system_names_the_cache_not_out(tmp_path, capsys, monkeypatch):
    import tailmem.resources

    cache = tmp_path / "cache"
    cache.mkdir()
    real = os.statvfs

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(
        tailmem.resources.os, "statvfs", lambda p: ReadOnly() if Path(p) == cache else real(p)
    )
    monkeypatch.setenv("TAILMEM_CACHE", str(cache))
    out = tmp_path / "run"
    line = refused(_run("ablation", out), capsys, out)
    assert f"TAILMEM_CACHE: {cache} is on a read-only file system" in line
    assert "--out" not in line and "data.cache_dir" in line


@pytest.fixture
def data_files(tmp_path) -> Path:
    (tmp_path / "empty").mkdir()
    os.mkfifo(tmp_path / "pipe.txt")
    (tmp_path / "notes.md").write_text("# not a corpus file\n")
    return tmp_path


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("data.corpus.paths=[{root}/absent.txt]", "absent.txt: file not found"),
        ("data.corpus.paths=[/dev/zero]", "unsupported file type ''"),
        ("data.corpus.paths=[{root}/pipe.txt]", "pipe.txt: not a regular file"),
        ("data.corpus.paths=[{root}/empty]", "empty: directory holds no .txt or .jsonl files"),
        ("data.corpus.paths=[{root}/notes.md]", "unsupported file type '.md'"),
    ],
)
def test_corpus_sources_are_checked_before_the_run_folder_exists(
    override, fragment, data_files, capsys
):
    out = data_files / "run"
    args = _run("ablation", out, "data.corpus.source=files", override.format(root=data_files))
    assert fragment in refused(args, capsys, out)


def test_tokenizer_files_are_checked_before_the_run_folder_exists(tmp_path, capsys):
    out = tmp_path / "run"
    line = refused(_run("knowledge-qa", out, "data.tokenizer_path=/etc/hostname"), capsys, out)
    assert line.startswith("tailmem: error: data.tokenizer_path: tokenizer file /etc/hostname")
    line = refused(_run("ablation", out, "data.corpus.tokenizer=/etc/hostname"), capsys, out)
    assert "tokenizer file /etc/hostname is not a valid tokenizers JSON file" in line
    line = refused(_run("knowledge-qa", out, "cache_dir=/etc/hostname"), capsys, out)
    assert "cache_dir: /etc/hostname is a file" in line


HF = ("data.corpus.source=hf", "data.corpus.max_docs=5", "data.corpus.hf_name=no-such/set")


def test_an_unreachable_hugging_face_source_is_refused_at_once(tmp_path, capsys, monkeypatch):
    pytest.importorskip("datasets")
    out = tmp_path / "run"
    monkeypatch.setenv("TAILMEM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    line = refused(_run("ablation", out, *HF), capsys, out)
    assert "is not cached under" in line and "HF_HUB_OFFLINE=1 forbids fetching it" in line
    monkeypatch.delenv("HF_HUB_OFFLINE")

    def unreachable(*args, **kwargs):
        raise OSError(-2, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    line = refused(_run("ablation", out, *HF), capsys, out)
    assert "cannot be reached (Name or service not known)" in line
    assert time.monotonic() - start < 30  # no half minute of retries per attempt


@pytest.mark.parametrize("command", ["config", "run"])
@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("seed=-1", f"seed: got -1; expected a seed in [0, {SEED_MAX}]"),
        ("seed=4294967296", "seed: got 4294967296; expected a seed in"),
        ("seed=99999999999999999999999", "seed: got 99999999999999999999999; expected a seed"),
        # tuning seeds are derived (seed + 1000 + i): the old sweep.seed is no field
        ("sweep.seed=-3", "unknown config field 'sweep'; expected one of: seed, seeds"),
        ("tuning.seeds=1", "tuning.seeds: got 1; expected >= 2"),
        ("seeds=1000", "seeds: got 1000; expected < 1000 (tuning seeds start 1000 above"),
        ("data.seed=-1", "data.seed: got -1; expected a seed"),
        ("seeds=99999999999999999999999", "seeds: got 99999999999999999999999; expected an int"),
        ("data.m=" + "9" * 5000, "is not valid YAML (Exceeds the limit (4300 digits)"),
        ("note=2020-13-45", "override note: value '2020-13-45' is not valid YAML (month must"),
        ("train.steps=10|train.steps=20", "'train.steps=20' repeats 'train.steps=10'"),
        ("model.n_head=2|model={n_layer: 2}", "'model={n_layer: 2}' replaces 'model.n_head=2'"),
    ],
)
def test_config_and_run_refuse_the_same_bad_values(command, override, fragment, tmp_path, capsys):
    out = tmp_path / "run"
    args = [command, "knowledge-qa", "--preset", "smoke", *override.split("|")]
    args += ["--out", str(out)] if command == "run" else []
    line = refused(args, capsys, out)
    assert fragment in line and len(line) < 400  # the 5000 digits are not echoed


def test_a_seed_range_past_the_last_seed_is_refused_before_the_run_folder(tmp_path, capsys):
    out = tmp_path / "run"
    line = refused(_run("ablation", out, f"seed={SEED_MAX}", "seeds=2"), capsys, out)
    assert f"up to seed {SEED_MAX + 1}" in line
    assert main(["config", "ablation", "--preset", "smoke", f"seed={SEED_MAX}"]) == 0


def test_a_preset_file_with_an_unreadable_number_is_one_line(fake_experiment, tmp_path, capsys):
    import tailmem.config

    (tailmem.config.CONFIGS_ROOT / "fake" / "big.yaml").write_text(f"steps: {'7' * 5000}\n")
    line = refused(["config", "fake", "--preset", "big"], capsys)
    assert "big.yaml is not valid YAML: Exceeds the limit (4300 digits)" in line
    with pytest.raises(ConfigError, match=r"steps: got an integer of 101 bits; expected an"):
        load_config(fake_experiment.Config, "fake", "smoke", [f"steps={2**100}"])
    with pytest.raises(ConfigError, match=r"steps: got 9223372036854775808; expected an int"):
        load_config(fake_experiment.Config, "fake", "smoke", [f"steps={2**63}"])


BIG = 10**15
"""A size no machine holds whatever the per-item bytes (the estimates are lower bounds)."""

MEMORY = [
    ("assoc-two-group", f"figure_k={3 * BIG}", "the update-spectra figure at figure_k="),
    ("assoc-two-group", "figure_k=300000000", "the update-spectra figure"),
    ("assoc-two-group", f"sweep_points={BIG}", "the one-step sweep of sweep_points="),
    ("assoc-two-group", f"multi_steps={BIG}", "the multi-step runs of multi_steps="),
    ("assoc-scaling", f"curve_steps={BIG}", "the noiseless curves of curve_steps="),
    ("assoc-scaling", f"curve_groups={BIG}", "an orthonormal embedding of K="),
    ("assoc-scaling", f"horizons=[20, {BIG}]", "the noisy sweep (horizons up to"),
    ("assoc-scaling", f"target_max_steps={BIG}", "steps to target (target_max_steps="),
    ("assoc-scaling", f"stability_group_sizes=[{BIG}]", "GD stability (stability_steps="),
    ("assoc-scaling", f"symmetry_steps={BIG}", "block symmetry (symmetry_steps="),
    ("assoc-capacity", f"steps={BIG}", "steps=1000000000000000"),
    ("assoc-capacity", f"batch_size={BIG}", "batch_size=1000000000000000"),
    # A study that tunes refuses 1000 evaluation seeds or more before counting their list
    # (its tuning seeds start 1000 above the first).
    ("knowledge-qa", "seeds=4000000000", "seeds: got 4000000000; expected < 1000"),
    ("ablation", "seeds=4000000000", "seeds: got 4000000000; expected < 1000"),
    ("icl-regression", f"data.eval_per_group={BIG}", "drawing the tasks (data.n_dims"),
    ("icl-regression", "data.n_dims=30000000", "drawing the tasks (data.n_dims 30000000"),
    ("knowledge-qa", "model.d_model=3000000000", "more bytes than a 64-bit size holds"),
]


@pytest.mark.parametrize(("experiment", "override", "fragment"), MEMORY)
def test_every_study_counts_its_big_allocations_before_the_run_folder(
    experiment, override, fragment, tmp_path, capsys
):
    out = tmp_path / "run"
    assert fragment in refused(_run(experiment, out, override), capsys, out)


@pytest.mark.parametrize(
    ("experiment", "override", "fragment"),
    [
        (
            "assoc-two-group",
            "record_every=81",
            "record_every: got 81; expected at most multi_steps",
        ),
        ("assoc-scaling", "curve_record_every=201", "curve_record_every: got 201; expected at"),
    ],
)
def test_a_cadence_that_records_only_the_start_is_refused(
    experiment, override, fragment, tmp_path, capsys
):
    out = tmp_path / "run"
    assert fragment in refused(_run(experiment, out, override), capsys, out)


# ------------------------------------------------------------------ class 2: what a run wrote


def _two_modes(fake_experiment, monkeypatch, intruder: Path | None = None) -> None:
    """The fake experiment writes a.csv and a sub-folder in mode a, b.csv in mode b; with
    ``intruder``, someone else drops a file into the run folder while it runs."""

    def run(cfg, run_dir):
        if cfg.mode == "a":
            run_dir.write_csv("a.csv", [{"x": 1}])
            (run_dir.path / "cache").mkdir(exist_ok=True)
            (run_dir.path / "cache" / "data.bin").write_bytes(b"\0" * 8)
        else:
            run_dir.write_csv("b.csv", [{"x": 2}])
        if intruder is not None:
            intruder.write_text("not the run's")
        run_dir.write_json("results.json", {"mode": cfg.mode})

    monkeypatch.setattr(fake_experiment, "run", run)


def _listed(folder: Path) -> set[str]:
    return set(json.loads((folder / "COMPLETE").read_text())["files"])


def test_force_removes_what_the_previous_run_wrote_and_keeps_the_rest(
    fake_experiment, monkeypatch, tmp_path, capsys
):
    _two_modes(fake_experiment, monkeypatch)
    out = tmp_path / "run"
    run_experiment("fake", "smoke", ["mode=a"], out=out)
    assert _listed(out) == {"config.yaml", "a.csv", "results.json"}
    assert main(["report", str(out)]) == 0
    (out / "notes.txt").write_text("my own notes")
    (out / ".git").mkdir()  # a user's hidden folder
    refusal = r"different config \(preset smoke; differs in mode a → b\); choose another --out"
    with pytest.raises(ConfigError, match=refusal):
        run_experiment("fake", "smoke", ["mode=b"], out=out)
    _, status = run_experiment("fake", "smoke", ["mode=b"], out=out, force=True)
    assert status == "ran"
    left = {p.name for p in out.iterdir()}
    assert {"a.csv", "cache", "report.html", "report.md", "verdicts.json"}.isdisjoint(left)
    assert {"b.csv", "notes.txt", ".git"} <= left
    assert _listed(out) == {"config.yaml", "b.csv", "results.json"}  # not notes.txt
    assert RunDir(out).is_complete


def test_complete_never_lists_a_file_the_run_did_not_write(fake_experiment, monkeypatch, tmp_path):
    out = tmp_path / "run"
    _two_modes(fake_experiment, monkeypatch, intruder=out / "dropped.txt")
    run, _ = run_experiment("fake", "smoke", ["mode=b"], out=out)
    assert (out / "dropped.txt").is_file() and "dropped.txt" not in _listed(out)
    assert "dropped.txt" not in run.entries()  # not the run's: --force leaves it too
    run.mark_complete()
    assert _listed(out) == {"b.csv", "config.yaml", "results.json"}


def test_report_takes_the_writer_lock_and_its_files_are_not_the_runs(
    fake_experiment, tmp_path, capsys
):
    out = tmp_path / "run"
    run_experiment("fake", "smoke", [], out=out)
    before = snapshot(out)
    with RunDir(out).lock():
        line = refused(["report", str(out)], capsys)
        assert "is being written by another tailmem process" in line
    assert changed(before, snapshot(out)) == []
    assert main(["report", str(out)]) == 0
    entries = RunDir(out).entries()
    assert {entries[n] for n in ("report.html", "report.md", "verdicts.json")} == {"report"}
    RunDir(out).mark_complete()
    assert _listed(out) == {"config.yaml", "results.json"}


def _model(root: Path) -> Path:
    """A two-matrix Hugging Face folder that ``tailmem diagnose`` reads."""
    from safetensors.torch import save_file

    root.mkdir()
    (root / "config.json").write_text('{"n_head": 2}')
    tensors = {
        "h.0.attn.c_attn.weight": torch.randn(8, 24),
        "h.0.attn.c_proj.weight": torch.randn(8, 8),
    }
    save_file(tensors, str(root / "model.safetensors"))
    return root


def test_each_command_writes_only_folders_of_its_kind(fake_experiment, tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_experiment("fake", "smoke", [], out=run_dir)
    model = str(_model(tmp_path / "model"))
    results = tmp_path / "results"
    with claim(results, ("results",), "reproduce"):
        pass
    user = tmp_path / "mine"
    user.mkdir()
    (user / "report.html").write_text("<p>my own page</p>")
    diag = tmp_path / "diag"
    assert main(["diagnose", model, "--out", str(diag)]) == 0
    assert main(["diagnose", model, "--out", str(diag)]) == 0  # its own kind: rewritten
    capsys.readouterr()
    before = {p: snapshot(p) for p in (run_dir, results, user, diag)}
    reproduce = ["reproduce", "--preset", "smoke", "--only", "assoc-capacity", "--out"]
    cases = [
        (["diagnose", model, "--out", str(run_dir)], "is a run folder (written by tailmem run)"),
        (["diagnose", model, "--out", str(results)], "is a results folder"),
        (["diagnose", model, "--out", str(user)], "holds files tailmem did not write (report"),
        ([*reproduce, str(run_dir)], "is a run folder"),
        ([*reproduce, str(user)], "holds files tailmem did not write (report.html)"),
        ([*reproduce, str(diag)], "is a diagnose folder"),
        (["run", "fake", "--preset", "smoke", "--out", str(results)], "is a results folder"),
        (["run", "fake", "--preset", "smoke", "--out", str(diag)], "is a diagnose folder"),
        (["run", "fake", "--preset", "smoke", "--out", str(user), "--force"], "did not write"),
        (["report", str(diag)], "is a diagnose folder"),
        (["report", str(user)], "holds files tailmem did not write"),
    ]
    for args, fragment in cases:
        assert fragment in refused(args, capsys), args
    inner = run_dir / "inner"
    for args in (["run", "fake", "--preset", "smoke", "--out", str(inner)],
                 ["diagnose", model, "--out", str(inner)], [*reproduce, str(inner)]):  # fmt: skip
        assert f"lies inside the run folder {run_dir}" in refused(args, capsys, inner)
    assert {str(p): changed(before[p], snapshot(p)) for p in before} == {str(p): [] for p in before}


# ------------------------------------------------------------------ class 6: messages


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_the_cpu_refusal_names_the_override_a_user_can_type(tmp_path, capsys):
    from dataclasses import dataclass, field

    @dataclass
    class Train:
        device: str = "cuda"

    @dataclass
    class Study:
        train: Train = field(default_factory=Train)

    with pytest.raises(ConfigError, match=r"pass train\.device=cpu$"):
        check_devices(Study())
    with pytest.raises(ConfigError, match=r"pass 'common=\{seeds: 3, train.device: cpu\}'$"):
        check_devices(Study(), within=("common", {"seeds": 3}))
    for experiment in ("ablation", "icl-regression", "qa-sensitivity"):
        out = tmp_path / experiment
        line = refused(["run", experiment, "--preset", "paper", "--out", str(out)], capsys, out)
        assert "pass device=cpu" not in line and ("train.device=cpu" in line or
                                                  "train.device: cpu}'" in line)  # fmt: skip


def test_nested_sections_name_their_fields_by_the_full_key(capsys):
    for experiment, override, fragment in [
        ("knowledge-qa", "data.m=99", "data.m: got 99; expected an integer in [1, 20]"),
        ("ablation", "data.corpus.max_docs=0", "data.corpus.max_docs: got 0; expected null"),
        ("ablation", "data.corpus.eos_token=", "data.corpus.eos_token: got an empty string"),
        ("spectra", "data.corpus.vocab_size=3000000000", "data.corpus.vocab_size: got 300"),
        ("knowledge-qa", "arms=[adam,adam]", "arms: got ['adam', 'adam']; expected each value at"),
    ]:
        assert fragment in refused(["config", experiment, "--preset", "smoke", override], capsys)
    known = {"adam": Arm("adam", "Adam", "adam:*"), "muon": Arm("muon", "Muon", "muon:q,k adam:*")}
    with pytest.raises(ConfigError, match=r"arms: 'adam' is listed twice"):
        select_arms(["adam", "muon", "adam"], known)
