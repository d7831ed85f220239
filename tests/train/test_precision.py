"""Mixed precision on the CPU and ``precision="auto"``: the probe (measured once per machine,
cached, shared by processes that start together), bf16 training against fp32, the resolved
precision in every record, and compiled training against eager."""

from __future__ import annotations

import json
import multiprocessing
import os
import time

import pytest
import torch

from tailmem.cli import main
from tailmem.errors import ConfigError
from tailmem.lm.arms import Arm, matrix_recipe
from tailmem.lm.config import OptimSection, TrainSection
from tailmem.lm.subrun import RunTemplate
from tailmem.models.gpt import GPT, GPTConfig, gpt_config
from tailmem.train import RandomWindows, TrainConfig, read_metrics, seed_everything, train
from tailmem.train import precision as P
from tailmem.train.checkpoint import latest_checkpoint, load_checkpoint

VOCAB, SEQ, BATCH = 64, 32, 8


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory for the probe, and no probe remembered in this process."""
    monkeypatch.setenv("TAILMEM_CACHE", str(tmp_path / "cache"))
    P.probe.cache_clear()
    yield tmp_path / "cache" / P.PROBE_FILE
    P.probe.cache_clear()


def fake_probe(choice: str, fp32: float = 100.0) -> P.Probe:
    bf16 = 5 * fp32 if choice == "bf16" else fp32 / 70
    return P.Probe(P.device_name("cpu"), torch.__version__, (fp32, fp32), (bf16, bf16), choice)


def stored(path, probe: P.Probe) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    key = f"{probe.device} | torch {probe.torch}"
    path.write_text(json.dumps({key: {**probe.__dict__}}))


def test_the_probe_measures_once_stores_its_numbers_and_reads_them_back(cache, monkeypatch):
    measured = P.probe("cpu")
    assert all(rate > 1 for rate in measured.fp32_gflops + measured.bf16_gflops)  # GFLOP/s
    fast = all(s >= P.BF16_MIN_SPEEDUP for s in measured.speedups)
    assert measured.choice == ("bf16" if fast else "fp32")
    entry = json.loads(cache.read_text())[f"{P.device_name('cpu')} | torch {torch.__version__}"]
    assert entry["choice"] == measured.choice and entry["fp32_gflops"] == [*measured.fp32_gflops]
    P.probe.cache_clear()
    monkeypatch.setattr(P, "measure", lambda kind: pytest.fail("measured again"))
    assert P.probe("cpu") == measured
    assert P.resolve_precision("auto", "cpu") == measured.choice


@pytest.mark.parametrize("choice", ["fp32", "bf16"])
def test_auto_is_the_cached_choice_and_explicit_precisions_are_kept(cache, choice):
    stored(cache, fake_probe(choice))
    assert P.resolve_precision("auto", "cpu") == choice
    assert P.resolve_precision("fp32", "cpu") == "fp32"
    assert P.resolve_precision("bf16", "cpu") == "bf16"


def test_a_damaged_cache_file_is_measured_again(cache, monkeypatch):
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json")
    monkeypatch.setattr(P, "measure", lambda kind: fake_probe("fp32"))
    assert P.resolve_precision("auto", "cpu") == "fp32"
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["choice"] == "fp32"


def _probe_in_child(queue) -> None:
    """A process whose own measurement would choose by the parity of its pid, slowly."""

    def slow(kind):
        time.sleep(0.3)
        return fake_probe("bf16" if os.getpid() % 2 else "fp32")

    P.measure = slow
    P.probe.cache_clear()
    queue.put(P.probe("cpu").choice)


def test_processes_probing_at_once_measure_once_and_agree(cache):
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    children = [context.Process(target=_probe_in_child, args=(queue,)) for _ in range(4)]
    for child in children:
        child.start()
    choices = [queue.get(timeout=60) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert len(set(choices)) == 1
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["choice"] == choices[0]


def test_bad_precisions_and_devices_are_one_line_config_errors():
    with pytest.raises(ConfigError, match=r"precision must be one of auto, fp32, bf16, got 'fp16'"):
        TrainConfig(steps=10, precision="fp16").validate()
    with pytest.raises(ConfigError, match=r"precision 'bf16' needs a cpu or cuda device"):
        TrainConfig(steps=10, precision="bf16", device="meta").validate()
    with pytest.raises(ConfigError, match=r"train\.precision must be one of"):
        TrainSection(precision="half").validate()  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="compile must be true or false"):
        TrainConfig(steps=10, compile="yes").validate()  # type: ignore[arg-type]


MUON = Arm.of_recipe(matrix_recipe("muon"))
MODEL = GPTConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=32)


def spec_of(**train):
    section = TrainSection(**train)
    runs = RunTemplate({"plain": MODEL}, section, OptimSection.defaults("muon", "adam"), {"d": 1})
    return runs.spec(MUON, "plain", {"muon": 0.02, "adam": 3e-3}, 0, 20)


@pytest.mark.parametrize("choice", ["fp32", "bf16"])
def test_a_run_with_auto_is_the_run_with_the_precision_it_resolved_to(cache, choice):
    stored(cache, fake_probe(choice))
    auto = spec_of(precision="auto")
    assert auto.record()["train"]["precision"] == choice
    assert auto.digest == spec_of(precision=choice).digest  # a cached run is reused
    other = "bf16" if choice == "fp32" else "fp32"
    assert auto.digest != spec_of(precision=other).digest
    # compile is part of a run's identity only when set (older runs' digests still hold)
    assert "compile" not in auto.record()["train"]
    compiled = spec_of(precision=choice, compile=True)
    assert compiled.record()["train"]["compile"] is True and compiled.digest != auto.digest


def tiny() -> GPT:
    seed_everything(0)
    return GPT(gpt_config("tiny", vocab_size=VOCAB, max_seq_len=SEQ))


def windows() -> RandomWindows:
    tokens = torch.randint(0, VOCAB, (4000,), generator=torch.Generator().manual_seed(3))
    return RandomWindows(tokens, BATCH, SEQ, seed=0)


def losses(tmp_path, name, **cfg):
    """Six logged AdamW steps of the tiny GPT under the loop config ``cfg``: the result, the
    losses and the trained model."""
    model = tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    config = TrainConfig(steps=6, log_every=1, progress=False, **cfg)
    result = train(model, opt, windows(), config, tmp_path / name)
    rows = read_metrics(tmp_path / name / "metrics.jsonl")
    return result, [r["loss"] for r in rows], model


def test_bf16_on_the_cpu_follows_fp32_with_fp32_weights_and_says_so(tmp_path, cache):
    ref, fp32, _ = losses(tmp_path, "fp32")
    result, bf16, model = losses(tmp_path, "bf16", precision="bf16")
    assert ref.precision == "fp32" and result.precision == "bf16"
    assert bf16 != fp32  # it did compute in bfloat16 ...
    assert bf16 == pytest.approx(fp32, rel=0.01)  # ... to within bfloat16's 3 digits
    assert fp32[-1] < fp32[0] and bf16[-1] < bf16[0]
    assert all(p.dtype == torch.float32 for p in model.parameters())
    ckpt = load_checkpoint(latest_checkpoint(tmp_path / "bf16" / "ckpt"))
    assert ckpt["train_config"]["precision"] == "bf16"
    assert all(v.dtype == torch.float32 for v in ckpt["model"].values() if v.is_floating_point())
    stored(cache, fake_probe("bf16"))
    auto, auto_losses, _ = losses(tmp_path, "auto", precision="auto")
    assert auto.precision == "bf16" and auto_losses == bf16
    ckpt = load_checkpoint(latest_checkpoint(tmp_path / "auto" / "ckpt"))
    assert ckpt["train_config"]["precision"] == "bf16"


def test_compile_without_a_cpu_compiler_is_one_line(monkeypatch):
    import torch._inductor.cpp_builder as builder

    def missing():
        raise RuntimeError("Unsupported compiler: g++ not found\nmore detail")

    monkeypatch.setattr(builder, "get_cpp_compiler", missing)
    expected = (
        r"^train\.compile needs a C\+\+ compiler on a CPU and found none \(Unsupported "
        r"compiler: g\+\+ not found\); install g\+\+ or use false$"
    )
    with pytest.raises(ConfigError, match=expected):
        TrainSection(compile=True).validate()


def test_a_backend_that_fails_at_the_first_step_is_one_line(tmp_path, monkeypatch):
    def broken(fn):
        def call(*args):
            raise torch._dynamo.exc.BackendCompilerFailed(
                fn, RuntimeError("cc1plus: fatal error: no space left\nmore"), None
            )

        return call

    monkeypatch.setattr(torch, "compile", broken)
    with pytest.raises(ConfigError, match=r"^compile: torch\.compile failed here \(RuntimeError: "
                       r"cc1plus: fatal error: no space left\); use false$"):  # fmt: skip
        losses(tmp_path, "broken", compile=True)


COMPILE_RTOL = 1e-4
"""Compiled losses against eager ones, relative: inductor fuses and reorders float32 reductions
(about 1e-6 per step here), and six AdamW steps carry that difference along."""

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize(
    "device",
    [pytest.param("cpu", marks=pytest.mark.slow), pytest.param("cuda", marks=needs_cuda)],
)
def test_compiled_training_follows_eager_training(tmp_path, device):
    """A tiny GPT trained six steps through torch.compile (inductor) and eagerly: the same
    losses within :data:`COMPILE_RTOL` (CPU: about 30 s with a cold inductor cache, 3 s warm,
    so it is marked slow; CUDA: run by scripts/gpu_check.sh)."""
    from torch._dynamo.utils import counters

    _, eager, eager_model = losses(tmp_path, "eager", device=device)
    counters.clear()
    result, compiled, model = losses(tmp_path, "compiled", compile=True, device=device)
    assert counters["stats"]["unique_graphs"] >= 1  # the steps did run through a compiled graph
    assert result.ok and len(compiled) == len(eager) == 6
    assert compiled == pytest.approx(eager, rel=COMPILE_RTOL)
    for a, b in zip(eager_model.parameters(), model.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-5)


@needs_cuda
def test_cuda_bf16_follows_fp32_and_auto_is_the_gpus_own_measurement(tmp_path, cache):
    _, fp32, _ = losses(tmp_path, "fp32", device="cuda")
    result, bf16, model = losses(tmp_path, "bf16", precision="bf16", device="cuda")
    assert result.precision == "bf16" and bf16 != fp32
    assert bf16 == pytest.approx(fp32, rel=0.01)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    measured = P.probe("cuda")
    assert measured.device == f"cuda: {torch.cuda.get_device_name()}"
    assert measured.choice == ("bf16" if min(measured.speedups) >= P.BF16_MIN_SPEEDUP else "fp32")
    auto, _, _ = losses(tmp_path, "auto", precision="auto", device="cuda")
    assert auto.precision == measured.choice


@needs_cuda
def test_cuda_smoke_preset_trains_on_the_gpu_and_records_the_resolved_precision(tmp_path, cache):
    out = tmp_path / "run"
    overrides = ["train.device=cuda", "train.precision=auto", "workers=1"]
    assert main(["run", "knowledge-qa", "--preset", "smoke", "--out", str(out), *overrides]) == 0
    specs = [json.loads(p.read_text()) for p in out.glob("runs/*/*/*/spec.json")]
    assert specs and {s["train"]["precision"] for s in specs} == {P.probe("cuda").choice}
    assert {s["train"]["device"] for s in specs} == {"cuda"}
