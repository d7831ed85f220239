"""What the training loop needs from data: batches addressed by step.

The data position of a run is its step. A source answers ``batch(step, rank, world_size)`` with
the rows of the *global* batch of that step that belong to ``rank``, as a pair ``(x, y)`` of
integer tensors ``(rows, T)``; ``y == -100`` marks targets that do not count (padding, prompt
tokens). A model that reads vectors rather than token ids (in-context regression) gets ``x`` of
shape ``(rows, T, features)`` and real-valued ``y`` ``(rows, T)``, -100 marking the positions that
do not count, with a ``loss_fn`` of its own. The answer must depend only on the step, the rank,
the world size and the source's own seed — never on how many batches were drawn before — so that

- resuming at step s continues with exactly the batches an uninterrupted run would have seen, and
- the union over ranks of the shards is the same global batch for every world size, which makes a
  2-rank run equal to a 1-process run with the same global batch.

A source may also have ``state_dict()`` / ``load_state_dict(state)`` (for example a cache keyed by
epoch); the loop stores that state in each checkpoint and restores it on resume.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from tailmem.errors import ConfigError, DataError


@runtime_checkable
class BatchSource(Protocol):
    """Deterministic batches addressed by step (see the module docstring)."""

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> tuple[Tensor, Tensor]: ...


def shard_rows(batch_size: int, rank: int, world_size: int) -> slice:
    """Rows ``[rank·B/W, (rank+1)·B/W)`` of a global batch of ``batch_size`` rows.

    The global batch must split evenly so every rank does the same work per step.
    """
    if batch_size % world_size:
        raise ConfigError(
            f"global batch size {batch_size} is not divisible by the world size {world_size}"
        )
    per_rank = batch_size // world_size
    return slice(rank * per_rank, (rank + 1) * per_rank)


class RandomWindows:
    """Language-model batches: random windows of a 1-D token stream.

    Step s draws ``batch_size`` window starts uniformly from a generator seeded with
    ``(seed, s)``; row i is ``x = tokens[start_i : start_i + seq_len]`` and ``y`` the same window
    shifted by one token. Each rank then keeps its rows (:func:`shard_rows`).
    """

    def __init__(self, tokens: Tensor, batch_size: int, seq_len: int, seed: int) -> None:
        if tokens.ndim != 1 or tokens.dtype not in (torch.int32, torch.int64, torch.uint16):
            raise DataError(
                f"RandomWindows needs a 1-D integer token tensor, got {tuple(tokens.shape)} "
                f"{tokens.dtype}"
            )
        if tokens.numel() < seq_len + 1:
            raise DataError(
                f"token stream has {tokens.numel()} tokens; need at least seq_len + 1 = "
                f"{seq_len + 1}"
            )
        if batch_size < 1 or seq_len < 1:
            raise ConfigError(f"batch_size and seq_len must be >= 1, got {batch_size}, {seq_len}")
        self.tokens, self.batch_size, self.seq_len, self.seed = tokens, batch_size, seq_len, seed
        self._offsets = torch.arange(seq_len + 1)

    def starts(self, step: int) -> Tensor:
        """Window starts of the whole global batch of ``step``."""
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        high = self.tokens.numel() - self.seq_len
        return torch.randint(0, high, (self.batch_size,), generator=gen)

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> tuple[Tensor, Tensor]:
        rows = self.starts(step)[shard_rows(self.batch_size, rank, world_size)]
        windows = self.tokens[rows[:, None] + self._offsets].long()
        return windows[:, :-1], windows[:, 1:]
