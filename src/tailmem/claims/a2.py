"""PAPERS.md A2 — spectral isotropy of the weights (Fig. 2); measured by ``spectra``.

The spectra experiment still decides these in its own code (its migration to ``check`` functions
follows the LM rewrite); the rules below are already seed-aware (pooled seed SDs).
"""

from __future__ import annotations

from tailmem.claims.core import Claim

EXPERIMENT = "spectra"
_PUBLISHED = "curves only: Muon higher H and eRank, lower Top10E and Q75/25"
_RULE = (
    "every metric: Muon − Adam in the isotropic direction > {sds:g} pooled seed SDs "
    "(layer-mean, final step)"
)
_TOL = {"sds": 2.0}

CLAIMS: list[Claim] = [
    *(
        Claim(
            f"A2.{vo}_isotropic",
            EXPERIMENT,
            "A2, Fig. 2",
            f"Muon's VO ({form}) weights are more isotropic than Adam's",
            _PUBLISHED,
            _RULE,
            _TOL,
        )
        for vo, form in (("vo_head", "per_head"), ("vo_stacked", "stacked"))
    ),
    Claim(
        "A2.w_out_isotropic",
        EXPERIMENT,
        "A2, Fig. 2",
        "Muon's W_out weights are more isotropic than Adam's",
        _PUBLISHED,
        _RULE,
        _TOL,
    ),
    Claim(
        "A2.ffn_in_isotropic",
        EXPERIMENT,
        "A2, appendix",
        "Muon's {ffn_in} weights are more isotropic than Adam's",
        _PUBLISHED,
        _RULE,
        _TOL,
        {"ffn_in": "W_in; W_in and W_gate with the gated FFN"},
    ),
    Claim(
        "A2.qk_isotropic",
        EXPERIMENT,
        "A2, text",
        "Muon's Q and K weights are more isotropic than Adam's",
        _PUBLISHED,
        _RULE,
        _TOL,
    ),
    Claim(
        "A2.muon_seed_spread_smaller",
        EXPERIMENT,
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
]
