"""Claim types, the four verdicts and the statistics every rule shares.

A leaf module: it imports nothing from ``tailmem`` (only the standard library and SciPy's
Student-t distribution), so experiments, the report and the CLI can all use it.

A :class:`Claim` is one unit: its id, where it stands in PAPERS.md, the statement, the published
value (per paper version where two versions differ), the rule in words, the rule's numbers
(``tolerances``) and ``check``, the function that turns a run's results into an :class:`Outcome`.
A check reads one frozen dataclass of typed inputs (a :class:`ClaimInputs`), which its claims
module declares and the experiment builds; the annotation of the check's second parameter names
it (:attr:`Claim.inputs`). :meth:`Claim.evaluate` fills the templates and gives the
:class:`ClaimResult` a run writes into ``claims.json``.

Verdicts:

- ``reproduced`` / ``not reproduced``: the rule decided;
- ``inconclusive``: the run cannot resolve the effect — a difference inside its 95 % two-sided
  Student-t interval over seeds, a model at chance, fewer points than a fit needs;
- ``not measured``: this configuration does not measure the claim; ``reason`` says why.

Statistics (one set, used by every verdict and every leaderboard place)
    Every interval is a two-sided Student-t interval at :data:`CONFIDENCE` (95 %), with Welch–
    Satterthwaite degrees of freedom when several arms' noise adds up (:func:`welch_df`): with
    3 seeds per arm that is about 2.8–4.3 standard errors, not the flat 2 SE (an 82–88 %
    interval at 3 seeds) used before. Every standard error is floored at the measurement's
    resolution (:func:`floored_se`), so seeds that agree exactly are not certainty. "The same"
    is never read from "no difference shown": it needs an equivalence test — two one-sided
    tests at level :data:`ALPHA` each (:func:`equivalence`), with a margin the claim declares
    and justifies. A family of comparisons (a leaderboard's) is corrected by Holm's step-down
    rule (:func:`holm`).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import statistics
import string
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from scipy import stats as _scipy_stats

Verdict = Literal["reproduced", "not reproduced", "inconclusive", "not measured"]
VERDICTS: tuple[str, ...] = ("reproduced", "not reproduced", "inconclusive", "not measured")
MIN_SEEDS = 3
"""Comparisons between arms need at least this many seeds per arm to be decided."""
CONFIDENCE = 0.95
"""Every interval is two-sided at this level; a difference inside it is within the noise."""
ALPHA = 1.0 - CONFIDENCE
"""The level of every test: a two-sided difference, or each one-sided test of an equivalence."""
MIN_TREND_POINTS = 3
"""A trend (a fitted slope) needs at least this many points to be decided."""


# --------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Outcome:
    """What a claim's ``check`` found: the verdict, our value in words and why.

    ``reason`` is required for ``inconclusive`` and ``not measured``; ``seeds`` are the seeds the
    verdict rests on (``None``: deterministic, exact computation); ``variant`` names the member of
    a family; ``published`` replaces the registry's value where it depends on the configuration;
    ``values`` fill the templates' run placeholders.
    """

    verdict: Verdict
    ours: str
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    seeds: Sequence[int] | None = None
    variant: str | None = None
    published: str | None = None
    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")
        if self.verdict in ("inconclusive", "not measured") and not self.reason:
            raise ValueError(f"a {self.verdict!r} outcome needs a reason")


def decided(passed: bool, ours: str, **kw: Any) -> Outcome:
    """``reproduced`` when ``passed``, else ``not reproduced``."""
    return Outcome("reproduced" if passed else "not reproduced", ours, **kw)


def inconclusive(ours: str, reason: str, **kw: Any) -> Outcome:
    return Outcome("inconclusive", ours, reason=reason, **kw)


def unmeasured(reason: str, **kw: Any) -> Outcome:
    return Outcome("not measured", "not measured", reason=reason, **kw)


@dataclass(frozen=True)
class DivergedRun:
    """A run of a study that diverged (a non-finite loss or gradient norm): its arm, FFN type,
    seed, learning rates, sub-run ``key`` and ``step``, the update it stopped at; the study's
    ``results.json`` lists each (:meth:`to_json`) and a claim that needs the arm gives
    :attr:`reason` as its "not measured" reason."""

    arm: str
    ffn: str
    seed: int
    lrs: Mapping[str, float]
    key: str
    step: int

    @property
    def reason(self) -> str:
        """Why a claim that needs this arm is not measured: ``"arm full diverged at step 7"``."""
        return f"arm {self.arm} diverged at step {self.step}"

    def to_json(self) -> dict[str, Any]:
        """Its entry in ``results.json``: the fields, then ``reason``."""
        return {**dataclasses.asdict(self), "lrs": dict(self.lrs), "reason": self.reason}


def divergence_reason(diverged: Iterable[DivergedRun], arms: Iterable[str]) -> str | None:
    """The "not measured" reason of a claim that needs ``arms``, from the study's diverged runs:
    the reasons of the needed arms that diverged, joined (``"arm full diverged at step 7"``), or
    None if none did."""
    needed = set(arms)
    reasons = dict.fromkeys(d.reason for d in diverged if d.arm in needed)
    return "; ".join(reasons) or None


def missing_arms(diverged: Iterable[DivergedRun], arms: Sequence[str]) -> Outcome:
    """``not measured`` for a claim whose ``arms`` have no finished seed: why (they diverged,
    read from the study's diverged runs, or were not run)."""
    reason = divergence_reason(diverged, arms)
    return unmeasured(reason or f"arms {'/'.join(arms)} not run")


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class MeanSE:
    """Mean and standard error of the mean over seeds (``se`` is ``None`` for one seed)."""

    mean: float
    se: float | None
    n: int

    def __str__(self) -> str:
        if math.isnan(self.mean):
            return "—"
        return f"{self.mean:.4g}" + ("" if self.se is None else f" ± {self.se:.2g}")

    def floored(self, resolution: float) -> MeanSE:
        """The same mean with the SE a decision uses (:func:`floored_se`), so that what is
        printed is what was decided on; one seed (no SE) stays without one."""
        if self.se is None or resolution <= 0:
            return self
        return MeanSE(self.mean, floored_se(self, resolution), self.n)


def mean_se(values: Sequence[float]) -> MeanSE:
    """Mean ± SE of per-seed values (SE = sample SD / √n)."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("mean_se needs at least one value")
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else None
    return MeanSE(statistics.fmean(xs), se, len(xs))


def floored_se(stats: MeanSE, resolution: float) -> float:
    """The SE of ``stats`` with the measurement's ``resolution`` as the floor of the per-seed SD
    (SE ≥ resolution/√n): seeds that agree exactly (a saturated accuracy, a count) agree only
    to the resolution of what was measured, so an SE of 0 is not certainty. One seed: the
    floor alone."""
    floor = resolution / math.sqrt(stats.n)
    return max(stats.se or 0.0, floor)


def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """The Student-t quantile of a two-sided ``confidence`` interval with ``df`` degrees of
    freedom (4.30 at df 2, 2.78 at df 4, 1.96 as df grows)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    return float(_scipy_stats.t.ppf(0.5 + confidence / 2.0, df))


def welch_df(parts: Sequence[tuple[float, int]]) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of independent means' noise: ``parts``
    holds each term's variance contribution ``c²·SE²`` and its seed count ``n``. One term:
    ``n − 1``; a term of zero variance adds nothing (a fixed reference)."""
    used = [(v, n) for v, n in parts if v > 0 and n > 1]
    if not used:
        return float(max(min((n for _, n in parts), default=2) - 1, 1))
    total = sum(v for v, _ in used)
    return total**2 / sum(v**2 / (n - 1) for v, n in used)


def two_sided_p(estimate: float, se: float, df: float) -> float:
    """The two-sided p-value of ``estimate / se`` under Student's t with ``df`` degrees of
    freedom (1 for an estimate of 0; 0 for a non-zero estimate with no noise)."""
    if se <= 0:
        return 1.0 if estimate == 0 else 0.0
    return float(2.0 * _scipy_stats.t.sf(abs(estimate) / se, df))


@dataclass(frozen=True)
class Bound:
    """A censored per-seed value: the true value is at least (``side="lower"``) or at most
    (``side="upper"``) ``value`` — e.g. a lag ratio whose lagging arm never reached the level.
    Comparisons keep it as its bound (:func:`compare_seeds`); it can support a verdict in its
    own direction only."""

    value: float
    side: Literal["lower", "upper"]


Sample = Sequence[float | Bound | None]
"""Per-seed values of one arm: a number, a :class:`Bound` (censored), or ``None`` (neither a
value nor a bound: the seed leaves the comparison undecidable)."""


@dataclass(frozen=True)
class Comparison:
    """``a − b − margin`` over seeds: its standard error, Welch degrees of freedom, the
    half-width of its :data:`CONFIDENCE` interval (``t·SE``), its two-sided p-value and the
    verdict it supports."""

    a: MeanSE
    b: MeanSE
    margin: float
    difference: float
    se: float | None
    verdict: Verdict
    reason: str
    censored: int = 0
    empty: int = 0
    df: float | None = None
    half_width: float | None = None
    p: float | None = None
    paired: bool = False

    @property
    def interval(self) -> tuple[float, float] | None:
        """The :data:`CONFIDENCE` interval of ``a − b`` (the margin not subtracted)."""
        if self.half_width is None:
            return None
        centre = self.difference + self.margin
        return centre - self.half_width, centre + self.half_width

    def __str__(self) -> str:
        ci = "" if self.interval is None else " (95 % CI {:+.3g} to {:+.3g})".format(*self.interval)
        bounds = f"; {self.censored} censored seed(s) kept as bounds" if self.censored else ""
        bounds += f"; {self.empty} seed(s) with neither a value nor a bound" if self.empty else ""
        if self.paired:
            se = "" if self.se is None else f" ± {self.se:.2g}"
            return (f"{self.a} vs {self.b} (paired difference {self.difference + self.margin:+.4g}"
                    f"{se}{ci}{bounds})")  # fmt: skip
        return f"{self.a} vs {self.b} (difference {self.a.mean - self.b.mean:+.4g}{ci}{bounds})"


def _values(sample: Sample, sign: float) -> tuple[list[float], set[str], int, int]:
    """The numbers of a sample (bounds at their value), the directions in which its bounds move
    the true difference (``sign`` +1 for the first arm, −1 for the second), and the counts of
    bounds and of seeds with nothing."""
    values, directions, bounds, empty = [], set(), 0, 0
    for item in sample:
        if item is None:
            empty += 1
        elif isinstance(item, Bound):
            bounds += 1
            values.append(float(item.value))
            up = (item.side == "lower") == (sign > 0)
            directions.add("up" if up else "down")
        else:
            values.append(float(item))
    return values, directions, bounds, empty


def _within_noise(estimate: float, half_width: float) -> str:
    return (
        f"|difference − margin| {abs(estimate):.3g} ≤ the {CONFIDENCE:.0%} t interval's "
        f"half-width {half_width:.3g}"
    )


def compare_seeds(
    a: Sample,
    b: Sample | float,
    *,
    margin: float = 0.0,
    min_seeds: int = MIN_SEEDS,
    resolution: float = 0.0,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """Is ``mean(a) − mean(b) > margin``, beyond the noise of every arm over seeds?

    Unpaired (Welch): SE = √(SE_a² + SE_b²), each arm's SE floored by the measurement's
    ``resolution`` (:func:`floored_se`), degrees of freedom by :func:`welch_df`; ``b`` may be
    one number, a fixed reference without noise (df = n_a − 1). ``reproduced`` when
    ``a − b − margin`` exceeds the half-width ``t·SE`` of the two-sided ``confidence``
    interval, ``not reproduced`` when it is below minus it, otherwise ``inconclusive``;
    ``inconclusive`` too with fewer than ``min_seeds`` seeds in an arm (a single-seed SD is
    unknown), with an SE of 0 and no resolution to floor it (no noise estimate is not
    certainty), or with a seed that has neither a value nor a bound. For paired seeds, pass
    the per-seed differences as ``a`` and 0 as ``b``.

    Censored seeds (:class:`Bound`) count at their bound. A lower bound in ``a`` (an upper
    bound in ``b``) means the true difference is at least the one computed: it can confirm
    ``reproduced`` but never refute; the opposite bounds can only refute. A verdict the bounds
    cannot support is ``inconclusive``.
    """
    xa, dir_a, bounds_a, empty_a = _values(a, 1.0)
    reference = isinstance(b, (int, float))
    xb: list[float] = []
    dir_b: set[str] = set()
    bounds_b = empty_b = 0
    if isinstance(b, (int, float)):
        mb = MeanSE(float(b), None, 0)
    else:
        xb, dir_b, bounds_b, empty_b = _values(b, -1.0)
        mb = mean_se(xb) if xb else MeanSE(math.nan, None, 0)
    ma = mean_se(xa) if xa else MeanSE(math.nan, None, 0)
    ma, mb = ma.floored(resolution), mb.floored(resolution)  # printed as decided
    censored = bounds_a + bounds_b
    diff = ma.mean - mb.mean - margin

    empty = empty_a + empty_b

    def undecided(reason: str, se: float | None = None, **kw: Any) -> Comparison:
        return Comparison(ma, mb, margin, diff, se, "inconclusive", reason, censored, empty, **kw)

    if empty:
        return undecided(f"{empty} seed(s) with neither a value nor a bound")
    arms = [ma] if reference else [ma, mb]
    if min(m.n for m in arms) < min_seeds:
        return undecided(f"{min(m.n for m in arms)} seed(s) per arm; the rule needs ≥ {min_seeds}")
    ses = [floored_se(m, resolution) for m in arms]
    se = math.hypot(*ses)
    if se == 0:
        return undecided("SE 0 with no measurement resolution to floor it: no noise estimate", se)
    df = welch_df([(s**2, m.n) for s, m in zip(ses, arms, strict=True)])
    half = t_quantile(df, confidence) * se
    kw = {"df": df, "half_width": half, "p": two_sided_p(diff, se, df)}
    if abs(diff) <= half:
        return undecided(_within_noise(diff, half), se, **kw)
    verdict: Verdict = "reproduced" if diff > 0 else "not reproduced"
    against = "down" if diff > 0 else "up"
    if against in dir_a | dir_b:
        return undecided(
            f"the {censored} censored seed(s) are bounds that cannot "
            + ("confirm" if diff > 0 else "refute")
            + " it (the difference is beyond the interval only at their bounds)",
            se,
            **kw,
        )
    return Comparison(ma, mb, margin, diff, se, verdict, "", censored, 0, df, half, kw["p"])


def difference_of(a: float | Bound | None, b: float | Bound | None) -> float | Bound | None:
    """``a − b`` of one seed's two values, censoring carried: a lower bound of ``a`` or an
    upper bound of ``b`` makes a lower bound of the difference (and the opposite an upper
    bound); bounds pulling both ways, or a None, leave nothing."""
    if a is None or b is None:
        return None
    sides: set[Literal["lower", "upper"]] = set()
    if isinstance(a, Bound):
        sides.add(a.side)
    if isinstance(b, Bound):
        sides.add("upper" if b.side == "lower" else "lower")
    value = (a.value if isinstance(a, Bound) else a) - (b.value if isinstance(b, Bound) else b)
    if len(sides) > 1:
        return None
    return Bound(value, sides.pop()) if sides else value


def _summary(sample: Sample) -> MeanSE:
    """Mean ± SE of a sample's numbers (bounds at their value; NaN mean when it has none)."""
    values = [v.value if isinstance(v, Bound) else float(v) for v in sample if v is not None]
    return mean_se(values) if values else MeanSE(math.nan, None, 0)


def compare_paired(
    a: Sample,
    b: Sample,
    *,
    margin: float = 0.0,
    min_seeds: int = MIN_SEEDS,
    resolution: float = 0.0,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """Is ``a − b > margin`` over seeds that two arms share (seed ``i`` of ``a`` and of ``b``
    trained on the same data order and initialisation)?

    The paired test: the per-seed differences ``aᵢ − bᵢ`` (:func:`difference_of`, censoring
    carried) against ``margin`` by a one-sample Student-t test, df n − 1, its SE floored by
    the resolution of a difference of two values each of ``resolution`` (``√2 ·
    resolution``). The shared seed's noise cancels; an unpaired (Welch) test of the same
    values adds it twice. Verdicts as :func:`compare_seeds`; the :class:`Comparison`'s ``a``
    and ``b`` are the arms' own means (for the text), its difference, SE, df and interval
    those of the paired differences."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    diffs = [difference_of(x, y) for x, y in zip(a, b, strict=True)]
    floor = math.hypot(resolution, resolution)
    c = compare_seeds(diffs, margin, min_seeds=min_seeds, resolution=floor, confidence=confidence)
    return dataclasses.replace(c, a=_summary(a).floored(resolution),
                               b=_summary(b).floored(resolution), margin=margin,
                               difference=c.a.mean - margin, paired=True)  # fmt: skip


@dataclass(frozen=True)
class Contrast:
    """A linear combination Σ cᵢ·mean(armᵢ) − margin, its SE from every arm's noise, its Welch
    degrees of freedom, the half-width of its :data:`CONFIDENCE` interval and the verdict it
    supports (:func:`contrast`)."""

    estimate: float
    se: float | None
    verdict: Verdict
    reason: str
    df: float | None = None
    half_width: float | None = None
    p: float | None = None

    def one_sided(self, side: Literal["above", "below"]) -> float:
        """The one-sided p-value of the estimate being above 0 (H0: ≤ 0) or below it (H0:
        ≥ 0); 1 where there is no noise estimate."""
        return one_sided_p(self.estimate, self.se, self.df, side)


def one_sided_p(
    estimate: float, se: float | None, df: float | None, side: Literal["above", "below"]
) -> float:
    """The one-sided Student-t p-value of ``estimate`` (SE ``se``, ``df`` degrees of freedom)
    being above 0 (``side="above"``: H0 ≤ 0) or below it (H0 ≥ 0); 1 without an SE."""
    if se is None or df is None or not se > 0:
        return 1.0
    t = estimate / se
    return float(_scipy_stats.t.sf(t, df) if side == "above" else _scipy_stats.t.cdf(t, df))


def contrast(
    terms: Sequence[tuple[float, Sequence[float]]],
    *,
    margin: float = 0.0,
    min_seeds: int = MIN_SEEDS,
    resolution: float = 0.0,
    confidence: float = CONFIDENCE,
    paired: bool = False,
) -> Contrast:
    """Is ``Σ c·mean(values) > margin`` beyond the noise of every arm it involves?

    Independent arms (unpaired, like :func:`compare_seeds`): SE = √(Σ c²·SE²), each SE
    floored by ``resolution``, degrees of freedom by :func:`welch_df`. Arms that share their
    seeds (``paired``, every list in the same seeds' order): per seed the combination
    Σ cᵢ·xᵢ, then a one-sample Student-t test of its mean against ``margin`` (df n − 1), the SE
    floored by ``resolution · √(Σ c²)`` (each value's resolution, added in quadrature). A ratio
    bound such as ``g(x)/g(full) ≥ f`` is the contrast ``g(x) − f·g(full) > 0``, so every
    arm's noise enters, not the point estimate of a ratio (Fieller's test of the ratio at
    ``f``). The verdicts are those of :func:`compare_seeds`.
    """
    if paired:
        used = [(c, list(v)) for c, v in terms if c]
        lengths = {len(v) for _, v in used}
        if len(lengths) != 1:
            raise ValueError(
                f"paired contrast: the arms' per-seed lists differ in length {lengths}"
            )
        per_seed = [sum(c * v[i] for c, v in used) for i in range(lengths.pop())]
        floor = resolution * math.sqrt(sum(c * c for c, _ in used))
        found = compare_seeds(per_seed, margin, min_seeds=min_seeds, resolution=floor,
                              confidence=confidence)  # fmt: skip
        return Contrast(found.difference, found.se, found.verdict, found.reason, found.df,
                        found.half_width, found.p)  # fmt: skip
    stats = [(c, mean_se(v)) for c, v in terms if c]
    estimate = sum(c * m.mean for c, m in stats) - margin
    n = min(m.n for _, m in stats)
    if n < min_seeds:
        return Contrast(estimate, None, "inconclusive",
                        f"{n} seed(s) per arm; the rule needs ≥ {min_seeds}")  # fmt: skip
    parts = [((c * floored_se(m, resolution)) ** 2, m.n) for c, m in stats]
    se = math.sqrt(sum(v for v, _ in parts))
    if se == 0:
        reason = "SE 0 with no measurement resolution to floor it: no noise estimate"
        return Contrast(estimate, se, "inconclusive", reason)
    df = welch_df(parts)
    half = t_quantile(df, confidence) * se
    p = two_sided_p(estimate, se, df)
    if abs(estimate) <= half:
        return Contrast(estimate, se, "inconclusive", _within_noise(estimate, half), df, half, p)
    verdict: Verdict = "reproduced" if estimate > 0 else "not reproduced"
    return Contrast(estimate, se, verdict, "", df, half, p)


@dataclass(frozen=True)
class Band:
    """An equivalence decided edge by edge (:func:`within_band`): the verdict, each edge's
    one-sided p-value of lying inside (above 0) and outside (below 0), and why it is
    undecided."""

    verdict: Verdict
    p_inside: tuple[float, ...]
    p_outside: tuple[float, ...]
    reason: str = ""


def within_band(edges: Sequence[tuple[str, Contrast]], alpha: float = ALPHA) -> Band:
    """Does a value lie inside a band, each ``edge`` a contrast that is positive inside it
    (``x − lo`` and ``hi − x``)? Two one-sided t tests at ``alpha`` each (TOST: an
    intersection–union test, so no correction is needed to confirm): ``reproduced`` when every
    edge is above 0 at ``alpha``; ``not reproduced`` when one edge is below 0 by its
    one-sided test after Holm's correction over the edges (family-wise ``alpha``); otherwise
    ``inconclusive``. The declared level is per side: a 95 % two-sided interval per edge would
    test each side at 2.5 %."""
    inside = tuple(c.one_sided("above") for _, c in edges)
    outside = tuple(c.one_sided("below") for _, c in edges)
    if any(holm(list(outside), alpha)):
        return Band("not reproduced", inside, outside)
    if all(p < alpha for p in inside):
        return Band("reproduced", inside, outside)
    reasons = [
        f"{name}: {c.reason or 'no noise estimate'}" if c.se is None or c.se == 0 else
        f"{name}: {c.estimate:+.3g} ± {c.se:.2g}, one-sided p {p:.3g} ≥ {alpha:g}"
        for (name, c), p in zip(edges, inside, strict=True) if not p < alpha
    ]  # fmt: skip
    return Band("inconclusive", inside, outside, "; ".join(reasons))


Equivalence = Literal["equivalent", "different", "not distinguished"]


@dataclass(frozen=True)
class EquivalenceTest:
    """Two one-sided tests of ``|mean| < margin`` on per-seed values (:func:`equivalence`):
    the mean, its floored SE and degrees of freedom, the p-value of equivalence (the larger
    one-sided p), the two-sided p-value of a difference from 0, and the finding."""

    mean: float
    se: float
    df: float
    margin: float
    p_equivalent: float
    p_different: float
    finding: Equivalence
    reason: str = ""


def equivalence(
    values: Sequence[float],
    margin: float,
    *,
    resolution: float = 0.0,
    min_seeds: int = MIN_SEEDS,
    alpha: float = ALPHA,
) -> EquivalenceTest:
    """Is the mean of ``values`` (e.g. per-seed log ratios) inside ``(−margin, margin)``?

    Two one-sided t tests (TOST) at level ``alpha`` each — ``mean > −margin`` and ``mean <
    margin`` — give ``equivalent`` when both reject (the (1 − 2α) interval lies inside the
    margin); a two-sided t test of ``mean = 0`` at ``alpha`` gives ``different``; otherwise —
    or with fewer than ``min_seeds`` values — ``not distinguished``: no difference shown is
    not sameness. The SE is floored by ``resolution`` (:func:`floored_se`)."""
    if not margin > 0:
        raise ValueError(f"an equivalence margin must be positive, got {margin}")
    stats = mean_se(values)
    if stats.n < min_seeds:
        reason = f"{stats.n} seed(s); the test needs ≥ {min_seeds}"
        return EquivalenceTest(stats.mean, math.nan, math.nan, margin, 1.0, 1.0,
                               "not distinguished", reason)  # fmt: skip
    se = floored_se(stats, resolution)
    df = float(stats.n - 1)
    if se == 0:
        reason = "SE 0 with no measurement resolution to floor it: no noise estimate"
        return EquivalenceTest(stats.mean, se, df, margin, 1.0, 1.0, "not distinguished", reason)
    lower = float(_scipy_stats.t.sf((stats.mean + margin) / se, df))  # H0: mean ≤ −margin
    upper = float(_scipy_stats.t.cdf((stats.mean - margin) / se, df))  # H0: mean ≥ margin
    p_eq = max(lower, upper)
    p_diff = two_sided_p(stats.mean, se, df)
    finding: Equivalence = "not distinguished"
    if p_eq < alpha:
        finding = "equivalent"
    elif p_diff < alpha:
        finding = "different"
    return EquivalenceTest(stats.mean, se, df, margin, p_eq, p_diff, finding)


@dataclass(frozen=True)
class Sameness:
    """Whether per-seed values are the same as 0 within ±``margin`` (:func:`same_within`):
    the verdict, the p-value of its refutation (1 where it is not refuted; 0 for a censored
    seed beyond the margin by itself) and why it is undecided."""

    verdict: Verdict
    p_refute: float
    reason: str = ""
    test: EquivalenceTest | None = None


def same_within(
    values: Sample, margin: float, *, resolution: float = 0.0, alpha: float = ALPHA
) -> Sameness:
    """ "The same" as 0 within ±``margin`` — the one rule of every sameness over seeds:

    - ``reproduced`` by an equivalence, two one-sided t tests at ``alpha`` each
      (:func:`equivalence`; it needs every seed's value, so a censored seed leaves it
      undecided);
    - ``not reproduced`` by a mean beyond the margin beyond the two-sided :data:`CONFIDENCE`
      interval (:func:`compare_seeds` against ±margin, censored seeds kept as bounds: each side
      at ``alpha / 2``, Holm's correction over the two one-sided tests), or by a censored
      seed whose bound alone lies beyond the margin;
    - otherwise ``inconclusive`` (also with a seed that has neither a value nor a bound)."""
    if any(v is None for v in values):
        return Sameness("inconclusive", 1.0, "a seed has neither a value nor a bound")
    bounds = [v for v in values if isinstance(v, Bound)]
    if any(b.value > margin if b.side == "lower" else b.value < -margin for b in bounds):
        return Sameness("not reproduced", 0.0, "a censored seed's bound lies beyond ±margin")
    above = compare_seeds(values, margin, resolution=resolution)
    below = compare_seeds(values, -margin, resolution=resolution)
    outside = [c.p or 0.0 for c, v in ((above, "reproduced"), (below, "not reproduced"))
               if c.verdict == v]  # fmt: skip
    if outside:
        return Sameness("not reproduced", min(outside))
    if bounds:
        reason = f"{len(bounds)} censored seed(s): an equivalence needs every value"
        return Sameness("inconclusive", 1.0, reason)
    test = equivalence([float(v) for v in values if isinstance(v, (int, float))], margin,
                       resolution=resolution, alpha=alpha)  # fmt: skip
    if test.finding == "equivalent":
        return Sameness("reproduced", 1.0, test=test)
    reason = test.reason or (
        f"mean {test.mean:+.3g} ± {test.se:.2g} not shown within ±{margin:.3g} (TOST p "
        f"{test.p_equivalent:.3g} ≥ {alpha:g})"
    )
    return Sameness("inconclusive", 1.0, reason, test)


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down rule: which of a family's hypotheses are rejected at family-wise level
    ``alpha`` (the k-th smallest p-value against ``alpha / (m − k)``, stopping at the first
    that fails). Valid under any dependence between the tests."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        rejected[i] = True
    return rejected


def both(*verdicts: Verdict) -> Verdict:
    """The verdict of a rule that needs every part: ``not reproduced`` if any part is, else
    ``reproduced`` if all are, else ``inconclusive``."""
    if "not reproduced" in verdicts:
        return "not reproduced"
    return "reproduced" if all(v == "reproduced" for v in verdicts) else "inconclusive"


def flipped(verdict: Verdict) -> Verdict:
    """The verdict of the opposite inequality (``a < b`` decided by comparing ``a > b``)."""
    swap: dict[Verdict, Verdict] = {"reproduced": "not reproduced", "not reproduced": "reproduced"}
    return swap.get(verdict, verdict)


@dataclass(frozen=True)
class Trend:
    """A least-squares log-log slope, or why there is none."""

    slope: float | None
    points: int
    reason: str = ""


def loglog_trend(
    xs: Sequence[float], ys: Sequence[float], *, min_points: int = MIN_TREND_POINTS
) -> Trend:
    """The slope ``b`` of ``y ≈ a·x^b`` over the positive points; none below ``min_points``."""
    pts = [(float(x), float(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < min_points:
        return Trend(None, len(pts), f"{len(pts)} usable point(s); a trend needs ≥ {min_points}")
    lx = [math.log(x) for x, _ in pts]
    ly = [math.log(y) for _, y in pts]
    return Trend(statistics.linear_regression(lx, ly).slope, len(pts))


def log_factor_slope(xs: Sequence[float]) -> float:
    """``1/ln(max x)``: the log-log slope that one logarithmic factor (``ln x``) adds to a
    power law at the largest ``x`` of a fit. An O(·) constant whose fitted slope stays within
    it cannot be told from a bounded one over that range, and a missing power of x (slope ≥
    1/2 for the √x the rates here would hide) lies far outside it: the tolerance of every
    trend rule (:func:`trend_bound`), ours, set by the range fitted and by no measurement."""
    top = max(float(x) for x in xs)
    if not top > math.e:
        raise ValueError(f"a trend over x ≤ e has no log-factor scale (max x = {top})")
    return 1.0 / math.log(top)


def trend_bound(
    xs: Sequence[float], constants: Sequence[float], *, bound: Literal["upper", "lower", "both"]
) -> tuple[Verdict, Trend, float, str]:
    """An O(·) (``"upper"``: the constant must not grow), a ≳/Ω(·) (``"lower"``: it must not
    decay) or a ≍ (``"both"``) tested as a trend: the log-log slope of the constant against x
    within :func:`log_factor_slope` of flat on the side the bound names. Returns the verdict,
    the fitted trend, the tolerance (NaN without a trend) and the reason of an
    ``inconclusive`` (too few points)."""
    trend = loglog_trend(xs, constants)
    if trend.slope is None:
        return "inconclusive", trend, math.nan, trend.reason
    tol = log_factor_slope(xs)
    ok_up = trend.slope <= tol
    ok_down = trend.slope >= -tol
    passed = {"upper": ok_up, "lower": ok_down, "both": ok_up and ok_down}[bound]
    return ("reproduced" if passed else "not reproduced"), trend, tol, ""


def at_chance(
    values: Sequence[float],
    chance: float,
    *,
    tol: float,
    higher_is_better: bool = True,
    resolution: float = 0.0,
) -> bool:
    """Whether an arm's per-seed score is not resolved beyond chance: its mean, moved the
    half-width of its :data:`CONFIDENCE` t interval towards chance (SE floored by
    ``resolution``, df n − 1), is within ``tol`` of the chance level (accuracy-like scores: ≤
    chance + tol; losses, ``higher_is_better=False``: ≥ chance − tol). An arm at chance
    learned nothing, so any claim that needs it is undecidable, whatever the other arms did."""
    stats = mean_se(values)
    se = floored_se(stats, resolution)
    half = t_quantile(max(stats.n - 1, 1)) * se
    if higher_is_better:
        return stats.mean - half <= chance + tol
    return stats.mean + half >= chance - tol


def grid_edge(value: float, grid: Sequence[float]) -> str | None:
    """``"lowest"``/``"highest"`` when a sweep picked an end of its grid, else ``None``."""
    if len(grid) < 2:
        return None
    if value == min(grid):
        return "lowest"
    if value == max(grid):
        return "highest"
    return None


@dataclass(frozen=True)
class Scale:
    """The model a run measured, as far as a published number depends on it: layers × width,
    and for the knowledge QA the index m of the rarest frequency group (``None``: not a QA
    run)."""

    n_layer: int
    d_model: int
    m: int | None = None

    def __str__(self) -> str:
        return f"{self.n_layer} × {self.d_model}" + ("" if self.m is None else f", m = {self.m}")


PAPER_A_LM = Scale(12, 768)
"""Paper A's 160M model (12 layers × 768), the model of its Table 1 losses."""
PAPER_A_QA = Scale(12, 768, 15)
"""Paper A's knowledge-QA run: the 160M model on m = 15 frequency groups (Tables 3–8)."""


def not_in_setting(published: Scale, measured: Scale | None) -> str | None:
    """Why a rule that compares with a number published for the ``published`` model cannot
    judge a run of the ``measured`` one (the number is the paper's measurement of its own
    model, not a bound derived for this one), else None: the "not measured in its setting"
    reason of every magnitude claim read at another scale."""
    if measured == published:
        return None
    found = "an unrecorded model" if measured is None else f"the {measured} model"
    return (
        f"not measured in its setting: the bound is paper A's number for its {published} "
        f"model, and this run measured {found}; no bound derived for this model exists"
    )


# --------------------------------------------------------------------------- inputs

_C = TypeVar("_C", bound=Callable[..., Any])


@dataclass(frozen=True, kw_only=True)
class ClaimInputs:
    """The base of every claims module's inputs: a frozen dataclass whose fields are exactly what
    its checks read (``A1Inputs``, ``A2Inputs``, …), built by the experiment that measures them."""


def inputs_class(check: Callable[..., Any]) -> type[ClaimInputs]:
    """The :class:`ClaimInputs` class a check reads: the annotation of its second parameter
    (``def check(claim: Claim, inputs: A1Inputs)``)."""
    params = list(inspect.signature(check).parameters)
    hint = typing.get_type_hints(check).get(params[1]) if len(params) == 2 else None
    if not (isinstance(hint, type) and issubclass(hint, ClaimInputs)):
        raise TypeError(
            f"check {check.__module__}.{check.__qualname__} must take (claim, inputs) with "
            f"inputs annotated as a ClaimInputs dataclass; got {hint!r}"
        )
    return hint


# --------------------------------------------------------------------------- claims


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
class ClaimResult:
    """One published claim beside our measurement, as written to ``claims.json``.

    ``rule`` is the rule in words with its numbers; ``reason`` says why a verdict is
    ``inconclusive`` or ``not measured``; ``seeds`` are the seeds behind the verdict
    (``None``: an exact, deterministic computation); ``check`` names the deciding function.
    """

    id: str
    claim: str
    source: str
    published: str
    ours: str
    rule: str
    verdict: Verdict
    details: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    seeds: list[int] | None = None
    check: str = ""

    def __post_init__(self) -> None:
        """Refuse a field of the wrong type, so a damaged ``claims.json`` entry is an error when
        it is read (:func:`~tailmem.claims.registry.read_claims` reports it in one line) instead
        of a report cell reading "None", or "a, b, c" for the seeds ``"abc"``."""
        for name in _TEXT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"field {name!r} is {_shown(value)}; expected text")
        if not self.id:
            raise ValueError("field 'id' is empty; expected a claim id of the registry")
        if not isinstance(self.verdict, str) or self.verdict not in VERDICTS:
            raise ValueError(f"verdict {_shown(self.verdict)} is not one of {VERDICTS}")
        if not isinstance(self.details, dict):
            raise TypeError(f"field 'details' is {_shown(self.details)}; expected an object")
        if self.seeds is not None and not (
            isinstance(self.seeds, list)
            and all(isinstance(s, int) and not isinstance(s, bool) for s in self.seeds)
        ):
            raise TypeError(
                f"field 'seeds' is {_shown(self.seeds)}; expected a list of whole numbers, or "
                "null for an exact computation"
            )


_TEXT_FIELDS = ("id", "claim", "source", "published", "ours", "rule", "reason", "check")
"""The :class:`ClaimResult` fields that hold text."""


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (an error message stays one short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Declared:
    """The test a rule runs, as ``tailmem claims`` states it beside the rule: the ``test``
    (what is computed over what), its ``per_side`` level (each side of a two-sided 95 %
    interval: 2.5 %; each one-sided test of an equivalence: 5 %; ``None`` for an exact,
    deterministic computation with no sampling noise), the ``family`` of tests that answer the
    claim's one question together, and the ``correction`` over that family."""

    test: str
    per_side: float | None
    family: str = "one test"
    correction: str = "none"
    level_note: str = ""
    """Where a rule runs tests of two kinds, what the other's level is (appended)."""

    @property
    def level(self) -> str:
        """The level per side in words (``2.5 %``; ``—`` for an exact computation)."""
        if self.per_side is None:
            return "— (exact computation)"
        return f"{self.per_side * 100:.3g} %{self.level_note}"

    def __post_init__(self) -> None:
        if self.per_side is not None and not 0 < self.per_side < 0.5:
            raise ValueError(f"a level per side must lie in (0, 0.5), got {self.per_side}")


def declares(declared: Declared) -> Callable[[_C], _C]:
    """Attach the test a check runs (:class:`Declared`) to the check function; every
    :class:`Claim` with that check states it (:attr:`Claim.declared`)."""

    def mark(check: _C) -> _C:
        check.__declared__ = declared  # type: ignore[attr-defined]
        return check

    return mark


TWO_SIDED = ALPHA / 2
"""The level per side of a two-sided test at :data:`CONFIDENCE` (2.5 %)."""
ONE_SIDED = ALPHA
"""The level of each one-sided test of an equivalence (TOST) or a bound (5 %)."""


EXACT = Declared("a deterministic computation (no seeds, no sampling noise) against the rule's "
                 "tolerance", None)  # fmt: skip
"""The test of a rule on an exact computation."""
TREND = Declared("a fitted log-log slope of a deterministic computation (no seeds), within the "
                 "rule's tolerance", None)  # fmt: skip
"""The test of a trend rule on an exact computation."""


Check = Callable[["Claim", Any], "Outcome | Sequence[Outcome]"]
"""``check(claim, inputs)``: ``inputs`` is the :class:`ClaimInputs` dataclass its second
parameter is annotated with (``Any`` here, so a check may name its own class)."""


@dataclass(frozen=True)
class Claim:
    """One published claim, its rule, the test the rule runs and the function that checks it.

    ``id`` is stable across runs; a claim with ``variant`` set is a family whose results carry
    ids ``"<id>.<variant value>"`` (e.g. one per spectrum exponent β). ``tolerances`` are the
    rule's numbers (read by ``check`` and filled into the templates: the only copy of each).
    ``versions`` gives the published value per paper version where versions differ. ``why``
    says how the rule was derived from the published statement. ``inputs``, set from the
    annotation of ``check``'s second parameter, is the :class:`ClaimInputs` class ``check``
    reads (``None`` for a claim without a check). ``min_seeds`` is how many seeds (or
    independent draws) per arm the rule needs to decide at all (:data:`MIN_SEEDS` for a
    comparison over seeds; 0 for an exact computation): every preset of its experiment must
    run at least that many. ``declared`` is the test the rule runs (:class:`Declared`: test,
    level per side, family, correction), from the check's :func:`declares` unless given.
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
    check: Check | None = None
    versions: Mapping[str, str] = field(default_factory=dict)
    why: str = ""
    min_seeds: int = 0
    declared: Declared | None = None
    inputs: type[ClaimInputs] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        for name in ("tolerances", "placeholders", "versions"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        if self.check is not None:
            object.__setattr__(self, "inputs", inputs_class(self.check))
            if self.declared is None:
                found = getattr(self.check, "__declared__", None)
                if not isinstance(found, Declared):
                    raise TypeError(
                        f"claim {self.id}: its check {self.check_name} declares no test; "
                        "expected @declares(Declared(...)) on it (or declared= on the claim)"
                    )
                object.__setattr__(self, "declared", found)

    def __getitem__(self, name: str) -> float:
        """The tolerance ``name``: ``CLAIMS[id]["slope_tol"]``."""
        return self.tolerances[name]

    @property
    def check_name(self) -> str:
        """``module.function`` of the check, or ``""`` where the claim has none yet."""
        if self.check is None:
            return ""
        return f"{self.check.__module__}.{self.check.__qualname__}"

    def fill(self, template: str, **values: Any) -> str:
        """``template`` with this claim's tolerances and the run ``values`` filled in."""
        numbers = {k: _Number(v) for k, v in self.tolerances.items()}
        return template.format(**numbers, **values)

    def describe(self, template: str) -> str:
        """``template`` for the registry listing: tolerances filled, run values described."""
        numbers = {k: _Number(v) for k, v in self.tolerances.items()}
        return _Listing(self.placeholders).format(template, **numbers)

    def with_versions(self, text: str) -> str:
        """``text`` (the published value) followed by each paper version's value, if any."""
        extra = "; ".join(f"{v}: {value}" for v, value in self.versions.items())
        return f"{text} [{extra}]" if extra else text

    def evaluate(self, inputs: ClaimInputs) -> list[ClaimResult]:
        """Run ``check`` on a run's inputs (an instance of :attr:`inputs`); one result per
        outcome (families: per variant)."""
        if self.check is None or self.inputs is None:
            raise ValueError(f"claim {self.id} has no check function")
        if not isinstance(inputs, self.inputs):
            raise TypeError(
                f"claim {self.id} reads {self.inputs.__module__}.{self.inputs.__qualname__}; "
                f"got {type(inputs).__qualname__}"
            )
        found = self.check(self, inputs)
        outcomes = [found] if isinstance(found, Outcome) else list(found)
        return [self.from_outcome(o) for o in outcomes]

    def from_outcome(self, outcome: Outcome) -> ClaimResult:
        """The :class:`ClaimResult` of an :class:`Outcome` (templates filled)."""
        if (outcome.variant is None) != (self.variant is None):
            raise ValueError(f"claim {self.id}: variant must be given exactly for families")
        values = dict(outcome.values)
        published = outcome.published
        if published is None:
            published = self.with_versions(self.fill(self.published, **values))
        return ClaimResult(
            id=self.id if outcome.variant is None else f"{self.id}.{outcome.variant}",
            claim=self.fill(self.statement, **values),
            source=self.source,
            published=published,
            ours=outcome.ours,
            rule=self.fill(self.rule, **values),
            verdict=outcome.verdict,
            details=dict(outcome.details),
            reason=outcome.reason,
            seeds=None if outcome.seeds is None else [int(s) for s in outcome.seeds],
            check=self.check_name,
        )
