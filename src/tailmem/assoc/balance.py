"""One-step balance ``ϱ^ε`` of an update direction (PAPERS.md A4, Theorem 5.3).

After one step from ``W_0 = 0`` the memory is ``W_1 = −η U`` and the logits are ``η D`` with
``D = −Ẽᵀ U E``. The correct-class probability of fact ``k`` is

    f_k(η) = 1 / Σ_i exp(η (D_ik − D_kk)),

so everything is a function of the *gap table* ``D_ik − D_kk`` (per fact, over competitors). For
the structured backend facts of one (cell, position) type share a row and competitors come with
multiplicities, so the table has a few rows instead of ``K``.

Definition used (paper: ``ϱ^ε = inf_η min_k f_k(η)`` subject to ``max_k f_k(η) ≥ 1 − ε``):
``η*`` is the smallest step at which some fact reaches ``1 − ε`` and ``ϱ^ε = min_k f_k(η*)``, so
``ϱ^ε = 1 − ε − Δ(W_1(η*))``. When every column of ``D`` has its largest entry on the diagonal
(every gap ``≤ 0``), each ``f_k`` is non-decreasing in ``η``, the feasible set is ``[η*, ∞)`` and
this equals the paper's infimum exactly; ``monotone`` records whether that holds, and
``rho_literal`` is the literal infimum over feasible step sizes on a log grid up to ``2^40 η*``
(different only for non-monotone directions, where some fact is eventually unlearned).

Search: ``max_k f_k(η) ≥ 1 − ε`` is evaluated for a batch of 120 doubling step sizes at once; the
first bracket is then refined by 9 rounds of 32-point batched grids (relative precision ≈ 1e-13).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tailmem.assoc.dynamics import small_op_threads
from tailmem.assoc.memory import (
    DenseMemory,
    Matrix,
    Memory,
    StructuredMemory,
    dense_matrix,
    orbit_matrix,
)
from tailmem.assoc.structure import OrbitMatrix

_CHUNK = 2**22  # elements per batched evaluation (bounds memory for dense K×K tables)


@dataclass(frozen=True)
class GapTable:
    """Rows = fact types, columns = competitors: ``gaps[t, m] = D_mt − D_tt`` with log-weights.

    ``count[t]`` is how many facts share type ``t`` and ``group[t]`` their group.
    """

    gaps: torch.Tensor
    logw: torch.Tensor
    count: torch.Tensor
    group: torch.Tensor

    @property
    def monotone(self) -> bool:
        live = torch.isfinite(self.logw)
        return bool((self.gaps[live] <= 1e-12).all())

    def log_probs(self, etas: torch.Tensor) -> torch.Tensor:
        """``log f_t(η)`` for a batch of step sizes: ``(n_eta, n_types)``."""
        etas = torch.as_tensor(etas, dtype=torch.float64).reshape(-1)
        per = max(1, _CHUNK // max(1, self.gaps.numel()))
        out = []
        for chunk in etas.split(per):
            x = chunk[:, None, None] * self.gaps + self.logw
            out.append(-torch.logsumexp(x, dim=-1))
        return torch.cat(out)


def gap_table(memory: Memory, direction: Matrix) -> GapTable:
    """The gap table of the one-step logits ``D = −Ẽᵀ U E`` for update direction ``U``."""
    if isinstance(memory, DenseMemory):
        return _dense_gap_table(memory, dense_matrix(direction))
    return _structured_gap_table(memory, orbit_matrix(direction))


def _dense_gap_table(memory: DenseMemory, direction: torch.Tensor) -> GapTable:
    D = -memory.to_task(direction)
    diag = torch.diagonal(D)
    gaps = (D - diag[None, :]).T.contiguous()
    K = memory.K
    return GapTable(
        gaps,
        torch.zeros_like(gaps),
        torch.ones(K, dtype=torch.float64),
        memory.spectrum.group.clone(),
    )


def _structured_gap_table(memory: StructuredMemory, direction: OrbitMatrix) -> GapTable:
    D = -memory.to_task(direction)
    lay = memory.layout
    C, u = lay.n_cells, lay.unit
    own = D.A + D.diag_B()  # (C', i, j)
    correct = torch.diagonal(own, dim1=-2, dim2=-1)  # (C', j)
    own_gaps = (own - correct[:, None, :]).permute(0, 2, 1).reshape(C * u, u)
    other = D.B - correct[None, :, None, :]  # (c, c', i, j)
    other_gaps = other.permute(1, 3, 0, 2).reshape(C * u, C * u)
    n = lay.counts.to(torch.float64)
    mult = n[:, None] - torch.eye(C, dtype=torch.float64)  # (c, c')
    logw_other = torch.log(mult).T[:, None, :, None].expand(C, u, C, u).reshape(C * u, C * u)
    gaps = torch.cat([own_gaps, other_gaps], dim=1)
    logw = torch.cat([torch.zeros(C * u, u, dtype=torch.float64), logw_other], dim=1)
    gaps = torch.where(torch.isfinite(logw), gaps, torch.zeros_like(gaps))
    return GapTable(gaps, logw, lay.type_weights().reshape(-1), lay.group.reshape(-1))


@dataclass(frozen=True)
class OneStepBalance:
    """``ϱ^ε`` and the state of the memory at the step size ``η*`` that defines it."""

    rho: float
    eta: float
    gap: float
    min_prob: float
    max_prob: float
    monotone: bool
    rho_literal: float
    group_prob: list[float]


def one_step_balance(memory: Memory, direction: Matrix, eps: float) -> OneStepBalance:
    """``ϱ^ε`` of update direction ``U`` (see the module docstring for the exact definition)."""
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps={eps}: expected a number strictly between 0 and 1")
    with small_op_threads(memory):
        return _one_step_balance(memory, direction, eps)


def _one_step_balance(memory: Memory, direction: Matrix, eps: float) -> OneStepBalance:
    table = gap_table(memory, direction)
    target = math.log1p(-eps)
    live = torch.isfinite(table.logw)
    scale = float(table.gaps[live].abs().max())
    nan = float("nan")
    if scale == 0.0:
        return OneStepBalance(nan, nan, nan, nan, nan, table.monotone, nan, [])
    etas = (1.0 / scale) * torch.pow(2.0, torch.arange(-40, 80, dtype=torch.float64))
    lp = table.log_probs(etas)
    feasible = lp.amax(dim=1) >= target
    if not feasible.any():
        return OneStepBalance(nan, nan, nan, nan, nan, table.monotone, nan, [])
    j = int(torch.nonzero(feasible)[0])
    lo = float(etas[j - 1]) if j > 0 else 0.0
    hi = float(etas[j])
    for _ in range(9):
        grid = torch.linspace(lo, hi, 33, dtype=torch.float64)[1:]
        ok = table.log_probs(grid).amax(dim=1) >= target
        i = int(torch.nonzero(ok)[0])
        hi = float(grid[i])
        lo = float(grid[i - 1]) if i > 0 else lo
    lp_star = table.log_probs(torch.tensor([hi], dtype=torch.float64))[0]
    probs = lp_star.exp()
    later = etas[feasible & (etas > hi)]
    if later.numel():
        literal = min(float(probs.min()), float(table.log_probs(later).amin().exp()))
    else:
        literal = float(probs.min())
    n_groups = int(table.group.max()) + 1
    mass = torch.zeros(n_groups, dtype=torch.float64).index_add_(
        0, table.group, probs * table.count
    )
    size = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, table.group, table.count)
    return OneStepBalance(
        rho=float(probs.min()),
        eta=hi,
        gap=float(probs.max() - probs.min()),
        min_prob=float(probs.min()),
        max_prob=float(probs.max()),
        monotone=table.monotone,
        rho_literal=literal,
        group_prob=(mass / size).tolist(),
    )


@dataclass(frozen=True)
class OneStepCurve:
    """The memory after one step of each size ``eta`` (float64 vectors, one entry per step
    size): the noiseless ``loss``, Δ (``gap``, best minus worst fact probability) and the
    worst and best fact probabilities (``min_prob``, ``max_prob``)."""

    eta: torch.Tensor
    loss: torch.Tensor
    gap: torch.Tensor
    min_prob: torch.Tensor
    max_prob: torch.Tensor


def one_step_curve(memory: Memory, direction: Matrix, etas: torch.Tensor) -> OneStepCurve:
    """Loss, Δ, min/max probability after one step of each size in ``etas`` (Figure 4(b)).

    Noiseless loss only (``Σ_k p_k (−log f_k)``), computed from the gap table.
    """
    table = gap_table(memory, direction)
    lp = table.log_probs(etas)
    probs = lp.exp()
    p_type = _type_probabilities(memory)
    loss = -(lp * p_type * table.count).sum(dim=1)
    return OneStepCurve(
        eta=torch.as_tensor(etas, dtype=torch.float64),
        loss=loss,
        gap=probs.amax(dim=1) - probs.amin(dim=1),
        min_prob=probs.amin(dim=1),
        max_prob=probs.amax(dim=1),
    )


def _type_probabilities(memory: Memory) -> torch.Tensor:
    if isinstance(memory, DenseMemory):
        return memory.spectrum.p
    return memory.layout.p.reshape(-1)


@dataclass(frozen=True)
class UpdateSpectrum:
    """Singular-value statistics of an update direction (Theorem 5.3's σ_min/σ_max).

    ``sigma_max``, ``sigma_min_nonzero`` and ``rank``: the largest and smallest non-zero
    singular values and their count (numerical rank, ``K·eps``); ``ratio``: σ_min/σ_max over
    the non-zero singular values. ``block_ratio``: the same for the within-cell part only (the
    ``I ⊗ A`` blocks: what the update does to differences between facts of equal frequency,
    which for paper A's coupled construction is its ``3 × 3`` "update block"); NaN for the
    dense backend. ``identity_deviation``: ``max |Ẽᵀ U E + I|`` (Muon's first update is
    ``−ẼEᵀ + O(1/K)``).
    """

    sigma_max: float
    sigma_min_nonzero: float
    rank: int
    ratio: float
    block_ratio: float
    identity_deviation: float


def update_spectrum(memory: Memory, direction: Matrix) -> UpdateSpectrum:
    """The singular-value statistics of update direction ``direction`` (:class:`UpdateSpectrum`)."""
    with small_op_threads(memory):
        s = memory.singular_values(direction)
        tol = memory.K * torch.finfo(torch.float64).eps * float(s[0])
        nonzero = s[s > tol]
        block = float("nan")
        if isinstance(memory, StructuredMemory):
            direction = orbit_matrix(direction)
            live = direction.layout.counts > 1
            if live.any():
                sb = torch.linalg.svdvals(direction.A[live])
                block = float(sb.amin() / sb.amax())
            task = memory.to_task(direction)
            eye = torch.eye(task.layout.unit, dtype=torch.float64)
            dev = max(
                float((task.A + task.diag_B() + eye).abs().max()),
                float(_off_diagonal_blocks(task).abs().max()) if task.layout.K > 1 else 0.0,
            )
        else:
            dense_task = memory.to_task(dense_matrix(direction))
            dev = float((dense_task + torch.eye(memory.K, dtype=torch.float64)).abs().max())
    return UpdateSpectrum(
        sigma_max=float(s[0]),
        sigma_min_nonzero=float(nonzero[-1]),
        rank=int(nonzero.numel()),
        ratio=float(nonzero[-1] / nonzero[0]),
        block_ratio=block,
        identity_deviation=dev,
    )


def _off_diagonal_blocks(task: OrbitMatrix) -> torch.Tensor:
    """Entries of ``B`` that appear off the diagonal unit blocks (cells with > 1 unit or c ≠ c')."""
    C = task.layout.n_cells
    present = (task.layout.counts[:, None] > 1) | ~torch.eye(C, dtype=torch.bool)
    return task.B[present]
