"""The one-layer associative memory of PAPERS.md A4 and B: exact population loss, optimisers,
one-step balance ``ϱ^ε`` and multi-step dynamics.

Parameter names are unambiguous across the two papers, which reuse α and β:
``head_mass`` (paper A α), ``head_fraction`` (paper A β), ``spectrum_exponent`` (paper B β),
``label_noise`` (paper B α), ``groups`` / ``group_size`` (paper B M / C).
"""

from __future__ import annotations

import torch

from tailmem.assoc.balance import OneStepBalance, OneStepCurve, one_step_balance, one_step_curve
from tailmem.assoc.dynamics import (
    Trajectory,
    build_memory,
    first_direction,
    lr_schedule,
    small_op_threads,
    train,
)
from tailmem.assoc.embeddings import (
    EMBEDDINGS,
    Embedding,
    coupled,
    custom,
    decoupled,
    gaussian,
    make_embedding,
    orthonormal,
    rotation_zyz,
)
from tailmem.assoc.memory import (
    DenseMemory,
    Matrix,
    Memory,
    StructuredMemory,
    correct_probabilities,
    loss_floor,
    max_gap,
    population_grad,
    population_loss,
)
from tailmem.assoc.optimizers import OPTIMIZERS, OptimizerSpec
from tailmem.assoc.spectra import FrequencySpectrum, hierarchical, two_group, uniform, zipf

__all__ = [
    "EMBEDDINGS",
    "OPTIMIZERS",
    "DenseMemory",
    "Embedding",
    "FrequencySpectrum",
    "OneStepBalance",
    "OneStepCurve",
    "OptimizerSpec",
    "StructuredMemory",
    "Trajectory",
    "build_memory",
    "correct_probabilities",
    "coupled",
    "custom",
    "decoupled",
    "first_direction",
    "gaussian",
    "hierarchical",
    "loss_floor",
    "lr_schedule",
    "make_embedding",
    "max_gap",
    "one_step_balance",
    "one_step_curve",
    "one_step_rho",
    "orthonormal",
    "population_grad",
    "population_loss",
    "rotation_zyz",
    "small_op_threads",
    "train",
    "two_group",
    "uniform",
    "update_singular_values",
    "zipf",
]


def _two_group_memory(
    K: int,
    embedding: str | Embedding,
    optimizer: str | OptimizerSpec,
    head_mass: float,
    head_fraction: float,
    head_rounding: str,
) -> tuple[Memory, Matrix]:
    """The memory of the two-group problem and the optimiser's first update direction on it."""
    emb = make_embedding(embedding, K) if isinstance(embedding, str) else embedding
    spectrum = two_group(K, head_mass, head_fraction, head_rounding)
    memory = build_memory(spectrum, emb, optimizer)
    with small_op_threads(memory):
        return memory, first_direction(memory, optimizer)


def one_step_rho(
    K: int,
    embedding: str | Embedding,
    optimizer: str | OptimizerSpec,
    head_mass: float,
    head_fraction: float,
    eps: float,
    *,
    head_rounding: str = "block_aligned",
) -> float:
    """Paper A's one-step balance ``ϱ^ε`` (Theorem 5.3) on the two-group spectrum.

    ``ϱ^ε = min_k f_k(η*)`` at the smallest step ``η*`` where some fact reaches ``1 − ε``; see
    :mod:`tailmem.assoc.balance` for why this is the paper's infimum. NaN if no step gets there.
    """
    memory, U = _two_group_memory(K, embedding, optimizer, head_mass, head_fraction, head_rounding)
    return one_step_balance(memory, U, eps).rho


def update_singular_values(
    K: int,
    embedding: str | Embedding,
    optimizer: str | OptimizerSpec,
    head_mass: float,
    head_fraction: float,
    *,
    head_rounding: str = "block_aligned",
) -> torch.Tensor:
    """All ``K`` singular values (descending) of the optimiser's first update at ``W₀ = 0``."""
    memory, U = _two_group_memory(K, embedding, optimizer, head_mass, head_fraction, head_rounding)
    with small_op_threads(memory):
        return memory.singular_values(U)
