"""What ``assoc-two-group`` measures, in the types its A4 checks read
(:class:`~tailmem.claims.a4.A4Inputs`).

The rows are also the study's CSV tables (each field a documented column, :mod:`tailmem.columns`):
one type serves the table, ``results.json`` and the claims, so a column cannot mean one thing
in the CSV and another to a check.
"""

from __future__ import annotations

from dataclasses import dataclass

from tailmem.columns import column


@dataclass(frozen=True)
class RhoRow:
    """One one-step balance of ``rho.csv``: one K, embedding, optimiser and head rounding."""

    set: str = column(
        "main: the K list; asymptotic: the large-K list; rounding: the "
        "'nearest' head rounding (coupled SignGD)"
    )
    K: int = column("number of facts")
    embedding: str = column("decoupled or coupled embeddings")
    optimizer: str = column("the update rule")
    head_rounding: str = column("how L = βK is rounded")
    head_size: int = column("L, the facts in the frequent group")
    rho: float = column("ϱ^ε, the one-step balance")
    rho_literal_inf: float = column("ϱ^ε read literally (an infimum over step sizes)")
    monotone: bool = column("whether the worst fact's probability rises monotonically in η")
    eta_star: float = column("η*, the step size that defines ϱ^ε")
    gap: float = column("Δ at η*, the best-minus-worst fact probability")
    head_prob: float = column("a frequent fact's probability at η*")
    tail_prob: float = column("a rare fact's probability at η*")
    muon_deficit_constant: float = column("(1 − ε − ϱ^ε)/(ε log K / K), Muon's O(·) constant")
    gd_theory_exact: float = column("GD's ϱ^ε from the closed form")
    gd_min_step_theorem: float = column("Theorem 5.3's smallest GD step size")
    backend: str = column("the memory's backend (structured or dense)")
    k_identity_deviation: float | None = column(
        "K · max |ẼᵀUE + I| of Muon's first update (empty for other rules)"
    )


@dataclass(frozen=True)
class SlopeRow:
    """One fitted slope of ``rho_slopes.csv``."""

    set: str = column("main: the K list; asymptotic: the large-K list")
    embedding: str = column("decoupled or coupled embeddings")
    optimizer: str = column("the update rule")
    k_min: int = column("smallest K of the fit")
    k_max: int = column("largest K of the fit")
    slope_rho: float = column("fitted log-log slope of ϱ^ε against K")
    slope_gap: float = column("fitted log-log slope of 1 − ε − ϱ^ε against K")
    predicted_slope_rho: float = column("the slope the theorem (or paper) predicts")
    prediction: str = column("where the predicted slope comes from")


@dataclass(frozen=True)
class SpectrumRow:
    """The singular values of one first update at ``figure_k`` (``update_spectra.csv``)."""

    K: int = column("number of facts (figure_k)")
    embedding: str = column("decoupled or coupled embeddings")
    optimizer: str = column("the update rule")
    sigma_max: float = column("the largest singular value of the update")
    sigma_min_nonzero: float = column("the smallest non-zero singular value")
    rank: int = column("the update's numerical rank")
    ratio: float = column("σ_min/σ_max over the non-zero singular values of the update")
    block_ratio: float = column("the same for the 3×3 (I⊗A) block of the coupled construction")
    identity_deviation: float = column("max |ẼᵀUE + I| (Muon's deviation from −ẼEᵀ)")


@dataclass(frozen=True)
class SweepRow:
    """One step size of the one-step sweep (``delta_vs_loss_one_step.csv``)."""

    embedding: str = column("decoupled or coupled embeddings")
    optimizer: str = column("the update rule")
    eta: float = column("the step size")
    loss: float = column("L(W) after the step")
    gap: float = column("Δ(W), the best-minus-worst fact probability")
    min_prob: float = column("the worst fact's probability")
    max_prob: float = column("the best fact's probability")


@dataclass(frozen=True)
class MultiRow:
    """One recorded step of a multi-step run (``delta_vs_loss_multi_step.csv``)."""

    embedding: str = column("decoupled or coupled embeddings")
    optimizer: str = column("the update rule")
    lr: float = column("the constant step size")
    step: int = column("the step")
    loss: float = column("L(W) at the step")
    gap: float = column("Δ(W), the best-minus-worst fact probability")
    min_prob: float = column("the worst fact's probability")
    max_prob: float = column("the best fact's probability")
    head_loss: float = column("the frequent group's loss")
    tail_loss: float = column("the rare group's loss")


@dataclass(frozen=True)
class MultiKRow:
    """A Muon run over the K list read at the first step with ε_t ≤ ε
    (``muon_multistep_k.csv``)."""

    K: int = column("number of facts")
    embedding: str = column("decoupled or coupled embeddings")
    eps_target: float = column("the fixed ε")
    step: int = column("the first recorded step with ε_t ≤ ε")
    eps_t: float = column("1 − max_k f_k at that step")
    gap: float = column("Δ_t, the best-minus-worst fact probability")
    constant_log_k: float = column("Δ_t/(ε_t log K / K), the theorem's O(·) constant")


@dataclass(frozen=True)
class CoupledReadings:
    """The first row of the coupled construction's product under both readings, beside the
    row paper A prints (``coupled_check.json`` holds the whole matrices)."""

    transposed: tuple[float, ...]
    """The first row of ``R_keyᵀ (A+B)ᵀ R_obj`` (W stored as d_s × d_o)."""
    literal: tuple[float, ...]
    """The first row of ``R_keyᵀ (A+B) R_obj`` (PAPERS.md orientation)."""
    printed: tuple[float, ...]
    """The row paper A prints."""
    transposed_error: float
    """The largest difference of the transposed reading's row from the printed one."""
    literal_error: float
    """The same for the literal reading."""
    reading: str
    """How the two readings come about, in words."""


@dataclass(frozen=True)
class RateExponents:
    """The large-K SignGD rate exponent r of our coupled construction, three ways."""

    ours_papers_md_orientation: float
    """In PAPERS.md's orientation (keys and objects as written)."""
    transposed_orientation: float
    """With keys and objects swapped."""
    same_position_only: float
    """Counting only same-position competitors."""
