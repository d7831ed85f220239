"""Gradients an optimiser cannot step on, refused before it changes anything.

A NaN or infinite gradient entry makes tailmem's optimisers raise
:class:`~tailmem.optim.orthogonalize.NonFiniteInputError` naming the parameter, with every
parameter and every state tensor (momentum, NorMuon's rows) as it was before the step, so a
caller that catches it (an fp16 overflow, a bad batch) can skip that batch and step on. Letting
the step run would do worse than fail: a momentum buffer that took in the NaN refuses every later
step, and SignGD's ``sign(NaN) = 0`` would freeze the coordinate without a word.

The check costs one host sync per step and device (one reduction pass over each gradient). The
flags of DTensor (FSDP2) parameters are reduced over their device mesh, one all-reduce per mesh
dimension for all of them, so that all ranks refuse together instead of one rank raising while
the others wait in a collective.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import Tensor

from tailmem.optim import distributed as D
from tailmem.optim.orthogonalize import NonFiniteInputError


def first_non_finite(tensors: Sequence[Tensor]) -> int | None:
    """The index of the first tensor with a NaN or infinite entry; ``None`` when all are finite.

    Meta tensors hold no values and count as finite; a sparse tensor (any sparse layout) is
    judged by its stored values. For a DTensor every rank of its mesh gets
    the same answer (the shards' flags are reduced with MIN over the mesh).
    """
    flags: dict[torch.device, list[tuple[int, Tensor]]] = {}
    sharded: dict[int, tuple[Any, list[tuple[int, Tensor]]]] = {}  # by mesh, in first-seen order
    for index, tensor in enumerate(tensors):
        local = D.local(tensor)
        if local.device.type == "meta":
            continue
        if local.layout != torch.strided:  # sparse (COO, CSR, CSC...): its stored values
            local = local.coalesce().values() if local.is_sparse else local.values()
        flag = _finite(local)
        if D.is_dtensor(tensor):
            mesh = cast(Any, tensor).device_mesh
            sharded.setdefault(id(mesh), (mesh, []))[1].append((index, flag))
        else:
            flags.setdefault(local.device, []).append((index, flag))
    for mesh, members in sharded.values():
        reduced = _reduced_over_mesh(torch.stack([flag for _, flag in members]), mesh)
        device = reduced.device
        for (index, _), flag in zip(members, reduced.unbind(), strict=True):
            flags.setdefault(device, []).append((index, flag))
    bad = []
    for members in flags.values():
        finite = torch.stack([flag for _, flag in members])
        if not bool(finite.all()):
            bad.append(members[int((~finite).nonzero()[0])][0])
    return min(bad) if bad else None


def _finite(tensor: Tensor) -> Tensor:
    """Whether every entry of ``tensor`` is finite, as a 0-d bool tensor (no host sync).

    From its smallest and largest entries (NaN propagates into both, an infinity is one of
    them): one reduction pass, measured 14x faster on a CPU than ``isfinite(tensor).all()``,
    which writes a mask as large as the tensor.
    """
    if tensor.numel() == 0:
        return torch.ones((), dtype=torch.bool, device=tensor.device)
    return torch.isfinite(torch.stack(torch.aminmax(tensor))).all()


def _reduced_over_mesh(flags: Tensor, mesh: Any) -> Tensor:
    """``flags`` (this rank's, one per DTensor of ``mesh``) AND-ed with every other rank's over
    the mesh: one MIN all-reduce per mesh dimension, whatever the number of tensors."""
    value = flags.to(torch.int32)
    for dim in range(mesh.ndim):
        dist.all_reduce(value, op=dist.ReduceOp.MIN, group=mesh.get_group(dim))
    return value.bool()


def refuse_non_finite(optimizer: str, param_groups: Sequence[dict[str, Any]]) -> None:
    """Raise :class:`NonFiniteInputError` naming the first parameter of ``param_groups`` whose
    gradient has a NaN or infinite entry (its name where the group carries ``param_names``)."""
    owners = [
        (group_index, index, p)
        for group_index, group in enumerate(param_groups)
        for index, p in enumerate(group["params"])
        if p.grad is not None
    ]
    bad = first_non_finite([cast(Tensor, p.grad) for _, _, p in owners])
    if bad is None:
        return
    group_index, index, p = owners[bad]
    names = param_groups[group_index].get("param_names")
    where = f"param_groups[{group_index}]['params'][{index}]"
    named = f"{names[index]!r} ({where})" if names else where
    raise NonFiniteInputError(
        f"{optimizer} got a NaN or infinite gradient entry in {named}, shape "
        f"{tuple(p.shape)}; expected finite gradients. Nothing was updated: skip this batch "
        "and step again"
    )
