"""What ``assoc-scaling`` measures, in the types its B checks read
(:class:`~tailmem.claims.b.BInputs`).

The rows are also the study's CSV tables (each field a documented column, :mod:`tailmem.columns`)
and the records of its ``results.json`` (``to_json``, :func:`dataclasses.asdict`): one type
serves the table, the file and the claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tailmem.columns import column, records


@dataclass(frozen=True)
class Settings:
    """The settings of the run that the B checks read (the study's config, in part)."""

    curve_steps: int
    """The length of the noiseless runs: a group not at half its loss by then is censored."""
    gd_groups: int
    """M, the groups of GD's noisy horizon sweep (its spectrum's cut)."""
    gd_lr_p1: float
    """GD's step size there, in units of 1/p_max."""
    horizons: Sequence[int]
    """The horizons T of the noisy sweep."""
    gd_lr_grid_p1: Sequence[float]
    """GD's step-size grid for steps to target, in units of 1/p_max."""
    muon_lr_grid: Sequence[float]
    """Muon's step-size grid for steps to target."""
    target_excess: float
    """The excess loss that steps to target wait for."""
    target_max_steps: int
    """The most steps that part runs."""
    symmetry_steps: int
    """The length of the block-symmetry run."""


@dataclass(frozen=True)
class Noiseless:
    """Part 1's fits of the noiseless curves (``results.json`` ``noiseless``): GD's total and
    per-group loss against K/(ηt) and 1/(η p_j t), Muon's against K·e^(−ηt), and each group's
    first step at half its initial loss."""

    K: int
    lrs: dict[str, float]
    """The constant step size of each optimiser's run."""
    gd_total_ratio: float
    gd_total_slope: float
    gd_group_ratio: list[float]
    gd_group_eta_p_t: list[float]
    gd_group_ratio_learned: list[float]
    muon_rate_over_eta: float
    muon_prefactor_over_k: float
    muon_group_rates_over_eta: list[float]
    gd_group_slopes: list[float]
    muon_final_gap: float
    gd_final_gap: float
    group_item_p: list[float]
    gd_group_half_times: list[int | None]
    muon_group_half_times: list[int | None]


@dataclass(frozen=True)
class Matching:
    """Part 1's matching check: TRA-SignGD(η) and plain SignGD against Muon(2η), as the
    largest relative difference of their (excess) losses over ``steps`` steps."""

    tra_noiseless: float
    tra_noisy: float
    signgd_grid: list[float]
    signgd_vs_muon_2eta: list[float]
    """Plain SignGD's mismatch at each step size of the grid."""
    refined_lrs: list[float]
    refined_mismatch: list[float]
    best_lr: float
    best_mismatch: float
    signgd_final_gap: list[float]
    muon_final_gap: float
    steps: int

    def to_json(self) -> dict[str, object]:
        """Its ``results.json`` record."""
        return {
            "noiseless": {"tra_vs_muon_2eta": self.tra_noiseless},
            "noisy": {"tra_vs_muon_2eta": self.tra_noisy},
            "signgd_grid": self.signgd_grid,
            "signgd_vs_muon_2eta": self.signgd_vs_muon_2eta,
            "signgd_refined": {"lrs": self.refined_lrs, "mismatch": self.refined_mismatch},
            "signgd_best": {"lr": self.best_lr, "mismatch": self.best_mismatch},
            "signgd_final_gap": self.signgd_final_gap,
            "muon_final_gap": self.muon_final_gap,
            "steps": self.steps,
        }


@dataclass(frozen=True)
class NoisyFitRow:
    """One β of ``noisy_fits.csv``: the fitted exponents against the claims."""

    spectrum_exponent: float = column("β of the group masses i^(−β)")
    K: int = column("number of facts")
    gd_slope: float = column("fitted log-log slope of GD's excess loss against T")
    gd_predicted: float = column("−(1 − 1/β), the claimed lower bound's exponent")
    muon_slope_last: float = column("the same for Muon's last iterate alone")
    muon_slope: float = column("the same for the larger of Muon's last two iterates")
    muon_predicted: float = column("−2, the claimed exponent of Muon")
    muon_max_bound_constant: float = column("max over T of excess·(T/log K)²")
    gd_lr: float = column("GD's step size (gd_lr_p1 / p_max)")
    muon_c: float = column("c of Muon's step size c·log K / T")


@dataclass(frozen=True)
class NoisyFit:
    """One β's fit (its table row) with the curves it was fitted to."""

    row: NoisyFitRow
    horizons: list[int]
    gd_excess: list[float]
    muon_excess_envelope: list[float]

    def to_json(self) -> dict[str, object]:
        """Its ``results.json`` record: the row, then the curves."""
        return {
            **records([self.row])[0],
            "horizons": self.horizons,
            "gd_excess": self.gd_excess,
            "muon_excess_envelope": self.muon_excess_envelope,
        }


@dataclass(frozen=True)
class TargetRow:
    """One group size of ``steps_to_target.csv``: steps until the excess loss stays below the
    target, GD against Muon."""

    group_size: int = column("C, facts per frequency group")
    K: int = column("number of facts")
    gd_best_steps: int | None = column("GD's fewest steps over its step-size grid")
    gd_best_lr_p1: float | None = column("that step size, in units of 1/p_max")
    gd_lr_p1_1_steps: int | None = column("GD's steps at η·p_max = 1")
    muon_best_steps: int | None = column("Muon's fewest steps over its step-size grid")
    muon_best_lr: float | None = column("Muon's best step size")
    ratio_tuned: float | None = column("GD steps / Muon steps, both tuned")
    ratio_gd_lr_p1_1: float | None = column("the same with GD at η·p_max = 1")
    gd_lr_grid_edge: str = column("set where GD's best step is an end of its grid")
    muon_lr_grid_edge: str = column("set where Muon's best step is an end of its grid")


@dataclass(frozen=True)
class TargetFit:
    """The log-log slopes of both step ratios against C (None under two points), and whether
    both optimisers reached the target at every C."""

    ratio_tuned: float | None
    ratio_gd_lr_p1_1: float | None
    reached_all: bool


@dataclass(frozen=True)
class StabilityRow:
    """One (group size, η·p_max) of ``gd_stability.csv``."""

    group_size: int = column("C, facts per frequency group")
    K: int = column("number of facts")
    lr_p1: float = column("η·p_max")
    stable: bool = column("finite, below the start and ≤ 1% late increases")
    final_excess: float = column("the excess loss at the last step")
    late_increase_fraction: float = column("share of late steps that raise the loss")
    predicted_threshold: float = column("2/(λ_max(H)/p_max) at the noisy optimum")


@dataclass(frozen=True)
class BlockSymmetry:
    """The largest relative distance from the exchangeable algebra along a dense run from
    W₀ = 0, per optimiser."""

    muon: float
    signgd: float
    K: int
