"""Share batched orthogonalisations across the ranks of an explicitly given process group.

Nothing here joins a collective on its own: :func:`sharded_map` with ``group=None`` runs locally.
With a group, every rank of it must call it with the same batch shapes in the same order; each
rank orthogonalises a disjoint slice of the batch and the slices are all-gathered, so all ranks
end with the identical result. :func:`full_matrix` and :func:`local_shard` move a DTensor
parameter's (FSDP2) direction to a full matrix and its update back to this rank's shard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import Tensor


def rank_and_world(group: Any = None) -> tuple[int, int]:
    """``(rank, world_size)`` in ``group``; ``(0, 1)`` for ``None`` (local work)."""
    if group is None:
        return 0, 1
    rank = dist.get_rank(group)
    if rank < 0:  # torch's answer for a process that is not in the group
        raise ValueError(
            f"this process (global rank {dist.get_rank()}) is not a member of the process group "
            "Muon shares its work over; expected only the group's ranks to step it (give the "
            "others an optimiser of their own, or process_group=None)"
        )
    return rank, dist.get_world_size(group)


def sharded_map(
    batch: Tensor,
    fn: Callable[..., Tensor],
    group: Any = None,
    aligned: tuple[Tensor, ...] = (),
) -> Tensor:
    """``fn(batch, *aligned)`` for a batch ``(B, ...)`` of same-shaped matrices, split across
    ``group``; ``aligned`` are tensors indexed like ``batch`` (e.g. a per-matrix scale), sliced
    with it.

    ``fn`` must act on each leading-index item independently and return ``(B, ...)`` items.
    Rank ``r`` of ``W`` computes items ``[r·c, (r+1)·c)`` with ``c = ceil(B / W)``; every rank's
    load differs by at most one matrix of this shape, and the last slices are zero-padded so
    that the ``all_gather`` has equal sizes (padding is never computed, only sent).
    """
    rank, world = rank_and_world(group)
    if world == 1:
        return fn(batch, *aligned)
    count = batch.shape[0]
    chunk = -(-count // world)
    start = min(rank * chunk, count)
    local = fn(*(t[start : start + chunk] for t in (batch, *aligned)))
    if local.shape[0] < chunk:
        pad = local.new_zeros((chunk - local.shape[0], *local.shape[1:]))
        local = torch.cat([local, pad])
    gathered = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(gathered, local.contiguous(), group=group)
    return torch.cat(gathered)[:count]


def is_dtensor(t: Tensor) -> bool:
    """Whether ``t`` is a ``torch.distributed.tensor.DTensor`` (e.g. an FSDP2 parameter)."""
    return type(t).__name__ == "DTensor" and hasattr(t, "device_mesh")


def local(t: Tensor) -> Tensor:
    """This rank's storage of ``t``: the local shard of a DTensor, else ``t`` itself."""
    return cast(Any, t).to_local() if is_dtensor(t) else t


def mesh_group(p: Tensor) -> Any:
    """The group that shares a DTensor parameter's orthogonalisation: its 1-D mesh's group
    (FSDP2's shard group); ``None`` (every rank does all of it) for a multi-dimensional mesh."""
    mesh = cast(Any, p).device_mesh
    return mesh.get_group() if mesh.ndim == 1 else None


def full_matrix(p: Tensor, local_value: Tensor) -> Tensor:
    """The full tensor whose shard on this rank is ``local_value``, laid out like DTensor ``p``.

    One all-gather over ``p``'s mesh (uneven shards included); every rank gets the same tensor.
    """
    from torch.distributed.tensor import DTensor

    spec = cast(DTensor, p)
    sharded = DTensor.from_local(
        local_value, spec.device_mesh, spec.placements, shape=p.shape, stride=p.stride()
    )
    return sharded.full_tensor()


def local_shard(p: Tensor, full: Tensor) -> Tensor:
    """This rank's shard of ``full`` (present identically on every rank), placed like ``p``.

    No communication: each rank cuts its own piece, exactly as ``p`` is cut.
    """
    from torch.distributed.tensor import distribute_tensor

    spec = cast(Any, p)
    return distribute_tensor(full, spec.device_mesh, spec.placements, src_data_rank=None).to_local()
