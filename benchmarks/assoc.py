"""Speed of the associative-memory lab (tailmem.assoc) against a straightforward dense baseline.

Prints:
1. the one-step ϱ^ε table of paper A (K ∈ {99, 300, 999, 3000} × {decoupled, coupled} ×
   {GD, SignGD, Muon}, ε = 0.1) and the time it took (target: ≤ 10 s on 2 cores);
2. the straightforward dense fp64 implementation (full K×K SVD / sign, then bisection on η with a
   full K×K softmax per trial) on the smaller K, its time, and the speed-up per K;
3. multi-step runs at K = 999 (1,000 steps, 3 optimisers × 2 embeddings; target ≤ 60 s) against
   the dense per-step cost measured on a few steps and extrapolated;
4. peak RSS.

Usage: ``PYTHONPATH=src python benchmarks/assoc.py [--baseline-ks 99 300]``.
"""

from __future__ import annotations

import math
import resource
import sys
import time

import torch

import tailmem.assoc as A
from tailmem.assoc.memory import DenseMemory
from tailmem.cli import ScriptParser, script_main
from tailmem.optim.orthogonalize import orthogonalize

KS = (99, 300, 999, 3000)
EMBEDDINGS = ("decoupled", "coupled")
OPTIMIZERS = ("gd", "signgd", "muon")
EPS = 0.1
ALPHA, BETA = 0.8, 0.2
MULTI_LR = {"gd": 200.0, "signgd": 0.01, "muon": 0.02}


def fast_table() -> tuple[dict[tuple[int, str, str], float], float]:
    start = time.perf_counter()
    table = {
        (K, emb, opt): A.one_step_rho(K, emb, opt, ALPHA, BETA, EPS)
        for K in KS
        for emb in EMBEDDINGS
        for opt in OPTIMIZERS
    }
    return table, time.perf_counter() - start


def naive_rho(K: int, embedding: str, optimizer: str) -> float:
    """Dense fp64: full gradient, full SVD/sign, bisection on η with a full softmax per trial."""
    E, Et = A.make_embedding(embedding, K).dense()
    p = A.two_group(K, ALPHA, BETA).p
    G = A.population_grad(torch.zeros(K, K, dtype=torch.float64), E, Et, p)
    U = {"gd": G, "signgd": torch.sign(G), "muon": orthogonalize(G, "svd")}[optimizer]

    def probs(eta: float) -> torch.Tensor:
        return A.correct_probabilities(-eta * U, E, Et)

    hi = 1e-3
    while float(probs(hi).max()) < 1 - EPS:
        hi *= 2
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if float(probs(mid).max()) >= 1 - EPS:
            hi = mid
        else:
            lo = mid
    return float(probs(hi).min())


def multi_step() -> tuple[dict[tuple[str, str], float], float]:
    K, steps = 999, 1000
    start = time.perf_counter()
    final = {}
    for emb in EMBEDDINGS:
        for opt in OPTIMIZERS:
            memory = A.build_memory(A.two_group(K, ALPHA, BETA), A.make_embedding(emb, K), opt)
            lrs = A.lr_schedule("constant", steps, K, lr=MULTI_LR[opt])
            traj = A.train(memory, opt, lrs, record=[0, steps])
            final[(emb, opt)] = float(traj.loss[-1])
    return final, time.perf_counter() - start


def dense_step_cost(n_steps: int = 3) -> float:
    """Seconds per dense fp64 step at K = 999 (mean over optimisers and embeddings)."""
    K = 999
    total = 0.0
    for emb in EMBEDDINGS:
        for opt in OPTIMIZERS:
            memory = DenseMemory(A.two_group(K, ALPHA, BETA), A.make_embedding(emb, K))
            lrs = A.lr_schedule("constant", n_steps, K, lr=MULTI_LR[opt])
            start = time.perf_counter()
            A.train(memory, opt, lrs, record=[0])
            total += (time.perf_counter() - start) / (n_steps + 1)
    return total / (len(EMBEDDINGS) * len(OPTIMIZERS))


def main(argv: list[str] | None = None) -> int:
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-ks", type=int, nargs="*", default=[99, 300])
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    table, t_fast = fast_table()
    print(f"\n1. one-step rho^eps (eps={EPS}, head_mass={ALPHA}, head_fraction={BETA})")
    header = "K".rjust(6) + "".join(
        f"{e[:3]}-{o}".rjust(14) for e in EMBEDDINGS for o in OPTIMIZERS
    )
    print(header)
    for K in KS:
        row = "".join(f"{table[(K, e, o)]:14.6g}" for e in EMBEDDINGS for o in OPTIMIZERS)
        print(f"{K:6d}{row}")
    print(f"table time: {t_fast:.2f} s (target <= 10 s)")

    print("\n2. straightforward dense fp64 baseline (full SVD + bisection with full softmax)")
    for K in args.baseline_ks:
        start = time.perf_counter()
        worst = 0.0
        for emb in EMBEDDINGS:
            for opt in OPTIMIZERS:
                ref = naive_rho(K, emb, opt)
                worst = max(worst, abs(ref - table.get((K, emb, opt), ref)) / max(ref, 1e-300))
        t_naive = time.perf_counter() - start
        start = time.perf_counter()
        for emb in EMBEDDINGS:
            for opt in OPTIMIZERS:
                A.one_step_rho(K, emb, opt, ALPHA, BETA, EPS)
        t_ours = time.perf_counter() - start
        print(
            f"K={K:5d}: baseline {t_naive:7.2f} s, ours {t_ours:6.3f} s, "
            f"speed-up {t_naive / t_ours:8.1f}x, max relative difference {worst:.1e}"
        )

    final, t_multi = multi_step()
    per_step = dense_step_cost()
    dense_estimate = per_step * 1001 * len(final)
    print("\n3. multi-step K=999, 1000 steps, final loss:")
    for (emb, opt), loss in final.items():
        print(f"   {emb:9s} {opt:6s} lr={MULTI_LR[opt]:<6g} loss={loss:.3e}")
    print(
        f"time: {t_multi:.2f} s (target <= 60 s); dense fp64 estimate {dense_estimate:.0f} s "
        f"({per_step * 1e3:.0f} ms/step), speed-up {dense_estimate / t_multi:.0f}x"
    )
    scale = 1 if sys.platform == "darwin" else 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20
    print(f"\npeak RSS: {peak:.0f} MiB")
    ok = t_fast <= 10 and t_multi <= 60 and all(math.isfinite(v) for v in table.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/assoc.py"))
