"""How far apart two runs' measurements of one claim are: the numbers of ``tailmem compare``'s
difference column.

A claim states our measurement in words (``ours``), every mean over seeds as ``mean ± SE``
(:data:`~tailmem.report.content.CLAIMS_TABLE_NOTE`): ``group 7: Muon 0.905 ± 0.009, Adam 0.625 ±
0.008; …``. :func:`measures` reads each ``mean ± SE`` with the words that name it (``group 7:
Muon``, ``Adam``); words with no ``mean ± SE`` at all (one seed, an exact computation) give
their decimal numbers instead, each with no SE (``head FTA muon 0.167, adam 0.125``).
:func:`differences` pairs two runs' measures by name and gives each difference ``B − A`` with
its 95 % two-sided Student-t interval, Welch degrees of freedom from the two runs' seed counts
(as every verdict's interval is computed: :func:`~tailmem.claims.core.welch_df`), where both
have an SE and two or more seeds; otherwise the difference alone.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tailmem.claims.core import ClaimResult, t_quantile, welch_df

_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_MEASURE = re.compile(rf"(?P<mean>{_NUMBER})\s*±\s*(?P<se>{_NUMBER})")
_DECIMAL = re.compile(r"(?<![\w.])(?P<mean>[-+]?\d+\.\d+(?:[eE][-+]?\d+)?)(?![\w.])")
_LABEL_START = re.compile(r"[,;]|\s\(|\bvs\b")
"""Where the words naming a measure begin: after the last comma, semicolon, opening bracket or
"vs"."""


@dataclass(frozen=True)
class Measure:
    """One ``mean ± SE`` of a claim's words (or a decimal number, ``se`` None), named by the
    words before it."""

    label: str
    mean: float
    se: float | None


@dataclass(frozen=True)
class Delta:
    """``B − A`` of one named measure, with its 95 % interval where both runs have seeds."""

    label: str
    estimate: float
    interval: tuple[float, float] | None

    def text(self) -> str:
        """``Muon +0.012 [-0.004, +0.028]`` (no brackets without an interval)."""
        shown = f"{self.label} {self.estimate:+.3g}" if self.label else f"{self.estimate:+.3g}"
        if self.interval is None:
            return shown
        return shown + " [{:+.3g}, {:+.3g}]".format(*self.interval)


def measures(ours: str) -> list[Measure]:
    """Every ``mean ± SE`` of ``ours`` (none: every decimal number), in order, each named by the
    words since the previous separator (``"0.94 ± 0.002 (Muon 0.91 ± 0.009)"``: ``""`` and
    ``"Muon"``)."""
    pattern = _MEASURE if _MEASURE.search(ours) else _DECIMAL
    found = []
    end = 0
    for match in pattern.finditer(ours):
        before = ours[end : match.start()]
        starts = [m.end() for m in _LABEL_START.finditer(before)]
        label = before[starts[-1] if starts else 0 :].strip(" =:")
        se = float(match["se"]) if pattern is _MEASURE else None
        found.append(Measure(label, float(match["mean"]), se))
        end = match.end()
    return found


def differences(a: ClaimResult, b: ClaimResult) -> tuple[Delta, ...]:
    """``b − a`` for every measure the two claims name alike (the k-th of a name with the k-th),
    in ``a``'s order; each with its interval where both claims rest on two or more seeds."""
    later: dict[tuple[str, int], Measure] = {}
    for measure in measures(b.ours):
        later[measure.label, sum(k[0] == measure.label for k in later)] = measure
    out = []
    seen: dict[str, int] = {}
    for first in measures(a.ours):
        index = seen.get(first.label, 0)
        seen[first.label] = index + 1
        second = later.get((first.label, index))
        if second is None:
            continue
        estimate = second.mean - first.mean
        out.append(Delta(first.label, estimate, _interval(first, a, second, b, estimate)))
    return tuple(out)


def _interval(
    first: Measure, a: ClaimResult, second: Measure, b: ClaimResult, estimate: float
) -> tuple[float, float] | None:
    """The 95 % t interval of ``estimate`` (None unless both measures have an SE and both
    claims ≥ 2 seeds)."""
    if first.se is None or second.se is None:
        return None
    if not (a.seeds and b.seeds and len(a.seeds) > 1 and len(b.seeds) > 1):
        return None
    parts = [(first.se**2, len(a.seeds)), (second.se**2, len(b.seeds))]
    half = t_quantile(welch_df(parts)) * math.sqrt(first.se**2 + second.se**2)
    return estimate - half, estimate + half
