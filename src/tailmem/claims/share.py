"""How much of one effect another explains: a ratio of paired per-seed means, with Fieller's
interval.

Muon's tail edge over Adam at one rate is ``E`` (a log exposure-lag ratio, or a difference of
the rarest group's final FTA); giving Adam's hidden matrices a rate of their own recovers
``R`` of it, measured the same way on the same seeds. The *share* of the edge the rate split
recovers is ``mean(R) / mean(E)``: 1 when the edge is all learning rate, 0 when none of it is.

A ratio of two means has no normal sampling distribution when its denominator can be near 0, so
its interval is Fieller's (Fieller 1954), not the delta method's: the set of ρ for which
``mean(R) − ρ·mean(E)`` is not distinguished from 0 by a two-sided Student-t test at the given
confidence (df = seeds − 1), using the paired seeds' variances and covariance. When ``mean(E)``
itself is not distinguished from 0 at that level the set is unbounded: the share is then *not
defined* (there is no resolved edge to share out), which :attr:`Share.defined` says; its
``low``/``high`` are None.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tailmem.claims.core import CONFIDENCE, t_quantile


@dataclass(frozen=True)
class Share:
    """``mean(part) / mean(whole)`` over ``n`` paired seeds and its Fieller interval (None where
    fewer than two seeds, or where the interval is unbounded: ``defined`` is then False)."""

    share: float | None
    low: float | None
    high: float | None
    n: int

    @property
    def defined(self) -> bool:
        """Whether the whole is resolved from 0, so that the interval is a bounded one."""
        return self.low is not None and self.high is not None

    def text(self) -> str:
        if self.share is None:
            return "—"
        if not self.defined:
            return f"{self.share:.2f} (interval not defined: the edge is not resolved from 0)"
        return f"{self.share:.2f} [{self.low:.2f}, {self.high:.2f}]"

    def verdict(self, level: float = 0.5) -> str:
        """``mostly the learning rate`` (interval above ``level``), ``mostly the update rule``
        (below), ``not distinguished`` (it straddles ``level``) or ``not defined``."""
        if self.low is None or self.high is None:
            return "not defined"
        if self.low > level:
            return "mostly the learning rate"
        if self.high < level:
            return "mostly the update rule"
        return "not distinguished"


def share(part: Sequence[float], whole: Sequence[float], confidence: float = CONFIDENCE) -> Share:
    """The share ``mean(part) / mean(whole)`` of paired per-seed values with Fieller's interval
    (module docstring)."""
    if len(part) != len(whole):
        raise ValueError(f"paired values differ in length: {len(part)} and {len(whole)}")
    n = len(part)
    if n == 0:
        return Share(None, None, None, 0)
    mp, mw = statistics.fmean(part), statistics.fmean(whole)
    if mw == 0:
        return Share(None, None, None, n)
    ratio = mp / mw
    if n < 2:
        return Share(ratio, None, None, n)
    q = t_quantile(n - 1, confidence) ** 2 / n
    a = mw**2 - q * statistics.variance(whole)
    b = mp * mw - q * statistics.covariance(part, whole)
    c = mp**2 - q * statistics.variance(part)
    if a <= 0:  # the whole is not resolved from 0: the set is unbounded
        return Share(ratio, None, None, n)
    root = math.sqrt(max(b * b - a * c, 0.0))
    return Share(ratio, (b - root) / a, (b + root) / a, n)
