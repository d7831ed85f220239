"""How much of one effect another explains: a ratio of paired per-seed log ratios.

Muon's tail edge over Adam at one rate is ``E = log(exposures Adam needs ÷ Muon's)``; giving
Adam's hidden matrices a rate of their own recovers ``R = log(exposures Adam needs ÷ Adam at its
own rate needs)``. The *share* of the edge the rate split recovers is ``R / E``: 1 when the edge
is all learning rate, 0 when none of it is. Both are measured on the same seeds (paired), so
the share is the ratio of their means with a delta-method standard error that uses their
covariance over seeds, and a two-sided Student-t interval (df = seeds − 1). It is undefined when
``E`` is not clearly positive (no edge to share out): its interval then covers 0.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tailmem.claims.core import CONFIDENCE, t_quantile


@dataclass(frozen=True)
class Share:
    """``mean(part) / mean(whole)`` over paired seeds, its delta-method SE and t interval
    (None where fewer than two seeds or a zero whole)."""

    share: float | None
    se: float | None
    low: float | None
    high: float | None
    n: int

    def text(self) -> str:
        if self.share is None:
            return "—"
        ci = "" if self.low is None or self.high is None else f" [{self.low:.2f}, {self.high:.2f}]"
        return f"{self.share:.2f}{ci}"


def share(part: Sequence[float], whole: Sequence[float], confidence: float = CONFIDENCE) -> Share:
    """The share ``mean(part) / mean(whole)`` of paired per-seed values (module docstring)."""
    if len(part) != len(whole):
        raise ValueError(f"paired values differ in length: {len(part)} and {len(whole)}")
    n = len(part)
    if n == 0:
        return Share(None, None, None, None, 0)
    mp, mw = statistics.fmean(part), statistics.fmean(whole)
    if mw == 0:
        return Share(None, None, None, None, n)
    ratio = mp / mw
    if n < 2:
        return Share(ratio, None, None, None, n)
    vp, vw = statistics.variance(part), statistics.variance(whole)
    cov = statistics.covariance(part, whole)
    var = (vp - 2 * ratio * cov + ratio**2 * vw) / (n * mw**2)
    se = math.sqrt(max(var, 0.0))
    half = t_quantile(n - 1, confidence) * se
    return Share(ratio, se, ratio - half, ratio + half, n)
