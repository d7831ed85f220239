"""Issue 13, classes 1 and 5: every bad input is refused before anything is written, in one line
with exit code 2, and a corrected rerun then simply runs."""

import dataclasses
import errno
import math
import os
from dataclasses import dataclass, field

import pytest
import torch
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tailmem.cli import main
from tailmem.config import parse_override
from tailmem.errors import ConfigError
from tailmem.runner import check_devices, run_experiment
from tailmem.typecheck import DUPLICATES, NONFINITE, check_range, from_dict


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tailmem: error: "), err
    return err[0]


# ------------------------------------------------------------------ the strict type check


@dataclass
class Typed:
    rate: float = 0.5
    flag: bool = False
    ks: list[int] = field(default_factory=lambda: [1, 2])
    lrs: dict[str, float] = field(default_factory=lambda: {"gd": 1.0})
    grid: dict[str, list[float]] = field(default_factory=lambda: {"gd": [1.0, 2.0]})
    betas: tuple[float, float] = (0.9, 0.95)
    cap: float = field(default=math.inf, metadata={NONFINITE: True})
    repeats: list[int] = field(default_factory=list, metadata={DUPLICATES: True})


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"rate": math.nan}, "rate: got nan; expected a finite number"),
        ({"rate": math.inf}, "rate: got inf; expected a finite number"),
        ({"rate": -math.inf}, "rate: got -inf; expected a finite number"),
        ({"lrs": {"gd": math.nan}}, "lrs.gd: got nan; expected a finite number"),
        ({"lrs": {"gd": "fast"}}, "lrs.gd: got 'fast'; expected a number"),
        ({"grid": {"gd": [1.0, math.nan]}}, "grid.gd[1]: got nan"),
        ({"grid": {"gd": [1.0, 1.0]}}, "grid.gd: got [1.0, 1.0]; expected each value at most once"),
        ({"ks": [99, 99]}, "ks: got [99, 99]; expected each value at most once (99 repeats)"),
        ({"flag": "maybe"}, "flag: got 'maybe'; expected true or false"),
        ({"flag": 1}, "flag: got 1; expected true or false"),
        ({"betas": [0.9, math.nan]}, "betas[1]: got nan"),
    ],
)
def test_strict_types_refuse_nonfinite_duplicates_and_loose_booleans(values, fragment):
    with pytest.raises(ConfigError) as info:
        from_dict(Typed, values)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_fields_may_opt_out_and_fixed_tuples_may_repeat():
    cfg = from_dict(
        Typed, {"cap": math.inf, "repeats": [3, 3], "betas": [0.9, 0.9], "flag": True, "ks": [2, 1]}
    )
    assert cfg.cap == math.inf and cfg.repeats == [3, 3] and cfg.betas == (0.9, 0.9)
    assert cfg.flag is True and cfg.ks == [2, 1]
    assert from_dict(Typed, {"lrs": {"gd": 2}}).lrs == {"gd": 2.0}  # ints accepted as floats


bounds = st.one_of(st.none(), st.floats(-10, 10))


@given(
    value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-100, 100)),
    gt=bounds,
    le=bounds,
)
def test_check_range_refuses_exactly_what_lies_outside_and_always_nan(value, gt, le):
    inside = not math.isnan(value) and (gt is None or value > gt) and (le is None or value <= le)
    if inside:
        check_range("x", value, gt=gt, le=le)
        assert not (isinstance(value, float) and math.isnan(value))
    else:
        with pytest.raises(ConfigError, match=r"^x: got "):
            check_range("x", value, gt=gt, le=le)


# ------------------------------------------------------------------ before anything is written

BAD_RUNS = [
    ("assoc-two-group", "multi_lr={gd: .nan, signgd: 0.01, muon: 0.02}", "multi_lr.gd: got nan"),
    ("assoc-two-group", "ks=[99,99]", "ks: got [99, 99]"),
    ("assoc-two-group", "eps=.inf", "eps: got inf"),
    ("assoc-two-group", "head_mass=1.5", "head_mass: got 1.5; expected a number > 0 and < 1"),
    ("assoc-capacity", "lr_grid={gd: [1.0, .nan]}", "lr_grid.gd[1]: got nan"),
    ("assoc-capacity", "zipf_exponent=.nan", "zipf_exponent: got nan"),
    ("assoc-capacity", "facts=100000000000", "GiB of memory"),
    ("assoc-capacity", "dims=[8,8]", "dims: got [8, 8]"),
    ("assoc-scaling", "exponents=[1.5, .nan]", "exponents[1]: got nan"),
    ("assoc-scaling", "muon_lr_grid=[0.1, -0.1]", "muon_lr_grid[1]: got -0.1"),
    ("assoc-scaling", "horizons=[25,25]", "horizons: got [25, 25]"),
    ("assoc-scaling", "curve_groups=100000", "orthonormal embedding of K=500000 facts needs"),
    ("assoc-two-group", "asymptotic_ks=[3000000000000, 6000000000000]", "K=6000000000000 facts"),
    ("ablation", "train.device=meta", "train.device: got 'meta'; expected cpu or cuda"),
    ("ablation", "train.device=tpu:0", "'tpu:0'"),
]


_LEVEL = "{{name: b, base: x, levels: [{{label: y, overrides: {}}}]}}"
"""A one-level factor of qa-sensitivity with the given overrides."""

BAD_LM = [  # the language-model studies (preflight: model on meta, memory, data)
    ("ablation", "train.grad_accum=3", "train.grad_accum: got 3; expected a divisor"),
    ("ablation", "train.steps=0", "train.steps: got 0; expected >= 1"),
    ("ablation", "model.n_head=0", "n_head must be a positive integer, got 0"),
    ("ablation", "model.n_head=3", "d_model (32) must be divisible by n_head (3)"),
    ("ablation", "model.rope_base=abc", "unknown config field 'model.rope_base'"),
    ("ablation", "train.warmup_frac=.nan", "unknown config field 'train.warmup_frac'"),
    ("ablation", "train.decay_frac=.nan", "train.decay_frac: got nan"),
    ("ablation", "model.qk_norm=maybe", "model.qk_norm: got 'maybe'; expected true or false"),
    ("ablation", "model.overrides={qk_norm: maybe}", "unknown config field 'model.overrides'"),
    ("spectra", "train.device=meta", "train.device: got 'meta'; expected cpu or cuda"),
    ("ablation", "model.d_model=1000000", "GiB of memory"),
    ("spectra", "train.batch_size=100000000", "at batch 100000000 × seq_len 32 needs about"),
    ("knowledge-qa", "data.frequency_exponent=.nan", "frequency_exponent: got nan"),
    ("knowledge-qa", "train.seq_len=2", "train.seq_len: got 2; expected at least 10"),
    ("knowledge-qa", "train.grad_accum=3", "train.grad_accum: got 3"),
    ("knowledge-qa", "model.n_layer=100000000", "GiB of memory"),
    ("knowledge-qa", "packing=diagonal", "packing: got 'diagonal'; expected one of 'cross', "),
    ("knowledge-qa", "model.tie_weights=maybe", "model.tie_weights: got 'maybe'; expected true"),
    ("knowledge-qa", "model.pos_encoding=alibi", "model.pos_encoding: got 'alibi'; expected one"),
    ("icl-regression", "model.tie_weights=true", "model.tie_weights: got true; expected false"),
    ("knowledge-qa", "data.answer_tokens=word", "data.answer_tokens: got 'word'; expected one of"),
    ("qa-sensitivity", f"factors=[{_LEVEL.format('{optim.adam.betaz: 0.9}')}]",
     "point 'b: y': unknown config field 'optim.adam.betaz'"),
    ("qa-sensitivity", f"factors=[{_LEVEL.format('{loss_on: none}')}]",
     "point 'b: y': loss_on: got 'none'"),
    ("qa-sensitivity", "common={train.seq_len: 2}", "point 'base': train.seq_len: got 2"),
    ("qa-sensitivity", f"factors=[{_LEVEL.format('{train.threads: 2}')}]",
     "train.threads: got [1, 2] across points; expected one value"),
    ("qa-sensitivity", "preset=huge", "unknown preset 'huge' for knowledge-qa"),
]  # fmt: skip


@pytest.mark.parametrize(("experiment", "override", "fragment"), BAD_RUNS + BAD_LM)
def test_bad_config_is_one_line_and_writes_nothing(
    experiment, override, fragment, tmp_path, capsys
):
    out = tmp_path / "run"
    assert main(["run", experiment, "--preset", "smoke", "--out", str(out), override]) == 2
    assert fragment in one_line_error(capsys)
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("experiment", ["ablation", "spectra", "knowledge-qa", "qa-sensitivity"])
def test_paper_preset_on_a_cpu_machine_is_refused_before_writing(experiment, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", experiment, "--preset", "paper", "--out", str(out)]) == 2
    assert "no CUDA device" in one_line_error(capsys)
    assert not out.exists()
    assert main(["reproduce", "--preset", "paper", "--out", str(out)]) == 2
    assert "no CUDA device" in one_line_error(capsys) and not out.exists()


def test_device_fields_are_found_at_any_depth():
    @dataclass
    class Train:
        device: str = "cpu"

    @dataclass
    class Outer:
        train: Train = field(default_factory=Train)

    check_devices(Outer())
    for bad, fragment in [("meta", "expected cpu or cuda"), ("gpu", "expected a torch device")]:
        with pytest.raises(ConfigError, match=f"train.device: got '{bad}'; {fragment}"):
            check_devices(Outer(Train(bad)))
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            check_devices(Outer(Train("cuda:1")))


def test_corrected_rerun_after_a_refusal_runs(fake_experiment, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ConfigError):
        run_experiment("fake", "smoke", ["inner.rate=.nan"], out=out)
    assert not out.exists()
    _, status = run_experiment("fake", "smoke", ["inner.rate=0.25"], out=out)
    assert status == "ran"


def test_a_run_that_wrote_only_its_record_is_replaced_by_another_config(fake_experiment, tmp_path):
    out = tmp_path / "run"
    run_experiment("fake", "smoke", [], out=out)
    for name in os.listdir(out):
        if name not in ("config.yaml", ".lock"):
            os.remove(out / name)  # as if it died right after recording its config
    _, status = run_experiment("fake", "smoke", ["steps=5"], out=out)
    assert status == "ran"
    assert yaml.safe_load((out / "config.yaml").read_text())["config"]["steps"] == 5


# ------------------------------------------------------------------ the error boundary


def _fail_with(exc: BaseException):
    def run(cfg, run_dir):
        raise exc

    return run


@pytest.mark.parametrize(
    ("exc", "fragment"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/x/results.json"), "the disk is full"),
        (OSError(errno.EROFS, "Read-only file system", "/ro/results.json"), "writable location"),
        (PermissionError(errno.EACCES, "Permission denied", "/x"), "may read and write"),
        (MemoryError(), "out of memory"),
        (RuntimeError("[enforce fail] DefaultCPUAllocator: can't allocate memory: 8 TB"), "memory"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "not UTF-8"),
    ],
)
def test_expected_failures_are_one_line_and_bugs_keep_their_traceback(
    fake_experiment, monkeypatch, tmp_path, capsys, exc, fragment
):
    monkeypatch.setattr(fake_experiment, "run", _fail_with(exc))
    out = str(tmp_path / "run")
    assert main(["run", "fake", "--preset", "smoke", "--out", out]) == 2
    line = one_line_error(capsys)
    assert fragment in line
    if isinstance(exc, OSError):
        assert exc.filename in line
    with pytest.raises(type(exc)):  # --debug shows the traceback instead
        main(["run", "fake", "--debug", "--preset", "smoke", "--out", out])
    monkeypatch.setattr(fake_experiment, "run", _fail_with(ZeroDivisionError("a bug")))
    with pytest.raises(ZeroDivisionError):
        main(["run", "fake", "--preset", "smoke", "--out", out])


def test_out_paths_that_cannot_be_folders(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    (tmp_path / "l1").symlink_to(tmp_path / "l2")
    (tmp_path / "l2").symlink_to(tmp_path / "l1")
    cases = [
        (a_file, "is a file; expected a folder"),
        (a_file / "sub", "expected a folder where the path has a file"),
        (tmp_path / "l1" / "x", "symbolic-link loop"),
    ]
    for out, fragment in cases:
        assert main(["run", "assoc-capacity", "--preset", "smoke", "--out", str(out)]) == 2
        assert fragment in one_line_error(capsys), out
    assert a_file.read_text() == "x"


def test_binary_or_malformed_run_records_are_one_line(tmp_path, capsys):
    run = tmp_path / "results" / "exp"
    run.mkdir(parents=True)
    for content, fragment in [
        (b"\x89PNG\r\n\x1a\n\x00\xff", "config.yaml is not valid YAML text"),
        (b"experiment: [", "config.yaml is not valid YAML text"),
        (b"- 1\n", "lacks the experiment/config"),
    ]:
        (run / "config.yaml").write_bytes(content)
        assert main(["report", str(tmp_path / "results")]) == 2
        assert fragment in one_line_error(capsys)
        assert main(["run", "assoc-capacity", "--preset", "smoke", "--out", str(run)]) == 2
        assert fragment in one_line_error(capsys)


@pytest.mark.parametrize("only", [",", " , ", ",,"])
def test_reproduce_only_with_no_names_is_refused(only, tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["reproduce", "--preset", "smoke", "--only", only, "--out", str(out)]) == 2
    assert "--only: names no experiment" in one_line_error(capsys)
    assert not out.exists()


def test_config_dataclasses_of_every_experiment_load_their_presets():
    """The strict rules (distinct list values, finite floats) hold for every shipped preset."""
    from tailmem.config import available_presets, load_config
    from tailmem.experiments import get_study, study_names

    for name in study_names():
        for preset in available_presets(name):
            cfg = load_config(get_study(name).config, name, preset)
            assert dataclasses.is_dataclass(cfg)


@pytest.mark.parametrize("word", ["maybe", "yes", "on", "off", "n", "1"])
def test_only_true_and_false_are_booleans_in_overrides(word):
    _, value = parse_override(f"flag={word}")
    with pytest.raises(ConfigError, match=r"flag: got .*; expected true or false"):
        from_dict(Typed, {"flag": value})
    assert from_dict(Typed, {"flag": parse_override("flag=true")[1]}).flag is True
