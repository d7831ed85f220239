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

Any other optimiser — a kind of the optimiser registry (:mod:`tailmem.optim.registry`: NorMuon,
AdamW, a library's Lion or SOAP, a user's) — enters through its ``setting``
(:class:`~tailmem.optim.registry.OptimizerSetting`, momentum and all of its hyper-parameters
its own): the lab steps it at learning rate 1 on a copy of ``W`` and takes the displacement as
``U``, so the schedule's ``η_t`` scales it like the others. That fits optimisers whose step is
linear in the learning rate (weight decay 0), on the dense backend with one ``W`` (no batch
of step sizes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic

import torch

from tailmem.assoc.memory import Mat, MemoryBackend
from tailmem.errors import ConfigError
from tailmem.optim.registry import REGISTRY, OptimizerSetting

OPTIMIZERS = ("gd", "signgd", "muon", "muon_ns5", "tra_signgd", "adam")
LABELS = {"gd": "GD", "signgd": "SignGD", "muon": "Muon", "muon_ns5": "Muon (NS5)",
          "tra_signgd": "TRA-SignGD", "adam": "Adam"}  # fmt: skip
"""How figures and tables name the optimisers above (a registry kind: its own label)."""
BASIS_INVARIANT = frozenset({"gd", "muon", "muon_ns5", "tra_signgd"})
"""Optimisers whose logit dynamics are the same for every orthonormal E, Ẽ."""


def check_names(where: str, names: Iterable[str]) -> None:
    """Refuse, in one line naming ``where`` (a config field: the optimiser list, or a mapping
    keyed by optimiser), a name that is not one of :data:`OPTIMIZERS`: a setting for an
    optimiser no run has would reach nothing."""
    unknown = [name for name in names if name not in OPTIMIZERS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown optimizer {unknown[0]!r}; expected names from "
            + ", ".join(OPTIMIZERS)
        )


def label(name: str) -> str:
    """The name a figure shows for optimiser ``name``: :data:`LABELS`, else the registry kind's
    label (``normuon`` → "NorMuon"), else ``name`` itself (a user's optimiser)."""
    kind = REGISTRY.get(name)
    return LABELS.get(name) or (kind.label if kind is not None else name)


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimiser and its hyper-parameters (the step size lives in the schedule); with a
    ``setting``, a registry optimiser called ``name`` (see the module docstring)."""

    name: str
    momentum: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    ns_steps: int = 5
    setting: OptimizerSetting | None = None

    def __post_init__(self) -> None:
        if self.setting is not None:
            # Not every kind's hyper-parameters have a weight decay; those that do must set it 0.
            weight_decay = getattr(self.setting.hparams, "weight_decay", 0.0)
            if weight_decay:
                raise ConfigError(
                    f"{self.name}: weight_decay {weight_decay}; expected 0 "
                    "(the lab scales each step by the schedule's step size)"
                )
            return
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
        return self.setting is None and self.name in BASIS_INVARIANT


def as_spec(optimizer: str | OptimizerSpec) -> OptimizerSpec:
    """Accept an optimiser name or a spec."""
    return optimizer if isinstance(optimizer, OptimizerSpec) else OptimizerSpec(optimizer)


@dataclass
class OptimizerState(Generic[Mat]):
    """What is carried between steps: the step count, the heavy-ball buffer, Adam's moments,
    and for a registry optimiser the parameter it steps and the optimiser itself."""

    step: int = 0
    momentum: Mat | None = None
    m: Mat | None = None
    v: Mat | None = None
    param: torch.nn.Parameter | None = None
    optimizer: torch.optim.Optimizer | None = None


def update_direction(
    spec: OptimizerSpec, grad: Mat, state: OptimizerState[Mat], memory: MemoryBackend[Mat]
) -> Mat:
    """The direction ``U_t`` for gradient ``grad``; updates ``state`` in place."""
    state.step += 1
    if spec.setting is not None:
        return _registry_direction(spec.setting, grad, state)
    g = grad
    if spec.name != "adam" and spec.momentum > 0.0:
        buf = state.momentum
        g = grad if buf is None else buf * spec.momentum + grad
        state.momentum = g
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


def _adam(
    spec: OptimizerSpec, grad: Mat, state: OptimizerState[Mat], memory: MemoryBackend[Mat]
) -> Mat:
    m, v = state.m, state.v
    sq = grad * grad
    m = grad * (1.0 - spec.beta1) if m is None else m * spec.beta1 + grad * (1.0 - spec.beta1)
    v = sq * (1.0 - spec.beta2) if v is None else v * spec.beta2 + sq * (1.0 - spec.beta2)
    state.m, state.v = m, v
    t = state.step
    c1 = 1.0 - spec.beta1**t
    c2 = math.sqrt(1.0 - spec.beta2**t)
    eps = spec.adam_eps
    denom = memory.map(v, lambda x: torch.sqrt(x) / c2 + eps)
    return (m * (1.0 / c1)) / denom


def _registry_direction(setting: OptimizerSetting, grad: Mat, state: OptimizerState[Mat]) -> Mat:
    """``W − W'`` where ``W'`` is one step of ``setting``'s optimiser at learning rate 1 from
    ``W`` (its state kept in ``state``); ``W`` only carries the optimiser's state here, so it
    is reset to zero before each step (the direction does not depend on ``W`` without weight
    decay)."""
    if not isinstance(grad, torch.Tensor) or grad.ndim != 2:
        raise ConfigError(
            f"{setting.kind.name} needs the dense backend with one W (backend=dense, one step size)"
        )
    if state.param is None or state.optimizer is None:
        param = torch.nn.Parameter(torch.zeros_like(grad))
        group: dict[str, Any] = {"params": [param]}
        if setting.kind.layout_keys:
            group["fan_out_dim"] = 0
        state.param = param
        state.optimizer = OptimizerSetting(setting.kind, 1.0, setting.hparams).build([group])
    param, optimizer = state.param, state.optimizer
    with torch.no_grad():
        param.zero_()
    param.grad = grad.detach().clone()
    optimizer.step()
    return -param.detach().clone()
