"""Where the Gram form of Polar Express pays on this device: a row of ``tailmem.optim.gram_table``.

For wide ``m × n`` matrices (``n = aspect·m``, ``aspect > 1.5``: where the Gram form needs fewer
FLOPs) this times, interleaved, ``orthogonalize(method="polar_express")`` (X space) and
``orthogonalize(method="gram_ns")`` (Gram form) on a batch of such matrices of about
``--elements`` entries in all, and prints per ``(m, aspect)`` the speed of the Gram form
relative to X space (X-space time / Gram time, best of ``--repeats``). The Gram form *pays* where
that is at least ``1 + --margin``; the rules printed are, per aspect, the smallest ``m`` from
which it pays at every larger ``m`` of the grid (dropping rules another one covers), in the
format of ``GRAM_TABLE``, next to the committed row for this device kind.

    PYTHONPATH=src python benchmarks/gram_table.py [--rows 64,128,256,512,768]
        [--aspects 2,3,4,8] [--dtype fp32] [--threads 1] [--repeats 5] [--device cpu]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TypeVar

import torch

from tailmem.cli import ScriptParser, script_main
from tailmem.optim import orthogonalize
from tailmem.optim.gram_table import GRAM_TABLE, GramRule

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
T = TypeVar("T")


def numbers(kind: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argparse type: comma-separated numbers of ``kind``, one line naming a bad one."""

    def parse(text: str) -> list[T]:
        try:
            return [kind(item) for item in text.split(",")]
        except ValueError:
            message = f"expected comma-separated numbers, got {text!r}"
            raise argparse.ArgumentTypeError(message) from None

    return parse


def sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def speedup(
    m: int, aspect: float, elements: int, repeats: int, device: str, dtype: torch.dtype
) -> float:
    """X-space time / Gram time for a batch of ``m × aspect·m`` matrices of about ``elements``
    entries (best of ``repeats``)."""
    n = round(aspect * m)
    count = max(1, round(elements / (m * n)))
    gen = torch.Generator().manual_seed(m * 1000 + n)
    G = torch.randn(count, m, n, generator=gen).to(device=device, dtype=dtype)
    best = {"polar_express": float("inf"), "gram_ns": float("inf")}
    for method in best:
        orthogonalize(G, method)  # warm-up
    for _ in range(repeats):
        for method in best:
            sync(device)
            start = time.perf_counter()
            orthogonalize(G, method)
            sync(device)
            best[method] = min(best[method], time.perf_counter() - start)
    return best["polar_express"] / best["gram_ns"]


def rules(
    pays: dict[tuple[int, float], bool], rows: list[int], aspects: list[float]
) -> list[GramRule]:
    """Per aspect the smallest ``m`` from which the Gram form pays at every larger ``m``; a
    rule covered by another (no more rows needed, no larger aspect) is dropped."""
    found = []
    for aspect in aspects:
        from_rows = None
        for m in reversed(rows):
            if not pays[m, aspect]:
                break
            from_rows = m
        if from_rows is not None:
            found.append(GramRule(min_rows=from_rows, min_aspect=aspect))
    return [
        rule
        for rule in found
        if not any(
            other != rule
            and other.min_rows <= rule.min_rows
            and other.min_aspect <= rule.min_aspect
            for other in found
        )
    ]


def main() -> None:
    parser = ScriptParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=numbers(int), default="64,128,256,512,768")
    parser.add_argument("--aspects", type=numbers(float), default="2,3,4,8")
    parser.add_argument("--elements", type=int, default=2**20, help="entries per timed batch")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    rows, aspects = args.rows, args.aspects
    if any(a <= 1.5 for a in aspects) or any(m < 1 for m in rows):
        parser.error("--aspects must be above 1.5 and --rows positive")
    if args.threads:
        torch.set_num_threads(args.threads)
    kind = torch.device(args.device).type
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.device}, "
        f"{args.dtype}: X-space time / Gram time (> 1: the Gram form is faster)"
    )
    print(f"{'m':>6s} " + " ".join(f"{f'n={a:g}m':>8s}" for a in aspects))
    pays: dict[tuple[int, float], bool] = {}
    for m in rows:
        cells = []
        for aspect in aspects:
            ratio = speedup(m, aspect, args.elements, args.repeats, args.device, DTYPES[args.dtype])
            pays[m, aspect] = ratio >= 1 + args.margin
            cells.append(f"{ratio:7.2f}{'*' if pays[m, aspect] else ' '}")
        print(f"{m:6d} " + " ".join(cells), flush=True)
    print(f"* pays (>= {1 + args.margin:.2f}x)")
    print(f'measured row:  "{kind}": {tuple(rules(pays, rows, aspects))}')
    print(f'committed row: "{kind}": {GRAM_TABLE.get(kind, "none (X space everywhere)")}')


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/gram_table.py"))
