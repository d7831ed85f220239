"""A tiny, fully seeded training run for the subprocess tests (kill/resume and torchrun).

Usage: ``python tests/train/tiny_run.py OUT_DIR [--steps N] [--ckpt-every N] [--log-every N]
[--batch B] [--grad-accum K] [--sleep SECONDS] [--crash-at STEP]``; under ``torchrun`` every
rank runs it. ``--sleep`` slows each batch down so a test can kill the process part-way through;
``--crash-at`` makes every rank raise when the batch of that (0-based) step is requested, then
rebuilds model, optimiser and data from scratch in the same process and trains again, which
resumes from the last checkpoint (a process restart without the restart, to save a launch).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from tailmem.models.gpt import GPT, gpt_config
from tailmem.train import RandomWindows, TrainConfig, TrainResult, seed_everything, train

VOCAB = 48
SEQ = 32


class SlowSource(RandomWindows):
    """RandomWindows that sleeps before each batch (to widen the window for a kill) and can
    simulate a crash."""

    def __init__(self, *args: object, sleep: float, crash_at: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.sleep, self.crash_at = sleep, crash_at

    def batch(self, step: int, rank: int = 0, world_size: int = 1):
        if step == self.crash_at:
            raise RuntimeError(f"simulated crash at step {step}")
        time.sleep(self.sleep)
        return super().batch(step, rank, world_size)


def attempt(args: argparse.Namespace, crash_at: int) -> TrainResult:
    """Build model, optimiser and data from the seed and train (resuming if checkpoints exist)."""
    seed_everything(0)
    model = GPT(gpt_config("tiny", vocab_size=VOCAB, max_seq_len=SEQ))
    # A stream with structure (a noisy repeating pattern) so the loss keeps moving.
    gen = torch.Generator().manual_seed(7)
    pattern = torch.randint(0, VOCAB, (97,), generator=gen)
    stream = pattern.repeat(60)
    noise = torch.rand(stream.shape, generator=gen) < 0.1
    stream[noise] = torch.randint(0, VOCAB, (int(noise.sum()),), generator=gen)
    data = SlowSource(stream, args.batch, SEQ, seed=3, sleep=args.sleep, crash_at=crash_at)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.8, 0.95), weight_decay=0.0)
    cfg = TrainConfig(
        steps=args.steps,
        schedule="cosine",
        warmup_steps=5,
        grad_clip=1.0,
        grad_accum=args.grad_accum,
        log_every=args.log_every,
        ckpt_every=args.ckpt_every,
        keep_ckpts=None,
        save_final=False,
        progress=False,
    )
    return train(model, optimizer, data, cfg, args.out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--ckpt-every", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--crash-at", type=int, default=-1)
    args = parser.parse_args()

    torch.set_num_threads(1)
    crashed_at = None
    if args.crash_at >= 0:
        try:
            attempt(args, args.crash_at)
        except RuntimeError as exc:
            if "simulated crash" not in str(exc):
                raise
            crashed_at = args.crash_at
    result = attempt(args, -1)
    if int(torch.distributed.is_initialized() and torch.distributed.get_rank()) == 0:
        summary = {
            "status": result.status,
            "resumed_from": result.resumed_from,
            "crashed_at": crashed_at,
        }
        (args.out / "result.json").write_text(json.dumps(summary))


if __name__ == "__main__":
    main()
