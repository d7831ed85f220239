"""Paper A's published knowledge-QA numbers (Tables 3-8), in both versions of the paper.

The m = 15 run (160M model, 10k steps): first-token accuracy of the tail groups 11, 13 and 15
at 2k, 5k and 10k steps for five arms, plain FFN; gated FFN only group 15 at 10k. Two versions
exist: arXiv v2 (Oct 2025) and the ICLR 2026 camera-ready, which reports a different Adam value
for group 15 at 10k steps (0.558, not 0.264); no other value is reported to differ, so the ICLR
table here is the v2 table with that one cell replaced. This module is the one place these
numbers live: the claims (:mod:`tailmem.claims.a3`) and the gap measures
(:func:`tailmem.metrics.qa_gaps.paper_curves`) read them from here.
"""

from __future__ import annotations

from typing import Literal

M = 15
ARMS = ("muon", "adam", "sgd", "muon_vo_ffn", "muon_qk")
STEPS = (2000, 5000, 10000)
GROUPS = (11, 13, 15)
Version = Literal["arxiv-v2", "iclr"]
VERSIONS: tuple[Version, ...] = ("arxiv-v2", "iclr")

# FTA per (ffn, step, group): one value per arm, in the order of ARMS.
_ARXIV_V2: dict[tuple[str, int, int], tuple[float, ...]] = {
    ("plain", 2000, 11): (0.854, 0.312, 0.156, 0.814, 0.472),
    ("plain", 2000, 13): (0.386, 0.146, 0.120, 0.256, 0.154),
    ("plain", 2000, 15): (0.140, 0.090, 0.082, 0.114, 0.086),
    ("plain", 5000, 11): (0.996, 0.936, 0.314, 0.992, 0.970),
    ("plain", 5000, 13): (0.964, 0.298, 0.148, 0.934, 0.354),
    ("plain", 5000, 15): (0.320, 0.110, 0.084, 0.254, 0.118),
    ("plain", 10000, 11): (1.000, 1.000, 0.422, 1.000, 1.000),
    ("plain", 10000, 13): (1.000, 0.890, 0.294, 0.998, 0.940),
    ("plain", 10000, 15): (0.976, 0.264, 0.126, 0.954, 0.286),
    ("gated", 10000, 15): (0.994, 0.244, 0.148, 0.990, 0.274),
}
_ICLR_CHANGES = {("plain", 10000, 15, "adam"): 0.558}


def published_fta(version: Version = "arxiv-v2") -> dict[tuple[str, int, int], dict[str, float]]:
    """``{(ffn, step, group): {arm: FTA}}`` of the given version of the paper."""
    if version not in VERSIONS:
        raise ValueError(f"version: got {version!r}; expected one of {VERSIONS}")
    table = {key: dict(zip(ARMS, values, strict=True)) for key, values in _ARXIV_V2.items()}
    if version == "iclr":
        for (ffn, step, group, arm), value in _ICLR_CHANGES.items():
            table[ffn, step, group][arm] = value
    return table


def fta_by_fraction(
    version: Version = "arxiv-v2",
) -> dict[str, dict[tuple[float, int], dict[str, float]]]:
    """``{ffn: {(fraction of the 10k steps, groups from the rarest): {arm: FTA}}}``: the table
    keyed independently of ``m`` and of the run length, as the claims compare it."""
    out: dict[str, dict[tuple[float, int], dict[str, float]]] = {}
    for (ffn, step, group), values in published_fta(version).items():
        out.setdefault(ffn, {})[step / STEPS[-1], M - group] = values
    return out
