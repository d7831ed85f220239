"""Deterministic, resumable training batches from a :class:`~tailmem.data.bios.BiosDataset`.

Packing
    Epoch ``e`` lists the training items (``dataset.train_items``: every QA sample, and every
    biography with ``train_on="qa+bios"``, with their repetitions) in the order of a permutation
    drawn from ``(seed, e)``, each item ending with EOS. The epochs, concatenated, form one
    endless token stream; every epoch has the same length ``tokens_per_epoch``. Row ``r`` of the
    stream is the window of tokens ``[r * seq_len, (r + 1) * seq_len]`` (``seq_len + 1`` tokens:
    inputs ``x`` and next-token targets ``y``) and batch ``step`` is rows
    ``step * batch_size .. (step + 1) * batch_size - 1``. So ``batch(step)`` is a pure function
    of ``(dataset, seed, batch_size, seq_len, loss_on, step)``: resuming at any step reproduces
    the exact batches, and each epoch presents every item exactly once. Batches may straddle
    epoch boundaries.

Loss mask (``loss_on``)
    ``"answer"`` (default): targets are the answer tokens of QA items whose question starts in
    the same row (a QA item cut by a row boundary contributes nothing to that row; with QA items
    of about 20 tokens and ``seq_len = 512`` that is about 4% of the items each epoch, a
    different 4% every epoch), plus every biography token except the first (biographies are
    plain language-model text). EOS is never a target. ``"all"``: every target position
    (ordinary language-model loss over the packed stream).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from tailmem.data.bios import KIND_QA, BiosDataset
from tailmem.errors import ConfigError

_EPOCH_CACHE = 4
_STREAM_TAG = 0x5EED  # keeps epoch permutations apart from the data set's own random streams


class QATrainStream:
    """Batches ``(x, y, loss_mask)`` of shape ``(batch_size, seq_len)`` for any ``step >= 0``."""

    def __init__(
        self,
        dataset: BiosDataset,
        batch_size: int,
        seq_len: int,
        seed: int,
        loss_on: Literal["answer", "all"] = "answer",
    ) -> None:
        items = dataset.items
        lengths = items.lengths
        longest = int(lengths[dataset.item_kind == KIND_QA].max())
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size: got {batch_size!r}; expected a positive integer")
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < longest:
            raise ConfigError(
                f"seq_len: got {seq_len!r}; expected an integer of at least {longest} "
                "(the longest QA sample with its EOS)"
            )
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"seed: got {seed!r}; expected a non-negative integer")
        if loss_on not in ("answer", "all"):
            raise ConfigError(f"loss_on: got {loss_on!r}; expected 'answer' or 'all'")
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.seed = seed
        self.loss_on = loss_on
        self._train_items = dataset.train_items.astype(np.int64)
        self._flat = items.flat
        self._offsets = items.offsets
        self._lengths = lengths
        self._loss_start = dataset.item_loss_start.astype(np.int64)
        self._is_qa = dataset.item_kind == KIND_QA
        self.tokens_per_epoch = int(lengths[self._train_items].sum())
        self._epochs: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def items_per_epoch(self) -> int:
        """Training items (QA samples and biographies, with repetitions) in one epoch."""
        return len(self._train_items)

    @property
    def steps_per_epoch(self) -> float:
        """Batches per epoch (usually not a whole number)."""
        return self.tokens_per_epoch / (self.batch_size * self.seq_len)

    def item_order(self, epoch: int) -> np.ndarray:
        """Item ids in the order epoch ``epoch`` presents them."""
        return self._epoch(epoch)[0].copy()

    def _epoch(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(item order, start offset of each item within the epoch), memoised."""
        if epoch not in self._epochs:
            rng = np.random.default_rng([self.seed, _STREAM_TAG, epoch])
            perm = rng.permutation(len(self._train_items))
            order = self._train_items[perm]
            starts = np.cumsum(self._lengths[order]) - self._lengths[order]
            if len(self._epochs) >= _EPOCH_CACHE:
                del self._epochs[min(self._epochs)]
            self._epochs[epoch] = (order, starts)
        return self._epochs[epoch]

    def _span(self, first: int, count: int) -> tuple[np.ndarray, ...]:
        """Token, item, offset in the item and the item's global start for ``count`` positions.

        The positions ``first .. first + count - 1`` are contiguous, so they are gathered item
        by item: one binary search per epoch touched, not one per position.
        """
        pieces = []
        position, end = first, first + count
        while position < end:
            epoch, offset = divmod(position, self.tokens_per_epoch)
            base = epoch * self.tokens_per_epoch
            stop = min(end, base + self.tokens_per_epoch)
            order, starts = self._epoch(epoch)
            lo = int(np.searchsorted(starts, offset, side="right")) - 1
            hi = int(np.searchsorted(starts, stop - base - 1, side="right"))
            items = order[lo:hi]
            lengths = self._lengths[items]
            within = np.arange(int(lengths.sum()), dtype=np.int64)
            within -= np.repeat(np.cumsum(lengths) - lengths, lengths)
            keep = slice(offset - int(starts[lo]), offset - int(starts[lo]) + stop - position)
            item = np.repeat(items, lengths)[keep]
            within = within[keep]
            pieces.append(
                (
                    self._flat[self._offsets[item] + within].astype(np.int64),
                    item,
                    within,
                    np.repeat(base + starts[lo:hi], lengths)[keep],
                )
            )
            position = stop
        return tuple(np.concatenate(column) for column in zip(*pieces, strict=True))

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Inputs ``x``, targets ``y`` (int64) and the boolean ``loss_mask`` of batch ``step``."""
        if step < 0:
            raise ValueError(f"step must be non-negative, got {step}")
        shape = (self.batch_size, self.seq_len)
        count = self.batch_size * self.seq_len
        first = step * count
        tokens, item, within, start = self._span(first, count + 1)
        x, y = tokens[:-1].reshape(shape), tokens[1:].reshape(shape)
        if self.loss_on == "all":
            return x, y, np.ones(shape, dtype=bool)
        item, within, start = item[1:], within[1:], start[1:]
        row_start = first + np.arange(count, dtype=np.int64) // self.seq_len * self.seq_len
        before_eos = within < self._lengths[item] - 1
        qa = (within >= self._loss_start[item]) & (start >= row_start)
        mask = before_eos & np.where(self._is_qa[item], qa, within >= 1)
        return x, y, mask.reshape(shape)
