"""Where each optimiser sits between Muon and Adam: one statistics for every leaderboard place.

An optimiser X is placed at one QA level from two paired, per-seed exposure-lag ratios at the
headline level τ (:data:`HEADLINE_TAU`, pooled over groups: the geometric mean over the groups
measured in every seed), on the log scale:

- ``vs Muon``: the exposures X needs ÷ Muon's (> 1: X trails Muon);
- ``vs Adam``: the exposures Adam needs ÷ X's, where Adam is ``adam_split`` — Adam on the hidden
  matrices at a rate of its own over the same Adam-trained rest, tuned by the same rule, so
  every row has the same tuning freedom (> 1: X leads Adam).

For each, a two-sided t test of a difference from 1 and an equivalence test — two one-sided t
tests that the ratio lies within ``[1/margin, margin]`` (:data:`EQUIVALENCE_MARGIN`) — each at
level 0.05 (:func:`tailmem.claims.core.equivalence`; standard errors floored at the
interpolation's resolution). The four p-values of every placed optimiser form one family,
corrected by Holm's step-down rule (:func:`tailmem.claims.core.holm`). Then, in order:

- **ahead of Muon**: X's lag behind Muon is below 1 (a difference, after Holm);
- **behind Adam**: Adam's lag behind X is below 1;
- **equivalent to Muon** / **equivalent to Adam**: an equivalence shown with one and not with
  the other;
- **between**: X trails Muon and leads Adam, both differences shown;
- **not distinguished**: anything else — including a ratio not measured in every seed, or
  equivalence with both (Muon and Adam not told apart at this level). No difference shown is
  never read as sameness.

The question the benchmark exists for — does ``adam_split`` share Muon's tail edge? — is one
pre-specified comparison (:func:`reference_finding`), outside the family: the same two tests
on the lag of ``adam_split`` behind Muon, uncorrected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tailmem.claims.core import ALPHA, EquivalenceTest, equivalence, holm
from tailmem.metrics.qa_gaps import LagRatio

HEADLINE_TAU = 0.5
"""The FTA level whose pooled lag ratios place each optimiser (the middle of the paper's three)."""
EQUIVALENCE_MARGIN = 1.25
"""Two optimisers are "equivalent" on the tail when the 90 % interval of the ratio of the
exposures they need lies within [1/1.25, 1.25]: a quarter more or fewer exposures. Declared, not
measured: it is below every lag the paper calls a difference (its smallest reported ratio, group
11 at τ 0.5, is ≥ 1.5; the camera-ready's group-15 ratio is 1.5) and it is the conventional
equivalence bound for ratios (0.80–1.25)."""
PLACES = (
    "ahead of Muon",
    "equivalent to Muon",
    "between",
    "equivalent to Adam",
    "behind Adam",
    "not distinguished",
)
"""Every place an optimiser can take (module docstring); references are placed as such."""


@dataclass(frozen=True)
class Placement:
    """Where one optimiser sits: its ``place`` (one of :data:`PLACES`), the two tests it rests
    on (None where the ratio was not measured in every seed), which of the four hypotheses
    Holm's rule rejected (difference and equivalence vs Muon, then vs Adam) and why."""

    place: str
    vs_muon: EquivalenceTest | None
    vs_adam: EquivalenceTest | None
    rejected: tuple[bool, bool, bool, bool] = (False, False, False, False)
    reason: str = ""


def log_test(ratio: LagRatio | None) -> EquivalenceTest | None:
    """The difference and equivalence tests of a lag ratio on the log scale (None: not
    measured in every seed)."""
    if ratio is None or not ratio.complete:
        return None
    return equivalence(ratio.log_values(), math.log(EQUIVALENCE_MARGIN),
                       resolution=ratio.resolution)  # fmt: skip


def place_all(
    ratios: Mapping[str, tuple[LagRatio | None, LagRatio | None]], alpha: float = ALPHA
) -> dict[str, Placement]:
    """The placement of every optimiser of ``ratios`` (name → (its lag behind Muon, Adam's lag
    behind it)), its tests corrected together by Holm's rule."""
    tests = {name: (log_test(m), log_test(a)) for name, (m, a) in ratios.items()}
    family: list[tuple[str, int, float]] = []
    for name, (vs_muon, vs_adam) in tests.items():
        if vs_muon is None or vs_adam is None:
            continue
        for k, p in enumerate((vs_muon.p_different, vs_muon.p_equivalent, vs_adam.p_different,
                               vs_adam.p_equivalent)):  # fmt: skip
            family.append((name, k, p))
    rejected = holm([p for _, _, p in family], alpha)
    flags: dict[str, list[bool]] = {name: [False] * 4 for name in tests}
    for (name, k, _), hit in zip(family, rejected, strict=True):
        flags[name][k] = hit
    out = {}
    for name, (vs_muon, vs_adam) in tests.items():
        if vs_muon is None or vs_adam is None:
            out[name] = Placement("not distinguished", vs_muon, vs_adam,
                                  reason="a lag ratio is not measured in every seed")  # fmt: skip
            continue
        held = tuple(flags[name])
        out[name] = Placement(_place(vs_muon, vs_adam, held), vs_muon, vs_adam, held)  # type: ignore[arg-type]
    return out


def _place(vs_muon: EquivalenceTest, vs_adam: EquivalenceTest, held: Sequence[bool]) -> str:
    diff_m, eq_m, diff_a, eq_a = held
    if diff_m and vs_muon.mean < 0:
        return "ahead of Muon"
    if diff_a and vs_adam.mean < 0:
        return "behind Adam"
    if eq_m and not eq_a:
        return "equivalent to Muon"
    if eq_a and not eq_m:
        return "equivalent to Adam"
    if diff_m and diff_a and vs_muon.mean > 0 and vs_adam.mean > 0:
        return "between"
    return "not distinguished"


@dataclass(frozen=True)
class ReferenceFinding:
    """The pre-specified comparison of ``adam_split`` with Muon: the ratio (exposures
    ``adam_split`` needs ÷ Muon's), its test and the finding in words: "shares Muon's tail edge"
    (equivalent), "trails Muon" or "leads Muon" (a difference), or "not distinguished"."""

    test: EquivalenceTest | None
    finding: str


def reference_finding(ratio: LagRatio | None, alpha: float = ALPHA) -> ReferenceFinding:
    """Does ``adam_split`` share Muon's tail edge (module docstring)?"""
    test = log_test(ratio)
    if test is None:
        return ReferenceFinding(None, "not measured in every seed")
    if test.p_equivalent < alpha:
        return ReferenceFinding(test, "shares Muon's tail edge (equivalent within the margin)")
    if test.p_different < alpha:
        finding = "trails Muon" if test.mean > 0 else "leads Muon"
        return ReferenceFinding(test, finding)
    return ReferenceFinding(test, "not distinguished")
