"""Training-step throughput by mode: eager vs ``torch.compile``, fp32 vs bf16 autocast, AdamW vs
hybrid Muon, on one GPT size and one device.

Every step is :func:`tailmem.train.train_step` (the loop's own step: forward and loss under the
precision's autocast, backward, clipping, optimiser update), with the loss compiled by
:func:`tailmem.train.loop.compiled_loss` in the compiled mode, exactly as ``train.compile`` does.
Prints, from one process:

- the device's matmul rate in fp32 and bf16 at the model's FFN product (tokens of one batch ×
  d_model × d_ff): the yardstick of the FLOP fractions below;
- per precision × mode × arm: tokens/s (best of ``--steps`` timed steps after ``--warmup``),
  model FLOP/s as a fraction of that precision's matmul rate (MFU: ``flops_per_token``, 6 N +
  attention, forward + backward; the optimiser's FLOPs not counted), the optimiser step's share
  of the step time (for the hybrid: Muon's Newton–Schulz plus AdamW on the rest; the step is
  synchronised around it on CUDA), and for compiled arms the compile seconds (first compiled
  step minus a steady one);
- the ratios that matter: bf16 / fp32 and compiled / eager tokens/s per arm, each hybrid's step
  time over AdamW's (``--arms``: ``hybrid`` batches Muon's same-shaped matrices,
  ``hybrid_looped`` steps them one at a time through ``torch.optim.Muon``);
- peak memory (process RSS; on CUDA also the allocator's peak).

    PYTHONPATH=src python benchmarks/step_modes.py                      # cpu-small, 1 thread
    PYTHONPATH=src python benchmarks/step_modes.py --device cuda --size gpt-160m --batch 16 \\
        --seq 1024 --vocab 50304 --precisions bf16 --threads 0          # the GPU check's call

Default (CPU): cpu-small (2 × 128) at the ablation/spectra presets' batch, 16 × 128 tokens, one
thread; all 8 combinations; about 2 minutes with a cold inductor cache.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tailmem.cli import ScriptParser, script_main
from tailmem.models.gpt import GPT, count_params, flops_per_token, gpt_config
from tailmem.optim import build_optimizer
from tailmem.train import TrainConfig, seed_everything, token_loss_sum, train_step
from tailmem.train import distributed as D
from tailmem.train.loop import compiled_loss
from tailmem.train.precision import matmul_gflops
from train_step import ADAMW, HYBRID, muon_shapes, orth_flops


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class TimedOptimizer:
    """An optimiser whose ``step`` adds its (synchronised) seconds to ``seconds``."""

    def __init__(self, inner: torch.optim.Optimizer, device: torch.device) -> None:
        self.inner, self.device, self.seconds = inner, device, 0.0
        self.param_groups = inner.param_groups

    def step(self, closure: Callable[[], Any] | None = None) -> None:
        sync(self.device)
        start = time.perf_counter()
        self.inner.step()
        sync(self.device)
        self.seconds += time.perf_counter() - start

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.inner.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return self.inner.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.inner.load_state_dict(state_dict)


ARMS = ("adamw", "hybrid", "hybrid_looped")
"""AdamW alone; the hybrid recipe with tailmem's Muon (same-shaped matrices batched); the same
recipe with ``torch.optim.Muon`` (one matrix at a time), both Newton–Schulz in bf16."""


def make_optimizer(arm: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if arm == "adamw":
        return torch.optim.AdamW(model.parameters(), **ADAMW)
    muon = {"lr": 0.02, "momentum": 0.95}
    if arm == "hybrid_looped":
        recipe = HYBRID.replace("muon:", "torch_muon:", 1)
        return build_optimizer(model, recipe, torch_muon=muon, adamw=ADAMW)
    return build_optimizer(model, HYBRID, muon=muon, adamw=ADAMW)


@dataclass(frozen=True)
class Measured:
    """One combination's best step seconds, its optimiser's seconds and the compile seconds."""

    step: float
    opt: float
    compile: float | None


def measure(args: argparse.Namespace, precision: str, compiled: bool, arm: str) -> Measured:
    """Best step seconds, optimiser seconds of that step, and compile seconds of one combination."""
    device = torch.device(args.device)
    seed_everything(0)
    cfg = gpt_config(args.size, vocab_size=args.vocab, max_seq_len=args.seq, ffn=args.ffn)
    model = GPT(cfg).to(device)
    optimizer = TimedOptimizer(make_optimizer(arm, model), device)
    loop = TrainConfig(steps=1, precision=precision, device=args.device, grad_clip=1.0)
    loss_fn = compiled_loss(token_loss_sum) if compiled else token_loss_sum
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen)
    batch = (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())
    ctx = D.DistContext()
    times, opt_times = [], []
    for _ in range(args.warmup + args.steps):
        before = optimizer.seconds
        sync(device)
        start = time.perf_counter()
        train_step(model, optimizer, batch, [0.02] * len(optimizer.param_groups), loop, ctx,
                   loss_fn)  # fmt: skip
        sync(device)
        times.append(time.perf_counter() - start)
        opt_times.append(optimizer.seconds - before)
    steady = min(range(args.warmup, len(times)), key=times.__getitem__)
    first = times[0] - times[steady]
    return Measured(times[steady], opt_times[steady], first if compiled else None)


def main() -> None:
    parser = ScriptParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="cpu-small")
    parser.add_argument("--ffn", default="plain", choices=["plain", "gated"])
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--modes", default="eager,compiled")
    parser.add_argument("--arms", default="adamw,hybrid", help=f"of {', '.join(ARMS)}")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps (compile included)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (best one kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    precisions, modes, arms = (x.split(",") for x in (args.precisions, args.modes, args.arms))
    if not set(arms) <= set(ARMS):
        parser.error(f"--arms: expected some of {', '.join(ARMS)}, got {args.arms!r}")
    cfg = gpt_config(args.size, vocab_size=args.vocab, max_seq_len=args.seq, ffn=args.ffn)
    fpt, n_tokens = flops_per_token(cfg, args.seq), args.batch * args.seq
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(
        f"{args.size} ({cfg.n_layer} x {cfg.d_model}, {args.ffn} FFN, vocab {args.vocab}): "
        f"{count_params(cfg) / 1e6:.1f}M params, {fpt / 1e6:.1f} MFLOP/token; batch "
        f"{args.batch} x {args.seq}; {where}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    shape = (n_tokens, cfg.d_model, cfg.d_ff)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    peak = {p: matmul_gflops(shape, dtypes[p], args.device, 0.5) * 1e9 for p in dtypes}
    print(
        f"matmul {shape[0]}x{shape[1]}x{shape[2]}: fp32 {peak['fp32'] / 1e9:.0f} GFLOP/s, "
        f"bf16 {peak['bf16'] / 1e9:.0f} GFLOP/s (bf16/fp32 {peak['bf16'] / peak['fp32']:.2f}x)"
    )
    if set(arms) - {"adamw"}:
        ns5 = orth_flops(muon_shapes(GPT(cfg)), "ns5")
        print(f"Muon NS5 per step: {ns5 / 1e9:.2f} GFLOP ({ns5 / (fpt * n_tokens):.1%} of the "
              "model's step FLOPs)")  # fmt: skip
    found: dict[tuple[str, str, str], Measured] = {}
    print(f"{'precision':9s} {'mode':8s} {'arm':13s} {'tokens/s':>10s} {'MFU':>6s} "
          f"{'opt share':>9s} {'compile s':>9s}")  # fmt: skip
    for precision in precisions:
        for mode in modes:
            for arm in arms:
                got = measure(args, precision, mode == "compiled", arm)
                found[precision, mode, arm] = got
                rate = n_tokens / got.step
                compile_s = "-" if got.compile is None else f"{got.compile:.1f}"
                print(
                    f"{precision:9s} {mode:8s} {arm:13s} {rate:10.0f} "
                    f"{rate * fpt / peak[precision]:6.1%} {got.opt / got.step:9.1%} "
                    f"{compile_s:>9s}",
                    flush=True,
                )

    def step(precision: str, mode: str, arm: str) -> float:
        return found[precision, mode, arm].step

    for arm in arms:
        if {"fp32", "bf16"} <= set(precisions):
            for mode in modes:
                ratio = step("fp32", mode, arm) / step("bf16", mode, arm)
                print(f"bf16 / fp32 tokens/s, {mode} {arm}: {ratio:.2f}x")
        if {"eager", "compiled"} <= set(modes):
            for precision in precisions:
                ratio = step(precision, "eager", arm) / step(precision, "compiled", arm)
                print(f"compiled / eager tokens/s, {precision} {arm}: {ratio:.2f}x")
    for hybrid in ("hybrid", "hybrid_looped"):
        if {"adamw", hybrid} <= set(arms):
            for precision in precisions:
                for mode in modes:
                    ratio = step(precision, mode, hybrid) / step(precision, mode, "adamw")
                    print(f"{hybrid} / adamw step time, {precision} {mode}: {ratio:.2f}x")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu = ""
    if args.device.startswith("cuda"):
        gpu = f", CUDA allocator peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
    print(f"peak RSS {rss:.0f} MiB{gpu}")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/step_modes.py"))
