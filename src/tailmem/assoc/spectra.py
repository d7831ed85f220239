"""Fact frequencies ``p_k`` of the associative memory (PAPERS.md A4 Assumption 5.2, B).

Each spectrum lists the probability of every fact and the group every fact belongs to (groups are
what the experiments report on: head/tail, or the M power-law groups of paper B). Facts are ordered
from most to least frequent, and every group is a contiguous run of facts.

Rounding of the head size in the two-group spectrum: paper A's ``L = βK`` is not an integer at its
own setting (``0.2 · 999 = 199.8``) and the paper does not say how it rounded. Two rules:

* ``block_aligned`` (default): when 3 divides K, ``L`` is the multiple of 3 nearest to ``βK``
  (``L = 3⌊βK/3 + ½⌋``), so no 3×3 block of paper A's coupled construction straddles the
  head/tail boundary and the decoupled and coupled embeddings share one ``L``; otherwise as
  ``nearest``. At ``K = 999, β = 0.2``: ``L = 201``.
* ``nearest``: ``L = ⌊βK + ½⌋`` (round half up). At ``K = 999, β = 0.2``: ``L = 200``.

Either way ``L`` is clipped to ``[1, K − 1]`` and ``p = α / L`` on the head, ``(1 − α) / (K − L)``
on the tail, so the head mass is exactly ``α`` and ``p`` sums to 1. A straddling block changes the
coupled SignGD result qualitatively (one fact of the mixed block is eventually unlearned), which is
why ``block_aligned`` is the default. ``L`` and the effective ``L / K`` are recorded in
:attr:`FrequencySpectrum.info`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from tailmem.errors import ConfigError

SPECTRA = ("two_group", "hierarchical", "zipf", "uniform")
HEAD_ROUNDINGS = ("block_aligned", "nearest")


@dataclass(frozen=True)
class FrequencySpectrum:
    """Fact probabilities ``p`` (``K``, float64, sums to 1), group id per fact and group names."""

    name: str
    p: torch.Tensor
    group: torch.Tensor
    group_names: tuple[str, ...]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def K(self) -> int:
        return int(self.p.numel())

    @property
    def n_groups(self) -> int:
        return len(self.group_names)

    def group_sizes(self) -> torch.Tensor:
        return torch.bincount(self.group, minlength=self.n_groups)

    def group_mass(self) -> torch.Tensor:
        """Total probability of each group."""
        return torch.zeros(self.n_groups, dtype=torch.float64).index_add_(0, self.group, self.p)


def head_size(K: int, head_fraction: float, rounding: str = "block_aligned") -> int:
    """The head size ``L`` for ``βK`` under ``rounding`` (see the module docstring)."""
    if rounding == "block_aligned" and K % 3 == 0:
        L = 3 * math.floor(head_fraction * K / 3 + 0.5)
    elif rounding in HEAD_ROUNDINGS:
        L = math.floor(head_fraction * K + 0.5)
    else:
        raise ConfigError(
            f"unknown head rounding {rounding!r}; expected one of: {', '.join(HEAD_ROUNDINGS)}"
        )
    return min(max(L, 1), K - 1)


def two_group(
    K: int, head_mass: float, head_fraction: float, rounding: str = "block_aligned"
) -> FrequencySpectrum:
    """Paper A's Assumption 5.2: the first ``L ≈ βK`` facts share mass α, the rest ``1 − α``.

    ``head_mass`` is paper A's α and ``head_fraction`` its β; ``rounding`` picks ``L``.
    """
    _check_k(K)
    if not 0.0 < head_mass < 1.0:
        raise ConfigError(f"head_mass={head_mass}: expected a number strictly between 0 and 1")
    if not 0.0 < head_fraction < 1.0:
        raise ConfigError(
            f"head_fraction={head_fraction}: expected a number strictly between 0 and 1"
        )
    L = head_size(K, head_fraction, rounding)
    p = torch.empty(K, dtype=torch.float64)
    p[:L] = head_mass / L
    p[L:] = (1.0 - head_mass) / (K - L)
    group = torch.zeros(K, dtype=torch.long)
    group[L:] = 1
    info = {
        "head_size": L,
        "head_fraction_requested": head_fraction,
        "head_fraction_effective": L / K,
        "rounding": rounding,
    }
    return FrequencySpectrum("two_group", p, group, ("head", "tail"), info)


def hierarchical(groups: int, group_size: int, spectrum_exponent: float) -> FrequencySpectrum:
    """Paper B's spectrum: M groups of C facts, group ``i`` has mass ``∝ i^(−β)`` shared equally.

    ``groups`` is M, ``group_size`` is C and ``spectrum_exponent`` is paper B's β (> 0; the paper's
    theory takes β > 1).
    """
    if groups < 1 or group_size < 1 or groups * group_size < 2:
        raise ConfigError(
            f"groups={groups}, group_size={group_size}: expected positive integers with M·C ≥ 2"
        )
    if spectrum_exponent <= 0:
        raise ConfigError(f"spectrum_exponent={spectrum_exponent}: expected a positive number")
    ranks = torch.arange(1, groups + 1, dtype=torch.float64)
    mass = ranks.pow(-spectrum_exponent)
    mass = mass / mass.sum()
    p = (mass / group_size).repeat_interleave(group_size)
    group = torch.arange(groups).repeat_interleave(group_size)
    names = tuple(f"group {i + 1}" for i in range(groups))
    info = {"groups": groups, "group_size": group_size, "spectrum_exponent": spectrum_exponent}
    return FrequencySpectrum("hierarchical", p, group, names, info)


def zipf(K: int, exponent: float, n_buckets: int = 8) -> FrequencySpectrum:
    """Per-fact Zipf law ``p_k ∝ k^(−exponent)``; groups are ``n_buckets`` log-spaced rank bins."""
    _check_k(K)
    if exponent < 0:
        raise ConfigError(f"zipf exponent={exponent}: expected a non-negative number")
    ranks = torch.arange(1, K + 1, dtype=torch.float64)
    p = ranks.pow(-exponent)
    p = p / p.sum()
    n_buckets = max(1, min(n_buckets, K))
    edges = torch.logspace(0, math.log10(K + 1), n_buckets + 1, dtype=torch.float64)
    group = (torch.bucketize(ranks, edges[1:-1], right=True)).clamp(max=n_buckets - 1)
    used = torch.unique(group)
    group = torch.searchsorted(used, group)
    lo = [int(ranks[group == g].min()) for g in range(len(used))]
    hi = [int(ranks[group == g].max()) for g in range(len(used))]
    names = tuple(f"ranks {a}-{b}" for a, b in zip(lo, hi, strict=True))
    return FrequencySpectrum("zipf", p, group, names, {"exponent": exponent})


def uniform(K: int) -> FrequencySpectrum:
    """Every fact equally likely (one group)."""
    _check_k(K)
    p = torch.full((K,), 1.0 / K, dtype=torch.float64)
    return FrequencySpectrum("uniform", p, torch.zeros(K, dtype=torch.long), ("all",), {})


def _check_k(K: int) -> None:
    if not isinstance(K, int) or K < 2:
        raise ConfigError(f"K={K!r}: the number of facts must be an integer ≥ 2")
