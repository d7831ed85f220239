"""Multi-step training of the associative memory on the exact population loss.

``W_{t+1} = W_t − η_t U_t`` from ``W_0 = 0`` (PAPERS.md A4 Theorem 5.4, B), with ``U_t`` from
:mod:`tailmem.assoc.optimizers`. Step-size schedules may carry extra batch dimensions (one run per
step size, per horizon, ...), all advanced together in one vectorised loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, overload

import torch
from tqdm.auto import tqdm

from tailmem.assoc.embeddings import Embedding
from tailmem.assoc.memory import (
    DenseMemory,
    EitherBackend,
    Mat,
    Memory,
    MemoryBackend,
    StructuredMemory,
    max_gap,
)
from tailmem.assoc.optimizers import OptimizerSpec, OptimizerState, as_spec, update_direction
from tailmem.assoc.spectra import FrequencySpectrum
from tailmem.assoc.structure import OrbitMatrix
from tailmem.errors import ConfigError
from tailmem.threads import torch_threads

SCHEDULES = ("constant", "log_k_over_t")
SMALL_DENSE = 5e7
"""Dense problems with at most this many multiply-adds per step run single-threaded."""


def lr_schedule(
    kind: str, steps: int, K: int, lr: float | None = None, c: float | None = None
) -> torch.Tensor:
    """Step sizes ``η_0..η_{T−1}``: ``constant`` (``lr``) or ``log_k_over_t`` (``c · log K / T``).

    ``log_k_over_t`` is paper B's Muon schedule for a horizon fixed in advance.
    """
    if steps < 1:
        raise ConfigError(f"steps={steps}: expected a positive integer")
    if kind == "constant":
        if lr is None or lr <= 0:
            raise ConfigError(f"constant schedule: lr={lr!r}; expected a positive number")
        value = lr
    elif kind == "log_k_over_t":
        if c is None or c <= 0:
            raise ConfigError(f"log_k_over_t schedule: c={c!r}; expected a positive number")
        value = c * math.log(K) / steps
    else:
        raise ConfigError(f"unknown schedule {kind!r}; expected one of: {', '.join(SCHEDULES)}")
    return torch.full((steps,), float(value), dtype=torch.float64)


def build_memory(
    spectrum: FrequencySpectrum,
    embedding: Embedding,
    optimizer: str | OptimizerSpec,
    label_noise: float = 0.0,
    backend: str = "auto",
) -> Memory:
    """The fastest exact backend for this problem and optimiser.

    ``auto`` picks :class:`StructuredMemory` for block-structured embeddings, and for orthonormal
    embeddings with a basis-invariant optimiser (then in the task basis); otherwise
    :class:`DenseMemory`. ``dense`` and ``structured`` force a backend.
    """
    if not 0.0 <= label_noise < 1.0:
        raise ConfigError(f"label_noise={label_noise}: expected a number in [0, 1)")
    if spectrum.K != embedding.K:
        raise ConfigError(f"spectrum has K={spectrum.K} facts but the embedding K={embedding.K}")
    spec = as_spec(optimizer)
    if backend == "dense":
        return DenseMemory(spectrum, embedding, label_noise)
    structured_ok = embedding.block_structured or (embedding.orthonormal and spec.basis_invariant)
    if backend == "structured" and not structured_ok:
        raise ConfigError(
            f"the structured backend needs a block-structured embedding or an orthonormal one with "
            f"a basis-invariant optimiser; got {embedding.name} with {spec.name}"
        )
    if backend not in ("auto", "structured"):
        raise ConfigError(f"unknown backend {backend!r}; expected auto, dense or structured")
    if structured_ok:
        return StructuredMemory(
            spectrum, embedding, label_noise, task_basis=not embedding.block_structured
        )
    return DenseMemory(spectrum, embedding, label_noise)


@dataclass(frozen=True)
class Trajectory(Generic[Mat]):
    """What a run recorded. ``loss`` has every step ``0..T``; the rest only the recorded steps.

    Shapes: ``loss (T+1, *batch)``; ``gap``, ``min_prob``, ``max_prob`` ``(R, *batch)``;
    ``group_loss``, ``group_prob`` ``(R, *batch, n_groups)`` (means over the facts of a group);
    ``steps`` lists the ``R`` recorded steps; ``final`` is ``W_T`` in the backend's matrix type.
    """

    steps: list[int]
    loss: torch.Tensor
    gap: torch.Tensor
    min_prob: torch.Tensor
    max_prob: torch.Tensor
    group_loss: torch.Tensor
    group_prob: torch.Tensor
    final: Mat


# One overload per backend: a caller holding a DenseMemory gets a Trajectory[Tensor] (and may
# pass a callback that takes tensors); one holding a Memory chosen at run time gets either.
@overload
def train(
    memory: DenseMemory,
    optimizer: str | OptimizerSpec,
    lrs: torch.Tensor,
    record: Sequence[int] | None = None,
    progress: bool = False,
    desc: str | None = None,
    callback: Callable[[int, torch.Tensor], None] | None = None,
    batch_size: int | None = None,
    seed: int = 0,
) -> Trajectory[torch.Tensor]: ...
@overload
def train(
    memory: StructuredMemory,
    optimizer: str | OptimizerSpec,
    lrs: torch.Tensor,
    record: Sequence[int] | None = None,
    progress: bool = False,
    desc: str | None = None,
    callback: Callable[[int, OrbitMatrix], None] | None = None,
    batch_size: int | None = None,
    seed: int = 0,
) -> Trajectory[OrbitMatrix]: ...
def train(
    memory: MemoryBackend[Mat],
    optimizer: str | OptimizerSpec,
    lrs: torch.Tensor,
    record: Sequence[int] | None = None,
    progress: bool = False,
    desc: str | None = None,
    callback: Callable[[int, Mat], None] | None = None,
    batch_size: int | None = None,
    seed: int = 0,
) -> Trajectory[Mat]:
    """Run ``len(lrs)`` steps from ``W_0 = 0``; ``lrs`` is ``(T,)`` or ``(T, *batch)``.

    Full statistics are recorded at the steps in ``record`` (default: every step);
    ``callback(t, W_t)`` is called at every recorded step. With ``batch_size`` the gradient is
    that of a mini-batch of queries drawn i.i.d. from ``p`` (seeded by ``seed``; dense backend
    only, since a sample breaks the symmetry the structured backend relies on); the recorded
    statistics stay those of the population loss.
    """
    if batch_size is not None and not isinstance(memory, DenseMemory):
        raise ConfigError("mini-batch sampling needs the dense backend (backend=dense)")
    if batch_size is not None and batch_size < 1:
        raise ConfigError(f"batch_size={batch_size}: expected a positive integer")
    gen = torch.Generator().manual_seed(seed)
    spec = as_spec(optimizer)
    lrs = torch.as_tensor(lrs, dtype=torch.float64)
    T = lrs.shape[0]
    batch = tuple(lrs.shape[1:])
    rec = sorted({int(s) for s in (range(T + 1) if record is None else record) if 0 <= s <= T})
    rec_set = set(rec)
    avg = memory.types.group_average(memory.spectrum.n_groups)
    W = memory.zeros(batch)
    state = OptimizerState[Mat]()
    # Preallocated: thousands of tiny per-step tensors kept between the large temporaries
    # fragment the heap (measured: +0.3 MB of peak RSS per step at K = 200).
    losses = torch.empty(T + 1, *batch, dtype=torch.float64)
    gaps, pmin, pmax, gl, gp = [], [], [], [], []
    with small_op_threads(memory):
        for t in tqdm(range(T + 1), desc=desc, disable=None if progress else True, leave=False):
            ev = memory.evaluate(W)
            losses[t] = ev.loss
            if t in rec_set:
                probs = ev.type_prob
                gaps.append(max_gap(probs))
                pmin.append(probs.amin(dim=-1))
                pmax.append(probs.amax(dim=-1))
                gl.append(ev.type_loss @ avg)
                gp.append(probs @ avg)
                if callback is not None:
                    callback(t, W)
            if t == T:
                break
            grad = ev.grad
            if batch_size is not None:
                assert isinstance(memory, DenseMemory)
                draws = torch.multinomial(memory.p, batch_size, replacement=True, generator=gen)
                weights = torch.bincount(draws, minlength=memory.K).to(torch.float64) / batch_size
                grad = memory.evaluate(W, weights=weights).grad
            U = update_direction(spec, grad, state, memory)
            W = W - _scaled(U, lrs[t])
    return Trajectory(
        rec,
        losses,
        torch.stack(gaps),
        torch.stack(pmin),
        torch.stack(pmax),
        torch.stack(gl),
        torch.stack(gp),
        W,
    )


@contextmanager
def small_op_threads(memory: EitherBackend) -> Iterator[None]:
    """Run small problems single-threaded.

    The structured backend's tensors have a few dozen entries and small dense problems (up to
    ``K ≈ 350`` for square ones) are a few MFLOP per step, so intra-op threading is pure
    overhead — and on a busy machine a large one (measured 30× slower for the structured backend
    and 60× for dense K = 200 with two threads under load).
    """
    large = isinstance(memory, DenseMemory) and _dense_work(memory) > SMALL_DENSE
    with torch_threads(None if large else 1):
        yield


def _dense_work(memory: DenseMemory) -> float:
    """Multiply-adds of one dense evaluation (logits and gradient), roughly."""
    e = memory.embedding
    return float(memory.K * e.d_key * e.d_obj + memory.n_obj * memory.K * (e.d_key + e.d_obj))


def _scaled(U: Mat, lr: torch.Tensor) -> Mat:
    """``lr · U`` with a scalar or batch-shaped ``lr`` (dense tensors and OrbitMatrix alike)."""
    if lr.ndim == 0:
        return U * float(lr)
    if isinstance(U, torch.Tensor):
        return U * lr[..., None, None]
    return U * lr


@overload
def first_direction(memory: DenseMemory, optimizer: str | OptimizerSpec) -> torch.Tensor: ...
@overload
def first_direction(memory: StructuredMemory, optimizer: str | OptimizerSpec) -> OrbitMatrix: ...
def first_direction(memory: MemoryBackend[Mat], optimizer: str | OptimizerSpec) -> Mat:
    """The optimiser's first update direction ``U_0`` at ``W_0 = 0`` (so ``W_1 = −η U_0``)."""
    grad = memory.evaluate(memory.zeros()).grad
    return update_direction(as_spec(optimizer), grad, OptimizerState[Mat](), memory)
