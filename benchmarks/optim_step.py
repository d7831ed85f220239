"""One optimiser step on GPT-shaped matrix sets: tailmem Muon vs torch.optim.Muon vs AdamW.

Parameter sets (Muon-routed matrices only, nn.Linear (out, in) layout):

* ``12x768``: 12 layers, d = 768, attention q, k, v, o 768×768, and two FFN variants timed
  separately: plain (w_in 3072×768, w_out 768×3072) and gated with hidden 2048 (w_in, w_gate
  2048×768, w_out 768×2048). Hidden 2048 is the LLaMA-style ≈ 8d/3 choice that keeps the gated
  FFN's parameter count equal to the plain one (3·2048 = 2·3072).
* ``6x384``: the same with 6 layers, d = 384 (hidden 1536 plain, 1024 gated).

Printed, all measured in this run: the machine's float32 and bfloat16 matmul rates; per set the
step time of ``torch.optim.Muon`` (one 2-D parameter at a time, Newton–Schulz hard-coded in
bfloat16; and the same code with its cast patched to float32), of our Muon per method (compute
dtype = the float32 parameters' unless marked bf16), the ratio against torch.optim.Muon, FLOPs
counted by ``orthogonalize_flops`` and the achieved GFLOP/s, AdamW's step time, and the
same-dtype ratios (torch fp32 / tailmem ns5 fp32, torch bf16 / tailmem ns5 bf16); then
max|σ - 1| of each method's output per shape on Gaussian inputs; then one Muon step of the first
set with 2 CPU ranks (gloo, one thread each) under DDP (``distributed="ddp"``, plain tensors)
and under FSDP2 (``fully_shard``, DTensor parameters), and its ratio; and the peak RSS. Timings
are the minimum over ``--repeats`` interleaved runs; with one repeat a Muon time includes its
first step's momentum-buffer allocation (a few % of the step).

    PYTHONPATH=src python benchmarks/optim_step.py [--set {12x768,6x384,2x128,all}] [--repeats N]
        [--ffn {plain,gated,both}] [--all-methods] [--no-distributed] [--device cuda]

The default (12x768, plain FFN, 1 repeat, methods ns5 / polar_express / gram_ns timed; every
method in the σ table) takes about 1.5 minutes on an idle 2-core CPU; ``--ffn both`` adds the
gated set, ``--all-methods`` times "cubic" and "svd" too; ``--set 6x384`` is the small run,
``--set 2x128`` (cpu-small's matrices) the toy one. ``--device cuda`` runs the timed steps on a
GPU (synchronised around each), the σ table and the 2-rank step stay on the CPU.
"""

from __future__ import annotations

import contextlib
import datetime
import resource
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import torch
import torch.distributed as dist
import torch.optim._muon as torch_muon
from torch.multiprocessing.spawn import spawn

from tailmem.cli import ScriptParser, script_main
from tailmem.optim import Muon, orthogonalize
from tailmem.optim.orthogonalize import BAND_MIN_SINGULAR, orthogonalize_flops

LR = 0.02
FAST_METHODS = ("ns5", "polar_express", "gram_ns")
ALL_METHODS = (*FAST_METHODS, "cubic", "svd")


def layer_shapes(layers: int, d: int, ffn: str) -> list[tuple[int, int]]:
    """The Muon-routed matrices of a GPT: q, k, v, o and the FFN, per layer."""
    hidden = 4 * d if ffn == "plain" else 8 * d // 3
    ffn_shapes = [(hidden, d), (d, hidden)] if ffn == "plain" else [(hidden, d)] * 2 + [(d, hidden)]
    return [(d, d)] * 4 * layers + ffn_shapes * layers


SETS = {
    "12x768": {
        "plain": ("12x768 plain FFN", layer_shapes(12, 768, "plain")),
        "gated": ("12x768 gated FFN (hidden 2048)", layer_shapes(12, 768, "gated")),
    },
    "6x384": {
        "plain": ("6x384 plain FFN", layer_shapes(6, 384, "plain")),
        "gated": ("6x384 gated FFN (hidden 1024)", layer_shapes(6, 384, "gated")),
    },
    "2x128": {
        "plain": ("2x128 plain FFN (cpu-small)", layer_shapes(2, 128, "plain")),
        "gated": ("2x128 gated FFN (hidden 341)", layer_shapes(2, 128, "gated")),
    },
}


def sync(device: str) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously; a CPU needs nothing)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def matmul_rate(dtype: torch.dtype, device: str, seconds: float = 1.0) -> float:
    """GFLOP/s of a 768×3072 @ 3072×768 matmul in ``dtype`` (best of a ~``seconds`` loop)."""
    a = torch.randn(768, 3072).to(device=device, dtype=dtype)
    b = torch.randn(3072, 768).to(device=device, dtype=dtype)
    a @ b
    sync(device)
    best, start = float("inf"), time.perf_counter()
    while time.perf_counter() - start < seconds:
        t = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t)
    return 2 * 768 * 3072 * 768 / best / 1e9


def _torch_ns_float32(
    grad: torch.Tensor, ns_coefficients: tuple[float, float, float], ns_steps: int, eps: float
) -> torch.Tensor:
    """``torch.optim.Muon``'s Newton–Schulz, operation for operation, with float32 for bfloat16."""
    a, b, c = ns_coefficients
    X = grad.float()
    if grad.size(0) > grad.size(1):
        X = X.T
    X = X.div(X.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = X @ X.T
        X = torch.addmm(X, torch.addmm(gram, gram, gram, beta=b, alpha=c), X, beta=a)
    return X.T if grad.size(0) > grad.size(1) else X


@contextlib.contextmanager
def torch_muon_in_float32() -> Iterator[None]:
    """Run ``torch.optim.Muon`` with its Newton–Schulz in float32 inside the block."""
    original = torch_muon._zeropower_via_newtonschulz
    torch_muon._zeropower_via_newtonschulz = _torch_ns_float32
    try:
        yield
    finally:
        torch_muon._zeropower_via_newtonschulz = original


def float32_step(step: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        with torch_muon_in_float32():
            step()

    return run


def tailmem_muon(params: Iterable[torch.Tensor], **options: Any) -> Muon:
    """tailmem's Muon as timed here: lr 0.02, momentum 0.95, Nesterov, no weight decay."""
    return Muon(params, lr=LR, weight_decay=0.0, **options)


def flops(shapes: list[tuple[int, int]], method: str) -> int | None:
    counts = [orthogonalize_flops(m, n, method) for m, n in shapes]
    return None if None in counts else sum(counts)  # type: ignore[arg-type]


def time_steps(
    contenders: dict[str, Callable[[], None]], repeats: int, device: str
) -> dict[str, tuple[float, float]]:
    """Minimum (wall, process CPU) seconds per contender over ``repeats`` interleaved calls.

    CPU time is shown beside wall time because it is far less sensitive to other processes
    competing for the cores (on an idle 2-core machine it is ≈2× the wall time).
    """
    best = {name: (float("inf"), float("inf")) for name in contenders}
    for _ in range(repeats):
        for name, step in contenders.items():
            sync(device)
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            sync(device)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def bench_set(
    title: str,
    shapes: list[tuple[int, int]],
    methods: tuple[str, ...],
    repeats: int,
    rates: dict[str, float],
    device: str,
) -> None:
    """Time one step of every contender on ``shapes`` on ``device``; ``rates``: matmul GFLOP/s
    by dtype."""
    gen = torch.Generator().manual_seed(0)
    params = [
        torch.nn.Parameter((torch.randn(*s, generator=gen) * 0.02).to(device)) for s in shapes
    ]
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen).to(device)
    contenders: dict[str, Callable[[], None]] = {
        "torch.optim.Muon (bf16)": torch.optim.Muon(params, lr=LR, weight_decay=0.0).step,
        "torch.optim.Muon (fp32)": float32_step(
            torch.optim.Muon(params, lr=LR, weight_decay=0.0).step
        ),
    }
    for method in methods:
        contenders[f"tailmem {method}"] = tailmem_muon(params, method=method, dtype=None).step
    contenders["tailmem ns5 (bf16)"] = tailmem_muon(params, dtype=torch.bfloat16).step
    adamw = torch.optim.AdamW(params, lr=1e-3)
    adamw.step()  # untimed: its first step's state allocation costs ≈10 steady steps here
    contenders["torch.optim.AdamW"] = adamw.step
    times = time_steps(contenders, repeats, device)
    reference, reference_cpu = times["torch.optim.Muon (bf16)"]
    print(
        f"\n== {title}: {len(shapes)} matrices, {sum(m * n for m, n in shapes) / 1e6:.1f}M params"
    )
    print(
        f"{'optimiser step':28s} {'wall s':>7s} {'vs torch':>8s} {'CPU s':>7s} {'vs torch':>8s} "
        f"{'GFLOP':>6s} {'GFLOP/s':>8s} {'% peak':>7s}"
    )
    for name, (seconds, cpu) in times.items():
        bf16 = "bf16" in name
        method = "ns5" if name.startswith("torch.optim.Muon") or bf16 else name.split()[-1]
        count = flops(shapes, method) if method in ALL_METHODS else None
        if count:
            achieved = count / seconds / 1e9
            peak = achieved / rates["bf16" if bf16 else "fp32"]
            cells = f"{count / 1e9:6.0f} {achieved:8.1f} {peak:7.0%}"
        else:
            cells = f"{'-':>6s} {'-':>8s} {'-':>7s}"
        print(
            f"{name:28s} {seconds:7.2f} {reference / seconds:7.2f}x {cpu:7.2f} "
            f"{reference_cpu / cpu:7.2f}x {cells}"
        )
    for dtype, theirs, ours in (
        ("fp32", "torch.optim.Muon (fp32)", "tailmem ns5"),
        ("bf16", "torch.optim.Muon (bf16)", "tailmem ns5 (bf16)"),
    ):
        print(
            f"same dtype ({dtype}): tailmem ns5 is {times[theirs][0] / times[ours][0]:.2f}x "
            f"torch.optim.Muon (wall), {times[theirs][1] / times[ours][1]:.2f}x (CPU)"
        )
    ns5, gram = flops(shapes, "ns5") or 0, flops(shapes, "gram_ns") or 0
    best_ns5, best_gram = ns5 / rates["fp32"] / 1e9, gram / rates["fp32"] / 1e9
    print(
        f"limits: ns5 counts the same {ns5 / 1e9:.0f} GFLOP as torch.optim.Muon; at 100% of the "
        f"fp32 matmul peak it would take {best_ns5:.2f} s (ceiling {reference / best_ns5:.2f}x "
        f"vs torch as measured), gram_ns {best_gram:.2f} s ({reference / best_gram:.2f}x); "
        f"fp32/bf16 peak ratio here {rates['fp32'] / rates['bf16']:.2f}"
    )


def sigma_report(shapes: list[tuple[int, int]], methods: tuple[str, ...]) -> None:
    """max|σ - 1| of each method's output per distinct shape, Gaussian input (float32).

    A shape and its transpose run the same code (tall inputs are transposed), so one is shown.
    Singular values come from the float64 eigenvalues of the small Gram matrix.
    """
    print(
        f"\n== max|σ - 1| of the output (float32, Gaussian input); 'below': fraction of the "
        f"input's σ/‖G‖_F under the band floor {BAND_MIN_SINGULAR:g}"
    )
    print(f"{'shape':>10s} {'below':>6s} " + " ".join(f"{m:>13s}" for m in methods))
    gen = torch.Generator().manual_seed(1)

    def singular_values(M: torch.Tensor) -> torch.Tensor:
        M = M.double()
        return torch.linalg.eigvalsh(M @ M.T).clamp(min=0).sqrt()

    for m, n in sorted({(min(s), max(s)) for s in shapes}):
        G = torch.randn(m, n, generator=gen)
        s = singular_values(G)
        below = (s / s.norm() < BAND_MIN_SINGULAR).double().mean().item()
        cells = [
            f"{(singular_values(orthogonalize(G, x)) - 1).abs().max().item():13.4f}"
            for x in methods
        ]
        print(f"{f'{m}x{n}':>10s} {below:6.1%} " + " ".join(cells))


def _dist_worker(
    rank: int, world: int, init: str, shapes: list[tuple[int, int]], repeats: int, out: str
) -> None:
    """Time one Muon step under DDP and under FSDP2 on ``world`` gloo ranks; rank 0 saves."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, distribute_tensor

    torch.set_num_threads(1)
    timeout = datetime.timedelta(minutes=10)
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world,
                            timeout=timeout)  # fmt: skip
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(*s, generator=gen) for s in shapes]
    plain = [torch.nn.Parameter(torch.randn(*s, generator=gen) * 0.02) for s in shapes]
    for p, g in zip(plain, grads, strict=True):
        p.grad = g.clone()
    model = torch.nn.ModuleList(torch.nn.Linear(n, m, bias=False) for m, n in shapes)
    for layer in model:
        fully_shard(layer)
    for p, g in zip(model.parameters(), grads, strict=True):
        spec = cast(DTensor, p)  # fully_shard made every parameter a DTensor
        p.grad = distribute_tensor(g, spec.device_mesh, spec.placements, src_data_rank=None)
    steps = {
        "DDP": tailmem_muon(plain, distributed="ddp", dtype=None).step,
        "FSDP2": tailmem_muon(model.parameters(), dtype=None).step,
    }
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(repeats):
        for name, step in steps.items():
            dist.barrier()
            start = time.perf_counter()
            step()
            elapsed = torch.tensor(time.perf_counter() - start)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time
            best[name] = min(best[name], elapsed.item())
    if rank == 0:
        torch.save(best, out)
    dist.barrier()
    dist.destroy_process_group()


def bench_distributed(title: str, shapes: list[tuple[int, int]], repeats: int) -> None:
    """One Muon step with 2 CPU ranks under DDP and FSDP2, ns5 in float32."""
    with tempfile.TemporaryDirectory() as tmp:
        init, out = f"{tmp}/store", f"{tmp}/times.pt"
        spawn(_dist_worker, args=(2, init, shapes, repeats, out), nprocs=2, join=True)
        best = torch.load(out, weights_only=True)
    print(f"\n== {title}: one Muon step (ns5, fp32) on 2 gloo CPU ranks, one thread each")
    for name, seconds in best.items():
        print(f"{name:28s} {seconds:7.2f} s")
    print(f"FSDP2 / DDP step time: {best['FSDP2'] / best['DDP']:.2f}x")


def main() -> None:
    parser = ScriptParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=["12x768", "6x384", "2x128", "all"], default="12x768")
    parser.add_argument("--device", default="cpu", help="where the optimiser steps run")
    parser.add_argument(
        "--ffn",
        choices=["plain", "gated", "both"],
        default="plain",
        help="FFN variant(s) to time (both: about twice the default run time)",
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--no-distributed",
        action="store_true",
        help="skip the 2-rank DDP vs FSDP2 step",
    )
    parser.add_argument(
        "--all-methods",
        action="store_true",
        help="also time 'cubic' and 'svd' (minutes on a 2-core CPU)",
    )
    parser.add_argument(
        "--methods",
        default=None,
        help="comma-separated methods to time and to list in the σ table (default: the fast "
        "ones timed, every one in the table)",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    rates = {
        dtype: matmul_rate(torch_dtype, args.device)
        for dtype, torch_dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    print(
        f"matmul 768x3072x768: fp32 {rates['fp32']:.1f} GFLOP/s, bf16 {rates['bf16']:.1f} GFLOP/s"
    )
    if rates["bf16"] < rates["fp32"] / 2:
        print(
            f"note: bf16 matmul is {rates['fp32'] / rates['bf16']:.0f}x slower than fp32 here "
            f"(no bf16 units on this CPU: emulated), so bf16 ratios say nothing about a GPU"
        )
    timed = ALL_METHODS if args.all_methods else FAST_METHODS
    listed = ALL_METHODS
    if args.methods:
        timed = listed = tuple(args.methods.split(","))
        if "ns5" not in timed or not set(timed) <= set(ALL_METHODS):
            parser.error(f"--methods: expected ns5 and any of {', '.join(ALL_METHODS[1:])}")
    names = ["12x768", "6x384"] if args.set == "all" else [args.set]
    shapes_seen: list[tuple[int, int]] = []
    variants = ["plain", "gated"] if args.ffn == "both" else [args.ffn]
    for name in names:
        for variant in variants:
            title, shapes = SETS[name][variant]
            bench_set(title, shapes, timed, args.repeats, rates, args.device)
            shapes_seen += shapes
    sigma_report(shapes_seen, listed)
    if not args.no_distributed:  # gloo ranks on the CPU, whatever --device
        bench_distributed(*SETS[names[0]][variants[0]], args.repeats)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/optim_step.py"))
