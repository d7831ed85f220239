"""Update directions of the optimisers studied on the associative memory (PAPERS.md A4, B).

Every optimiser maps the gradient ``∇L(W_t)`` (and its state) to a direction ``U_t``; the step is
``W_{t+1} = W_t − η_t U_t``. Without momentum (the papers' setting):

* ``gd``:          ``U = ∇L``
* ``signgd``:      ``U = sign(∇L)`` entrywise (paper A's "Adam with β1 = β2 = 0")
* ``muon``:        ``U = U_r V_rᵀ`` from the SVD of ``∇L``, every non-zero singular value set to 1
  (exact; zero singular values stay zero — the first gradient has rank ``K − 1``); the
  semantics of ``tailmem.optim.orthogonalize(method="svd")``
* ``muon_ns5``:    the practical quintic Newton–Schulz approximation of ``muon``
  (``orthogonalize(method="ns5")``)
* ``tra_signgd``:  ``U = Ẽ sign(Ẽᵀ ∇L E) Eᵀ``, the sign taken in the task basis (paper B; needs the
  embeddings, i.e. oracle knowledge)
* ``adam``:        bias-corrected Adam with EMAs ``β1, β2`` and ``adam_eps``

``momentum > 0`` replaces ``∇L`` by the heavy-ball buffer ``m ← μ m + ∇L`` before the map (so
SignGD becomes Signum and Muon gets its usual momentum). Everything works on both memory
backends (dense tensors or :class:`~tailmem.assoc.structure.OrbitMatrix`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from tailmem.errors import ConfigError

OPTIMIZERS = ("gd", "signgd", "muon", "muon_ns5", "tra_signgd", "adam")
BASIS_INVARIANT = frozenset({"gd", "muon", "muon_ns5", "tra_signgd"})
"""Optimisers whose logit dynamics are the same for every orthonormal E, Ẽ."""


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimiser and its hyper-parameters (the step size lives in the schedule)."""

    name: str
    momentum: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    ns_steps: int = 5

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise ConfigError(
                f"unknown optimizer {self.name!r}; expected one of: {', '.join(OPTIMIZERS)}"
            )
        if not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"momentum={self.momentum}: expected a number in [0, 1)")
        if not (0.0 <= self.beta1 < 1.0 and 0.0 <= self.beta2 < 1.0):
            raise ConfigError(
                f"adam betas ({self.beta1}, {self.beta2}): expected numbers in [0, 1)"
            )

    @property
    def basis_invariant(self) -> bool:
        return self.name in BASIS_INVARIANT


def as_spec(optimizer: str | OptimizerSpec) -> OptimizerSpec:
    """Accept an optimiser name or a spec."""
    return optimizer if isinstance(optimizer, OptimizerSpec) else OptimizerSpec(optimizer)


@dataclass
class OptimizerState:
    """Buffers carried between steps (momentum buffer, Adam moments, step count)."""

    step: int = 0
    buffers: dict[str, Any] = field(default_factory=dict)


def update_direction(spec: OptimizerSpec, grad: Any, state: OptimizerState, memory: Any) -> Any:
    """The direction ``U_t`` for gradient ``grad``; updates ``state`` in place."""
    state.step += 1
    g = grad
    if spec.name != "adam" and spec.momentum > 0.0:
        buf = state.buffers.get("momentum")
        g = grad if buf is None else buf * spec.momentum + grad
        state.buffers["momentum"] = g
    if spec.name == "gd":
        return g
    if spec.name == "signgd":
        return memory.map(g, torch.sign)
    if spec.name == "muon":
        return memory.polar(g)
    if spec.name == "muon_ns5":
        return memory.ns5(g, spec.ns_steps)
    if spec.name == "tra_signgd":
        return memory.from_task(memory.map(memory.to_task(g), torch.sign))
    return _adam(spec, grad, state, memory)


def _adam(spec: OptimizerSpec, grad: Any, state: OptimizerState, memory: Any) -> Any:
    m = state.buffers.get("m")
    v = state.buffers.get("v")
    sq = grad * grad
    m = grad * (1.0 - spec.beta1) if m is None else m * spec.beta1 + grad * (1.0 - spec.beta1)
    v = sq * (1.0 - spec.beta2) if v is None else v * spec.beta2 + sq * (1.0 - spec.beta2)
    state.buffers["m"], state.buffers["v"] = m, v
    t = state.step
    c1 = 1.0 - spec.beta1**t
    c2 = math.sqrt(1.0 - spec.beta2**t)
    eps = spec.adam_eps
    denom = memory.map(v, lambda x: torch.sqrt(x) / c2 + eps)
    return (m * (1.0 / c1)) / denom
