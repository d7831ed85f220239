"""Forward + backward time of the GPT per position encoding and with packed documents.

Baseline (measured in the same run): the default GPT (RoPE, plain causal attention through
``scaled_dot_product_attention(is_causal=True)``). Prints, for the knowledge-qa ``cpu`` preset's
shape (``cpu-small``, batch 8 x 128 tokens, one thread), the step time of ``learned`` and
``none`` positions and of document packing (per-token positions and a boolean block-diagonal
mask, items of about 20 tokens as in knowledge-qa) as ratios to the baseline, and peak RSS. Each
variant's time is the best of ``--repeats`` single steps, the variants interleaved (load from
other processes only ever slows a step down).

    PYTHONPATH=src python benchmarks/gpt_positions.py [--size cpu-small] [--batch 8]
        [--seq-len 128] [--repeats 30] [--threads 1]
"""

from __future__ import annotations

import resource
import time

import torch

from tailmem.cli import ScriptParser, script_main
from tailmem.models.gpt import GPT, gpt_config

VOCAB = 1500


def step_time(model: GPT, x: torch.Tensor, **documents: torch.Tensor) -> float:
    """Seconds of one forward + backward pass."""
    start = time.perf_counter()
    model(x, x, **documents)[1].backward()
    return time.perf_counter() - start


def main() -> None:
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="cpu-small")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    b, t = args.batch, args.seq_len
    x = torch.randint(0, VOCAB, (b, t))
    doc_ids = torch.arange(t).expand(b, t) // 20
    positions = torch.arange(t).expand(b, t) % 20
    models = {
        enc: GPT(gpt_config(args.size, vocab_size=VOCAB, max_seq_len=t, pos_encoding=enc))
        for enc in ("rope", "learned", "none")
    }
    variants = {
        "rope, causal (baseline)": (models["rope"], {}),
        "learned, causal": (models["learned"], {}),
        "none, causal": (models["none"], {}),
        "rope, documents": (models["rope"], {"positions": positions, "doc_ids": doc_ids}),
    }
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(args.repeats):
        for name, (model, documents) in variants.items():
            best[name] = min(best[name], step_time(model, x, **documents))
    base = best["rope, causal (baseline)"]
    print(f"{args.size}, batch {b} x {t}, {args.threads} thread(s), best of {args.repeats}")
    for name, seconds in best.items():
        print(f"  {name:26s} {1e3 * seconds:7.1f} ms   ratio {seconds / base:5.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/gpt_positions.py"))
