"""Torch's intra-op thread count for a block: small problems and per-run workers use one thread
(threading them is pure overhead, and on a shared machine much worse), and a block that sets it
puts the previous count back however it ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads (None or 0: leave the count as it is)."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
