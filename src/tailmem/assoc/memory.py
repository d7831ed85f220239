"""The one-layer associative memory: population loss, gradient, per-fact probabilities, Δ.

Model (PAPERS.md A4, B). Facts ``k = 1..K`` with frequencies ``p_k``; key ``E_k`` and object
``Ẽ_k`` are columns of ``E`` (``d_s × K``) and ``Ẽ`` (``d_o × K``); the memory ``W`` is
``d_o × d_s``. Logits ``Z = Ẽᵀ W E`` (column ``k`` scores every object for key ``k``), scores
``s_{·k} = softmax(Z_{·k})``. With label noise ``α`` (paper B) the answer to key ``k`` is ``k`` with
probability ``1 − α`` and uniform over all ``K`` objects otherwise, i.e. the target matrix is
``Q = (1 − α) I + (α/K) J``; ``α = 0`` is paper A's noiseless loss. The population loss and its
gradient are exact (no sampling):

    L(W)  = −Σ_k p_k Σ_i Q_ik log s_ik,
    ∇L(W) = Ẽ (S − Q) diag(p) Eᵀ,

which for ``α = 0`` is paper A's ``−Σ_k p_k [(1 − s_kk) Ẽ_k E_kᵀ − Σ_{k'≠k} s_{k'k} Ẽ_{k'} E_kᵀ]``.

Two interchangeable backends evaluate it. :class:`DenseMemory` works on the full matrices (any
embedding, including ``d < K``). :class:`StructuredMemory` works in the exchangeable-block algebra
of ``structure.py`` and is exact whenever ``W`` stays in that algebra: always for block-structured
embeddings (identity, coupled) started at ``W₀ = 0``; and for any orthonormal embedding with a
basis-invariant optimiser (GD, Muon, TRA-SignGD), because then the logits ``Z`` evolve exactly as
with ``E = Ẽ = I`` (the structured backend then runs in the task basis; ``basis`` records this).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import torch

from tailmem.assoc.embeddings import Embedding
from tailmem.assoc.spectra import FrequencySpectrum
from tailmem.assoc.structure import Layout, OrbitMatrix
from tailmem.optim.orthogonalize import NS5_COEFFICIENTS, orthogonalize

Mat = TypeVar("Mat", torch.Tensor, OrbitMatrix)
"""A backend's matrix type (``W``, gradients, update directions): ``torch.Tensor`` for
:class:`DenseMemory`, :class:`OrbitMatrix` for :class:`StructuredMemory`. Code generic in it is
checked once for each."""

Matrix = torch.Tensor | OrbitMatrix
"""A matrix of either backend, where the backend is only known at run time."""

# --------------------------------------------------------------------------- dense functions


def logits(W: torch.Tensor, E: torch.Tensor, Et: torch.Tensor) -> torch.Tensor:
    """``Z = Ẽᵀ W E`` (``K × K``; column k holds the scores of every object for key k)."""
    return Et.transpose(-2, -1) @ W @ E


def fact_losses(Z: torch.Tensor, label_noise: float = 0.0) -> torch.Tensor:
    """Per-fact cross-entropy ``−Σ_i Q_ik log s_ik`` from logits ``Z`` (``(..., K)``)."""
    logs = torch.log_softmax(Z, dim=-2)
    correct = torch.diagonal(logs, dim1=-2, dim2=-1)
    K = Z.shape[-1]
    return -(1.0 - label_noise) * correct - (label_noise / K) * logs.sum(dim=-2)


def population_loss(
    W: torch.Tensor, E: torch.Tensor, Et: torch.Tensor, p: torch.Tensor, label_noise: float = 0.0
) -> torch.Tensor:
    """``L(W) = Σ_k p_k ℓ_k(W)``."""
    return (fact_losses(logits(W, E, Et), label_noise) * p).sum(dim=-1)


def population_grad(
    W: torch.Tensor, E: torch.Tensor, Et: torch.Tensor, p: torch.Tensor, label_noise: float = 0.0
) -> torch.Tensor:
    """``∇L(W) = Ẽ (S − Q) diag(p) Eᵀ`` in closed form."""
    Z = logits(W, E, Et)
    S = torch.softmax(Z, dim=-2)
    K = Z.shape[-1]
    G = S - label_noise / K
    G = G - (1.0 - label_noise) * torch.eye(K, dtype=Z.dtype)
    return Et @ (G * p) @ E.transpose(-2, -1)


def correct_probabilities(W: torch.Tensor, E: torch.Tensor, Et: torch.Tensor) -> torch.Tensor:
    """``f_W(E_k)_k``, the probability the memory gives to the correct object of every fact."""
    Z = logits(W, E, Et)
    return torch.diagonal(torch.log_softmax(Z, dim=-2), dim1=-2, dim2=-1).exp()


def max_gap(probs: torch.Tensor) -> torch.Tensor:
    """Paper A's maximal probability gap ``Δ(W) = max_{i,j} (f(E_i)_i − f(E_j)_j)``."""
    return probs.amax(dim=-1) - probs.amin(dim=-1)


def loss_floor(K: int, label_noise: float) -> float:
    """``L* = H(Q_{·k})``, the entropy of the noisy answer distribution (0 without noise)."""
    if label_noise <= 0.0:
        return 0.0
    right = 1.0 - label_noise + label_noise / K
    wrong = label_noise / K
    return -right * math.log(right) - (K - 1) * wrong * math.log(wrong)


# --------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class FactTypes:
    """Facts that provably share every statistic are one *type* (all facts, for dense).

    ``count[t]`` facts of type ``t``, each with frequency ``p[t]`` and group ``group[t]``;
    ``index[k]`` is the type of fact ``k``.
    """

    count: torch.Tensor
    p: torch.Tensor
    group: torch.Tensor
    index: torch.Tensor

    def group_average(self, n_groups: int) -> torch.Tensor:
        """``(T, G)`` matrix turning per-type values into per-group means over facts."""
        avg = torch.zeros(self.count.numel(), n_groups, dtype=torch.float64)
        avg[torch.arange(self.count.numel()), self.group] = self.count
        return avg / avg.sum(dim=0, keepdim=True)


@dataclass(frozen=True)
class Evaluation(Generic[Mat]):
    """Loss ``(...)``, per-type loss and correct-class probability ``(..., T)``, the W-gradient
    (in the backend's matrix type)."""

    loss: torch.Tensor
    type_loss: torch.Tensor
    type_prob: torch.Tensor
    grad: Mat
    types: FactTypes

    @property
    def fact_loss(self) -> torch.Tensor:
        """Per-fact loss ``(..., K)``."""
        return self.type_loss[..., self.types.index]

    @property
    def correct_prob(self) -> torch.Tensor:
        """Per-fact correct-class probability ``f_W(E_k)_k``, ``(..., K)``."""
        return self.type_prob[..., self.types.index]


class DenseMemory:
    """Full-matrix backend: any embedding, ``W`` of shape ``(..., d_o, d_s)``.

    ``answers`` (optional, ``K`` object indices) lets several facts share an object, as in
    Cabannes et al.'s labels ``y = x mod M``; then ``Ẽ`` has one column per object and label noise
    spreads over the objects. By default fact ``k``'s object is ``k``.
    """

    basis = "embedding"
    backend = "dense"

    def __init__(
        self,
        spectrum: FrequencySpectrum,
        embedding: Embedding,
        label_noise: float = 0.0,
        answers: torch.Tensor | None = None,
    ) -> None:
        self.spectrum = spectrum
        self.embedding = embedding
        self.label_noise = float(label_noise)
        self.K = spectrum.K
        self.E, self.Et = embedding.dense()
        self.n_obj = int(self.Et.shape[1])
        K = self.K
        if answers is None:
            if self.n_obj != K:
                raise ValueError(f"Ẽ has {self.n_obj} objects for K={K} facts: pass answers")
            answers = torch.arange(K)
        if answers.shape != (K,) or int(answers.min()) < 0 or int(answers.max()) >= self.n_obj:
            raise ValueError(f"answers: expected K={K} object indices in [0, {self.n_obj})")
        self.answers = answers.long()
        # Every gradient (and momentum buffer) has its columns in span(Ẽ): with fewer objects
        # than dimensions its polar factor comes from an n_obj × d_s SVD (see ``polar``).
        self._obj_basis = torch.linalg.qr(self.Et)[0] if self.n_obj < self.Et.shape[0] else None
        self.p = spectrum.p
        self.types = FactTypes(
            torch.ones(K, dtype=torch.float64), self.p, spectrum.group, torch.arange(K)
        )

    def zeros(self, batch: tuple[int, ...] = ()) -> torch.Tensor:
        return torch.zeros(*batch, self.embedding.d_obj, self.embedding.d_key, dtype=torch.float64)

    def evaluate(
        self, W: torch.Tensor, weights: torch.Tensor | None = None
    ) -> Evaluation[torch.Tensor]:
        """Loss and gradient; ``weights`` replaces ``p`` (e.g. a sampled batch's frequencies)."""
        p = self.p if weights is None else weights
        Z = logits(W, self.E, self.Et)
        logs = torch.log_softmax(Z, dim=-2)
        cols = torch.arange(self.K)
        correct = logs[..., self.answers, cols]
        a, n = self.label_noise, self.n_obj
        fl = -(1.0 - a) * correct - (a / n) * logs.sum(dim=-2)
        G = logs.exp() - a / n
        G[..., self.answers, cols] -= 1.0 - a
        grad = self.Et @ (G * p) @ self.E.T
        return Evaluation((fl * p).sum(-1), fl, correct.exp(), grad, self.types)

    def errors(self, W: torch.Tensor) -> torch.Tensor:
        """Top-1 error ``Σ_k p_k 1[argmax_i Z_ik ≠ answer_k]`` (batch-shaped)."""
        Z = logits(W, self.E, self.Et)
        wrong = Z.argmax(dim=-2) != self.answers
        return (wrong.to(torch.float64) * self.p).sum(dim=-1)

    def to_task(self, X: torch.Tensor) -> torch.Tensor:
        """``Ẽᵀ X E``."""
        return self.Et.T @ X @ self.E

    def from_task(self, Y: torch.Tensor) -> torch.Tensor:
        """``Ẽ Y Eᵀ`` (the inverse of :meth:`to_task` for orthonormal embeddings)."""
        return self.Et @ Y @ self.E.T

    @staticmethod
    def map(X: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        return fn(X)

    def polar(self, X: torch.Tensor) -> torch.Tensor:
        """Exact ``U_r V_rᵀ`` (``orthogonalize(method="svd")``); when ``X = Q Qᵀ X`` (columns in
        span(Ẽ) = span(Q), true of every gradient), via the small ``Qᵀ X``."""
        if self._obj_basis is None:
            return orthogonalize(X, "svd")
        Q = self._obj_basis
        return Q @ orthogonalize(Q.T @ X, "svd")

    @staticmethod
    def ns5(X: torch.Tensor, steps: int = 5) -> torch.Tensor:
        """The practical quintic Newton–Schulz approximation (``orthogonalize(method="ns5")``)."""
        return orthogonalize(X, "ns5", steps=steps)

    @staticmethod
    def frobenius(X: torch.Tensor) -> torch.Tensor:
        return X.flatten(-2).norm(dim=-1)

    @staticmethod
    def singular_values(X: Matrix) -> torch.Tensor:
        """Singular values, descending. Takes :data:`Matrix` so that code holding a memory and
        a direction of a backend chosen at run time can call it; an OrbitMatrix is a TypeError."""
        return torch.linalg.svdvals(dense_matrix(X))

    @staticmethod
    def dense(X: torch.Tensor) -> torch.Tensor:
        return X


class StructuredMemory:
    """Exchangeable-block backend (see the module docstring for when it is exact)."""

    backend = "structured"

    def __init__(
        self,
        spectrum: FrequencySpectrum,
        embedding: Embedding,
        label_noise: float = 0.0,
        task_basis: bool = False,
    ) -> None:
        if not task_basis and not embedding.block_structured:
            raise ValueError(
                f"embedding {embedding.name!r} is not block-structured; use DenseMemory or "
                "task_basis=True with a basis-invariant optimiser"
            )
        if task_basis and not embedding.orthonormal:
            raise ValueError("task_basis=True needs an orthonormal embedding")
        self.spectrum = spectrum
        self.embedding = embedding
        self.label_noise = float(label_noise)
        self.K = spectrum.K
        self.basis = "task (exact by basis invariance)" if task_basis else "embedding"
        if task_basis:
            unit = 1
            self.R_s = self.R_o = torch.eye(1, dtype=torch.float64)
        else:
            assert embedding.unit is not None and embedding.key_block is not None
            assert embedding.object_block is not None
            unit = embedding.unit
            self.R_s = embedding.key_block
            self.R_o = embedding.object_block
        self.layout = Layout.from_frequencies(spectrum.p, spectrum.group, unit)
        a = self.label_noise
        self._target = OrbitMatrix.identity_plus_constant(self.layout, 1.0 - a, a / self.K)
        self._type_p = self.layout.p
        lay = self.layout
        self.types = FactTypes(
            lay.type_weights().reshape(-1),
            lay.p.reshape(-1),
            lay.group.reshape(-1),
            lay.fact_type,
        )

    def zeros(self, batch: tuple[int, ...] = ()) -> OrbitMatrix:
        return OrbitMatrix.zeros(self.layout, batch)

    def to_task(self, X: OrbitMatrix) -> OrbitMatrix:
        return X.sandwich(self.R_o.T, self.R_s)

    def from_task(self, Y: OrbitMatrix) -> OrbitMatrix:
        return Y.sandwich(self.R_o, self.R_s.T)

    def evaluate(self, W: OrbitMatrix) -> Evaluation[OrbitMatrix]:
        Z = self.to_task(W)
        S, log_correct, sum_log = Z.column_log_softmax()
        a = self.label_noise
        fl = -(1.0 - a) * log_correct - (a / self.K) * sum_log  # (..., C, u)
        weights = self.layout.type_weights() * self._type_p
        loss = (fl * weights).sum(dim=(-2, -1))
        G = (S - self._target).scale_columns(self._type_p)
        return Evaluation(
            loss, fl.flatten(-2), log_correct.exp().flatten(-2), self.from_task(G), self.types
        )

    @staticmethod
    def map(X: OrbitMatrix, fn: Callable[[torch.Tensor], torch.Tensor]) -> OrbitMatrix:
        return X.map(fn)

    @staticmethod
    def polar(X: OrbitMatrix) -> OrbitMatrix:
        return X.polar()

    @staticmethod
    def ns5(X: OrbitMatrix, steps: int = 5) -> OrbitMatrix:
        """``orthogonalize(method="ns5")`` in reduced form: divide by ``‖X‖_F + 1e-7``, then the
        quintic ``X ← aX + (b XXᵀ + c (XXᵀ)²) X`` on the within-cell blocks and the reduced matrix
        (the polynomial acts on each invariant subspace separately); computed in float64."""
        a, b, c = NS5_COEFFICIENTS

        def quintic(Y: torch.Tensor) -> torch.Tensor:
            for _ in range(steps):
                gram = Y @ Y.transpose(-2, -1)
                Y = a * Y + (b * gram + c * gram @ gram) @ Y
            return Y

        return (X * (1.0 / (X.frobenius() + 1e-7))).matrix_polynomial(quintic)

    @staticmethod
    def frobenius(X: OrbitMatrix) -> torch.Tensor:
        return X.frobenius()

    @staticmethod
    def singular_values(X: Matrix) -> torch.Tensor:
        """Singular values, descending (a dense tensor is a TypeError; see DenseMemory's)."""
        return orbit_matrix(X).singular_values()

    @staticmethod
    def dense(X: OrbitMatrix) -> torch.Tensor:
        return X.dense()


class MemoryBackend(Protocol[Mat]):
    """What the optimisers and the training loop use of a backend, typed by its matrix type
    (both :class:`DenseMemory` and :class:`StructuredMemory` have it)."""

    spectrum: FrequencySpectrum
    K: int
    types: FactTypes

    def zeros(self, batch: tuple[int, ...] = ()) -> Mat: ...
    def evaluate(self, W: Mat) -> Evaluation[Mat]: ...
    def to_task(self, X: Mat) -> Mat: ...
    def from_task(self, Y: Mat) -> Mat: ...
    def map(self, X: Mat, fn: Callable[[torch.Tensor], torch.Tensor]) -> Mat: ...
    def polar(self, X: Mat) -> Mat: ...
    def ns5(self, X: Mat, steps: int = 5) -> Mat: ...
    def singular_values(self, X: Mat) -> torch.Tensor: ...


Memory = DenseMemory | StructuredMemory
"""A backend chosen at run time (:func:`~tailmem.assoc.dynamics.build_memory`)."""


def dense_matrix(X: Matrix) -> torch.Tensor:
    """``X`` as a :class:`DenseMemory` matrix: a TypeError for an OrbitMatrix (the backends'
    matrices do not mix)."""
    if not isinstance(X, torch.Tensor):
        raise TypeError("a DenseMemory takes dense matrices; got an OrbitMatrix")
    return X


def orbit_matrix(X: Matrix) -> OrbitMatrix:
    """``X`` as a :class:`StructuredMemory` matrix: a TypeError for a dense tensor."""
    if not isinstance(X, OrbitMatrix):
        raise TypeError("a StructuredMemory takes OrbitMatrix matrices; got a dense tensor")
    return X


EitherBackend = MemoryBackend[torch.Tensor] | MemoryBackend[OrbitMatrix]
"""Either backend, also inside code generic in :data:`Mat` (where ``Memory`` cannot narrow)."""
