"""PAPERS.md "Related results" (and paper B's experiments); ``cabannes.capacity`` is measured by
``assoc-capacity``, the others by no experiment yet.

``cabannes.capacity`` reads the experiment's results mapping: ``config`` (``dims``, ``lr_grid``,
``zipf_exponent``, ``labels``, ``facts``), ``rows`` (per d and optimiser: best final top-1
``error``, ``best_lr``) and ``chance_error`` (1 − 1/number of objects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tailmem.claims.core import Claim, Outcome, decided, grid_edge, inconclusive, loglog_trend

CABANNES = "Related: Cabannes, Dohmatob & Bietti (ICLR 2024)"
CHANCE_TOL = 0.05
"""An error within this of the chance error at every d: the memory learned nothing."""


def check_capacity(claim: Claim, results: Mapping[str, Any]) -> list[Outcome]:
    """Per optimiser: the log-log slope of the best final error against d, beside 1 − α."""
    cfg = results["config"]
    predicted = 1.0 - cfg["zipf_exponent"]
    out = []
    for opt in cfg["optimizers"]:
        rows = sorted((r for r in results["rows"] if r["optimizer"] == opt), key=lambda r: r["d"])
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
        if all(r["error"] >= results["chance_error"] - CHANCE_TOL for r in rows):
            out.append(inconclusive(ours, "model at chance at every d", **kw))
        elif 2 * len(edges) >= len(rows):
            out.append(inconclusive(ours, "the step-size grid does not bracket the best step "
                                    "at half or more of the d values", **kw))  # fmt: skip
        elif trend.slope is None:
            out.append(inconclusive(ours, trend.reason, **kw))
        else:
            out.append(decided(abs(trend.slope - predicted) <= claim["slope_tol"], ours, **kw))
    return out


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
        None,
        "Related: Kunstner et al. (NeurIPS 2024)",
        "heavy-tailed class imbalance is why Adam beats GD on language models",
        "qualitative",
        "per-frequency loss of GD and Adam on heavy-tailed classes",
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
        None,
        "Related: Vasudeva et al. (ICLR 2026)",
        "spectral GD learns all principal components at the same rate on imbalanced data, "
        "helping minority classes",
        "qualitative",
        "per-component learning rates under spectral GD",
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
