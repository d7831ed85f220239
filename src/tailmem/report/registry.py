"""The registry of published claims: every observation and theorem of PAPERS.md in one place.

Each :class:`Claim` holds the static part of a claim — its stable id, the experiment that measures
it (``None`` where none does yet), where it stands in PAPERS.md, the statement, the published
value, the rule that decides the verdict and the rule's numbers (``tolerances``). Experiments
measure and call :meth:`Claim.result`, so the text and every tolerance live here only; the report
lists the registry claims a run did not measure. :data:`CLAIMS` is in PAPERS.md order.

Templates: ``statement``, ``published`` and ``rule`` may name tolerances (``{slope_tol}``) and
run values (``{vo}``) in braces; tolerances print as plain numbers (``1e-9``, ``0.05``), run
values as the experiment passes them, and ``placeholders`` says in words what each run value is.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from tailmem.errors import DataError

if TYPE_CHECKING:
    from tailmem.report.claims import ClaimResult

SECTIONS: dict[str, str] = {
    "A1": "Component ablation on LM pretraining",
    "A2": "Spectral isotropy",
    "A3": "Heavy-tailed knowledge QA",
    "A4": "One-layer associative memory theory",
    "B": "Paper B: training dynamics and scaling laws",
    "Related": "Related results worth reproducing or comparing with",
}
"""PAPERS.md's sections that hold claims; every claim's ``source`` starts with one of the keys."""

# Paper A, Tables 3-8 (PAPERS.md A3): FTA of the tail groups of the m = 15 run, by the group's
# distance from the rarest group (0 = group 15, 2 = group 13, 4 = group 11) and the fraction
# of the 10k steps (0.2 = 2k, 0.5 = 5k, 1.0 = 10k). Gated FFN: only the rarest group at 10k.
_A3_ARMS = ("muon", "adam", "sgd", "muon_vo_ffn", "muon_qk")
A3_PUBLISHED_FTA: dict[str, dict[tuple[float, int], dict[str, float]]] = {
    "plain": {
        key: dict(zip(_A3_ARMS, values, strict=True))
        for key, values in {
            (0.2, 4): (0.854, 0.312, 0.156, 0.814, 0.472),
            (0.2, 2): (0.386, 0.146, 0.120, 0.256, 0.154),
            (0.2, 0): (0.140, 0.090, 0.082, 0.114, 0.086),
            (0.5, 4): (0.996, 0.936, 0.314, 0.992, 0.970),
            (0.5, 2): (0.964, 0.298, 0.148, 0.934, 0.354),
            (0.5, 0): (0.320, 0.110, 0.084, 0.254, 0.118),
            (1.0, 4): (1.000, 1.000, 0.422, 1.000, 1.000),
            (1.0, 2): (1.000, 0.890, 0.294, 0.998, 0.940),
            (1.0, 0): (0.976, 0.264, 0.126, 0.954, 0.286),
        }.items()
    },
    "gated": {(1.0, 0): dict(zip(_A3_ARMS, (0.994, 0.244, 0.148, 0.990, 0.274), strict=True))},
}
"""Published FTA per FFN type, (fraction of training, groups from the rarest) and arm."""


class _Number(float):
    """A tolerance in a template: plain ``{x}`` prints the shortest form with a short exponent."""

    def __format__(self, spec: str) -> str:
        if spec:
            return format(float(self), spec)
        text = repr(int(self)) if self.is_integer() and abs(self) < 1e6 else repr(float(self))
        return re.sub(r"e([+-])0*(\d)", lambda m: "e" + m[1].replace("+", "") + m[2], text)


class _Listing(string.Formatter):
    """Fills tolerances and shows a run value as its description (for the registry listing)."""

    def __init__(self, described: Mapping[str, str]) -> None:
        self.described = described

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        return kwargs[key] if key in kwargs else f"⟨{self.described.get(key, key)}⟩"

    def format_field(self, value: Any, spec: str) -> str:
        return value if isinstance(value, str) else format(value, spec)


@dataclass(frozen=True)
class Claim:
    """One published claim and the rule that checks it.

    ``id`` is stable across runs; a claim with ``variant`` set is a family whose results carry
    ids ``"<id>.<variant value>"`` (e.g. one per spectrum exponent β). ``tolerances`` are the
    rule's numbers, read by the experiment when it decides and filled into the templates.
    """

    id: str
    experiment: str | None
    source: str
    statement: str
    published: str
    rule: str
    tolerances: Mapping[str, float] = field(default_factory=dict)
    placeholders: Mapping[str, str] = field(default_factory=dict)
    variant: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tolerances", MappingProxyType(dict(self.tolerances)))
        object.__setattr__(self, "placeholders", MappingProxyType(dict(self.placeholders)))

    def __getitem__(self, name: str) -> float:
        """The tolerance ``name``: ``CLAIMS[id]["slope_tol"]``."""
        return self.tolerances[name]

    def fill(self, template: str, **values: Any) -> str:
        """``template`` with this claim's tolerances and the run ``values`` filled in."""
        numbers = {k: _Number(v) for k, v in self.tolerances.items()}
        return template.format(**numbers, **values)

    def describe(self, template: str) -> str:
        """``template`` for the registry listing: tolerances filled, run values described."""
        numbers = {k: _Number(v) for k, v in self.tolerances.items()}
        return _Listing(self.placeholders).format(template, **numbers)

    def result(
        self,
        ours: str,
        passed: bool | None,
        details: dict[str, Any] | None = None,
        *,
        variant: Any = None,
        published: str | None = None,
        rule_suffix: str = "",
        **values: Any,
    ) -> ClaimResult:
        """The :class:`~tailmem.report.claims.ClaimResult` of a measurement.

        ``passed`` is the rule's outcome (``None``: this configuration could not measure it);
        ``published`` replaces the registry's value where it depends on the configuration;
        ``values`` fill the templates' run placeholders.
        """
        from tailmem.report.claims import ClaimResult, verdict

        if (variant is None) != (self.variant is None):
            raise ValueError(f"claim {self.id}: variant must be given exactly for families")
        return ClaimResult(
            id=self.id if variant is None else f"{self.id}.{variant}",
            claim=self.fill(self.statement, **values),
            source=self.source,
            published=self.fill(self.published, **values) if published is None else published,
            ours=ours,
            rule=self.fill(self.rule, **values) + rule_suffix,
            verdict=verdict(passed),
            details={} if details is None else details,
        )


def _a1(claim_id: str, statement: str, published: str, rule: str, **kw: Any) -> Claim:
    kw.setdefault("source", "A1, Table 1")
    return Claim(claim_id, kw.pop("experiment", "ablation"), statement=statement,
                 published=published, rule=rule, **kw)  # fmt: skip


_GAIN = "; g(arm) = L(all-Adam) − L(arm), needs g(full) > 0"
_ISO_PUBLISHED = "curves only: Muon higher H and eRank, lower Top10E and Q75/25"
_ISO_RULE = (
    "every metric: Muon − Adam in the isotropic direction > {sds:g} pooled seed SDs "
    "(layer-mean, final step)"
)
_ISO_TOL = {"sds": 2.0}
_HYBRID_RULE = (
    "t = (x − Adam)/(Muon − Adam) of the rarest-group FTA at the last step; t {op} {t}; "
    "not measured unless |Muon − Adam| ≥ {min_spread}"
)
_A3_TAIL_SOURCE = "A3, Tables 3-8 (group 15 at 10k)"
_A4 = "A4, Theorem 5.3"
_FIG4 = "A4, Figure 4(b, c)"
_B = "B (secondary sources)"


def _a3_claims(ffn: str) -> list[Claim]:
    """The A3 claims of one FFN type (its published values differ; the mid-tail is plain only)."""

    def pub(frac: float, offset: int, arm: str) -> float:
        return A3_PUBLISHED_FTA[ffn][(frac, offset)][arm]

    def vs(arm: str, label: str, frac: float = 1.0, offset: int = 0) -> str:
        return f"{label} {pub(frac, offset, arm):.3f} vs Adam {pub(frac, offset, 'adam'):.3f}"

    def hybrid(arm: str, label: str, target: str, op: str, t: float) -> Claim:
        return Claim(
            f"A3.{ffn}.{arm}_like_{target.lower()}",
            "knowledge-qa",
            _A3_TAIL_SOURCE,
            f"{label} behaves like {target} in the tail ({ffn} FFN)",
            f"{pub(1.0, 0, arm):.3f} (Muon {pub(1.0, 0, 'muon'):.3f}, "
            f"Adam {pub(1.0, 0, 'adam'):.3f})",
            _HYBRID_RULE.replace("{op}", op),
            {"t": t, "min_spread": 0.1},
        )

    gap = {"gap": 0.3}
    out = [
        Claim(
            f"A3.{ffn}.tail_muon_vs_adam",
            "knowledge-qa",
            _A3_TAIL_SOURCE,
            f"Muon learns the rarest group far better than Adam by the end ({ffn} FFN)",
            vs("muon", "Muon"),
            "mean over seeds of FTA(rarest group) at the last step: Muon − Adam ≥ {gap}",
            gap,
        )
    ]
    if ffn == "plain":
        out.append(
            Claim(
                f"A3.{ffn}.midtail_halfway",
                "knowledge-qa",
                "A3, Tables 3-8 (group 13 at 5k)",
                "Halfway through training Muon has learned the second-rarest-but-one group, "
                "Adam not",
                vs("muon", "Muon", 0.5, 2),
                "FTA(group m−2) at 50% of the steps: Muon − Adam ≥ {gap}",
                gap,
            )
        )
    out += [
        Claim(
            f"A3.{ffn}.head_all_optimisers",
            "knowledge-qa",
            "A3 (head groups reach ≈ 1.0 with every optimiser)",
            f"Every optimiser, SGD included, learns the head groups ({ffn} FFN)",
            "≈ 1.0 for every arm",
            "mean FTA of groups 0..{last_head} at the last step ≥ {floor}, every arm",
            {"floor": 0.9},
            {"last_head": "last head group (config head_groups − 1)"},
        ),
        hybrid("muon_vo_ffn", "Muon(VO+FFN)&Adam(QK)", "Muon", "≥", 0.75),
        hybrid("muon_qk", "Muon(QK)&Adam(VO+FFN)", "Adam", "≤", 0.25),
        Claim(
            f"A3.{ffn}.sgd_below_adam",
            "knowledge-qa",
            _A3_TAIL_SOURCE,
            f"SGD+momentum learns the rarest group no better than Adam ({ffn} FFN)",
            vs("sgd", "SGD+M"),
            "rarest-group FTA at the last step: SGD+M ≤ Adam + {tol}",
            {"tol": 0.02},
        ),
    ]
    return out


_CLAIM_LIST: list[Claim] = [
    # ------------------------------------------------------------------ A1 (ablation, Table 1)
    _a1(
        "A1.full_beats_adam",
        "Muon on all hidden matrices beats all-Adam in final validation loss",
        "full Muon 3.5654, all-Adam 3.9242 (plain FFN; gated 3.5125, 3.8837)",
        "L(full) < L(all-Adam)",
    ),
    _a1(
        "A1.vo_ffn_recovers_full",
        "Muon on VO + FFN recovers most of full Muon's gain over all-Adam",
        "g/g(full) = 0.943 (plain FFN; gated 0.950)",
        "g(VO+FFN)/g(full) >= {min_fraction}" + _GAIN,
        tolerances={"min_fraction": 0.7},
    ),
    _a1(
        "A1.qk_gain_small",
        "Muon on QK alone gives little of full Muon's gain",
        "g/g(full) = 0.088 (plain FFN; gated 0.086)",
        "g(QK)/g(full) < {max_fraction}" + _GAIN,
        tolerances={"max_fraction": 0.3},
    ),
    _a1(
        "A1.o_beats_v",
        "Muon on O helps more than Muon on V",
        "O 3.7712, V 3.8301",
        "L(o) < L(v)",
        source="A1, Table 1 (plain FFN)",
    ),
    _a1(
        "A1.w_out_beats_w_in",
        "Muon on W_out helps more than Muon on W_in",
        "W_out 3.7023, W_in 3.7170",
        "L(w_out) < L(w_in)",
        source="A1, Table 1 (plain FFN)",
    ),
    _a1(
        "A1.table1.losses",
        "The validation losses of Table 1 (160M model, FineWeb, 10k steps), arm by arm",
        "Table 1 (e.g. full Muon 3.5654, all-Adam 3.9242, plain FFN)",
        "|L_ours − L_paper| per arm; needs the paper-scale model and data",
        experiment=None,
    ),
    _a1(
        "A1.table2.logit_bounded",
        "Under Muon the per-layer max attention logit stays bounded",
        "5.6-8.4 over 12 layers (160M, d_head 64: 0.70-1.05 √d_head)",
        "max over layers, seeds, evaluations <= {bound_sqrt_dhead} √d_head",
        source="A1, Table 2",
        experiment="spectra",
        tolerances={"bound_sqrt_dhead": 1.5},
    ),
    _a1(
        "A1.beyond.tail_gain",
        "Full Muon's gain over all-Adam is larger on tail target tokens than on head tokens",
        "— (predicted: Muon learns rare associations better)",
        "L_{tail}(all-Adam) − L_{tail}(full) > L_{head}(all-Adam) − L_{head}(full)",
        source="A (thesis); beyond A1 — not measured on text in the paper",
        placeholders={"tail": "tail bucket", "head": "head bucket"},
    ),
    # ------------------------------------------------------------------ A2 (spectra)
    *(
        Claim(
            f"A2.{vo}_isotropic",
            "spectra",
            "A2, Fig. 2",
            f"Muon's VO ({form}) weights are more isotropic than Adam's",
            _ISO_PUBLISHED,
            _ISO_RULE,
            _ISO_TOL,
        )
        for vo, form in (("vo_head", "per_head"), ("vo_stacked", "stacked"))
    ),
    Claim(
        "A2.w_out_isotropic",
        "spectra",
        "A2, Fig. 2",
        "Muon's W_out weights are more isotropic than Adam's",
        _ISO_PUBLISHED,
        _ISO_RULE,
        _ISO_TOL,
    ),
    Claim(
        "A2.ffn_in_isotropic",
        "spectra",
        "A2, appendix",
        "Muon's {ffn_in} weights are more isotropic than Adam's",
        _ISO_PUBLISHED,
        _ISO_RULE,
        _ISO_TOL,
        {"ffn_in": "W_in; W_in and W_gate with the gated FFN"},
    ),
    Claim(
        "A2.qk_isotropic",
        "spectra",
        "A2, text",
        "Muon's Q and K weights are more isotropic than Adam's",
        _ISO_PUBLISHED,
        _ISO_RULE,
        _ISO_TOL,
    ),
    Claim(
        "A2.muon_seed_spread_smaller",
        "spectra",
        "A2, Fig. 2",
        "Muon's isotropy curves vary less across seeds than Adam's",
        "Muon nearly identical across seeds; Adam varies",
        "seed SD (mean over steps > 0 and layers) smaller under Muon in >= {min_pairs} of 8 "
        "pairs ({vo}, w_out × 4 metrics)",
        {"min_pairs": 6},
        {"vo": "the VO matrix of the config"},
    ),
    Claim(
        "A2.isotropic_from_start",
        None,
        "A2, Fig. 2",
        "Muon is markedly more isotropic from the first steps of training",
        "curves only",
        "Muon − Adam separation at the first evaluations after step 0",
    ),
    # ------------------------------------------------------------------ A3 (knowledge-qa)
    *_a3_claims("plain"),
    *_a3_claims("gated"),
    Claim(
        "A3.beyond.uniform_sweep",
        None,
        "A3, reviewers",
        "The Muon–Adam tail gap shrinks as frequencies go from power law to uniform",
        "— (asked by reviewers)",
        "tail gap against the frequency exponent",
    ),
    Claim(
        "A3.beyond.capacity_controlled",
        None,
        "A3, reviewers",
        "The tail advantage survives a capacity-controlled ablation",
        "— (asked by reviewers)",
        "tail gap at matched model capacity",
    ),
    Claim(
        "A3.beyond.qk_task",
        None,
        "A3, reviewers",
        "On a task that depends mainly on QK (in-context linear regression) Muon's tail edge "
        "vanishes",
        "— (asked by reviewers)",
        "tail gap on in-context linear regression",
    ),
    # ------------------------------------------------------------------ A4 (assoc-two-group)
    Claim(
        "A4.coupled_printed_row",
        "assoc-two-group",
        "A4, coupled construction",
        "R(3.638,2.949,5.218)ᵀ (A+B) R(1.715,0.876,3.098) has first row (1.4655, 1.0133, −0.1118)",
        "1.4655, 1.0133, −0.1118",
        "some consistent reading matches every printed digit (max error ≤ {max_error}); the "
        "reading is stated",
        {"max_error": 5e-5},
    ),
    Claim(
        "A4.thm53.gd_slope",
        "assoc-two-group",
        _A4,
        "GD one-step balance ϱ^ε = O(ε^(−r) K^(r−1)) with r(α, β)",
        "slope r − 1 = −0.9375 (r = 1/16 at α = 0.8, β = 0.2)",
        "fitted log-log slope of ϱ vs K (K list) within ±{slope_tol} of r − 1, every embedding",
        {"slope_tol": 0.05},
    ),
    Claim(
        "A4.thm53.gd_min_step",
        "assoc-two-group",
        _A4,
        "smallest GD step learning one fact to 1 − ε is log((1/ε − 1)(K − 1)) / max(γ1, γ2)",
        "η* = log((1/ε−1)(K−1)) / max(α/(βK), (1−α)/((1−β)K))",
        "|η*_ours/η*_theorem − 1| ≤ |L − βK|/(βK) (the rounding of βK), every K",
        {"slack": 1e-6, "exact_rel": 1e-8},
    ),
    Claim(
        "A4.thm53.muon_rho",
        "assoc-two-group",
        _A4,
        "Muon: ϱ^ε ≥ 1 − ε(1 + O(log K / K)) for any orthonormal embeddings",
        "ϱ^ε ≥ 1 − ε(1 + c·log K/K)",
        "the implied constant c stays in [0, {c_max}] for every K and embedding",
        {"c_max": 2, "slack": 1e-9},
    ),
    Claim(
        "A4.thm53.muon_update",
        "assoc-two-group",
        _A4,
        "Muon's first update is −ẼEᵀ + O(1/K)·ẼJEᵀ with near-equal singular values",
        "deviation from −ẼEᵀ is O(1/K) entrywise; singular values all ≈ 1",
        "K·max|ẼᵀUE + I| ≤ {k_deviation_max} and all non-zero singular values equal "
        "(ratio > 1 − {ratio_slack})",
        {"k_deviation_max": 2, "ratio_slack": 1e-9},
    ),
    Claim(
        "A4.thm53.signgd_decoupled",
        "assoc-two-group",
        _A4,
        "SignGD with decoupled embeddings: ϱ^ε = 1 − ε",
        "ϱ = 1 − ε",
        "|ϱ − (1 − ε)| ≤ {tol} for every K",
        {"tol": 1e-6},
    ),
    Claim(
        "A4.thm53.signgd_coupled_slope",
        "assoc-two-group",
        _A4,
        "SignGD with the coupled construction: ϱ^ε = O(ε^(−0.7) K^(−0.3))",
        "slope ≈ −0.3 in K",
        "log-log slope over the largest K list within ±{slope_tol} of −0.3 (the theorem is a "
        "K → ∞ statement; the small-K slope is reported beside it)",
        {"slope_tol": 0.1},
    ),
    Claim(
        "A4.thm53.signgd_coupled_r",
        "assoc-two-group",
        _A4,
        "the coupled construction's SignGD rate exponent is r ≈ 0.675",
        "r ≈ 0.675",
        "|r − {r}| ≤ {tol}, r = min_j m_j / max_j m_j of the large-K growth rates",
        {"r": 0.675, "tol": 0.02},
    ),
    Claim(
        "A4.thm53.signgd_coupled_sv",
        "assoc-two-group",
        _A4,
        "σ_min/σ_max of SignGD's coupled update block is ≤ 25%",
        "≤ 0.25",
        "block σ_min/σ_max ≤ {ratio_max}",
        {"ratio_max": 0.25},
    ),
    Claim(
        "A4.thm54.muon_multistep",
        "assoc-two-group",
        "A4, Theorem 5.4",
        "Muon's balance bound holds at every step of a multi-step run",
        "ϱ_t ≥ 1 − ε_t(1 + O(log K / K)) at every step (ε fixed, K → ∞)",
        "Δ_t ≤ {c_max}·ε_t·log(K/ε_t)/K at every recorded step (the O(·) read at fixed ε_t, "
        "whose constant may depend on log(1/ε_t))",
        {"c_max": 2},
    ),
    Claim(
        "A4.fig4.gd_imbalanced",
        "assoc-two-group",
        _FIG4,
        "GD is strongly imbalanced under both embeddings",
        "large Δ for GD, decoupled and coupled",
        "max Δ ≥ {gap_min} in both panels for both embeddings",
        {"gap_min": 0.5},
    ),
    Claim(
        "A4.fig4.muon_balanced",
        "assoc-two-group",
        "A4, Figure 4(b, c), Theorem 5.4",
        "Muon is balanced under both embeddings (one step and multi-step; Theorem 5.4)",
        "Δ ≈ 0 for Muon",
        "max Δ ≤ {gap_max} in both panels for both embeddings",
        {"gap_max": 0.05},
    ),
    Claim(
        "A4.fig4.signgd",
        "assoc-two-group",
        _FIG4,
        "SignGD is balanced when decoupled and GD-like (imbalanced) when coupled",
        "small Δ decoupled, large Δ coupled",
        "decoupled max Δ ≤ {decoupled_max} and coupled max Δ ≥ {coupled_min}, both panels",
        {"decoupled_max": 0.05, "coupled_min": 0.2},
    ),
    Claim(
        "A4.fig4.rise_then_fall",
        "assoc-two-group",
        _FIG4,
        "as the loss falls, Δ first rises then falls",
        "Δ rises then falls",
        "for GD in every panel and embedding: Δ at the start < {start_frac:.0%} and at the end "
        "< {end_frac:.0%} of its maximum",
        {"start_frac": 0.1, "end_frac": 0.5},
    ),
    # ------------------------------------------------------------------ B (assoc-scaling)
    Claim(
        "B.noiseless.gd_per_item",
        "assoc-scaling",
        _B,
        "noiseless GD: per-item loss ≈ 1/(p_j t) (with step η: 1/(η p_j t))",
        "loss_j · η p_j t → 1",
        "every such group within [{lo}, {hi}]",
        {"lo": 0.8, "hi": 1.25},
    ),
    Claim(
        "B.noiseless.gd_total",
        "assoc-scaling",
        _B,
        "noiseless GD: total loss ≈ K/t (with step η: K/(ηt))",
        "L·ηt/K → 1, slope −1",
        "ratio within [{ratio_lo}, {ratio_hi}] and slope within −1 ± {slope_tol}",
        {"ratio_lo": 0.67, "ratio_hi": 1.5, "slope_tol": 0.25},
    ),
    Claim(
        "B.noiseless.muon_exponential",
        "assoc-scaling",
        _B,
        "noiseless Muon: per-item loss ≈ K e^(−ηt), the same rate for every item",
        "rate η, prefactor K, equal across items",
        "rate/η within 1 ± {rate_tol}, prefactor/K within [{prefactor_lo}, {prefactor_hi}], "
        "group rates within {group_spread:.0%}",
        {"rate_tol": 0.1, "prefactor_lo": 0.5, "prefactor_hi": 2, "group_spread": 0.05},
    ),
    Claim(
        "B.noisy.gd_exponent",
        "assoc-scaling",
        _B,
        "label noise, power-law spectrum β = {beta:g}: GD excess loss ≳ T^(−(1−1/β)) (up to log K)",
        "exponent −(1 − 1/β)",
        "fitted log-log slope over the horizons within ±{slope_tol} of −(1 − 1/β)",
        {"slope_tol": 0.15},
        {"beta": "β"},
        variant="beta<β>",
    ),
    Claim(
        "B.noisy.muon_exponent",
        "assoc-scaling",
        _B,
        "label noise, β = {beta:g}: Muon with η = Θ(log K / T) reaches excess loss ≲ (log K / T)²",
        "exponent −2",
        "the excess of both iterates of Muon's final period-2 oscillation is ≤ (log K/T)² and the "
        "larger one's fitted slope is within ±{slope_tol} of −2 (the last iterate alone is a "
        "staircase: one point of the orbit barely moves with η)",
        {"slope_tol": 0.3, "bound_constant_max": 1},
        {"beta": "β"},
        variant="beta<β>",
    ),
    Claim(
        "B.noisy.muon_beta_independent",
        "assoc-scaling",
        _B,
        "Muon's noisy rate is independent of β",
        "independent of β",
        "spread of the fitted exponents across β ≤ {spread_max}",
        {"spread_max": 0.3},
    ),
    Claim(
        "B.speedup_omega_c",
        "assoc-scaling",
        _B,
        "Muon is faster than GD by a factor Ω(C)",
        "steps ratio GD/Muon grows ∝ C",
        "slope ≥ {slope_min} for step sizes tuned per optimiser (target excess {target_excess}, "
        "≤ {target_max_steps} steps)",
        {"slope_min": 0.75},
        {"target_excess": "config target_excess", "target_max_steps": "config target_max_steps"},
    ),
    Claim(
        "B.block_symmetry",
        "assoc-scaling",
        _B,
        "Muon from W₀ = 0 keeps the block-symmetric structure",
        "exact",
        "Muon ≤ {max_distance} (dense run, random orthonormal embeddings)",
        {"max_distance": 1e-9},
    ),
    Claim(
        "B.preconditioner",
        "assoc-scaling",
        _B,
        "Muon acts as an implicit preconditioner (every frequency group learns alike)",
        "qualitative",
        "Muon's group rates within {group_spread:.0%} of each other while GD's final Δ > "
        "{gap_factor}× Muon's",
        {"group_spread": 0.05, "gap_factor": 10},
    ),
    Claim(
        "B.tra_signgd_matches_muon",
        "assoc-scaling",
        _B,
        "TRA-SignGD with step η matches Muon with step 2η",
        "same trajectory",
        "≤ {max_difference} in both settings",
        {"max_difference": 0.1},
    ),
    Claim(
        "B.signgd_cannot",
        "assoc-scaling",
        _B,
        "plain SignGD cannot match Muon",
        "cannot",
        "best mismatch > {min_mismatch} (i.e. no step size comes within {min_mismatch:.0%} of "
        "Muon(2η))",
        {"min_mismatch": 0.1},
    ),
    Claim(
        "B.gd_stability",
        "assoc-scaling",
        _B,
        "GD is stable only for η·p_1 ≲ 1",
        "threshold η·p_1 = O(1)",
        "threshold within [{lo}, {hi}] for every C",
        {"lo": 0.25, "hi": 4},
    ),
    Claim(
        "B.experiments",
        None,
        _B,
        "Muon's advantage shows in synthetic long-tail classification and small LLaMA-style "
        "pretraining",
        "details not known",
        "needs the paper's experimental setup",
    ),
    # ------------------------------------------------------------------ related results
    Claim(
        "cabannes.capacity",
        "assoc-capacity",
        "Related: Cabannes, Dohmatob & Bietti (ICLR 2024)",
        "top-1 error of a d×d associative memory on Zipf(α) data scales as d^(−α+1)",
        "exponent 1 − α (−1.00 at α = 2)",
        "fitted log-log slope of the best final error against d within ±{slope_tol} of 1 − α",
        {"slope_tol": 0.25},
        variant="<optimizer>",
    ),
    Claim(
        "cabannes.samples",
        None,
        "Related: Cabannes, Dohmatob & Bietti (ICLR 2024)",
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
]

CLAIMS: dict[str, Claim] = {c.id: c for c in _CLAIM_LIST}
"""Every claim of PAPERS.md by id, in PAPERS.md order."""
if len(CLAIMS) != len(_CLAIM_LIST):
    raise ValueError("duplicate ids in the claims registry")


def section_of(source: str) -> str:
    """The :data:`SECTIONS` key a claim's source names first (``"A (thesis); beyond A1"``: A1)."""
    found = [(m.start(), key) for key in SECTIONS if (m := re.search(rf"\b{key}\b", source))]
    if not found:
        raise ValueError(f"source {source!r} names none of the sections {list(SECTIONS)}")
    return min(found)[1]


for _claim in _CLAIM_LIST:
    section_of(_claim.source)
_FAMILIES = [c for c in _CLAIM_LIST if c.variant]


def lookup(claim_id: str) -> Claim | None:
    """The registry claim of a result id (a family's results carry ``"<id>.<variant>"``)."""
    if claim_id in CLAIMS:
        return None if CLAIMS[claim_id].variant else CLAIMS[claim_id]
    return next((c for c in _FAMILIES if claim_id.startswith(f"{c.id}.")), None)


def check_id(claim_id: str, where: str) -> Claim:
    """:func:`lookup`, with an unknown id a one-line DataError naming ``where`` it was found."""
    claim = lookup(claim_id)
    if claim is None:
        raise DataError(
            f"{where}: unknown claim id {claim_id!r}; expected an id of the claims registry "
            "(see 'tailmem claims')"
        )
    return claim


def claims_of(experiment: str | None) -> list[Claim]:
    """The registry claims measured by ``experiment`` (``None``: those no experiment measures)."""
    return [c for c in CLAIMS.values() if c.experiment == experiment]
