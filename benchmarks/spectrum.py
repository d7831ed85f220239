"""Spectral metrics of every matrix of a 12-layer, d = 768 transformer: batched vs naive loop.

Matrices per layer: q, k, v, o (768 x 768), w_in (3072 x 768), w_out (768 x 3072), the stacked
VO product W_O W_V (768 x 768) and the 12 per-head VO products W_O,h W_V,h (768 x 768, rank 64).

Batched (ours): one ``svdvals`` call per shape group (q/k/v/o/stacked VO together; w_in with
w_out transposed to the same tall shape) and the per-head VO spectra from thin QR factors
(``vo_head_singular_values``: 64 x 64 SVDs instead of 768 x 768).
Naive baseline, measured in the same run: one ``svdvals`` per matrix in its stored orientation
and one per explicitly formed per-head product.

Prints wall and CPU time of both paths, their ratios, the largest metric difference between the
two paths and the peak RSS. On a shared machine, CPU time is the steadier number, and with
more threads than free cores OpenMP's spinning waits can inflate wall time tenfold: run with
``OMP_WAIT_POLICY=PASSIVE`` (or ``OMP_NUM_THREADS=1``) there.
Target: the batched path in <= 10 s on 2 CPU cores.

    PYTHONPATH=src python benchmarks/spectrum.py [--layers 12] [--naive-layers 12]

``--naive-layers n`` times the baseline on the first n layers only and scales it linearly to all
layers (every layer is the same work); the output says when it does.
"""

from __future__ import annotations

import resource
import time

import torch

from tailmem.cli import ScriptParser, script_main
from tailmem.metrics.spectrum import (
    METRICS,
    isotropy_metrics_many,
    spectral_metrics,
    vo_head_isotropy,
    vo_head_products,
    vo_stacked,
)

D, FF, HEADS = 768, 3072, 12


def make_model(layers: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random float32 weights (torch Linear layout) with a decaying spectrum per matrix."""
    gen = torch.Generator().manual_seed(seed)
    shapes = {"q": (D, D), "k": (D, D), "v": (D, D), "o": (D, D), "w_in": (FF, D), "w_out": (D, FF)}
    weights = {}
    for i in range(layers):
        for name, (m, n) in shapes.items():
            w = torch.randn(m, n, generator=gen) / n**0.5
            weights[f"{i}.{name}"] = w * torch.linspace(1.0, 0.05, n)
    return weights


def batched(weights: dict[str, torch.Tensor], layers: int) -> dict[str, dict[str, float]]:
    named = dict(weights)
    w_v = torch.stack([weights[f"{i}.v"] for i in range(layers)])
    w_o = torch.stack([weights[f"{i}.o"] for i in range(layers)])
    stacked = vo_stacked(w_v, w_o)
    named.update({f"{i}.vo": stacked[i] for i in range(layers)})
    out = isotropy_metrics_many(named)
    heads = vo_head_isotropy(w_v, w_o, HEADS)
    for i in range(layers):
        for h in range(HEADS):
            out[f"{i}.vo_head{h}"] = {key: float(heads[key][i, h]) for key in METRICS}
    return out


def naive(weights: dict[str, torch.Tensor], layers: range) -> dict[str, dict[str, float]]:
    out = {}

    def one(name: str, w: torch.Tensor) -> None:
        s = torch.linalg.svdvals(w)  # stored orientation, one call per matrix
        rtol = max(w.shape) * torch.finfo(w.dtype).eps
        out[name] = {key: float(v) for key, v in spectral_metrics(s, rtol=rtol).items()}

    for i in layers:
        for name in ("q", "k", "v", "o", "w_in", "w_out"):
            one(f"{i}.{name}", weights[f"{i}.{name}"])
        w_v, w_o = weights[f"{i}.v"], weights[f"{i}.o"]
        one(f"{i}.vo", w_o @ w_v)
        products = vo_head_products(w_v, w_o, HEADS)
        for h in range(HEADS):
            one(f"{i}.vo_head{h}", products[h])
    return out


def main() -> None:
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--naive-layers", type=int, default=None)
    args = parser.parse_args()
    naive_layers = args.layers if args.naive_layers is None else args.naive_layers
    weights = make_model(args.layers)
    print(
        f"model: {args.layers} layers, d={D}, ffn={FF}, heads={HEADS}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )

    start, cpu = time.perf_counter(), time.process_time()
    fast = batched(weights, args.layers)
    t_fast, c_fast = time.perf_counter() - start, time.process_time() - cpu

    start, cpu = time.perf_counter(), time.process_time()
    slow = naive(weights, range(naive_layers))
    scale = args.layers / naive_layers
    t_slow = (time.perf_counter() - start) * scale
    c_slow = (time.process_time() - cpu) * scale

    worst = max(
        abs(fast[name][key] - slow[name][key]) / max(1.0, abs(slow[name][key]))
        for name in slow
        for key in METRICS
    )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    scaled = "" if naive_layers == args.layers else f" (timed on {naive_layers} layers, scaled)"
    print(f"matrices: {len(fast)} ({args.layers * (7 + HEADS)} expected)")
    print(f"batched : {t_fast:7.2f} s wall, {c_fast:7.2f} s CPU")
    print(f"naive   : {t_slow:7.2f} s wall, {c_slow:7.2f} s CPU{scaled}")
    print(f"speed-up: {t_slow / t_fast:7.2f} x wall, {c_slow / c_fast:5.2f} x CPU")
    print(f"max relative metric difference batched vs naive: {worst:.2e}")
    print(f"peak RSS: {peak_mb:7.0f} MiB")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/spectrum.py"))
