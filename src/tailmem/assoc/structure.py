"""Exact reduced arithmetic for ``K × K`` matrices with exchangeable blocks.

Why: at ``W₀ = 0`` with block-structured frequencies, every matrix the memory ever sees (logits,
softmax scores, gradients, their signs, polar factors, Adam moments) is invariant under
permutations that shuffle equal-frequency facts among themselves. Working in that invariant
algebra makes a Muon step at ``K = 3000`` cost microseconds instead of a dense SVD, exactly (this is
a change of representation, not an approximation).

Layout. The ``K`` facts are split into consecutive *units* of ``u`` facts (``u = 1`` for the
identity embedding, ``u = 3`` for paper A's coupled construction, whose 3×3 blocks must stay
whole), and the units into *cells*: maximal runs of consecutive units whose per-position
frequencies and groups are identical. Cell ``c`` holds ``n_c`` units. A matrix ``X`` is
*cell-exchangeable* when ``X = Π X Πᵀ`` for every permutation ``Π`` of units within a cell; such an
``X`` is stored as

* ``A[c]`` (``u × u``): the extra part of the diagonal unit block of every unit in cell ``c``;
* ``B[c, c']`` (``u × u``): the block shared by every (answer unit in ``c``, query unit in ``c'``)
  pair, so a diagonal unit block of cell ``c`` is ``A[c] + B[c, c]``.

Rows index answers (objects), columns queries (keys), as in ``Z = Ẽᵀ W E``. Tensors may carry
leading batch dimensions (e.g. one entry per step size).

Spectral structure. ``X`` maps the ``(n_c − 1)·u``-dimensional space of zero-sum unit
combinations inside cell ``c`` to itself, acting there as ``A[c]``, and the ``C·u``-dimensional
space of cell-constant vectors to itself, acting as the *reduced matrix*
``M[(c,i),(c',j)] = δ_cc' A[c]_ij + √(n_c n_c') B[c,c']_ij``. Singular values, polar factors and
matrix polynomials (Newton–Schulz) are therefore computed on ``A`` and ``M`` separately.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import torch


@dataclass(frozen=True)
class Layout:
    """How facts group into units and cells; see the module docstring."""

    K: int
    unit: int
    counts: torch.Tensor  # (C,) int64: units per cell
    p: torch.Tensor  # (C, u) float64: probability of the fact at each position of a unit
    group: torch.Tensor  # (C, u) int64: group of the fact at each position of a unit

    @property
    def n_cells(self) -> int:
        return int(self.counts.numel())

    @classmethod
    def from_frequencies(cls, p: torch.Tensor, group: torch.Tensor, unit: int) -> Layout:
        """Cells = maximal runs of consecutive units with identical (frequency, group) rows."""
        K = int(p.numel())
        if K % unit:
            raise ValueError(f"K={K} is not a multiple of the unit size {unit}")
        pu = p.reshape(-1, unit)
        gu = group.reshape(-1, unit)
        change = torch.ones(pu.shape[0], dtype=torch.bool)
        change[1:] = (pu[1:] != pu[:-1]).any(dim=1) | (gu[1:] != gu[:-1]).any(dim=1)
        starts = torch.nonzero(change).flatten()
        ends = torch.cat([starts[1:], torch.tensor([pu.shape[0]])])
        return cls(K, unit, ends - starts, pu[starts].clone(), gu[starts].clone())

    def cell_of_unit(self) -> torch.Tensor:
        """(K/u,) cell index of every unit."""
        return self._cell_of_unit

    @cached_property
    def _cell_of_unit(self) -> torch.Tensor:
        return torch.repeat_interleave(torch.arange(self.n_cells), self.counts)

    @cached_property
    def fact_type(self) -> torch.Tensor:
        """(K,) index of every fact's (cell, position) type in the flattened ``(C·u,)`` order."""
        u = self.unit
        return (self._cell_of_unit[:, None] * u + torch.arange(u)).reshape(-1)

    def expand(self, per_type: torch.Tensor) -> torch.Tensor:
        """Per-(cell, position) values ``(..., C, u)`` → per-fact values ``(..., K)``."""
        return per_type.flatten(-2)[..., self.fact_type]

    def type_weights(self) -> torch.Tensor:
        """(C, u) number of facts of each (cell, position) type."""
        return self.counts.to(torch.float64).unsqueeze(-1).expand(-1, self.unit)


@dataclass(frozen=True)
class OrbitMatrix:
    """A cell-exchangeable ``K × K`` matrix in reduced form ``(A, B)``; see the module docstring.

    Canonical form: ``A[c] = 0`` for cells with one unit (their block lives in ``B[c, c]``), so
    entrywise maps never evaluate a function on a block that has no entries.
    """

    A: torch.Tensor  # (..., C, u, u)
    B: torch.Tensor  # (..., C, C, u, u)
    layout: Layout

    # ----------------------------------------------------------------- construction / views
    @classmethod
    def zeros(cls, layout: Layout, batch: tuple[int, ...] = ()) -> OrbitMatrix:
        C, u = layout.n_cells, layout.unit
        return cls(
            torch.zeros(*batch, C, u, u, dtype=torch.float64),
            torch.zeros(*batch, C, C, u, u, dtype=torch.float64),
            layout,
        )

    @classmethod
    def identity_plus_constant(
        cls, layout: Layout, diag: float, const: float, batch: tuple[int, ...] = ()
    ) -> OrbitMatrix:
        """``diag · I + const · J`` (e.g. the label-noise target ``(1 − α) I + (α/K) J``)."""
        C, u = layout.n_cells, layout.unit
        eye = torch.eye(u, dtype=torch.float64)
        A = (diag * eye).expand(*batch, C, u, u).clone()
        B = torch.full((*batch, C, C, u, u), const, dtype=torch.float64)
        single = torch.nonzero(layout.counts == 1).flatten()
        B[..., single, single, :, :] += A[..., single, :, :]
        return cls(_drop_single(A, layout), B, layout)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.A.shape[:-3])

    def diag_B(self) -> torch.Tensor:
        """``B[c, c]`` for every cell, shape ``(..., C, u, u)``."""
        return torch.diagonal(self.B, dim1=-4, dim2=-3).permute(*range(self.B.ndim - 4), -1, -3, -2)

    def dense(self) -> torch.Tensor:
        """The full ``K × K`` matrix (for tests and small problems)."""
        lay = self.layout
        cu = lay.cell_of_unit()
        n_units, u = cu.numel(), lay.unit
        blocks = self.B[..., cu[:, None], cu[None, :], :, :]  # (..., U, U, u, u)
        idx = torch.arange(n_units)
        blocks[..., idx, idx, :, :] += self.A[..., cu, :, :]
        full = blocks.transpose(-3, -2)  # (..., U, u, U, u)
        return full.reshape(*self.batch_shape, n_units * u, n_units * u)

    # ----------------------------------------------------------------- entrywise arithmetic
    def _entrywise(self, other: OrbitMatrix | None, fn: Callable[..., torch.Tensor]) -> OrbitMatrix:
        dB = self.diag_B()
        if other is None:
            A = fn(self.A + dB) - fn(dB)
            return OrbitMatrix(_drop_single(A, self.layout), fn(self.B), self.layout)
        odB = other.diag_B()
        A = fn(self.A + dB, other.A + odB) - fn(dB, odB)
        return OrbitMatrix(_drop_single(A, self.layout), fn(self.B, other.B), self.layout)

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> OrbitMatrix:
        """Apply an entrywise function (sign, square, sqrt, ...) to every entry of the matrix."""
        return self._entrywise(None, fn)

    def __add__(self, other: OrbitMatrix) -> OrbitMatrix:
        return OrbitMatrix(self.A + other.A, self.B + other.B, self.layout)

    def __sub__(self, other: OrbitMatrix) -> OrbitMatrix:
        return OrbitMatrix(self.A - other.A, self.B - other.B, self.layout)

    def __neg__(self) -> OrbitMatrix:
        return OrbitMatrix(-self.A, -self.B, self.layout)

    def __mul__(self, other: OrbitMatrix | float | torch.Tensor) -> OrbitMatrix:
        """Entrywise product, or scaling by a number / a batch-shaped tensor."""
        if isinstance(other, OrbitMatrix):
            return self._entrywise(other, torch.mul)
        if isinstance(other, torch.Tensor) and other.ndim:
            a = other.reshape(*other.shape, 1, 1, 1)
            return OrbitMatrix(self.A * a, self.B * a.unsqueeze(-1), self.layout)
        return OrbitMatrix(self.A * other, self.B * other, self.layout)

    __rmul__ = __mul__

    def __truediv__(self, other: OrbitMatrix) -> OrbitMatrix:
        return self._entrywise(other, torch.div)

    def scale_columns(self, col: torch.Tensor) -> OrbitMatrix:
        """``X · diag(col)`` for per-(cell, position) column weights ``col`` of shape ``(C, u)``."""
        return OrbitMatrix(self.A * col[:, None, :], self.B * col[None, :, None, :], self.layout)

    def sandwich(self, left: torch.Tensor, right: torch.Tensor) -> OrbitMatrix:
        """``(I ⊗ left) X (I ⊗ right)`` for ``u × u`` unit blocks (a change of basis)."""
        return OrbitMatrix(left @ self.A @ right, left @ self.B @ right, self.layout)

    # ----------------------------------------------------------------- spectral operations
    def pieces(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(A, M)``: the within-cell blocks and the reduced ``C·u × C·u`` matrix."""
        lay = self.layout
        C, u = lay.n_cells, lay.unit
        n = lay.counts.to(torch.float64)
        root = torch.sqrt(n[:, None] * n[None, :])
        M = (self.B * root[:, :, None, None]).transpose(-3, -2)  # (..., C, u, C, u)
        M = M + _block_diagonal(self.A)
        return self.A, M.reshape(*self.batch_shape, C * u, C * u)

    @classmethod
    def from_pieces(cls, A: torch.Tensor, M: torch.Tensor, layout: Layout) -> OrbitMatrix:
        """Inverse of :meth:`pieces`; cells with one unit have no within-cell part (A := 0)."""
        C, u = layout.n_cells, layout.unit
        n = layout.counts.to(torch.float64)
        A = _drop_single(A, layout)
        M = M.reshape(*M.shape[:-2], C, u, C, u) - _block_diagonal(A)
        root = torch.sqrt(n[:, None] * n[None, :])
        B = M.transpose(-3, -2) / root[:, :, None, None]
        return cls(A, B, layout)

    def frobenius(self) -> torch.Tensor:
        """‖X‖_F, batch-shaped."""
        A, M = self.pieces()
        w = (self.layout.counts - 1).to(torch.float64)
        within = (A.square().sum(dim=(-2, -1)) * w).sum(dim=-1)
        return torch.sqrt(within + M.square().sum(dim=(-2, -1)))

    def singular_values(self) -> torch.Tensor:
        """All ``K`` singular values of the full matrix, in descending order."""
        A, M = self.pieces()
        reps = (self.layout.counts - 1).clamp(min=0)
        sA = torch.linalg.svdvals(A)  # (..., C, u)
        sA = torch.repeat_interleave(sA, reps, dim=-2).flatten(-2)
        sM = torch.linalg.svdvals(M)
        return torch.sort(torch.cat([sA, sM], dim=-1), dim=-1, descending=True).values

    def polar(self, rtol: float | None = None) -> OrbitMatrix:
        """Exact ``U_r V_rᵀ`` over the numerical rank (zero singular values map to zero).

        Singular values below ``rtol · σ_max`` (default ``K · eps``, the rank convention of
        ``torch.linalg.matrix_rank``) count as zero, with ``σ_max`` taken over the whole matrix.
        """
        A, M = self.pieces()
        if rtol is None:
            rtol = self.layout.K * torch.finfo(torch.float64).eps
        UA, sA, VhA = torch.linalg.svd(A)
        UM, sM, VhM = torch.linalg.svd(M)
        live = (self.layout.counts > 1)[:, None]
        smax = torch.maximum(
            torch.where(live, sA, torch.zeros_like(sA)).amax(dim=(-2, -1)), sM.amax(dim=-1)
        )
        tol = (rtol * smax)[..., None]
        keepA = (sA > tol[..., None]).to(A.dtype)
        keepM = (sM > tol).to(M.dtype)
        PA = (UA * keepA.unsqueeze(-2)) @ VhA
        PM = (UM * keepM.unsqueeze(-2)) @ VhM
        return OrbitMatrix.from_pieces(PA, PM, self.layout)

    def matrix_polynomial(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> OrbitMatrix:
        """Apply an odd matrix function ``X ↦ f(X Xᵀ) X`` (e.g. Newton–Schulz) piecewise."""
        A, M = self.pieces()
        return OrbitMatrix.from_pieces(fn(A), fn(M), self.layout)

    # ----------------------------------------------------------------- column softmax
    def column_log_softmax(self) -> tuple[OrbitMatrix, torch.Tensor, torch.Tensor]:
        """Column-wise softmax of the logits matrix ``Z = self``.

        Returns ``(S, log_correct, sum_log)`` where ``S`` is the softmax (an OrbitMatrix),
        ``log_correct[..., c, j]`` the log-probability of the correct answer of the query at
        position ``j`` of a unit in cell ``c``, and ``sum_log[..., c, j]`` the sum of its
        log-probabilities over all ``K`` answers (needed for the label-noise loss).
        """
        lay = self.layout
        n = lay.counts.to(torch.float64)
        C = lay.n_cells
        mult = n[:, None] - torch.eye(C, dtype=torch.float64)  # copies of B[c, c'] per column
        logmult = torch.log(mult)  # -inf where a cell has no other unit
        own = self.A + self.diag_B()  # (..., C, u, u): logits inside the query's own unit
        lse_other = torch.logsumexp(self.B + logmult[:, :, None, None], dim=(-4, -2))
        lse_own = torch.logsumexp(own, dim=-2)
        logZ = torch.logaddexp(lse_other, lse_own)  # (..., C', u)
        logS_B = self.B - logZ.unsqueeze(-2).unsqueeze(-4)
        logS_own = own - logZ.unsqueeze(-2)
        S_B = torch.exp(logS_B)
        S_own = torch.exp(logS_own)
        S = OrbitMatrix(
            S_own - torch.diagonal(S_B, dim1=-4, dim2=-3).permute(*range(S_B.ndim - 4), -1, -3, -2),
            S_B,
            lay,
        )
        log_correct = torch.diagonal(logS_own, dim1=-2, dim2=-1)
        sum_log = logS_own.sum(dim=-2) + (logS_B * mult[:, :, None, None]).sum(dim=(-4, -2))
        return S, log_correct, sum_log


def _drop_single(A: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Canonical form: a cell with a single unit keeps its whole diagonal block in ``B[c, c]``."""
    return torch.where((layout.counts > 1)[:, None, None], A, torch.zeros_like(A))


def _block_diagonal(A: torch.Tensor) -> torch.Tensor:
    """``(..., C, u, u)`` → ``(..., C, u, C, u)``: ``A[c]`` at ``[c, :, c, :]``, zero elsewhere."""
    C = A.shape[-3]
    eye = torch.eye(C, dtype=A.dtype)[:, None, :, None]
    return A.unsqueeze(-2) * eye


def project(X: torch.Tensor, layout: Layout) -> OrbitMatrix:
    """The orbit average of a dense ``K × K`` matrix: the nearest cell-exchangeable matrix.

    Averages every unit block over its orbit (diagonal unit blocks of a cell; off-diagonal unit
    pairs of a cell pair), so ``project(X).dense() == X`` exactly when ``X`` is exchangeable.
    """
    u, C = layout.unit, layout.n_cells
    cu = layout.cell_of_unit()
    U = cu.numel()
    blocks = X.reshape(*X.shape[:-2], U, u, U, u).transpose(-3, -2)  # (..., U, U, u, u)
    idx = torch.arange(U)
    diag = blocks[..., idx, idx, :, :]  # (..., U, u, u)
    n = layout.counts.to(X.dtype)
    diag_mean = (
        torch.zeros(*X.shape[:-2], C, u, u, dtype=X.dtype).index_add_(-3, cu, diag)
        / n[:, None, None]
    )
    off = blocks.clone()
    off[..., idx, idx, :, :] = 0
    rows = torch.zeros(*X.shape[:-2], C, U, u, u, dtype=X.dtype).index_add_(-4, cu, off)
    sums = torch.zeros(*X.shape[:-2], C, C, u, u, dtype=X.dtype).index_add_(-3, cu, rows)
    pairs = n[:, None] * n[None, :] - torch.diag(n)
    B = sums / pairs.clamp(min=1)[:, :, None, None]
    cidx = torch.arange(C)
    single = layout.counts == 1
    B[..., cidx[single], cidx[single], :, :] = diag_mean[..., single, :, :]
    A = diag_mean - torch.diagonal(B, dim1=-4, dim2=-3).permute(*range(B.ndim - 4), -1, -3, -2)
    return OrbitMatrix(_drop_single(A, layout), B, layout)
