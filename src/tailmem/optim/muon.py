"""Muon: momentum followed by orthogonalisation of each matrix update (paper A, Sec. 5).

Per step, for a matrix parameter ``W`` with gradient ``g`` (the conventions of
``torch.optim.Muon``; its documented form ``B <- μB + g``, nesterov ``g + μB`` gives the same
direction up to the positive factor ``1 - μ``, which orthogonalisation removes)::

    B <- μ·B + (1 - μ)·g                         (momentum buffer, B_0 = 0)
    D <- (1 - μ)·g + μ·B  if nesterov  else  B
    W <- (1 - lr·weight_decay)·W                 (decoupled weight decay, unscaled lr)
    W <- W - lr·scale(rows, cols)·orthogonalize(D)

``momentum = 0`` is pure spectral descent ``W <- W - lr·scale·orthogonalize(g)``.

Matrix view of a parameter: the output (fan-out) dimension ``fan_out_dim`` is moved first and
all other dimensions are flattened, so a conv weight ``(out, in, kh, kw)`` is the matrix
``(out, in·kh·kw)`` and a Hugging Face ``Conv1D`` weight ``(in, out)`` with ``fan_out_dim=1`` is
``(out, in)``. Its rows may be split into blocks (``num_heads`` equal blocks, or ``row_splits``
sizes, e.g. a fused q/k/v) that are orthogonalised and scaled separately. ``scale`` always uses the
block's ``(rows, cols)`` in that ``(out, in)`` view:

* ``"original"``: ``sqrt(max(1, rows/cols))`` (Keller Jordan; ``torch.optim.Muon`` default),
* ``"match_rms_adamw"``: ``0.2·sqrt(max(rows, cols))`` (Moonlight: update RMS ≈ AdamW's),
* ``"none"``: 1.

Speed: all blocks of one shape (across parameters and param groups with the same method, steps,
dtype and eps) are stacked and orthogonalised in ONE batched call. Under ``torch.distributed``
each rank orthogonalises a disjoint share of every batch (:mod:`tailmem.optim.distributed`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor
from torch.optim import Optimizer

from tailmem.optim.distributed import sharded_map
from tailmem.optim.orthogonalize import METHODS, orthogonalize

SCALES: tuple[str, ...] = ("original", "match_rms_adamw", "none")


def update_scale(rows: int, cols: int, scale: str) -> float:
    """The learning-rate multiplier of an orthogonalised ``rows × cols`` (out × in) block."""
    if scale == "original":
        return math.sqrt(max(1.0, rows / cols))
    if scale == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    if scale == "none":
        return 1.0
    raise ValueError(f"unknown Muon scale {scale!r}; expected one of {SCALES}")


@dataclass
class _Job:
    """One parameter's update: its ``(out, in)`` direction cut into row blocks."""

    param: Tensor
    group: dict[str, Any]
    moved_shape: tuple[int, ...]
    block_rows: tuple[int, ...]
    equal_blocks: bool
    pieces: list[Tensor]


class Muon(Optimizer):
    """Muon optimiser for matrix (and flattened >2-D) parameters; see the module docstring.

    Args:
        params: parameters or param groups. Every parameter needs at least 2 dimensions.
        lr: learning rate (>= 0), multiplied by the shape ``scale`` of each block.
        momentum: momentum ``μ`` in ``[0, 1)``; 0 gives pure spectral descent.
        nesterov: use the Nesterov direction ``(1 - μ)·g + μ·B``.
        method, steps, dtype, eps: passed to :func:`tailmem.optim.orthogonalize` (dtype is the
            compute dtype, ``None`` = the gradient's dtype; e.g. ``torch.bfloat16`` on a GPU).
        scale: ``"original"``, ``"match_rms_adamw"`` or ``"none"``.
        weight_decay: decoupled weight decay, multiplied by the (unscaled) lr.
        num_heads: split the output rows into this many equal blocks.
        row_splits: split the output rows into blocks of these sizes (exclusive with num_heads).
        fan_out_dim: which dimension of the parameter is the output (0: ``nn.Linear`` (out, in);
            1: Hugging Face ``Conv1D`` (in, out)).

    Every argument after ``params`` can be overridden per param group. ``p.grad`` is never
    modified; parameters whose grad is ``None`` are skipped. State per parameter:
    ``momentum_buffer`` (when momentum > 0), shaped like the parameter.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = False,
        method: str = "ns5",
        steps: int | None = None,
        scale: str = "original",
        weight_decay: float = 0.0,
        eps: float = 1e-7,
        num_heads: int | None = None,
        row_splits: tuple[int, ...] | None = None,
        fan_out_dim: int = 0,
        dtype: torch.dtype | None = None,
    ) -> None:
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "nesterov": nesterov,
            "method": method,
            "steps": steps,
            "scale": scale,
            "weight_decay": weight_decay,
            "eps": eps,
            "num_heads": num_heads,
            "row_splits": row_splits,
            "fan_out_dim": fan_out_dim,
            "dtype": dtype,
        }
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group after checking its hyperparameters and parameter shapes."""
        super().add_param_group(param_group)
        try:
            _check_group(self.param_groups[-1])
        except (ValueError, TypeError):
            self.param_groups.pop()
            raise

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One Muon step for every parameter that has a gradient; returns the closure's loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        jobs: list[_Job] = []
        buckets: dict[tuple[Any, ...], list[tuple[_Job, int]]] = {}
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p, direction in zip(params, self._directions(group, params), strict=True):
                job = _split(p, group, direction)
                jobs.append(job)
                for index, piece in enumerate(job.pieces):
                    key = (
                        tuple(piece.shape[1:]),
                        piece.dtype,
                        piece.device,
                        group["method"],
                        group["steps"],
                        group["dtype"],
                        group["eps"],
                    )
                    buckets.setdefault(key, []).append((job, index))
        for key, members in buckets.items():
            _, _, _, method, steps, dtype, eps = key
            stacked = torch.cat([job.pieces[i] for job, i in members])
            fn = partial(orthogonalize, method=method, steps=steps, dtype=dtype, eps=eps)
            ortho = sharded_map(stacked, fn)
            offset = 0
            for job, i in members:
                count = job.pieces[i].shape[0]
                job.pieces[i] = ortho[offset : offset + count]
                offset += count
        for job in jobs:
            _apply(job)
        return loss

    def _directions(self, group: dict[str, Any], params: list[Tensor]) -> list[Tensor]:
        """Update momentum buffers (foreach) and return the directions to orthogonalise."""
        grads = []
        for p in params:
            if p.grad.is_sparse:
                raise RuntimeError("Muon does not support sparse gradients")
            grads.append(p.grad)
        momentum = group["momentum"]
        if momentum == 0.0:
            return grads
        bufs = []
        for p in params:
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            bufs.append(state["momentum_buffer"])
        torch._foreach_lerp_(bufs, grads, 1.0 - momentum)
        if group["nesterov"]:
            return list(torch._foreach_lerp(grads, bufs, momentum))
        return bufs


def _split(p: Tensor, group: dict[str, Any], direction: Tensor) -> _Job:
    """Cut a parameter's direction into ``(count, rows, cols)`` pieces of equal-shaped blocks."""
    fan_out_dim = group["fan_out_dim"]
    moved = direction.movedim(fan_out_dim, 0)
    out = moved.shape[0]
    matrix = moved.reshape(out, -1)
    if group["row_splits"] is not None:
        rows = tuple(group["row_splits"])
        pieces = [block.unsqueeze(0) for block in matrix.split(rows, dim=0)]
        equal = False
    else:
        heads = group["num_heads"] or 1
        rows = (out // heads,) * heads
        pieces = [matrix.reshape(heads, out // heads, -1)]
        equal = True
    return _Job(p, group, tuple(moved.shape), rows, equal, pieces)


def _apply(job: _Job) -> None:
    """Weight decay, then ``p -= lr·scale·O`` with the orthogonalised blocks back in place."""
    group, p = job.group, job.param
    lr, scale = group["lr"], group["scale"]
    cols = job.pieces[0].shape[-1]
    if group["weight_decay"] != 0.0:
        p.mul_(1.0 - lr * group["weight_decay"])
    if job.equal_blocks:
        update = job.pieces[0].reshape(job.moved_shape)
        alpha = -lr * update_scale(job.block_rows[0], cols, scale)
    else:
        scaled = [
            piece[0] * update_scale(rows, cols, scale)
            for piece, rows in zip(job.pieces, job.block_rows, strict=True)
        ]
        update = torch.cat(scaled).reshape(job.moved_shape)
        alpha = -lr
    p.add_(update.movedim(0, group["fan_out_dim"]), alpha=alpha)


def _check_group(group: dict[str, Any]) -> None:
    """Raise ValueError/TypeError naming the bad hyperparameter or parameter shape."""
    lr = group["lr"]
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr >= 0.0:
        raise ValueError(f"Muon lr must be a number >= 0, got {lr!r}")
    momentum = group["momentum"]
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)):
        raise ValueError(f"Muon momentum must be a number in [0, 1), got {momentum!r}")
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"Muon momentum must be in [0, 1), got {momentum!r}")
    if not isinstance(group["nesterov"], bool):
        raise TypeError(f"Muon nesterov must be True or False, got {group['nesterov']!r}")
    if group["method"] not in METHODS:
        raise ValueError(f"unknown Muon method {group['method']!r}; expected one of {METHODS}")
    steps = group["steps"]
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"Muon steps must be a positive integer or None, got {steps!r}")
    if group["scale"] not in SCALES:
        raise ValueError(f"unknown Muon scale {group['scale']!r}; expected one of {SCALES}")
    wd = group["weight_decay"]
    if isinstance(wd, bool) or not isinstance(wd, (int, float)) or not wd >= 0.0:
        raise ValueError(f"Muon weight_decay must be a number >= 0, got {wd!r}")
    eps = group["eps"]
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0.0:
        raise ValueError(f"Muon eps must be a number > 0, got {eps!r}")
    dtype = group["dtype"]
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"Muon dtype must be a floating torch.dtype or None, got {dtype!r}")
    heads, splits = group["num_heads"], group["row_splits"]
    if heads is not None and splits is not None:
        raise ValueError("Muon takes num_heads or row_splits, not both")
    if heads is not None and (isinstance(heads, bool) or not isinstance(heads, int) or heads < 1):
        raise ValueError(f"Muon num_heads must be a positive integer or None, got {heads!r}")
    if splits is not None:
        if not isinstance(splits, (tuple, list)) or not splits:
            raise ValueError(f"Muon row_splits must be a non-empty tuple of sizes, got {splits!r}")
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in splits):
            raise ValueError(f"Muon row_splits must be positive integers, got {splits!r}")
    fan_out_dim = group["fan_out_dim"]
    if isinstance(fan_out_dim, bool) or not isinstance(fan_out_dim, int) or fan_out_dim < 0:
        raise ValueError(f"Muon fan_out_dim must be an integer >= 0, got {fan_out_dim!r}")
    for p in group["params"]:
        _check_param(p, heads, splits, fan_out_dim)


def _check_param(
    p: Tensor, heads: int | None, splits: tuple[int, ...] | None, fan_out_dim: int
) -> None:
    shape = tuple(p.shape)
    if p.ndim < 2:
        raise ValueError(
            f"Muon only handles matrices; route 1-D params like norms/biases to Adam "
            f"(got a parameter of shape {shape})"
        )
    if torch.is_complex(p):
        raise TypeError(f"Muon does not support complex parameters (shape {shape})")
    if fan_out_dim >= p.ndim:
        raise ValueError(f"Muon fan_out_dim={fan_out_dim} is out of range for shape {shape}")
    out = shape[fan_out_dim]
    if heads is not None and out % heads != 0:
        raise ValueError(f"Muon num_heads={heads} does not divide the output size {out} of {shape}")
    if splits is not None and sum(splits) != out:
        raise ValueError(
            f"Muon row_splits {tuple(splits)} sum to {sum(splits)}, "
            f"expected the output size {out} of {shape}"
        )
