"""Claim types, the four verdicts and the statistics every rule shares.

A leaf module: it imports nothing from ``tailmem.experiments`` or ``tailmem.report`` (only the
standard library and :mod:`tailmem.errors`), so experiments, the report and the CLI can all use it.

A :class:`Claim` is one unit: its id, where it stands in PAPERS.md, the statement, the published
value (per paper version where two versions differ), the rule in words, the rule's numbers
(``tolerances``) and ``check``, the function that turns a run's results into an :class:`Outcome`.
A check reads one frozen dataclass of typed inputs (a :class:`ClaimInputs`), which its claims
module declares and the experiment builds; the annotation of the check's second parameter names
it (:attr:`Claim.inputs`). :meth:`Claim.evaluate` fills the templates and gives the
:class:`ClaimResult` a run writes into ``claims.json``.

Verdicts:

- ``reproduced`` / ``not reproduced``: the rule decided;
- ``inconclusive``: the run cannot resolve the effect — a difference within 2 standard errors over
  seeds, a model at chance, fewer points than a fit needs;
- ``not measured``: this configuration does not measure the claim; ``reason`` says why.
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

Verdict = Literal["reproduced", "not reproduced", "inconclusive", "not measured"]
VERDICTS: tuple[str, ...] = ("reproduced", "not reproduced", "inconclusive", "not measured")
MIN_SEEDS = 3
"""Comparisons between arms need at least this many seeds per arm to be decided."""
SE_FACTOR = 2.0
"""A difference smaller than this many standard errors is within the noise: ``inconclusive``."""
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


def divergence_reason(diverged: Iterable[Mapping[str, Any]], arms: Iterable[str]) -> str | None:
    """The "not measured" reason of a claim that needs ``arms``, from a results file's
    ``diverged`` list (entries with ``arm`` and ``reason``): the reasons of the needed arms that
    diverged, joined (``"arm full diverged at step 7"``), or None if none did."""
    needed = set(arms)
    reasons = dict.fromkeys(d["reason"] for d in diverged if d.get("arm") in needed)
    return "; ".join(reasons) or None


def missing_arms(diverged: Iterable[Mapping[str, Any]], arms: Sequence[str]) -> Outcome:
    """``not measured`` for a claim whose ``arms`` have no finished seed: why (they diverged,
    read from the study's ``diverged`` list, or were not run)."""
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
        return f"{self.mean:.4g}" + ("" if self.se is None else f" ± {self.se:.2g}")


def mean_se(values: Sequence[float]) -> MeanSE:
    """Mean ± SE of per-seed values (SE = sample SD / √n)."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("mean_se needs at least one value")
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else None
    return MeanSE(statistics.fmean(xs), se, len(xs))


@dataclass(frozen=True)
class Comparison:
    """``a − b − margin`` over seeds, with its standard error and the verdict it supports."""

    a: MeanSE
    b: MeanSE
    margin: float
    difference: float
    se: float | None
    verdict: Verdict
    reason: str

    def __str__(self) -> str:
        se = "" if self.se is None else f" ± {self.se:.2g}"
        return f"{self.a} vs {self.b} (difference {self.a.mean - self.b.mean:+.4g}{se})"


def compare_seeds(
    a: Sequence[float],
    b: Sequence[float],
    *,
    margin: float = 0.0,
    min_seeds: int = MIN_SEEDS,
    se_factor: float = SE_FACTOR,
) -> Comparison:
    """Is ``mean(a) − mean(b) > margin``, beyond the noise over seeds?

    Unpaired: SE = √(SE_a² + SE_b²). ``reproduced`` when ``a − b − margin > se_factor·SE``,
    ``not reproduced`` when it is ``< −se_factor·SE``, otherwise ``inconclusive``; fewer than
    ``min_seeds`` seeds in either arm is ``inconclusive`` too (a single-seed SD is unknown).
    """
    ma, mb = mean_se(a), mean_se(b)
    diff = ma.mean - mb.mean - margin
    if min(ma.n, mb.n) < min_seeds or ma.se is None or mb.se is None:
        return Comparison(
            ma, mb, margin, diff, None, "inconclusive",
            f"{min(ma.n, mb.n)} seed(s) per arm; the rule needs ≥ {min_seeds}",
        )  # fmt: skip
    se = math.hypot(ma.se, mb.se)
    if abs(diff) <= se_factor * se:
        verdict: Verdict = "inconclusive"
        reason = f"|difference − margin| {abs(diff):.3g} ≤ {se_factor:g} SE ({se_factor * se:.3g})"
    else:
        verdict = "reproduced" if diff > 0 else "not reproduced"
        reason = ""
    return Comparison(ma, mb, margin, diff, se, verdict, reason)


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


def at_chance(score: float, chance: float, *, tol: float) -> bool:
    """Whether a score (accuracy-like: higher is better) is within ``tol`` of chance level."""
    return score <= chance + tol


def grid_edge(value: float, grid: Sequence[float]) -> str | None:
    """``"lowest"``/``"highest"`` when a sweep picked an end of its grid, else ``None``."""
    if len(grid) < 2:
        return None
    if value == min(grid):
        return "lowest"
    if value == max(grid):
        return "highest"
    return None


# --------------------------------------------------------------------------- inputs

_I = TypeVar("_I", bound="ClaimInputs")


@dataclass(frozen=True, kw_only=True)
class ClaimInputs:
    """The base of every claims module's inputs: a frozen dataclass whose fields are exactly what
    its checks read (``A1Inputs``, ``A2Inputs``, …), built by the experiment that measures them."""

    @classmethod
    def of(cls: type[_I], results: Mapping[str, Any]) -> _I:
        """The inputs taken from a results mapping with (at least) these fields: other keys are
        left out, absent optional fields keep their defaults (an absent required one is a
        TypeError naming it)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in results.items() if k in names})


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


Check = Callable[["Claim", Any], "Outcome | Sequence[Outcome]"]
"""``check(claim, inputs)``: ``inputs`` is the :class:`ClaimInputs` dataclass its second
parameter is annotated with (``Any`` here, so a check may name its own class)."""


@dataclass(frozen=True)
class Claim:
    """One published claim, its rule and the function that checks it.

    ``id`` is stable across runs; a claim with ``variant`` set is a family whose results carry
    ids ``"<id>.<variant value>"`` (e.g. one per spectrum exponent β). ``tolerances`` are the
    rule's numbers (read by ``check`` and filled into the templates: the only copy of each).
    ``versions`` gives the published value per paper version where versions differ. ``why``
    says how the rule was derived from the published statement. ``inputs``, set from the
    annotation of ``check``'s second parameter, is the :class:`ClaimInputs` class ``check``
    reads (``None`` for a claim without a check).
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
    inputs: type[ClaimInputs] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        for name in ("tolerances", "placeholders", "versions"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        if self.check is not None:
            object.__setattr__(self, "inputs", inputs_class(self.check))

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
