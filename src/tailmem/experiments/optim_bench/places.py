"""Where each optimiser sits between Muon and Adam: one statistics for every leaderboard place.

The statistics are declared once, in :mod:`tailmem.claims.bench` (and stated by ``tailmem
claims``): an optimiser X is placed at one QA level from per-seed differences of the rarest
group's final first-token accuracy (the primary statistic; the area under its FTA-against-
exposures curve is the second), paired by seed:

- ``vs Muon``: Muon − X per seed (> 0: X trails Muon);
- ``vs Adam``: X − Adam per seed, where Adam is ``adam_split`` — Adam on the hidden matrices at
  a rate of its own over the same Adam-trained rest, tuned by the same rule, so every row has
  the same tuning freedom (> 0: X leads Adam).

For each, a two-sided t test of a difference from 0 and an equivalence test — two one-sided t
tests that the difference lies within ±:data:`~tailmem.claims.bench.FTA_MARGIN` — each at 0.05
(:func:`tailmem.claims.core.equivalence`; standard errors floored at the resolution of a
difference of two FTAs, one question each). The four p-values of every placed optimiser form one
family, corrected by Holm's step-down rule (:func:`tailmem.claims.core.holm`). Then, in order:

- **ahead of Muon**: X above Muon (a difference, after Holm);
- **behind Adam**: X below Adam;
- **equivalent to Muon** / **equivalent to Adam**: an equivalence shown with one and not with
  the other (its words name a difference resolved inside the margin too:
  :attr:`Placement.described`);
- **between**: X trails Muon and leads Adam, both differences shown;
- **not distinguished**: anything else — including an optimiser not measured in every seed, or
  equivalence with both (Muon and Adam not told apart at this level). No difference shown is
  never read as sameness.

A place that puts an optimiser below a reference while its tuned rate sat at an end of its grid
with the widening spent — or above a reference whose rate did — is :data:`UNDER_TUNED`
(:func:`tuned_within`): a better rate may lie beyond the end, so the order is not decided (the
rule of :mod:`tailmem.claims.a3` for knowledge QA's arms). The finding on ``adam_split`` follows
the same rule.

Nothing is placed unless the positive control separates (:func:`positive_control`: all-Adam
below Muon by the paired t test); a run where it does not is underpowered and decides nothing.
The question the benchmark exists for — does ``adam_split`` share Muon's tail edge? — is one
pre-specified comparison (:func:`reference_finding`), outside the family: the same two tests on
Muon − ``adam_split``, uncorrected.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tailmem.claims.bench import FTA_MARGIN, POWER, family_level, seeds_for_power
from tailmem.claims.core import ALPHA, EquivalenceTest, equivalence, holm

MUON, ADAM, ALL_ADAM = "muon", "adam_split", "adam"
"""The two references (Muon; Adam on the hidden matrices at its own rate) and the extra row
(Adam everywhere at one rate: paper A's reference, the positive control)."""
TailValues = Mapping[int, tuple[float, float]]
"""One optimiser's tail per evaluation seed: (the rarest group's final FTA, its area under FTA
against exposures ÷ the exposures trained)."""
HEADLINE_TAU = 0.5
"""The FTA level of the descriptive lag ratios (the middle of the paper's three)."""
PLACES = (
    "ahead of Muon",
    "equivalent to Muon",
    "between",
    "equivalent to Adam",
    "behind Adam",
    "not distinguished",
)
"""Every place an optimiser can take (module docstring); references are placed as such."""
UNDERPOWERED = (
    "undecided: the run is underpowered (its positive control, all-Adam against Muon, did not "
    "separate)"
)
"""The place of every optimiser of a run whose positive control did not separate."""
UNDER_TUNED = "undecided: a rate at an end of its grid"
"""The place of an optimiser whose order rests on an under-tuned rate (:func:`tuned_within`)."""
BELOW = {"between": (MUON,), "equivalent to Adam": (MUON,), "behind Adam": (MUON, ADAM)}
"""The references each place puts an optimiser below."""
ABOVE = {"ahead of Muon": (MUON, ADAM), "between": (ADAM,)}
"""The references each place puts an optimiser above."""
Edges = Mapping[str, str]
"""Optimiser → ``lowest``/``highest``: its tuned rate sat at that end of the candidates tried,
the widening spent (optimisers with an interior rate are absent)."""


@dataclass(frozen=True)
class Placement:
    """Where one optimiser sits: its ``place`` (one of :data:`PLACES`, :data:`UNDER_TUNED` or
    :data:`UNDERPOWERED`), the two tests it rests on (None where not measured in every seed),
    which of the four hypotheses Holm's rule rejected (difference and equivalence vs Muon, then
    vs Adam) and why."""

    place: str
    vs_muon: EquivalenceTest | None
    vs_adam: EquivalenceTest | None
    rejected: tuple[bool, bool, bool, bool] = (False, False, False, False)
    reason: str = ""

    @property
    def described(self) -> str:
        """The place in words; an equivalence whose difference test rejected too says so (both
        hold: the difference is real and smaller than the margin)."""
        if self.place == "equivalent to Muon" and self.rejected[0] and self.vs_muon is not None:
            return f"{self.place}, {resolved(below=self.vs_muon.mean > 0)}"
        if self.place == "equivalent to Adam" and self.rejected[2] and self.vs_adam is not None:
            return f"{self.place}, {resolved(below=self.vs_adam.mean < 0)}"
        return self.place


def resolved(below: bool) -> str:
    """The words for a difference resolved inside the equivalence margin."""
    return f"{'trailing' if below else 'leading'} it by a difference the t test resolves"


def difference_test(diffs: Sequence[float] | None, resolution: float) -> EquivalenceTest | None:
    """The difference and equivalence tests of per-seed FTA differences (None: not measured in
    every seed), the SE floored at the resolution of a difference of two FTAs each of
    ``resolution`` (one question)."""
    if diffs is None:
        return None
    return equivalence(diffs, FTA_MARGIN, resolution=math.hypot(resolution, resolution))


def place_all(
    tests: Mapping[str, tuple[EquivalenceTest | None, EquivalenceTest | None]],
    alpha: float = ALPHA,
) -> dict[str, Placement]:
    """The placement of every optimiser of ``tests`` (name → (Muon − it, it − Adam)), its
    tests corrected together by Holm's rule."""
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
                                  reason="not measured in every seed")  # fmt: skip
            continue
        d_m, e_m, d_a, e_a = flags[name]
        out[name] = Placement(_place(vs_muon, vs_adam, flags[name]), vs_muon, vs_adam,
                              (d_m, e_m, d_a, e_a))  # fmt: skip
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
class PositiveControl:
    """All-Adam against Muon on the primary statistic: the test of Muon − all-Adam per seed and
    whether it separates (a difference above 0 at 5 %, two-sided)."""

    test: EquivalenceTest | None
    separated: bool

    def text(self) -> str:
        if self.test is None:
            return "positive control not measured (all-Adam or Muon missing in some seed)"
        verdict = "separates" if self.separated else "does not separate: underpowered"
        return (f"positive control: Muon − all-Adam {self.test.mean:+.3f} ± {self.test.se:.2g} "
                f"FTA (paired, p {self.test.p_different:.2g}): {verdict}")  # fmt: skip


def positive_control(test: EquivalenceTest | None, alpha: float = ALPHA) -> PositiveControl:
    """Does all-Adam trail Muon beyond the two-sided paired t test at ``alpha``?"""
    separated = test is not None and test.p_different < alpha and test.mean > 0
    return PositiveControl(test, separated)


def decided(placed: Mapping[str, Placement], control: PositiveControl) -> dict[str, Placement]:
    """The places, or every one :data:`UNDERPOWERED` when the positive control did not
    separate."""
    if control.separated:
        return dict(placed)
    return {name: Placement(UNDERPOWERED, p.vs_muon, p.vs_adam, reason=control.text())
            for name, p in placed.items()}  # fmt: skip


def tuned_within(placed: Mapping[str, Placement], edges: Edges) -> dict[str, Placement]:
    """The places, each one :data:`UNDER_TUNED` whose order rests on a rate at a grid end: the
    optimiser's own where the place puts it below a reference, a reference's where it puts the
    optimiser above that reference."""
    out = {}
    for name, p in placed.items():
        short = [name] if BELOW.get(p.place) and name in edges else []
        short += [ref for ref in ABOVE.get(p.place, ()) if ref in edges]
        if not short:
            out[name] = p
            continue
        why = "; ".join(f"{arm}'s rate sat at the {edges[arm]} end of its grid" for arm in short)
        out[name] = replace(p, place=UNDER_TUNED,
                            reason=f"{p.place}, but {why} (widening spent): a better rate may "
                                   "lie beyond")  # fmt: skip
    return out


@dataclass(frozen=True)
class ReferenceFinding:
    """The pre-specified comparison of ``adam_split`` with Muon: its test (Muon − it per seed)
    and the finding in words: "shares Muon's tail edge" (equivalent; with "trailing it" or
    "leading it" where a difference smaller than the margin is resolved too), "trails Muon" or
    "leads Muon" (a difference), or "not distinguished"."""

    test: EquivalenceTest | None
    finding: str


def reference_finding(
    test: EquivalenceTest | None,
    control: PositiveControl,
    edges: Edges | None = None,
    alpha: float = ALPHA,
) -> ReferenceFinding:
    """Does ``adam_split`` share Muon's tail edge (module docstring)? Undecided in a run whose
    positive control did not separate, and where the one found behind had its rate at a grid
    end (``edges``)."""
    if test is None:
        return ReferenceFinding(None, "not measured in every seed")
    if not control.separated:
        return ReferenceFinding(test, UNDERPOWERED)
    if test.p_equivalent < alpha:
        shares = "shares Muon's tail edge (equivalent within the margin)"
        if test.p_different < alpha:
            shares += f", {resolved(below=test.mean > 0)}"
        return ReferenceFinding(test, shares)
    if test.p_different < alpha:
        behind = ADAM if test.mean > 0 else MUON
        edge = (edges or {}).get(behind)
        if edge is not None:
            why = f"{UNDER_TUNED} ({behind}'s rate at its {edge}): the order is not decided"
            return ReferenceFinding(test, why)
        return ReferenceFinding(test, "trails Muon" if test.mean > 0 else "leads Muon")
    return ReferenceFinding(test, "not distinguished")


def tail_values(
    seeds: Sequence[int], fta: np.ndarray, exposures: np.ndarray
) -> dict[int, tuple[float, float]]:
    """Per seed, the rarest group's final FTA (the primary statistic) and its area under FTA
    against ``exposures`` divided by the exposures spanned (the second: its mean FTA over
    training, trapezoids between the evaluations; the final FTA with one evaluation). ``fta``:
    ``(seeds, evaluations)`` of the rarest group; ``exposures``: its exposures at each."""
    span = float(exposures[-1] - exposures[0])
    out = {}
    for seed, curve in zip(seeds, np.asarray(fta, dtype=np.float64), strict=True):
        area = float(np.trapezoid(curve, exposures)) / span if span > 0 else float(curve[-1])
        out[int(seed)] = (float(curve[-1]), area)
    return out


def paired(a: TailValues, b: TailValues, which: int, seeds: Sequence[int]) -> list[float] | None:
    """``a − b`` per seed of ``seeds`` (``which``: 0 the final FTA, 1 the area), in order; None
    unless both finished every seed (a seed lost to divergence is not dropped silently)."""
    if not seeds or any(s not in a or s not in b for s in seeds):
        return None
    return [a[s][which] - b[s][which] for s in seeds]


@dataclass(frozen=True)
class Power:
    """The power computation of one level (:mod:`tailmem.claims.bench`): the median over
    challengers of the seed SD of Muon − X in the rarest group's final FTA, the margin, the
    target power, Holm's most stringent level over the level's family, the seeds the run had
    and the seeds that decide a difference of the margin at the target (None: no SD)."""

    sd: float | None
    margin: float
    target: float
    alpha_per_test: float
    seeds_run: int
    seeds_needed: int | None


@dataclass(frozen=True)
class LevelStats:
    """One level's tests: the positive control, the places on the primary and on the second
    statistic, the pre-specified finding on Adam (own rate) against Muon, and the power."""

    control: PositiveControl
    placed: Mapping[str, Placement]
    placed_auc: Mapping[str, Placement]
    finding: ReferenceFinding
    power: Power


def decide_level(
    values: Mapping[str, TailValues],
    seeds: Sequence[int],
    resolution: float,
    edges: Edges | None = None,
) -> LevelStats:
    """Every test of one level from each optimiser's :data:`TailValues` over the evaluation
    ``seeds`` (``resolution``: one question of the rarest group, the floor of an FTA's SD):
    the positive control (Muon − all-Adam), the places of every challenger (every optimiser
    but the two references) on both statistics, each its own Holm family and withheld unless
    the control separates, undecided where an order rests on a rate at a grid end (``edges``),
    the finding on Adam (own rate), and the power at the SD observed."""
    edges = edges or {}
    none: TailValues = {}

    def test(a: str, b: str, which: int) -> EquivalenceTest | None:
        return difference_test(paired(values.get(a, none), values.get(b, none), which, seeds),
                               resolution)  # fmt: skip

    control = positive_control(test(MUON, ALL_ADAM, 0))
    challengers = [arm for arm in values if arm not in (MUON, ADAM)]
    placed, placed_auc = (
        decided(tuned_within(place_all({x: (test(MUON, x, k), test(x, ADAM, k))
                                        for x in challengers}), edges), control)
        for k in (0, 1)
    )  # fmt: skip
    finding = reference_finding(test(MUON, ADAM, 0), control, edges)
    muon = values.get(MUON, none)
    sds = [statistics.stdev(d) for x in challengers
           if (d := paired(muon, values[x], 0, seeds)) and len(d) > 1]  # fmt: skip
    sd: float | None = statistics.median(sds) if sds else None
    if sd is not None and not sd > 0:
        sd = None
    level = family_level(len(challengers))
    needed = None if sd is None else seeds_for_power(sd, FTA_MARGIN, level)
    power = Power(sd, FTA_MARGIN, POWER, level, len(seeds), needed)
    return LevelStats(control, placed, placed_auc, finding, power)
