"""Training-step throughput of the shared loop on the ``cpu`` GPT: AdamW vs hybrid Muon.

Prints, from one process:
- the machine's fp32 matmul rate (1024³ products), the yardstick for the FLOP ratios below;
- tokens/s of ``tailmem.train.train`` with all-AdamW, its achieved FLOP/s (``flops_per_token``
  × tokens/s) as a fraction of the matmul rate, and the loop's overhead against a bare
  forward/backward/step loop on the same batches;
- if ``tailmem.optim.build_optimizer`` is importable: the step-time ratio of the hybrid recipe
  ``muon:q,k,v,o,w_in,w_gate,w_out adamw:*`` to all-AdamW (goal ≤ 1.10);
- peak RSS.

Arms are interleaved and each is repeated ``--repeats`` times, keeping its best window, so load
from other processes on a shared machine biases all arms alike.

    PYTHONPATH=src python benchmarks/train_step.py [--size cpu] [--seq 128] [--batch 16]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from tailmem.models.gpt import GPT, count_params, flops_per_token, gpt_config, mfu
from tailmem.train import RandomWindows, TrainConfig, read_metrics, seed_everything, train

HYBRID = "muon:q,k,v,o,w_in,w_gate,w_out adamw:*"


def matmul_flops(n: int = 1024, reps: int = 10) -> float:
    """Measured fp32 matmul FLOP/s on an n × n × n product (best of ``reps``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def ns5_flops(model: GPT, recipe_roles: set[str], iterations: int = 5) -> int:
    """FLOPs of quintic Newton–Schulz on every Muon matrix: per iteration, for X of shape
    m × n with m ≤ n, X Xᵀ (2m²n), the quadratic in A = X Xᵀ (2m³) and B X (2m²n)."""
    roles = model.param_roles()
    total = 0
    for name, p in model.named_parameters():
        if roles[name] in recipe_roles:
            m, n = sorted(p.shape)
            total += iterations * (4 * m * m * n + 2 * m**3)
    return total


def adamw(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.8, 0.95), weight_decay=0.0)


def hybrid_factory() -> Callable[[torch.nn.Module], torch.optim.Optimizer] | None:
    try:
        from tailmem.optim import build_optimizer
    except ImportError:
        try:
            from tailmem.optim.routing import build_optimizer
        except ImportError:
            return None

    def build(model: torch.nn.Module) -> torch.optim.Optimizer:
        return build_optimizer(
            model,
            HYBRID,
            muon={"lr": 0.02, "momentum": 0.95},
            adamw={"lr": 3e-3, "betas": (0.8, 0.95), "weight_decay": 0.0},
        )

    return build


def loop_tokens_per_s(args: argparse.Namespace, make_opt, data: RandomWindows) -> float:
    """Best steady-state tokens/s of ``train`` (first window, with warm-up, dropped)."""
    seed_everything(0)
    model = GPT(gpt_config(args.size, vocab_size=args.vocab, max_seq_len=args.seq, ffn=args.ffn))
    cfg = TrainConfig(
        steps=args.window * (args.windows + 1),
        log_every=args.window,
        save_final=False,
        progress=False,
        grad_clip=1.0,
    )
    with tempfile.TemporaryDirectory() as tmp:
        train(model, make_opt(model), data, cfg, Path(tmp))
        rows = read_metrics(Path(tmp) / "metrics.jsonl")
    return max(r["tokens_per_s"] for r in rows[1:])


def bare_tokens_per_s(args: argparse.Namespace, data: RandomWindows) -> float:
    """Tokens/s of a minimal forward/backward/AdamW loop on the same batches."""
    seed_everything(0)
    model = GPT(gpt_config(args.size, vocab_size=args.vocab, max_seq_len=args.seq, ffn=args.ffn))
    opt = adamw(model)
    times = []
    for step in range(args.window * (args.windows + 1)):
        start = time.perf_counter()
        x, y = data.batch(step)
        opt.zero_grad(set_to_none=True)
        model(x, y)[1].backward()
        opt.step()
        times.append(time.perf_counter() - start)
    steady = times[args.window :]
    per_window = [
        statistics.fmean(steady[i : i + args.window]) for i in range(0, len(steady), args.window)
    ]
    return args.batch * args.seq / min(per_window)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="cpu")
    parser.add_argument("--ffn", default="plain", choices=["plain", "gated"])
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--window", type=int, default=5, help="steps per timing window")
    parser.add_argument("--windows", type=int, default=3, help="timed windows per run")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    cfg = gpt_config(args.size, vocab_size=args.vocab, max_seq_len=args.seq, ffn=args.ffn)
    fpt = flops_per_token(cfg, args.seq)
    peak = matmul_flops()
    print(
        f"model {args.size} ({args.ffn} FFN, vocab {args.vocab}): {count_params(cfg) / 1e6:.2f}M "
        f"params, {fpt / 1e6:.1f} MFLOP/token; batch {args.batch} x seq {args.seq}; "
        f"{torch.get_num_threads()} threads"
    )
    print(f"fp32 matmul rate (1024^3): {peak / 1e9:.1f} GFLOP/s")

    tokens = torch.randint(0, args.vocab, (200_000,), generator=torch.Generator().manual_seed(0))
    data = RandomWindows(tokens, args.batch, args.seq, seed=0)
    arms: dict[str, Callable] = {"adamw": adamw}
    hybrid = hybrid_factory()
    if hybrid is not None:
        arms["hybrid-muon"] = hybrid
    best: dict[str, float] = {name: 0.0 for name in arms}
    bare = 0.0
    for _ in range(args.repeats):
        bare = max(bare, bare_tokens_per_s(args, data))
        for name, make_opt in arms.items():
            best[name] = max(best[name], loop_tokens_per_s(args, make_opt, data))

    for name, tps in best.items():
        print(
            f"{name:12s} train(): {tps:9.0f} tokens/s  "
            f"achieved/matmul FLOP/s = {mfu(tps, fpt, peak):.3f}"
        )
    print(
        f"bare fwd/bwd/AdamW loop: {bare:9.0f} tokens/s; loop overhead ratio "
        f"(bare / train) = {bare / best['adamw']:.3f}"
    )
    muon_roles = set(HYBRID.split()[0].removeprefix("muon:").split(","))
    orth = ns5_flops(GPT(cfg), muon_roles)
    step_flops = fpt * args.batch * args.seq
    print(
        f"NS5 FLOPs / model step FLOPs = {orth / step_flops:.3f} (Muon's cost does not grow "
        f"with the batch: at equal FLOP rate the ratio below is about 1 + this)"
    )
    if hybrid is None:
        print("hybrid Muon: skipped (tailmem.optim.build_optimizer not importable yet)")
    else:
        ratio = best["adamw"] / best["hybrid-muon"]
        verdict = "ok" if ratio <= 1.10 else "ABOVE GOAL"
        print(f"step-time ratio hybrid-muon / adamw = {ratio:.3f} (goal <= 1.10: {verdict})")
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {peak_rss_mb:.0f} MiB")


if __name__ == "__main__":
    main()
