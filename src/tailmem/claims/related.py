"""PAPERS.md "Related results" and section C (and paper B's experiments); ``cabannes.capacity``
is measured by ``assoc-capacity``, ``kunstner.heavy_tail_adam`` and ``vasudeva.spectral_gd`` by
``optim-bench`` (on its associative memory: :class:`BenchMemory`), the others by no experiment
yet.

``cabannes.capacity`` reads :class:`CapacityInputs`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tailmem.claims.core import (
    MIN_SEEDS,
    SE_FACTOR,
    Claim,
    ClaimInputs,
    Outcome,
    decided,
    grid_edge,
    inconclusive,
    loglog_trend,
    mean_se,
    unmeasured,
)

CABANNES = "Related: Cabannes, Dohmatob & Bietti (ICLR 2024)"
CHANCE_TOL = 0.05
"""An error within this of the chance error at every d: the memory learned nothing."""


@dataclass(frozen=True, kw_only=True)
class CapacityInputs(ClaimInputs):
    """What ``assoc-capacity`` gives ``cabannes.capacity`` (taken from its ``results.json``
    mapping)."""

    config: Mapping[str, Any]
    """The run's config as a dict: ``zipf_exponent``, ``optimizers``, ``lr_grid`` (per
    optimiser), …"""
    rows: Sequence[Mapping[str, Any]]
    """Per d and ``optimizer``: the best final top-1 ``error`` over the grid and its
    ``best_lr``."""
    chance_error: float
    """The error of guessing: 1 − 1/number of objects."""


def check_capacity(claim: Claim, inputs: CapacityInputs) -> list[Outcome]:
    """Per optimiser: the log-log slope of the best final error against d, beside 1 − α."""
    cfg = inputs.config
    predicted = 1.0 - cfg["zipf_exponent"]
    out = []
    for opt in cfg["optimizers"]:
        rows = sorted((r for r in inputs.rows if r["optimizer"] == opt), key=lambda r: r["d"])
        edges = [
            f"d = {r['d']}: η = {r['best_lr']:g} ({edge})"
            for r in rows
            if (edge := grid_edge(r["best_lr"], cfg["lr_grid"][opt]))
        ]
        kw: dict[str, Any] = {
            "variant": opt,
            "published": f"exponent {predicted:.2f}",
            "details": {"rows": rows, "grid_edges": edges},
        }
        trend = loglog_trend([r["d"] for r in rows], [r["error"] for r in rows])
        ours = f"{opt}: " + (
            "zero error at too many d"
            if trend.slope is None
            else f"fitted exponent {trend.slope:.3f}"
        )
        if edges:
            ours += f"; best step size at a grid edge at {len(edges)}/{len(rows)} d"
        if all(r["error"] >= inputs.chance_error - CHANCE_TOL for r in rows):
            out.append(inconclusive(ours, "model at chance at every d", **kw))
        elif 2 * len(edges) >= len(rows):
            out.append(inconclusive(ours, "the step-size grid does not bracket the best step "
                                    "at half or more of the d values", **kw))  # fmt: skip
        elif trend.slope is None:
            out.append(inconclusive(ours, trend.reason, **kw))
        else:
            out.append(decided(abs(trend.slope - predicted) <= claim["slope_tol"], ours, **kw))
    return out


BENCH = "optim-bench"


@dataclass(frozen=True)
class BenchMemory(ClaimInputs):
    """What ``optim-bench``'s associative memory gives the claims: per optimiser, per embedding
    draw, the step at which each frequency group (most frequent first) halved its loss (None:
    not within the ``steps`` of the run)."""

    steps: int
    times: Mapping[str, Sequence[Sequence[int | None]]]


def _log_ratios(
    inputs: BenchMemory, slow: str, fast: str, group: int
) -> tuple[list[float], bool] | None:
    """Per draw, ``log(time_slow / time_fast)`` of ``group``; a censored ``slow`` time counts
    as ``steps`` (the ratio is then a lower bound: second value True). None where ``fast``
    never got there or either optimiser was not run."""
    if slow not in inputs.times or fast not in inputs.times:
        return None
    out, bound = [], False
    for a, b in zip(inputs.times[slow], inputs.times[fast], strict=True):
        t_fast, t_slow = b[group], a[group]
        if t_fast is None:
            return None
        bound |= t_slow is None
        out.append(math.log(max(inputs.steps if t_slow is None else t_slow, 1) / max(t_fast, 1)))
    return out, bound


def _one_sided(values: list[float], bound: bool, ours: str, what: str) -> Outcome:
    """Decide ``mean(values) > 0`` beyond 2 SE over ≥ 3 draws; a value that is only a lower
    bound can confirm the claim but never refute it."""
    stats = mean_se(values)
    if stats.n < MIN_SEEDS or stats.se is None:
        return inconclusive(ours, f"{stats.n} embedding draw(s); the rule needs ≥ {MIN_SEEDS}")
    low, high = stats.mean - SE_FACTOR * stats.se, stats.mean + SE_FACTOR * stats.se
    if low > 0:
        return decided(True, ours)
    if high < 0 and not bound:
        return decided(False, ours)
    reason = f"{what} within {SE_FACTOR:g} SE of equal"
    if high < 0:
        reason = "the ratio is a lower bound (a censored draw): it cannot refute the claim"
    return inconclusive(ours, reason)


def check_heavy_tail_adam(claim: Claim, inputs: BenchMemory) -> Outcome:
    """SGD+M's time to halve the rarest group's loss over Adam's, per draw: longer beyond
    2 SE of the log-ratios (≥ 3 draws) is reproduced."""
    found = _log_ratios(inputs, "sgd", "adam", -1)
    if found is None:
        return unmeasured("needs sgd and adam among the optimisers, Adam learning the rarest group")
    values, bound = found
    stats = mean_se(values)
    se = "" if stats.se is None else f" ± {stats.se:.2f}"
    ours = (
        f"rarest group: SGD+M takes {math.exp(stats.mean):.2f}× Adam's steps to halve its "
        f"loss (log-ratio {stats.mean:.2f}{se}, {stats.n} draws{', a lower bound' * bound})"
    )
    return _one_sided(values, bound, ours, "SGD+M's and Adam's times")  # fmt: skip


def check_spectral_balance(claim: Claim, inputs: BenchMemory) -> Outcome:
    """The spread log(time rarest / time most frequent) of GD with momentum minus Muon's, per
    draw: positive beyond 2 SE (Muon's groups are learned closer together) is reproduced."""
    if "sgd" not in inputs.times or "muon" not in inputs.times:
        return unmeasured("needs muon and sgd among the optimisers")
    diffs, bound = [], False
    for a, b in zip(inputs.times["sgd"], inputs.times["muon"], strict=True):
        sgd_head, sgd_tail, muon_head, muon_tail = a[0], a[-1], b[0], b[-1]
        if sgd_head is None or muon_head is None or muon_tail is None:
            return inconclusive("a most frequent group, or Muon's rarest, was never learned",
                                "the spread is undefined")  # fmt: skip
        bound |= sgd_tail is None
        tail = inputs.steps if sgd_tail is None else sgd_tail
        spread_sgd = math.log(max(tail, 1) / max(sgd_head, 1))
        diffs.append(spread_sgd - math.log(max(muon_tail, 1) / max(muon_head, 1)))
    stats = mean_se(diffs)
    se = "" if stats.se is None else f" ± {stats.se:.2f}"
    ours = (
        f"log(rarest ÷ most frequent group's time to halve its loss): SGD+M's exceeds "
        f"Muon's by {stats.mean:.2f}{se} ({stats.n} draws{', a lower bound' * bound})"
    )
    return _one_sided(diffs, bound, ours, "the two spreads are")  # fmt: skip


CLAIMS: list[Claim] = [
    Claim(
        "B.experiments",
        None,
        "B (secondary sources)",
        "Muon's advantage shows in synthetic long-tail classification and small LLaMA-style "
        "pretraining",
        "details not known",
        "needs the paper's experimental setup",
    ),
    Claim(
        "cabannes.capacity",
        "assoc-capacity",
        CABANNES,
        "top-1 error of a d×d associative memory on Zipf(α) data scales as d^(−α+1)",
        "exponent 1 − α (−1.00 at α = 2)",
        "fitted log-log slope of the best final error against d (≥ 3 values of d) within "
        "±{slope_tol} of 1 − α; inconclusive at chance or when the best step size is at a "
        "grid edge for half or more of the d values (the grid does not bracket the optimum)",
        {"slope_tol": 0.25},
        variant="<optimizer>",
        check=check_capacity,
        why="'≍' is a rate statement, two-sided; ±0.25 for a fit over a finite range of d.",
    ),
    Claim(
        "cabannes.samples",
        None,
        CABANNES,
        "the error of an associative memory trained on T Zipf(α) samples scales as T^(−1+1/α)",
        "exponent −1 + 1/α (−0.5 at α = 2)",
        "fitted log-log slope of the error against T",
    ),
    Claim(
        "kunstner.heavy_tail_adam",
        BENCH,
        "Related: Kunstner et al. (NeurIPS 2024; arXiv 2402.19449); C",
        "heavy-tailed class imbalance is why Adam beats GD on language models: Adam makes "
        "progress on the low-frequency classes that GD neglects",
        "qualitative: GD's loss on rare classes stalls while Adam's falls",
        "on the benchmark's associative memory (Zipf facts, d < K), the steps SGD+M needs to "
        "halve the rarest group's loss over Adam's: log-ratio > 0 beyond 2 SE over ≥ 3 "
        "embedding draws is reproduced, < 0 beyond 2 SE not reproduced (a censored SGD+M draw "
        "is a lower bound: it can confirm, never refute), else inconclusive",
        check=check_heavy_tail_adam,
        why="The statement is a direction (Adam faster on rare classes), tested one-sided on "
        "the rarest group, with the draws' noise; no threshold beyond 'slower'.",
    ),
    Claim(
        "kunstner_bach.sign_descent",
        None,
        "Related: Kunstner & Bach (2025)",
        "sign descent and GD scale differently under Zipf-distributed data",
        "scaling laws in the paper",
        "fitted exponents of sign descent and GD",
    ),
    Claim(
        "vasudeva.spectral_gd",
        BENCH,
        "Related: Vasudeva et al. (ICLR 2026; arXiv 2510.22980); C",
        "spectral methods (Muon's idealisation, spectral GD) learn all principal components at "
        "the same rate on imbalanced data, balancing learning across frequency groups",
        "qualitative: equal rates for spectral GD, frequency-ordered rates for GD",
        "on the benchmark's associative memory, the spread log(steps to halve the rarest "
        "group's loss ÷ the most frequent group's) of SGD+M minus Muon's, per embedding draw: "
        "> 0 beyond 2 SE over ≥ 3 draws is reproduced, < 0 beyond 2 SE not reproduced, else "
        "inconclusive",
        check=check_spectral_balance,
        why="'The same rate' against GD's frequency-ordered rates: a narrower spread than GD's "
        "is the claim's direction; equality with 0 spread is not required (Muon is spectral GD "
        "with momentum, and ns5 only approximates the polar factor).",
    ),
    Claim(
        "related.independent_recall",
        None,
        "Related: An independent (non-author) reproduction, contextual associative recall",
        "with 2-layer attention, best-over-LR tail accuracy is Muon 1.000 vs AdamW 0.966; Muon "
        "stays above 0.92 for LRs 3e-4…3e-2, AdamW only at 3e-4 and 1e-3 (LR robustness)",
        "Muon 1.000, AdamW 0.966 (3 seeds)",
        "tail accuracy per LR, Muon and AdamW, ≥ 3 seeds",
    ),
    Claim(
        "related.mechanism_challenges",
        None,
        "Related: Challenges to the mechanism (2025–26, secondary summaries)",
        "random or inverted spectra match Muon at 124M; variance adaptation matters more than "
        "spectral normalisation; Muon's speed-up shrinks from 1.4× at 0.1B to 1.1× at 1.2B",
        "qualitative",
        "controls with random/inverted spectra beside Muon",
    ),
]
