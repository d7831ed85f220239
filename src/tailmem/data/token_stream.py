"""Language-model batches from a token shard, addressed by step (exact resume, no state).

:class:`TokenStream` answers the training loop's ``batch(step, rank, world_size)`` with
epoch-permuted contiguous chunks; :func:`eval_batches` gives a fixed validation set. Shards are
1-D integer arrays (typically the memory-mapped ``train.npy`` / ``val.npy`` of a built corpus,
see :mod:`tailmem.data.corpus`), or paths to such ``.npy`` files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeGuard

import numpy as np
import torch
from torch import Tensor

from tailmem.errors import ConfigError, DataError

_STREAM_TAG = 0xC0DE  # keeps chunk permutations apart from other random streams of the seed
_EPOCH_CACHE = 4


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shard_rows(batch_size: int, rank: int, world_size: int) -> slice:
    if batch_size % world_size:
        raise ConfigError(
            f"global batch size {batch_size} is not divisible by the world size {world_size}"
        )
    per_rank = batch_size // world_size
    return slice(rank * per_rank, (rank + 1) * per_rank)


def _as_tokens(shard: np.ndarray | str | Path) -> np.ndarray:
    tokens = _load_shard(Path(shard)) if isinstance(shard, (str, Path)) else shard
    if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
        raise DataError(f"token shard must be 1-D integers, got {tokens.shape} {tokens.dtype}")
    return tokens


def _load_shard(path: Path) -> np.ndarray:
    """The ``.npy`` token shard at ``path``, memory-mapped."""
    if not path.is_file():
        raise DataError(f"{path}: token shard not found; expected a .npy file")
    try:
        tokens: np.ndarray = np.load(path, mmap_mode="r")
    except ValueError as exc:
        raise DataError(f"{path}: not a .npy token shard ({exc})") from None
    return tokens


def _positive(name: str, value: object) -> int:
    if not _is_int(value) or value < 1:
        raise ConfigError(f"{name}: got {value!r}; expected a positive integer")
    return value


class TokenStream:
    """Training batches of a token shard, addressed by step, in epoch-permuted contiguous chunks.

    The shard is cut into ``n_chunks = (len(shard) - 1) // seq_len`` non-overlapping chunks;
    chunk ``c`` gives ``x = shard[c·T : c·T + T]`` and ``y = shard[c·T + 1 : c·T + T + 1]``
    (``T = seq_len``; chunks ignore document boundaries, which are marked by end-of-text tokens).
    Sample ``g = step·batch_size + row`` is chunk ``perm_e[g mod n_chunks]`` with epoch
    ``e = g // n_chunks`` and ``perm_e`` a permutation drawn from ``(seed, e)``: every epoch shows
    every chunk exactly once, batches may straddle epochs, and ``batch(step)`` is a pure function
    of ``(shard, batch_size, seq_len, seed, step)`` — resuming at any step reproduces the run.
    At most ``seq_len - 1`` trailing tokens are never used. ``batch(step, rank, world_size)``
    returns rank ``rank``'s equal share of the global batch (the training loop's protocol).
    """

    def __init__(
        self, shard: np.ndarray | str | Path, batch_size: int, seq_len: int, seed: int
    ) -> None:
        self.tokens = _as_tokens(shard)
        self.batch_size = _positive("batch_size", batch_size)
        self.seq_len = _positive("seq_len", seq_len)
        if not _is_int(seed) or seed < 0:
            raise ConfigError(f"seed: got {seed!r}; expected a non-negative integer")
        self.seed = seed
        self.n_chunks = (len(self.tokens) - 1) // seq_len
        if self.n_chunks < 1:
            raise DataError(
                f"token shard has {len(self.tokens)} tokens; need at least seq_len + 1 = "
                f"{seq_len + 1}"
            )
        self._orders: dict[int, np.ndarray] = {}

    @property
    def steps_per_epoch(self) -> float:
        return self.n_chunks / self.batch_size

    def chunk_order(self, epoch: int) -> np.ndarray:
        """The chunk permutation of ``epoch`` (memoised for the last few epochs)."""
        if epoch not in self._orders:
            rng = np.random.default_rng([self.seed, _STREAM_TAG, epoch])
            if len(self._orders) >= _EPOCH_CACHE:
                del self._orders[min(self._orders)]
            self._orders[epoch] = rng.permutation(self.n_chunks)
        return self._orders[epoch]

    def chunks(self, step: int) -> np.ndarray:
        """Chunk ids of the rows of the global batch of ``step``."""
        if not _is_int(step) or step < 0:
            raise ValueError(f"step must be a non-negative integer, got {step!r}")
        samples = step * self.batch_size + np.arange(self.batch_size, dtype=np.int64)
        epochs, positions = np.divmod(samples, self.n_chunks)
        ids = np.empty(self.batch_size, dtype=np.int64)
        for epoch in np.unique(epochs):
            sel = epochs == epoch
            ids[sel] = self.chunk_order(int(epoch))[positions[sel]]
        return ids

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> tuple[Tensor, Tensor]:
        """``(x, y)``, int64 tensors ``(batch_size / world_size, seq_len)``; y is x shifted by 1."""
        chunk_ids = self.chunks(step)[_shard_rows(self.batch_size, rank, world_size)]
        return _windows(self.tokens, chunk_ids, self.seq_len)


def _windows(tokens: np.ndarray, chunk_ids: np.ndarray, seq_len: int) -> tuple[Tensor, Tensor]:
    index = chunk_ids[:, None] * seq_len + np.arange(seq_len + 1, dtype=np.int64)[None, :]
    rows = torch.from_numpy(np.asarray(tokens[index], dtype=np.int64))
    return rows[:, :-1], rows[:, 1:]


def eval_batches(
    shard: np.ndarray | str | Path,
    batch_size: int,
    seq_len: int,
    max_batches: int | None = None,
) -> list[tuple[Tensor, Tensor]]:
    """A fixed set of validation batches: the shard's chunks (as in :class:`TokenStream`) in order.

    All ``n_chunks`` chunks, or — when ``max_batches·batch_size`` is smaller — that many chunks
    evenly spaced over the shard, so the whole validation text is represented. The last batch may
    have fewer rows; weight losses by token count. No randomness: every run and every step
    evaluates on the same tokens.
    """
    tokens = _as_tokens(shard)
    batch_size = _positive("batch_size", batch_size)
    seq_len = _positive("seq_len", seq_len)
    n_chunks = (len(tokens) - 1) // seq_len
    if n_chunks < 1:
        raise DataError(
            f"validation shard has {len(tokens)} tokens; need at least seq_len + 1 = {seq_len + 1}"
        )
    ids = np.arange(n_chunks, dtype=np.int64)
    if max_batches is not None:
        wanted = _positive("max_batches", max_batches) * batch_size
        if wanted < n_chunks:
            ids = np.unique(np.linspace(0, n_chunks - 1, wanted).round().astype(np.int64))
    return [
        _windows(tokens, ids[start : start + batch_size], seq_len)
        for start in range(0, len(ids), batch_size)
    ]
