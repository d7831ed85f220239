"""Ragged integer arrays: many variable-length rows stored as one flat array plus offsets.

Token sequences of QA samples and biographies are ragged. Building hundreds of thousands of them
one Python list at a time is slow, so rows are composed from cached pieces with vectorised
gathers: row ``i`` of :func:`concat_rows` is the concatenation of one row of each piece table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ragged:
    """Rows ``flat[offsets[i]:offsets[i + 1]]`` for ``i < len(offsets) - 1``."""

    flat: np.ndarray
    offsets: np.ndarray

    def __post_init__(self) -> None:
        if self.offsets.ndim != 1 or len(self.offsets) < 1 or self.offsets[0] != 0:
            raise ValueError("offsets must be a 1-D array starting at 0")
        if self.offsets[-1] != len(self.flat):
            raise ValueError(
                f"offsets end at {self.offsets[-1]} but flat has {len(self.flat)} entries"
            )

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]], dtype: np.dtype | type = np.int64) -> Ragged:
        """Pack Python sequences (e.g. token id lists) into one ragged array."""
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter((t for r in rows for t in r), dtype=dtype, count=int(offsets[-1]))
        return cls(flat, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """Length of every row."""
        return np.diff(self.offsets)

    def row(self, i: int) -> np.ndarray:
        """Row ``i`` as a view of ``flat``."""
        return self.flat[self.offsets[i] : self.offsets[i + 1]]


def concat_rows(
    parts: Sequence[tuple[Ragged, np.ndarray]], dtype: np.dtype | type
) -> tuple[Ragged, np.ndarray]:
    """Row ``i`` of the result is ``parts[0][0].row(parts[0][1][i]) + parts[1][0].row(...) + ...``.

    Returns the ragged result and a ``(n_rows, len(parts))`` array with the position inside each
    row where every part starts (e.g. where the answer of a QA sample begins).
    """
    n = len(parts[0][1])
    if any(len(index) != n for _, index in parts):
        raise ValueError("every part needs one index per output row")
    lengths = np.stack([table.lengths[index] for table, index in parts], axis=1)
    starts_in_row = np.cumsum(lengths, axis=1) - lengths
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths.sum(axis=1), out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=dtype)
    for j, (table, index) in enumerate(parts):
        part_len = lengths[:, j]
        total = int(part_len.sum())
        within = np.arange(total, dtype=np.int64) - np.repeat(
            np.cumsum(part_len) - part_len, part_len
        )
        dst = np.repeat(offsets[:-1] + starts_in_row[:, j], part_len) + within
        src = np.repeat(table.offsets[index], part_len) + within
        flat[dst] = table.flat[src]
    return Ragged(flat, offsets), starts_in_row


def stack_rows(tables: Sequence[Ragged]) -> Ragged:
    """The rows of every table, one table after the other."""
    flat = np.concatenate([t.flat for t in tables])
    shifts = np.cumsum([0] + [len(t.flat) for t in tables[:-1]])
    offsets = np.concatenate(
        [[0], *[t.offsets[1:] + s for t, s in zip(tables, shifts, strict=True)]]
    )
    return Ragged(flat, offsets.astype(np.int64))
