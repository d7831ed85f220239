"""Share batched orthogonalisations across the ranks of a ``torch.distributed`` process group.

Gradients are assumed to be averaged already (as under DDP), so every rank holds the same
momentum-averaged directions. Each rank orthogonalises a disjoint slice of every same-shaped batch
and the slices are all-gathered, so all ranks apply the identical update. Without an initialised
process group (or with one rank) the work runs locally, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import Tensor


def rank_and_world() -> tuple[int, int]:
    """``(rank, world_size)`` of the default process group, ``(0, 1)`` when there is none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def sharded_map(batch: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
    """``fn(batch)`` for a batch ``(B, ...)`` of same-shaped matrices, split across ranks.

    ``fn`` must act on each leading-index item independently and keep shapes and dtype. Rank ``r``
    of ``W`` computes items ``[r·c, (r+1)·c)`` with ``c = ceil(B / W)``; every rank's load differs
    by at most one matrix of this shape, and the last slices are zero-padded so that the
    ``all_gather`` has equal sizes (padding is never computed, only sent). All ranks must call this
    with the same batch shapes in the same order.
    """
    rank, world = rank_and_world()
    if world == 1:
        return fn(batch)
    count = batch.shape[0]
    chunk = -(-count // world)
    start = min(rank * chunk, count)
    local = fn(batch[start : start + chunk])
    if local.shape[0] < chunk:
        pad = local.new_zeros((chunk - local.shape[0], *local.shape[1:]))
        local = torch.cat([local, pad])
    gathered = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(gathered, local.contiguous())
    return torch.cat(gathered)[:count]
