"""PAPERS.md A2 — spectral isotropy of the weights (Fig. 2); measured by ``spectra``.

The checks are pure functions of :class:`A2Inputs` (which also carries what
``A1.table2.logit_bounded``, see :mod:`~tailmem.claims.a1`, reads from the same runs).

"More isotropic" is higher H_norm and eRank, lower TopE_k and Q75/25; the two arms share their
seeds (the same data order and initialisation), so every Muon–Adam comparison is paired: per-seed
differences over ≥ 3 seeds, beyond their 95 % two-sided Student-t interval
(:func:`~tailmem.claims.core.compare_paired`), and the seed variances are compared by the paired
(Pitman–Morgan) test. The four metrics of a matrix are functions of the
same singular values of the same seeds: one measurement seen four ways, never four independent
ones. So a refutation from any of them is corrected for the family (Holm), and the seed-spread
claim compares one pre-specified metric per matrix (:data:`SPREAD_METRIC`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scipy import stats as scipy_stats

from tailmem.claims.core import (
    ALPHA,
    CONFIDENCE,
    MIN_SEEDS,
    TWO_SIDED,
    Claim,
    ClaimInputs,
    Comparison,
    Declared,
    MeanSE,
    Outcome,
    compare_paired,
    declares,
    holm,
    inconclusive,
    unmeasured,
)

EXPERIMENT = "spectra"
_PUBLISHED = "curves only: Muon higher H and eRank, lower Top10E and Q75/25"
_RULE = (
    "every metric (layer mean, final step), per seed (paired: the arms share seeds) over ≥ 3 "
    "seeds: Muon − Adam in the isotropic direction beyond the "
    f"{CONFIDENCE:.0%} two-sided t interval of the per-seed differences (df n − 1), in every "
    "metric of every matrix → reproduced; Adam more isotropic beyond the "
    "interval in some metric, with Holm's correction over the claim's metric comparisons at "
    f"family-wise {ALPHA:.0%} → not reproduced; otherwise (or < 3 seeds) inconclusive"
)
_WHY = (
    "'more isotropic' is stated for all four metrics (Fig. 2), so each must separate beyond "
    "the seed noise (every part required: no correction needed to confirm); the sign of each "
    "metric's isotropic direction comes from its definition. The metrics are functions of "
    "the same singular values, so a refutation by any one of them is a family of tests: "
    "Holm's step-down rule, valid under any dependence."
)


@dataclass(frozen=True, kw_only=True)
class A2Inputs(ClaimInputs):
    """What the spectra study gives the A2 checks and ``A1.table2.logit_bounded`` (arms
    ``"muon"`` and ``"adam"``; every per-seed list in the order of ``seeds``, the seeds both
    arms completed, so that seed ``i`` of one arm is paired with seed ``i`` of the other)."""

    seeds: Sequence[int]
    """The seeds behind every per-seed list (complete runs of both arms)."""
    head_dim: int
    """The attention head dimension d_head."""
    isotropy: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]] = field(
        default_factory=dict
    )
    """Arm → matrix → metric (``svd_entropy``, ``erank``, ``topk_energy``, ``q75_25``) → per-seed
    value at the final step, averaged over layers; empty unless both arms ran."""
    higher_is_isotropic: Mapping[str, bool] = field(default_factory=dict)
    """Metric → whether a larger value means more isotropic (the metrics compared)."""
    vo_matrix: str = "vo_head"
    """The VO matrix of the config: ``"vo_head"`` or ``"vo_stacked"``."""
    ffn_in: Sequence[str] = ("w_in",)
    """The FFN input matrices: ``w_in``, and ``w_gate`` with the gated FFN."""
    qk_norm: bool = False
    """Whether the model normalises Q and K (√d_head is then the logits' reference scale)."""
    logit_peak: Mapping[str, Sequence[float]] = field(default_factory=dict)
    """Arm → per-seed largest attention logit over layers and evaluations."""


def _matrices(claim: Claim, inputs: A2Inputs) -> list[str]:
    """The matrices a claim is about: ``A2.<matrix>_isotropic``, with the two special cases."""
    name = claim.id.removeprefix("A2.").removesuffix("_isotropic")
    return {"ffn_in": list(inputs.ffn_in), "qk": ["q", "k"]}.get(name, [name])


def isotropy_comparison(
    muon: Sequence[float], adam: Sequence[float], higher_is_isotropic: bool
) -> Comparison:
    """Muon − Adam per paired seed in the isotropic direction (values sign-flipped where lower
    is more isotropic): ``reproduced`` means Muon is more isotropic beyond the t interval."""
    sign = 1.0 if higher_is_isotropic else -1.0
    return compare_paired([sign * x for x in muon], [sign * x for x in adam])


@declares(Declared(
    "paired t of Muon − Adam per seed in each metric of each matrix, df n − 1", TWO_SIDED,
    "the claim's metric comparisons (4 metrics × its matrices)",
    "confirm: every one required (intersection–union, none needed); refute: Holm",
))  # fmt: skip
def check_isotropic(claim: Claim, inputs: A2Inputs) -> Outcome:
    """Muon more isotropic than Adam in every metric of every matrix, each beyond the t
    interval; refuted by a metric in Adam's favour beyond it, after Holm's correction over the
    claim's comparisons (the metrics share their singular values: dependent tests)."""
    iso = inputs.isotropy
    matrices = _matrices(claim, inputs)
    values = {"ffn_in": " and ".join(m.replace("w_", "W_") for m in matrices)}
    if not all(m in iso.get(arm, {}) for arm in ("muon", "adam") for m in matrices):
        return unmeasured("isotropy of Muon and Adam runs not logged", values=values)
    seeds = inputs.seeds
    found: dict[str, Comparison] = {}
    parts = []
    for matrix in matrices:
        for metric, higher in inputs.higher_is_isotropic.items():
            muon, adam = iso["muon"][matrix][metric], iso["adam"][matrix][metric]
            c = found[f"{matrix}/{metric}"] = isotropy_comparison(muon, adam, higher)
            parts.append(f"{matrix} {metric}: {_signed(c, higher)} ({c.verdict})")
    details = {k: {"difference": c.difference, "se": c.se, "p": c.p} for k, c in found.items()}
    ours = "; ".join(parts)
    against = [c.p if c.verdict == "not reproduced" and c.p is not None else 1.0
               for c in found.values()]  # fmt: skip
    if any(holm(against)):
        return Outcome("not reproduced", ours, details=details, seeds=seeds, values=values)
    if all(c.verdict == "reproduced" for c in found.values()):
        return Outcome("reproduced", ours, details=details, seeds=seeds, values=values)
    undecided = sum(c.verdict != "reproduced" for c in found.values())
    reason = (
        f"{undecided} of {len(found)} metric comparisons not resolved in Muon's favour (within "
        f"the {CONFIDENCE:.0%} t interval, < 3 seeds, or in Adam's favour but not after Holm's "
        "correction)"
    )
    return inconclusive(ours, reason, details=details, seeds=seeds, values=values)


def _signed(c: Comparison, higher: bool) -> str:
    """Muon vs Adam in the metric's own units (the comparison ran on sign-flipped values)."""
    if higher:
        return f"Muon {c.a} vs Adam {c.b}"
    muon, adam = (MeanSE(-x.mean, x.se, x.n) for x in (c.a, c.b))
    return f"Muon {muon} vs Adam {adam}"


SPREAD_METRIC = "svd_entropy"
"""The one metric per matrix the seed-spread claim compares, fixed before any run: the
normalised SVD entropy H, the first of paper A's four (the others are functions of the same
singular values, so they add no independent comparison)."""


@dataclass(frozen=True)
class VarianceRatio:
    """Adam's seed variance over Muon's for one matrix (:func:`variance_ratio`): the ratio, its
    two-sided :data:`~tailmem.claims.core.CONFIDENCE` interval, the p-value of equal variances
    and the number of paired seeds."""

    ratio: float
    low: float
    high: float
    p: float
    n: int


def variance_ratio(muon: Sequence[float], adam: Sequence[float]) -> VarianceRatio | None:
    """The paired test of equal seed variances (Pitman 1939, Morgan 1939): the arms share their
    seeds, so their values are correlated and Fisher's F (independent samples) does not apply.
    With r the correlation of Adam's and Muon's values over the seeds, the ratio
    F = s²_Adam / s²_Muon equals 1 exactly when Adam − Muon and Adam + Muon are uncorrelated,
    so t = r_ds √(n − 2) / √(1 − r_ds²) on n − 2 degrees of freedom tests it; the interval of
    σ²_Adam/σ²_Muon is F·(K ∓ √(K² − 1)) with K = 1 + 2(1 − r²) t²_{n−2} / (n − 2) (the
    inversion of that test). None when either variance is 0 (no noise estimate) or there are
    fewer than three paired seeds."""
    if len(muon) != len(adam):
        raise ValueError(f"paired seeds differ in length: {len(muon)} and {len(adam)}")
    n = len(muon)
    if n < 3:
        return None
    var_m, var_a = statistics.variance(muon), statistics.variance(adam)
    if var_m <= 0 or var_a <= 0:
        return None
    f = var_a / var_m
    r = statistics.correlation(list(adam), list(muon)) if n > 2 else 0.0
    df = n - 2
    # corr(Adam − Muon, Adam + Muon) = (F − 1) / √((F + 1)² − 4 r² F)
    r_ds = (f - 1) / math.sqrt((f + 1) ** 2 - 4 * r * r * f)
    t = r_ds * math.sqrt(df) / math.sqrt(max(1 - r_ds * r_ds, 1e-300))
    p = float(2 * scipy_stats.t.sf(abs(t), df))
    q = float(scipy_stats.t.ppf(0.5 + CONFIDENCE / 2, df))
    k = 1 + 2 * (1 - r * r) * q * q / df
    root = math.sqrt(k * k - 1)
    return VarianceRatio(f, f * (k - root), f * (k + root), min(p, 1.0), n)


@declares(Declared(
    "paired (Pitman–Morgan) t test of equal seed variances of the per-seed SVD entropy, "
    "df n − 2; interval of Adam's variance ÷ Muon's", TWO_SIDED, "the two matrices (VO, W_out)",
    "confirm: both required (intersection–union, none needed); refute: Holm over the two",
))  # fmt: skip
def check_seed_spread(claim: Claim, inputs: A2Inputs) -> Outcome:
    """Adam's seed variance above Muon's for each of VO and W_out (the matrices of Fig. 2),
    each an F-test of :data:`SPREAD_METRIC` at the final step; below Muon's for either, after
    Holm's correction over the two, refutes."""
    iso = inputs.isotropy
    vo = inputs.vo_matrix
    values = {"vo": vo}
    matrices = (vo, "w_out")
    if not all(m in iso.get(a, {}) for a in ("muon", "adam") for m in matrices):
        return unmeasured("isotropy of Muon and Adam runs not logged", values=values)
    seeds = list(inputs.seeds)
    tests = {}
    for m in matrices:
        muon, adam = iso["muon"][m][SPREAD_METRIC], iso["adam"][m][SPREAD_METRIC]
        if min(len(muon), len(adam)) < MIN_SEEDS:
            reason = f"{min(len(muon), len(adam))} seed(s); a seed variance needs ≥ {MIN_SEEDS}"
            return inconclusive("—", reason, seeds=seeds, values=values)
        tests[m] = variance_ratio(muon, adam)
    parts = [
        f"{m}: no variance estimate (a seed variance of 0)" if t is None else
        f"{m}: Adam's variance ÷ Muon's {t.ratio:.3g} ({CONFIDENCE:.0%} CI {t.low:.3g}–"
        f"{t.high:.3g}, paired test over {t.n} seeds, df {t.n - 2})"
        for m, t in tests.items()
    ]  # fmt: skip
    ours = f"{SPREAD_METRIC} at the final step: " + "; ".join(parts)
    details = {m: None if t is None else {"ratio": t.ratio, "low": t.low, "high": t.high,
                                          "p": t.p} for m, t in tests.items()}  # fmt: skip
    against = [1.0 if t is None or t.ratio >= 1 else t.p for t in tests.values()]
    if any(holm(against)):
        return Outcome("not reproduced", ours, details=details, seeds=seeds, values=values)
    if all(t is not None and t.low > 1 for t in tests.values()):
        return Outcome("reproduced", ours, details=details, seeds=seeds, values=values)
    short = [m for m, t in tests.items() if t is None or t.low <= 1]
    reason = f"{', '.join(short)}: the variance ratio's {CONFIDENCE:.0%} interval reaches 1"
    return inconclusive(ours, reason, details=details, seeds=seeds, values=values)


def _iso(matrix: str, source: str, statement: str) -> Claim:
    return Claim(
        f"A2.{matrix}_isotropic", EXPERIMENT, source, statement, _PUBLISHED, _RULE,
        check=check_isotropic, why=_WHY, min_seeds=MIN_SEEDS,
    )  # fmt: skip


CLAIMS: list[Claim] = [
    _iso("vo_head", "A2, Fig. 2", "Muon's VO (per_head) weights are more isotropic than Adam's"),
    _iso("vo_stacked", "A2, Fig. 2", "Muon's VO (stacked) weights are more isotropic than Adam's"),
    _iso("w_out", "A2, Fig. 2", "Muon's W_out weights are more isotropic than Adam's"),
    Claim(
        "A2.ffn_in_isotropic",
        EXPERIMENT,
        "A2, appendix",
        "Muon's {ffn_in} weights are more isotropic than Adam's",
        _PUBLISHED,
        _RULE,
        placeholders={"ffn_in": "W_in; W_in and W_gate with the gated FFN"},
        check=check_isotropic,
        why=_WHY,
        min_seeds=MIN_SEEDS,
    ),
    _iso("qk", "A2, text", "Muon's Q and K weights are more isotropic than Adam's"),
    Claim(
        "A2.muon_seed_spread_smaller",
        EXPERIMENT,
        "A2, Fig. 2",
        "Muon's isotropy curves vary less across seeds than Adam's",
        "Muon nearly identical across seeds; Adam varies",
        "one statistic per matrix, fixed in advance: the normalised SVD entropy H "
        f"({SPREAD_METRIC}) of the layer mean at the final step, per seed, for "
        "{vo} and W_out; per matrix the "
        "paired (Pitman–Morgan) test of Adam's seed variance over Muon's (the arms share "
        "seeds; df n − 2, ≥ 3 paired seeds): its "
        f"{CONFIDENCE:.0%} two-sided interval above 1 for both matrices → "
        f"reproduced; below 1 for either at family-wise {ALPHA:.0%} (Holm over the two) → not "
        "reproduced; else (or < 3 seeds) inconclusive",
        placeholders={"vo": "the VO matrix of the config"},
        check=check_seed_spread,
        why="'Nearly identical vs varies' compares seed variances, one per matrix of Fig. 2 "
        "(VO and W_out). The four metrics are functions of the same singular values of the "
        "same seeds — one measurement, not four independent comparisons — so one metric per "
        "matrix is fixed in advance (H, the paper's first). The two arms share their seeds, "
        "so their values are correlated: Fisher's F (independent samples) does not apply, and "
        "the paired Pitman–Morgan test — exact for normal pairs — does; with 5 seeds (df 3) "
        "the ratio must be large to be resolved, so the paper's 10 seeds are what decides it. "
        "Both matrices are required (no correction needed to confirm); a refutation by either "
        "is corrected for the two (Holm).",
        min_seeds=MIN_SEEDS,
    ),
    Claim(
        "A2.isotropic_from_start",
        None,
        "A2, Fig. 2",
        "Muon is markedly more isotropic from the first steps of training",
        "curves only",
        "Muon − Adam separation at the first evaluations after step 0",
    ),
]
