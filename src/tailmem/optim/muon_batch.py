"""Muon's update for many tensors at once: momentum directions in, scaled orthogonal updates out.

The one code path of tailmem's Muon: :class:`~tailmem.optim.Muon` (every parameter of a step) and
:func:`~tailmem.optim.muon_update` (one tensor) both call :func:`orthogonal_updates`. Each
:class:`Request`'s direction is seen as its ``(out, in)`` matrix (per batch index, see
:class:`Layout`) and cut into row blocks; blocks of one shape, dtype and device with one
:class:`Orthogonalisation` and process group, whatever request they come from, are stacked and
orthogonalised in ONE batched call (``torch.bmm`` over the stack; on a CPU, in stacks of at most
:data:`STACK_BYTES_CPU`), compiled by ``torch.compile`` where asked (:func:`backend`). NorMuon's row
normalisation then runs on each such stack at once, and the shape scale is either folded into
:attr:`Update.factor` (every block of the tensor has one shape) or multiplied into the blocks.
Whether the inputs are finite is read once per call (for the polynomial methods: after their
straight-line work, before any state is touched), or not at all when the caller has refused
non-finite gradients already (``checked``: :class:`~tailmem.optim.Muon`'s step).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor

from tailmem.optim import distributed as D
from tailmem.optim.orthogonalize import (
    POLYNOMIAL_METHODS,
    Finite,
    check_finite,
    compiled,
    narrow,
    orthogonalize_wide,
    widen,
)

SCALES: tuple[str | None, ...] = (None, "original", "match_rms_adamw", "none")
NORMUON_FLOOR = 1e-10


@dataclass(frozen=True)
class Orthogonalisation:
    """How blocks are orthogonalised (:func:`tailmem.optim.orthogonalize`'s arguments)."""

    method: str = "ns5"
    steps: int | None = None
    coefficients: tuple[float, float, float] | None = None  # "ns5"'s only
    dtype: torch.dtype | None = torch.bfloat16
    eps: float = 1e-7


@dataclass(frozen=True)
class Layout:
    """How a tensor is a set of matrices (see :class:`~tailmem.optim.Muon`): ``batch_dims``
    leading dimensions index independent matrices, ``fan_out_dim`` (after them) is the output
    dimension and the rest are flattened into the input; the output rows are cut into
    ``num_heads`` equal blocks or blocks of ``row_splits`` sizes."""

    fan_out_dim: int = 0
    batch_dims: int = 0
    num_heads: int | None = None
    row_splits: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Request:
    """One tensor's update: its momentum direction (the full tensor, never modified) and how.

    ``second_moment``: NorMuon's per-row state (one float32 entry per output row of every
    block, in block order), updated in place with decay ``beta2``; ``None``: no NorMuon.
    ``comm``: the process group that shares the orthogonalisation (``None``: local).
    """

    direction: Tensor
    how: Orthogonalisation
    layout: Layout = Layout()
    adjust_lr_fn: str | None = None
    second_moment: Tensor | None = None
    beta2: float = 0.95
    comm: Any = None


@dataclass(frozen=True)
class Update:
    """A request's update ``factor·tensor`` (``tensor`` shaped like the direction), kept as a
    pair so that ``W.add_(tensor, alpha=-lr·factor)`` rounds as one fused operation."""

    tensor: Tensor
    factor: float


def update_scale(rows: int, cols: int, scale: str | None) -> float:
    """The learning-rate multiplier of an orthogonalised ``rows × cols`` (out × in) block."""
    if scale is None or scale == "original":
        return math.sqrt(max(1.0, rows / cols))
    if scale == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    if scale == "none":
        return 1.0
    raise ValueError(f"unknown Muon scale {scale!r}; expected one of {SCALES}")


COMPILE_VARIABLE = "TAILMEM_MUON_COMPILE"
"""Environment variable that decides ``compile=None`` (the default, also of a recipe's Muon):
"0" never compiles, "1" compiles everywhere, unset (or empty) compiles on CUDA only."""


def backend(compile: bool | str | None, device: torch.device, method: str) -> str | None:
    """The ``torch.compile`` backend for one batched call, or ``None`` (eager).

    ``compile``: ``None`` follows :data:`COMPILE_VARIABLE`, unset compiling with "inductor" on
    CUDA devices and nowhere else (on a CPU it was measured not to pay:
    ``benchmarks/muon_batched.py``); ``True`` compiles everywhere, ``False`` never, a string
    names the backend to use everywhere. Only :data:`POLYNOMIAL_METHODS` compile. A bad value of
    the variable raises ``ValueError``.
    """
    if compile is None:
        setting = os.environ.get(COMPILE_VARIABLE) or None
        if setting not in (None, "0", "1"):
            raise ValueError(f"{COMPILE_VARIABLE}={setting!r}: expected 0, 1 or unset")
        compile = None if setting is None else setting == "1"
    if method not in POLYNOMIAL_METHODS or compile is False:
        return None
    if compile is None:
        return "inductor" if device.type == "cuda" else None
    return "inductor" if compile is True else compile


@dataclass
class _Job:
    """One request cut into row blocks. ``pieces`` are ``(n, rows, cols)`` stacks of equal
    blocks (replaced by their orthogonalised values); ``block_rows`` the rows of every block in
    the order the pieces unbind (the order of NorMuon's state)."""

    request: Request
    moved_shape: tuple[int, ...]  # (count, out, other dims...): count = product of batch dims
    block_rows: tuple[int, ...]
    equal_blocks: bool
    pieces: list[Tensor]


def orthogonal_updates(
    requests: Sequence[Request], compile: bool | str | None = None, checked: bool = False
) -> list[Update]:
    """The update of every request, orthogonalising same-shaped blocks together (module doc).

    Raises :class:`~tailmem.optim.orthogonalize.NonFiniteInputError` (a ``ValueError``) before
    any NorMuon state is touched when a direction has a NaN or infinite entry, unless
    ``checked``: the caller refused non-finite gradients already
    (:mod:`tailmem.optim.gradients`), and its directions, convex combinations of finite
    gradients and momenta, are finite; then nothing is read back from the device. With a
    ``comm`` every rank of that group must make the same call (see
    :mod:`tailmem.optim.distributed`).
    """
    jobs = [_split(request) for request in requests]
    buckets: dict[tuple[Any, ...], list[tuple[_Job, int]]] = {}
    for job in jobs:
        for index, piece in enumerate(job.pieces):
            how, comm = job.request.how, job.request.comm
            key = (tuple(piece.shape[1:]), piece.dtype, piece.device, how, comm)
            buckets.setdefault(key, []).append((job, index))
    deferred: list[Finite] | None = None if checked else []
    stacks: list[tuple[list[tuple[_Job, int]], Tensor]] = []
    for key, bucket in buckets.items():
        _, _, device, how, comm = key
        for members in _stacked(bucket, device):
            stacks.append((members, _orthogonalised(members, key, compile, deferred)))
    if deferred is not None:
        check_finite(deferred)
    for members, out in stacks:
        _normuon(members, out)
    _scale_blocks([job for job in jobs if not _one_factor(job)])
    return [_assemble(job) for job in jobs]


STACK_BYTES_CPU = 24 * 2**20
"""The largest stack of blocks one call orthogonalises on a CPU (a bucket above it is cut into
stacks below it; a single larger piece stays whole). glibc maps every allocation above its largest
mmap threshold (32 MiB) afresh and page-faults it in again at each step: whole stacks made the
batched step 6% slower than a loop over the matrices on the 160M model's set, where stacks below
the threshold reuse freed heap memory (``benchmarks/muon_batched.py``). A CPU's products are
compute-bound, so a stack of a few large matrices runs at the rate of one of many; on other
devices (CUDA's caching allocator, launch-bound small products) a bucket is one stack."""


def _stacked(members: list[tuple[_Job, int]], device: torch.device) -> list[list[tuple[_Job, int]]]:
    """A bucket's members in consecutive stacks, of at most :data:`STACK_BYTES_CPU` on a CPU."""
    if device.type != "cpu":
        return [members]
    stacks: list[list[tuple[_Job, int]]] = [[]]
    size = 0
    for job, i in members:
        piece = job.pieces[i]
        nbytes = piece.numel() * piece.element_size()
        if stacks[-1] and size + nbytes > STACK_BYTES_CPU:
            stacks.append([])
            size = 0
        stacks[-1].append((job, i))
        size += nbytes
    return stacks


def _orthogonalised(
    members: list[tuple[_Job, int]],
    key: tuple[Any, ...],
    compile: bool | str | None,
    deferred: list[Finite] | None,
) -> Tensor:
    """One stack's members orthogonalised in one call (their pieces replaced by slices of the
    result, which is returned); the finiteness of a polynomial method's input is appended to
    ``deferred`` for the caller to read once, any other method's is checked first (neither
    when ``deferred`` is None: the inputs are known finite)."""
    _, _, device, how, comm = key
    pieces = [job.pieces[i] for job, i in members]
    wide = widen(pieces[0] if len(pieces) == 1 else torch.cat(pieces))
    if deferred is None:  # the caller's inputs are known finite
        pass
    elif how.method in POLYNOMIAL_METHODS:  # straight-line: non-finite input cannot hurt it
        deferred.append(wide.finite)
    else:
        check_finite([wide.finite])
    chosen = backend(compile, device, how.method)
    fn = partial(
        compiled(chosen, key[:4]) if chosen else orthogonalize_wide,
        method=how.method,
        steps=how.steps,
        dtype=how.dtype,
        eps=how.eps,
        coefficients=how.coefficients,
    )
    out = narrow(D.sharded_map(wide.X, fn, comm, aligned=(wide.scale,)), wide)
    offset = 0
    for job, i in members:
        count = job.pieces[i].shape[0]
        job.pieces[i] = out[offset : offset + count]
        offset += count
    return out


def _split(request: Request) -> _Job:
    """Cut a direction into ``(n, rows, cols)`` pieces of equal-shaped blocks: per batch index,
    its ``(out, in)`` matrix view split into row blocks."""
    layout, direction = request.layout, request.direction
    count = math.prod(direction.shape[: layout.batch_dims])
    per_index = direction.reshape(count, *direction.shape[layout.batch_dims :])
    moved = per_index.movedim(layout.fan_out_dim + 1, 1)
    out = moved.shape[1]
    matrices = moved.reshape(count, out, -1)
    if layout.row_splits is not None:
        splits = tuple(layout.row_splits)
        pieces = list(matrices.split(splits, dim=1))
        rows = tuple(r for r in splits for _ in range(count))
        return _Job(request, tuple(moved.shape), rows, False, pieces)
    heads = layout.num_heads or 1
    rows = (out // heads,) * (heads * count)
    pieces = [matrices.reshape(count * heads, out // heads, -1)]
    return _Job(request, tuple(moved.shape), rows, True, pieces)


def _normuon(members: list[tuple[_Job, int]], out: Tensor) -> None:
    """NorMuon on the orthogonalised blocks of one stack (``out``, ``(N, rows, cols)``, whose
    slices are the members' pieces), for the members that ask for it, one batched pass per
    ``beta2``; see :class:`~tailmem.optim.Muon`.

    Per block ``O``: ``V <- β₂·V + (1 - β₂)·mean_j O_ij²`` (the member's state, in place), then
    ``O' = O / sqrt(max(V, 1e-10))`` rescaled to ``‖O‖_F``. Replaces the members' pieces.
    """
    by_beta: dict[float, list[tuple[_Job, int]]] = {}
    for job, i in members:
        if job.request.second_moment is not None:
            by_beta.setdefault(job.request.beta2, []).append((job, i))
    for beta2, chosen in by_beta.items():
        whole = len(chosen) == len(members)
        blocks = out if whole else torch.cat([job.pieces[i] for job, i in chosen])
        moments = [_moments(job, i) for job, i in chosen]
        means = blocks.float().square().mean(dim=-1)
        counts = [m.shape[0] for m in moments]
        torch._foreach_lerp_(moments, list(means.split(counts)), 1.0 - beta2)
        second = torch.cat(moments)
        normalised = blocks * second.clamp_min(NORMUON_FLOOR).rsqrt().unsqueeze(-1)
        norms = torch._foreach_norm(list(blocks.unbind(0)))
        new_norms = torch._foreach_norm(list(normalised.unbind(0)))
        ratio = torch.stack(norms) / torch.stack(new_norms).clamp_min(NORMUON_FLOOR)
        result = (normalised * ratio[:, None, None]).to(blocks.dtype)
        for (job, i), piece in zip(chosen, result.split(counts), strict=True):
            job.pieces[i] = piece


def _moments(job: _Job, index: int) -> Tensor:
    """The ``(n, rows)`` view of NorMuon's state that belongs to piece ``index`` of ``job``."""
    state = job.request.second_moment
    if state is None:  # only members with NorMuon reach here
        raise ValueError("NorMuon needs a second-moment state")
    start = sum(piece.shape[0] * piece.shape[1] for piece in job.pieces[:index])
    count, rows = job.pieces[index].shape[:2]
    return state[start : start + count * rows].view(count, rows)


def _one_factor(job: _Job) -> bool:
    """Whether the job's shape scale can stay a factor of the whole update: every block has one
    shape and NorMuon has not rescaled them."""
    return job.equal_blocks and job.request.second_moment is None


def _scale_blocks(jobs: list[_Job]) -> None:
    """Multiply every piece of ``jobs`` by its blocks' shape scale, in one foreach call."""
    pieces = [piece for job in jobs for piece in job.pieces]
    scales = [
        update_scale(piece.shape[1], piece.shape[2], job.request.adjust_lr_fn)
        for job in jobs
        for piece in job.pieces
    ]
    scaled = iter(torch._foreach_mul(pieces, scales) if pieces else ())
    for job in jobs:
        job.pieces = [next(scaled) for _ in job.pieces]


def _assemble(job: _Job) -> Update:
    """The (orthogonalised) blocks back in the direction's layout, with the factor that is
    still to multiply them (1 once :func:`_scale_blocks` has)."""
    request = job.request
    pieces = job.pieces
    update = (pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=1)).reshape(job.moved_shape)
    factor = 1.0
    if _one_factor(job):
        factor = update_scale(job.block_rows[0], pieces[0].shape[-1], request.adjust_lr_fn)
    moved = update.movedim(1, request.layout.fan_out_dim + 1)
    return Update(moved.reshape(request.direction.shape), factor)
