"""Deterministic, resumable training batches from a :class:`~tailmem.data.bios.BiosDataset`.

Packing: items are placed whole, never cut
    A row holds ``seq_len + 1`` tokens (inputs ``x = row[:-1]``, next-token targets
    ``y = row[1:]``) filled with whole training items (``dataset.train_items``: every QA sample,
    and every biography with ``train_on="qa+bios"``, with their repetitions), each ending with
    EOS; the rest of the row is padding (EOS ids whose targets are never in the loss). An item
    never straddles two rows, so every answer token of every item is a target in the epoch that
    presents it. (An earlier version cut the stream into windows; at ``seq_len = 128`` that
    dropped about 13% of the answer tokens every epoch, the rarest facts most.)

    Which item *lengths* share a row is fixed once, by packing the training multiset's lengths
    into nearly full rows (:func:`pack_rows`; padding is about 0.2% of the tokens at the cpu
    preset); it is independent of the seed, so every epoch has exactly ``rows_per_epoch``
    rows. Epoch ``e`` then draws, from ``(seed, e)``, which item of each length fills each slot
    of that length, the order of the rows and the order of the items within each row. So each
    epoch presents every item exactly once (repeated items as often as they repeat), in a fresh
    random arrangement.

    Row ``r`` of the endless stream is row ``r mod rows_per_epoch`` of epoch
    ``r // rows_per_epoch``; batch ``step`` is rows ``step * batch_size .. (step + 1) *
    batch_size - 1`` (a batch may straddle epoch boundaries). So ``batch(step)`` is a pure
    function of ``(dataset, seed, batch_size, seq_len, loss_on, packing, epoch_aligned,
    step)``: resuming at any step reproduces the exact batches.

    ``epoch_aligned``: every epoch is a whole number of batches. The packed rows are followed by
    empty rows (padding only, no target in the loss) up to a multiple of ``batch_size``, so no
    batch straddles two epochs and ``E * steps_per_epoch`` steps train exactly ``E`` epochs:
    every item is seen exactly ``E`` times (times its repetitions). The last batch of an epoch
    then holds fewer items, as in an implementation that cuts each epoch into batches.

Attention across items (``packing``)
    ``"cross"`` (default): a row is one sequence; an item's tokens attend to the earlier items
    of its row, at the positions they have in the row. ``"document"``: each item is its own
    document; :meth:`QATrainStream.packed` gives every input token its position within its item
    (restarting at 0) and its slot in the row (``doc_ids``), for a model that attends only
    within a document (:func:`tailmem.models.gpt.document_mask`). Training then sees each QA
    item exactly as evaluation asks it: alone, from position 0.

Loss mask (``loss_on``)
    ``"answer"`` (default): targets are the answer tokens of QA items, plus every biography
    token except the first (biographies are plain language-model text). EOS and padding are
    never targets. ``"all"``: every target position that is not padding (ordinary
    language-model loss over the packed items, including each item's first token after the
    previous item's EOS; with ``packing="document"`` that target is left out, because its input
    belongs to the previous item's document).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from tailmem.data.bios import KIND_QA, BiosDataset
from tailmem.errors import ConfigError

_EPOCH_CACHE = 4
_STREAM_TAG = 0x5EED  # keeps epoch permutations apart from the data set's own random streams


def _fullest_row(values: np.ndarray, counts: np.ndarray, capacity: int) -> np.ndarray:
    """How many entries of each length make the fullest row the remaining ``counts`` allow.

    A bounded subset sum over copies of the distinct lengths (at most ``capacity // length``
    copies each), longest first, so that among equally full rows the one of longer entries
    wins and the short ones stay to fill gaps later.
    """
    copies = [
        (i, int(length))
        for i in range(len(values) - 1, -1, -1)
        for length in [values[i]] * int(min(counts[i], capacity // values[i]))
    ]
    reach = np.zeros(capacity + 1, dtype=bool)
    reach[0] = True
    via = np.full(capacity + 1, -1, dtype=np.int64)  # the copy that first reached each sum
    for j, (_, length) in enumerate(copies):
        fresh = np.zeros_like(reach)
        fresh[length:] = reach[:-length] & ~reach[length:]
        via[fresh] = j
        reach |= fresh
    pattern = np.zeros(len(values), dtype=np.int64)
    total = int(np.flatnonzero(reach)[-1])
    while total:
        i, length = copies[via[total]]
        pattern[i] += 1
        total -= length
    return pattern


def pack_rows(lengths: np.ndarray, capacity: int) -> tuple[np.ndarray, int]:
    """Pack entries of the given lengths into rows of ``capacity``: the row of every entry, and
    the number of rows.

    Greedy by patterns (the cutting-stock "sequential heuristic"): find the fullest row the
    remaining entries can make (:func:`_fullest_row`), fill as many rows with that pattern as
    the remaining counts allow, repeat. The cost grows with the number of distinct lengths, not
    of entries (1.7 million QA samples at ``m = 15`` pack in a few hundredths of a second), and
    the rows come out nearly full: at ``m = 7``, rows of 129 tokens, 571 rows against the bound
    of 570 (best-fit decreasing needs 597).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and (lengths.min() < 1 or lengths.max() > capacity):
        span = f"{lengths.min()}..{lengths.max()}"
        raise ValueError(f"lengths must lie in [1, {capacity}], got {span}")
    values, counts = np.unique(lengths, return_counts=True)
    slot_rows, slot_lengths = [], []
    n_rows = 0
    while counts.any():
        pattern = _fullest_row(values, counts, capacity)
        used = pattern > 0
        repeats = int((counts[used] // pattern[used]).min())
        counts -= repeats * pattern
        per_row = np.repeat(values, pattern)
        slot_rows.append(np.repeat(np.arange(n_rows, n_rows + repeats), len(per_row)))
        slot_lengths.append(np.tile(per_row, repeats))
        n_rows += repeats
    row_of = np.empty(len(lengths), dtype=np.int64)
    if n_rows:
        slot_row = np.concatenate(slot_rows)
        slot_length = np.concatenate(slot_lengths)
        by_length = np.argsort(slot_length, kind="stable")
        row_of[np.argsort(lengths, kind="stable")] = slot_row[by_length]
    return row_of, n_rows


@dataclass(frozen=True)
class PackedBatch:
    """One batch, each array ``(batch_size, seq_len)``: inputs ``x``, next-token targets ``y``,
    the boolean ``loss_mask``, and per input token its ``positions`` within its item and
    ``doc_ids`` (its item's slot in the row; every padding token is a slot of its own)."""

    x: np.ndarray
    y: np.ndarray
    loss_mask: np.ndarray
    positions: np.ndarray
    doc_ids: np.ndarray


class QATrainStream:
    """Batches ``(x, y, loss_mask)`` of shape ``(batch_size, seq_len)`` for any ``step >= 0``
    (:meth:`packed` adds the item positions and slots that ``packing="document"`` needs)."""

    def __init__(
        self,
        dataset: BiosDataset,
        batch_size: int,
        seq_len: int,
        seed: int,
        loss_on: Literal["answer", "all"] = "answer",
        packing: Literal["cross", "document"] = "cross",
        epoch_aligned: bool = False,
    ) -> None:
        items = dataset.items
        lengths = items.lengths
        train_items = dataset.train_items.astype(np.int64)
        longest = int(lengths[train_items].max())
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size: got {batch_size!r}; expected a positive integer")
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < longest - 1:
            raise ConfigError(
                f"seq_len: got {seq_len!r}; expected an integer of at least {longest - 1} "
                f"(a row of seq_len + 1 tokens must hold the longest training item, {longest} "
                "tokens with its EOS, whole)"
            )
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"seed: got {seed!r}; expected a non-negative integer")
        if loss_on not in ("answer", "all"):
            raise ConfigError(f"loss_on: got {loss_on!r}; expected 'answer' or 'all'")
        if packing not in ("cross", "document"):
            raise ConfigError(f"packing: got {packing!r}; expected 'cross' or 'document'")
        self.batch_size = batch_size
        self.packing = packing
        self.seq_len = seq_len
        self.seed = seed
        self.loss_on = loss_on
        self._eos = dataset.eos_id
        self._flat = items.flat
        self._offsets = items.offsets
        self._lengths = lengths
        self._loss_start = dataset.item_loss_start.astype(np.int64)
        self._is_qa = dataset.item_kind == KIND_QA
        self._train_items = train_items
        item_lengths = lengths[train_items]
        row_of, self.packed_rows = pack_rows(item_lengths, seq_len + 1)
        self.epoch_aligned = epoch_aligned
        self.rows_per_epoch = (
            -(-self.packed_rows // batch_size) * batch_size if epoch_aligned else self.packed_rows
        )
        # Slots and items both sorted by length: slot j is filled by an item of its length.
        by_length = np.argsort(item_lengths, kind="stable")
        self._slot_row = row_of[by_length]
        self._slot_length = item_lengths[by_length]
        self._items_by_length = train_items[by_length]
        self._epochs: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def items_per_epoch(self) -> int:
        """Training items (QA samples and biographies, with repetitions) in one epoch."""
        return len(self._train_items)

    @property
    def tokens_per_epoch(self) -> int:
        """Input positions per epoch, padding included: ``rows_per_epoch * seq_len``."""
        return self.rows_per_epoch * self.seq_len

    @property
    def steps_per_epoch(self) -> float:
        """Batches per epoch (a whole number when ``epoch_aligned``, usually not otherwise)."""
        return self.rows_per_epoch / self.batch_size

    @property
    def fill(self) -> float:
        """Fraction of the row tokens that are item tokens (the rest is padding)."""
        used = int(self._lengths[self._train_items].sum())
        return used / (self.rows_per_epoch * (self.seq_len + 1))

    def item_order(self, epoch: int) -> np.ndarray:
        """Item ids in the order epoch ``epoch`` presents them (row by row)."""
        return self._epoch(epoch)[0].copy()

    def layout(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """``(item order, row offsets)``: row ``r`` of epoch ``epoch`` holds, in this order, the
        items ``order[offsets[r]:offsets[r + 1]]``."""
        order, offsets = self._epoch(epoch)
        return order.copy(), offsets.copy()

    def _epoch(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(item order, row offsets) of one epoch, memoised."""
        if epoch not in self._epochs:
            rng = np.random.default_rng([self.seed, _STREAM_TAG, epoch])
            n = len(self._items_by_length)
            fill = np.lexsort((rng.random(n), self._slot_length))  # shuffle within each length
            items = self._items_by_length[fill]
            row_position = rng.permutation(self.packed_rows)[self._slot_row]
            order = np.lexsort((rng.random(n), row_position))  # by row, shuffled within rows
            per_row = np.bincount(row_position, minlength=self.rows_per_epoch)
            offsets = np.concatenate([[0], np.cumsum(per_row)])
            if len(self._epochs) >= _EPOCH_CACHE:
                del self._epochs[min(self._epochs)]
            self._epochs[epoch] = (items[order], offsets)
        return self._epochs[epoch]

    def _rows(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tokens, item id (-1 on padding) and offset within the item of rows
        ``first .. first + count - 1``, each of shape ``(count, seq_len + 1)``."""
        width = self.seq_len + 1
        tokens = np.full((count, width), self._eos, dtype=np.int64)
        item_at = np.full((count, width), -1, dtype=np.int64)
        within_at = np.zeros((count, width), dtype=np.int64)
        row = first
        while row < first + count:
            epoch, r0 = divmod(row, self.rows_per_epoch)
            r1 = min(self.rows_per_epoch, r0 + first + count - row)
            order, offsets = self._epoch(epoch)
            items = order[offsets[r0] : offsets[r1]]
            lengths = self._lengths[items]
            slot_row = np.repeat(np.arange(r1 - r0), np.diff(offsets[r0 : r1 + 1]))
            ends = np.cumsum(lengths)
            row_base = np.concatenate([[0], ends])[offsets[r0:r1] - offsets[r0]]
            slot_start = ends - lengths - row_base[slot_row]
            within = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64)
            within -= np.repeat(ends - lengths, lengths)
            out_row = np.repeat(slot_row + row - first, lengths)
            column = np.repeat(slot_start, lengths) + within
            item = np.repeat(items, lengths)
            tokens[out_row, column] = self._flat[self._offsets[item] + within]
            item_at[out_row, column] = item
            within_at[out_row, column] = within
            row += r1 - r0
        return tokens, item_at, within_at

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Inputs ``x``, targets ``y`` (int64) and the boolean ``loss_mask`` of batch ``step``."""
        packed = self.packed(step)
        return packed.x, packed.y, packed.loss_mask

    def packed(self, step: int) -> PackedBatch:
        """Batch ``step`` with the items' positions and slots (see :class:`PackedBatch`)."""
        if step < 0:
            raise ValueError(f"step must be non-negative, got {step}")
        tokens, item, within = self._rows(step * self.batch_size, self.batch_size)
        x, y = np.ascontiguousarray(tokens[:, :-1]), np.ascontiguousarray(tokens[:, 1:])
        positions = np.ascontiguousarray(within[:, :-1])
        doc_ids = np.cumsum(within[:, :-1] == 0, axis=1)
        item, within = item[:, 1:], within[:, 1:]
        real = item >= 0
        if self.loss_on == "all":
            mask = real & (within > 0) if self.packing == "document" else real
        else:
            item = np.where(real, item, 0)
            before_eos = within < self._lengths[item] - 1
            start = np.where(self._is_qa[item], self._loss_start[item], 1)
            mask = real & before_eos & (within >= start)
        return PackedBatch(x, y, mask, positions, doc_ids)
