"""One training step of an ensemble: E models of one shape (``GPT(cfg, members=E)``) trained
as one module, each member exactly as :func:`~tailmem.train.loop.train_step` trains it alone.

Per member ``e`` of a step on inputs and targets ``(E, B, T)``:

* its loss is the mean cross-entropy over its own counted targets (the model returns one loss
  per member; their sum is back-propagated, so member ``e``'s gradient is its own loss's);
* its gradient norm is the global norm over its own slices of every parameter, and clipping to
  ``grad_clip`` scales only its slices (``torch.nn.utils.clip_grads_with_norm_`` per member);
* the optimiser steps every member on its own: routing gives Muon-like kinds ``batch_dims`` and
  refuses kinds whose update mixes a tensor's entries (``OptimizerKind.per_member``).

A member whose loss or gradient norm is not finite is reported so (``EnsembleStep.finite``) and
its gradient is set to zero before the update (its optimiser state only decays), so that no
NaN reaches the optimiser, which shares work across members (Muon refuses non-finite input);
the members share no computation otherwise, so the others step exactly as before. The caller
stops counting it, as :func:`~tailmem.train.loop.train` stops a diverged run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tailmem.train.loop import OptimizerLike
from tailmem.train.precision import autocast

CLIP_EPS = 1e-6
"""Added to a member's gradient norm before clipping (torch's ``clip_grads_with_norm_``)."""


@dataclass(frozen=True)
class EnsembleStep:
    """One ensemble update: every member's mean loss and pre-clip gradient norm."""

    losses: tuple[float, ...]
    grad_norms: tuple[float, ...]

    @property
    def finite(self) -> tuple[bool, ...]:
        """Per member: loss and gradient norm are finite."""
        return tuple(
            math.isfinite(loss) and math.isfinite(norm)
            for loss, norm in zip(self.losses, self.grad_norms, strict=True)
        )


def member_grad_norms(params: Sequence[Tensor]) -> Tensor:
    """The global gradient norm of each member: ``(E,)`` over parameters ``(E, ...)``."""
    squares = [p.grad.float().square().flatten(1).sum(dim=1) for p in params if p.grad is not None]
    return torch.stack(squares).sum(dim=0).sqrt()


def clip_member_grads_(params: Sequence[Tensor], max_norm: float, norms: Tensor) -> None:
    """Scale member ``e``'s gradient slices by ``min(1, max_norm / (norms[e] + 1e-6))``."""
    factor = (max_norm / (norms + CLIP_EPS)).clamp(max=1.0)
    for p in params:
        if p.grad is not None:
            p.grad.mul_(factor.view(-1, *(1,) * (p.ndim - 1)).to(p.grad.dtype))


def ensemble_step(
    model: nn.Module,
    optimizer: OptimizerLike,
    batch: tuple[Tensor, Tensor],
    lrs: Sequence[float],
    *,
    grad_clip: float | None = 1.0,
    precision: str = "fp32",
) -> EnsembleStep:
    """Forward, backward, per-member clipping and one optimiser update with learning rate
    ``lrs[i]`` for group ``i``; ``batch`` is inputs and targets ``(E, B, T)`` on the model's
    device, ``precision`` a resolved one (``fp32`` or ``bf16``)."""
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    with autocast(x.device, precision):
        _, losses = model(x, y)
    losses.sum().backward()
    params = [p for p in model.parameters() if p.grad is not None]
    norms = member_grad_norms(params)
    loss_values, norm_values = torch.stack([losses.detach().float(), norms]).tolist()
    result = EnsembleStep(tuple(loss_values), tuple(norm_values))
    keep = torch.tensor(result.finite, device=norms.device)
    if not keep.all():
        norms = torch.where(keep, norms, 0.0)
        for p in params:
            if (grad := p.grad) is not None:
                grad.copy_(torch.where(keep.view(-1, *(1,) * (p.ndim - 1)), grad, 0.0))
    if grad_clip is not None:
        clip_member_grads_(params, grad_clip, norms)
    for group, lr in zip(optimizer.param_groups, lrs, strict=True):
        group["lr"] = lr
    optimizer.step()
    return result
