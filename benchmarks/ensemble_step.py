"""Seeds as one model: one ensemble step of E members against E single-model steps.

The same E models (one per seed), the same batches and the same optimiser recipe are trained
two ways in one process, interleaved: E single models, one ``train_step`` after another (what a
run per seed does), and one ``GPT(cfg, members=E)`` ensemble with ``ensemble_step`` (batched
matmuls over members, attention over members × batch, Muon's Newton–Schulz batched over every
member's matrices). Printed: the step time of each way (the best of ``--repeats`` windows of
``--window`` steps), their ratio (E single steps / one ensemble step: > 1 means the ensemble pays),
tokens/s of each, the largest parameter difference between ensemble member k and single model k
after the timed steps (the equivalence the tests assert), and the peak RSS (CPU) or peak CUDA
memory.

Defaults: the knowledge-qa ``cpu`` preset's model (2 layers x d = 256, 4 heads, vocabulary
1578, batch 8 x 128 tokens), the hybrid arm ``muon:q,k,v,o,w_in,w_gate,w_out adam:*``, 3 members,
one thread (that preset trains two runs side by side with one thread each).

    PYTHONPATH=src python benchmarks/ensemble_step.py [--members 3] [--size cpu] [--n-layer 2]
        [--batch 8] [--seq 128] [--vocab 1578] [--threads 1] [--device cpu|cuda] [--bf16]
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

import torch

from tailmem.cli import ScriptParser, script_main
from tailmem.models.gpt import GPT, gpt_config
from tailmem.optim.registry import REGISTRY
from tailmem.optim.routing import route
from tailmem.train.distributed import DistContext
from tailmem.train.ensemble import ensemble_step
from tailmem.train.loop import TrainConfig, train_step

RECIPE = "muon:q,k,v,o,w_in,w_gate,w_out adam:*"


def window_seconds(step: Callable[[], None], length: int, device: torch.device) -> float:
    """Seconds per step over a window of ``length`` steps."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(length):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / length


def main() -> None:
    parser = ScriptParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--size", default="cpu")
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--ffn", default="gated", choices=("plain", "gated"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=1578)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (fp32 weights)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    precision = "bf16" if args.bf16 else "fp32"
    cfg = gpt_config(
        args.size, vocab_size=args.vocab, ffn=args.ffn, n_layer=args.n_layer, max_seq_len=args.seq
    )
    settings = {"muon": REGISTRY["muon"].setting(0.02), "adam": REGISTRY["adam"].setting(1e-3)}
    singles = []
    for seed in range(args.members):
        torch.manual_seed(seed)
        singles.append(GPT(cfg).to(device))
    ensemble = GPT.stack(singles)
    single_opts = [route(m, RECIPE, settings) for m in singles]
    ensemble_opt = route(ensemble, RECIPE, settings)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(
        0, args.vocab, (args.members, args.batch, args.seq + 1), generator=generator
    ).to(device)
    x, y = tokens[..., :-1], tokens[..., 1:]
    train_cfg = TrainConfig(steps=1, device=args.device, precision=precision, grad_clip=1.0)
    ctx = DistContext()

    def singles_step() -> None:
        for k, (model, opt) in enumerate(zip(singles, single_opts, strict=True)):
            lrs = [g["lr"] for g in opt.param_groups]
            train_step(model, opt, (x[k], y[k]), lrs, train_cfg, ctx)

    def ensemble_step_once() -> None:
        lrs = [g["lr"] for g in ensemble_opt.param_groups]
        ensemble_step(ensemble, ensemble_opt, (x, y), lrs, grad_clip=1.0, precision=precision)

    singles_step()  # first steps allocate optimiser state; keep them out of the timing
    ensemble_step_once()
    single_times, ensemble_times = [], []
    for _ in range(args.repeats):  # interleaved: load from elsewhere hits both ways alike
        single_times.append(window_seconds(singles_step, args.window, device))
        ensemble_times.append(window_seconds(ensemble_step_once, args.window, device))
    t_single, t_ensemble = min(single_times), min(ensemble_times)
    step_tokens = args.members * args.batch * args.seq
    worst = 0.0
    for k, single in enumerate(singles):
        member = ensemble.member(k)
        for a, b in zip(member.parameters(), single.parameters(), strict=True):
            worst = max(worst, ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item())
    print(
        f"{args.members} members of {args.n_layer} x {cfg.d_model} ({args.ffn} FFN, vocab "
        f"{args.vocab}), batch {args.batch} x {args.seq}, {precision}, {args.threads} thread(s), "
        f"{device.type}; recipe {RECIPE!r}"
    )
    for name, seconds in (
        (f"{args.members} single steps", t_single),
        ("one ensemble step", t_ensemble),
    ):
        print(f"  {name:>18}: {seconds * 1e3:8.1f} ms  {step_tokens / seconds:9.0f} tok/s")
    print(f"  ratio single / ensemble: {t_single / t_ensemble:.2f}x (> 1: the ensemble pays)")
    print(f"  max relative parameter difference member k vs single k: {worst:.2e}")
    if device.type == "cuda":
        print(f"  peak CUDA memory: {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    print(f"  peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/ensemble_step.py"))
