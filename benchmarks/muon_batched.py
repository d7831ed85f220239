"""One Muon step alone: looped vs batched vs batched + compiled, against torch.optim.Muon.

Contenders, all on the same parameters and gradients, timed interleaved in this process:

* ``looped``: ``W -= lr·muon_update(g, B)`` one parameter after another (the reference
  implementations' structure, and what ``torch.optim.Muon`` does);
* ``batched``: ``tailmem.optim.Muon(compile=False)``: same-shaped matrices stacked and
  orthogonalised in one batched call, foreach momentum and update;
* ``batched+compiled``: the same with ``compile=True`` (``torch.compile``, inductor, one graph per
  shape group; its compile seconds are printed apart and not in its step time);
* ``torch.optim.Muon``: torch's own, in the same Newton–Schulz dtype (bf16 is torch's; for fp32 its
  cast is patched to float32, as ``benchmarks/optim_step.py`` does).

Each at Newton–Schulz compute dtype fp32 and bf16 (fp32 parameters and gradients; momentum 0.95,
Nesterov, ns5). Parameter sets (Muon-routed matrices, ``nn.Linear`` layout): ``2x256`` the cpu
preset's model (2 layers, d 256, q/k/v/o and a plain FFN of 1024), ``12x768`` the 160M model's
(12 layers, d 768, FFN 3072), ``2x64`` a toy for the tests. Printed per set and dtype: each
contender's best wall time and process CPU time over ``--repeats`` interleaved steps, its speed
relative to ``looped`` (time of looped / its time; in wall time, then in CPU time, which other
processes on a shared host do not inflate) and to torch.optim.Muon, its peak memory
within one step (peak RSS during the step minus RSS before it, Linux only; with ``--device cuda``
the CUDA allocator's; the largest over the repeats), the size of the state it keeps between
steps and its Newton–Schulz FLOP rate as a share of the device's matmul rate in that dtype
(printed first, fp32 and bf16); last the ceiling: the set's NS5 products at that matmul rate,
which bounds what batching (fewer calls, the same products) can gain over ``looped`` (its wall
or CPU time, whichever is smaller).

    PYTHONPATH=src python benchmarks/muon_batched.py [--sets 2x256,12x768] [--dtypes fp32,bf16]
        [--repeats 3] [--threads 1] [--no-compile] [--device cuda]

The 12x768 set takes minutes per contender in fp32 on a 2-core CPU (about 1.6 TFLOP per step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from optim_step import layer_shapes, matmul_rate, sync, torch_muon_in_float32
from tailmem.cli import ScriptParser, script_main
from tailmem.optim import Muon, muon_update
from tailmem.optim.orthogonalize import orthogonalize_flops

SETS = {"2x64": (2, 64), "2x256": (2, 256), "12x768": (12, 768)}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
LR = 0.02
STATUS = Path("/proc/self/status")


def rss_kib(field: str) -> int | None:
    """``VmRSS`` or ``VmHWM`` of this process in KiB (None off Linux)."""
    if not STATUS.exists():
        return None
    for line in STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def transient_mib(step: Callable[[], None], device: str) -> float | None:
    """Run ``step`` (synchronised on CUDA); the peak memory during it minus the memory before
    it, MiB: on CUDA the allocator's, on a CPU the RSS (Linux: its peak is reset through
    ``/proc/self/clear_refs``; None where that is not possible)."""
    if torch.device(device).type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats()
        before_bytes = torch.cuda.memory_allocated()
        step()
        sync(device)
        return (torch.cuda.max_memory_allocated() - before_bytes) / 2**20
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        step()
        return None
    before = rss_kib("VmRSS")
    step()
    peak = rss_kib("VmHWM")
    return None if before is None or peak is None else (peak - before) / 1024


def make_params(shapes: list[tuple[int, int]], device: str) -> list[torch.nn.Parameter]:
    """fp32 parameters on ``device`` with fixed random gradients."""
    gen = torch.Generator().manual_seed(0)
    params = [
        torch.nn.Parameter((torch.randn(*s, generator=gen) * 0.02).to(device)) for s in shapes
    ]
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen).to(device)
    return params


@dataclass(frozen=True)
class Contender:
    """One way of stepping: the step, and the tensors it keeps between steps."""

    step: Callable[[], None]
    state: Callable[[], list[torch.Tensor]]


def looped_muon(params: list[torch.nn.Parameter], dtype: torch.dtype) -> Contender:
    """``W -= lr·muon_update(g, B)`` parameter by parameter."""
    bufs = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step() -> None:
        for p, buf in zip(params, bufs, strict=True):
            assert p.grad is not None
            p.add_(muon_update(p.grad, buf, momentum=0.95, nesterov=True, dtype=dtype), alpha=-LR)

    return Contender(step, lambda: bufs)


def optimiser(opt: torch.optim.Optimizer, step: Callable[[], None] | None = None) -> Contender:
    """An optimiser's step (or ``step``) and its ``state``."""

    def state() -> list[torch.Tensor]:
        return [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]

    return Contender(step or opt.step, state)


def tailmem(params: list[torch.nn.Parameter], dtype: torch.dtype, compile: bool) -> Contender:
    """``tailmem.optim.Muon``, batched, compiled or not."""
    opt = Muon(params, lr=LR, weight_decay=0.0, dtype=dtype, compile=compile)
    return optimiser(opt)


def torch_muon(params: list[torch.nn.Parameter], dtype: torch.dtype) -> Contender:
    """``torch.optim.Muon``, its Newton–Schulz in ``dtype``."""
    opt = torch.optim.Muon(params, lr=LR, weight_decay=0.0)
    if dtype == torch.bfloat16:
        return optimiser(opt)

    def step() -> None:
        with torch_muon_in_float32():
            opt.step()

    return optimiser(opt, step)


def mib(tensors: list[torch.Tensor]) -> float:
    return sum(t.numel() * t.element_size() for t in tensors) / 2**20


def bench(
    name: str, dtype_name: str, repeats: int, compile: bool, device: str, rate: float
) -> None:
    """Time every contender on one parameter set in one Newton–Schulz dtype; ``rate`` is the
    device's matmul rate in that dtype (GFLOP/s), the yardstick of the ceiling printed last."""
    layers, d = SETS[name]
    shapes = layer_shapes(layers, d, "plain")
    dtype = DTYPES[dtype_name]
    contenders = {
        "looped": looped_muon(make_params(shapes, device), dtype),
        "batched": tailmem(make_params(shapes, device), dtype, False),
    }
    compile_seconds = 0.0
    if compile:
        compiled = tailmem(make_params(shapes, device), dtype, True)
        start = time.perf_counter()
        compiled.step()  # compiles one graph per shape group
        sync(device)
        compile_seconds = time.perf_counter() - start
        contenders["batched+compiled"] = compiled
    contenders["torch.optim.Muon"] = torch_muon(make_params(shapes, device), dtype)
    for contender in contenders.values():
        contender.step()  # untimed: state allocation
    best = {n: (float("inf"), float("inf")) for n in contenders}
    memory: dict[str, float | None] = {}
    for _ in range(repeats):
        for n, contender in contenders.items():
            sync(device)
            wall, cpu = time.perf_counter(), time.process_time()
            transient = transient_mib(contender.step, device)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best[n] = (min(best[n][0], wall), min(best[n][1], cpu))
            if transient is not None:
                memory[n] = max(transient, memory.get(n) or 0.0)
    count = sum(m * n for m, n in shapes)
    print(
        f"\n== {name} ({len(shapes)} matrices, {count / 1e6:.2f}M parameters), "
        f"Newton-Schulz in {dtype_name}"
        + (f"; compile {compile_seconds:.1f} s (first step)" if compile else "")
    )
    print(
        f"{'contender':18s} {'wall s':>8s} {'CPU s':>8s} {'vs looped':>9s} {'(in CPU)':>9s} "
        f"{'vs torch':>8s} {'step MiB':>8s} {'state MiB':>9s} {'of rate':>7s}"
    )
    (looped, looped_cpu), theirs = best["looped"], best["torch.optim.Muon"][0]
    gflop = sum(orthogonalize_flops(m, n, "ns5") or 0 for m, n in shapes) / 1e9
    for n, (wall, cpu) in best.items():
        transient = memory.get(n)
        cells = "-" if transient is None else f"{transient:.0f}"
        print(
            f"{n:18s} {wall:8.3f} {cpu:8.3f} {looped / wall:8.2f}x {looped_cpu / cpu:8.2f}x "
            f"{theirs / wall:7.2f}x {cells:>8s} {mib(contenders[n].state()):9.0f} "
            f"{gflop / wall / rate:7.0%}"
        )
    floor, work = gflop / rate, min(looped, looped_cpu)
    print(
        f"ceiling: the set's NS5 products ({gflop:.1f} GFLOP) take {floor:.3f} s at the "
        f"{dtype_name} matmul rate above; batching the same products (none runs faster than "
        f"that large one) cannot beat looped's {work:.3f} s by more than {work / floor:.2f}x"
    )


def main() -> None:
    parser = ScriptParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default="2x256,12x768", help=f"of {', '.join(SETS)}")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    parser.add_argument("--no-compile", action="store_true", help="skip batched+compiled")
    parser.add_argument("--device", default="cpu", help="where the steps run (cpu, cuda)")
    args = parser.parse_args()
    sets, dtypes = args.sets.split(","), args.dtypes.split(",")
    if not set(sets) <= set(SETS) or not set(dtypes) <= set(DTYPES):
        parser.error(f"--sets: expected some of {', '.join(SETS)}; --dtypes: of fp32, bf16")
    if args.threads:
        torch.set_num_threads(args.threads)
    rates = {name: matmul_rate(dtype, args.device, 0.5) for name, dtype in DTYPES.items()}
    fp32, bf16 = rates["fp32"], rates["bf16"]
    print(
        f"torch {torch.__version__}, {args.device}, {torch.get_num_threads()} threads; "
        f"matmul 768x3072x768: "
        f"fp32 {fp32:.0f} GFLOP/s, bf16 {bf16:.0f} GFLOP/s ({bf16 / fp32:.2f}x fp32)"
    )
    for name in sets:
        for dtype_name in dtypes:
            bench(
                name, dtype_name, args.repeats, not args.no_compile, args.device, rates[dtype_name]
            )


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/muon_batched.py"))
