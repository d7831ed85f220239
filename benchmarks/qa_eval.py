"""Cost of knowledge-qa's evaluation (FTA + whole-answer exact match in one pass) against the
FTA-only pass it replaced, and against training, at a preset's scale.

Prints, for the preset's model and data (default: cpu):
1. the FTA-only baseline (prompts only, logits at each prompt's last position) and the FTA + EM
   pass (prompt + answer, logits at every answer position), seconds per evaluation of every
   question, best of ``--repeat``, and their ratio;
2. one training step (forward, backward, Adam) on the preset's batch;
3. the evaluation's share of one run, before (``steps / eval_every`` FTA-only evaluations) and
   after (one more, at step 0, each FTA + EM), and the run's relative cost increase;
4. peak RSS.

Usage: ``PYTHONPATH=src python benchmarks/qa_eval.py [--preset cpu] [--repeat 5]``.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import torch

from tailmem.cli import ScriptParser, script_main
from tailmem.config import load_config
from tailmem.data.bios import BiosDataset, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.experiments.knowledge_qa import Config
from tailmem.experiments.knowledge_qa.fta import (
    FTAEvaluator,
    QABatches,
    answer_loss_sum,
    logits_at,
)
from tailmem.models.gpt import GPT


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def fta_only(model: GPT, dataset: BiosDataset, batch_size: int) -> Callable[[], None]:
    """The replaced evaluation: each prompt alone, the logits at its last position."""
    order = np.argsort(dataset.item_loss_start[dataset.eval_items], kind="stable")
    batches = []
    for start in range(0, len(order), batch_size):
        b = dataset.eval_batch(order[start : start + batch_size])
        batches.append((torch.from_numpy(b.tokens), torch.from_numpy(b.lengths - 1)))

    @torch.no_grad()
    def run() -> None:
        for tokens, last in batches:
            logits_at(model, tokens, last).argmax(-1)

    return run


def main() -> None:
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = load_config(Config, "knowledge-qa", args.preset)
    train = cfg.train
    with tempfile.TemporaryDirectory() as cache:
        dataset = build_dataset(cfg.data, cache)
        model = GPT(cfg.model.build(dataset.vocab_size, cfg.ffns[0], train.seq_len))
        model.eval()
        baseline = best_of(args.repeat, fta_only(model, dataset, train.eval_batch_size))
        evaluator = FTAEvaluator(dataset, train.eval_batch_size)
        both = best_of(args.repeat, lambda: evaluator(0, model))
        model.train()
        source = QABatches(QATrainStream(dataset, train.batch_size, train.seq_len, 0, cfg.loss_on))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step() -> None:
            x, y = source.batch(0)
            loss = answer_loss_sum(model, x, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        step()  # warm up
        per_step = best_of(args.repeat, step)
    n_q = len(dataset.eval_items)
    answers = (
        dataset.items.lengths[dataset.eval_items] - 1 - dataset.item_loss_start[dataset.eval_items]
    )
    print(f"preset {args.preset}: {n_q} questions, answer tokens mean {answers.mean():.2f} "
          f"max {answers.max()}, eval batch {train.eval_batch_size}")  # fmt: skip
    print(f"FTA-only evaluation (baseline):  {baseline * 1e3:8.1f} ms")
    print(f"FTA + exact match evaluation:    {both * 1e3:8.1f} ms  ({both / baseline:.2f}x)")
    print(f"one training step:               {per_step * 1e3:8.1f} ms")
    evals_before = train.steps // train.eval_every if train.eval_every else 1
    before = train.steps * per_step + evals_before * baseline
    after = train.steps * per_step + (evals_before + 1) * both
    print(f"one run of {train.steps} steps: evaluation {evals_before * baseline:.2f} s of "
          f"{before:.2f} s before, {(evals_before + 1) * both:.2f} s of {after:.2f} s after "
          f"(+{(after / before - 1) * 100:.1f}% per run)")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS {peak / (1024 if sys.platform != 'darwin' else 1024**2):.0f} MiB")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/qa_eval.py"))
