"""Figures of the Muon-vs-Adam map: heat maps over two grid axes and the lag ratio's trend.

Both return the matplotlib figure, for a study's :class:`tailmem.outputs.Figure`.

- :func:`heat_map_figure`: one value per cell of a two-axis grid (the other axes fixed), coloured
  and annotated with the value and its 95 % interval; a cell whose value is a bound (the lag
  ratio where a crossing is not bracketed) is hatched and written "≥ x" or "≤ x"; a cell with
  no value is grey, "—".
- :func:`trend_figure`: the fitted power law of :mod:`tailmem.metrics.lag_trend` along one
  feature, through the measured points (with their SE), with its confidence band, extended to
  an extrapolated point drawn with its confidence and prediction intervals, and published
  values beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from tailmem.metrics.lag_trend import TrendFit
from tailmem.plotting import legend_outside, pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Kind = Literal["measured", "lower", "upper"]
AxisValue = float | str
"""A value of a grid axis: a number (a size, a rate) or a name."""
BOUND_TEXT = {"lower": "≥", "upper": "≤"}


@dataclass(frozen=True)
class Cell:
    """One heat-map cell: ``value`` (a summary over seeds — a geometric mean, a mean — or a
    bound when ``kind`` is "lower" or "upper") and its interval ``low``–``high`` (``None``:
    unknown or a bound)."""

    value: float
    low: float | None = None
    high: float | None = None
    kind: Kind = "measured"

    def text(self, digits: int) -> str:
        if self.kind in BOUND_TEXT:
            return f"{BOUND_TEXT[self.kind]} {self.value:.{digits}f}"
        if self.low is None or self.high is None:
            return f"{self.value:.{digits}f}"
        return f"{self.value:.{digits}f}\n[{self.low:.{digits}f}, {self.high:.{digits}f}]"


def heat_map_figure(
    cells: Mapping[tuple[AxisValue, AxisValue], Cell | None],
    x: tuple[str, Sequence[AxisValue]],
    y: tuple[str, Sequence[AxisValue]],
    *,
    title: str,
    colorbar: str,
    center: float,
    log: bool = False,
    digits: int = 2,
) -> Figure:
    """A grid of ``cells[(x_value, y_value)]`` over the axes ``x = (label, values)`` and ``y``;
    colours diverge about ``center`` (1 for a ratio, 0 for a gap), on a log scale if ``log``."""
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.ticker import NullFormatter

    plt = pyplot()
    (x_label, xs), (y_label, ys) = x, y
    values = np.full((len(ys), len(xs)), np.nan)
    for i, yv in enumerate(ys):
        for j, xv in enumerate(xs):
            cell = cells.get((xv, yv))
            if cell is not None and (cell.value > 0 or not log):
                values[i, j] = cell.value
    shown = values[np.isfinite(values)]
    reach = max([abs(_scale(v, log) - _scale(center, log)) for v in shown] or [1.0]) or 1.0
    low, high = (_unscale(_scale(center, log) + s * reach, log) for s in (-1, 1))
    norm = LogNorm(low, high) if log else Normalize(low, high)  # symmetric about center
    fig, ax = plt.subplots(figsize=(1.3 * len(xs) + 2.4, 0.9 * len(ys) + 1.8))
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="lightgrey")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, origin="lower",
                      aspect="auto")  # fmt: skip
    for i, yv in enumerate(ys):
        for j, xv in enumerate(xs):
            cell = cells.get((xv, yv))
            if cell is not None and cell.kind in BOUND_TEXT:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//",
                                           edgecolor="black", linewidth=0))  # fmt: skip
            text = "—" if cell is None else cell.text(digits)
            dark = np.isfinite(values[i, j]) and abs(norm(values[i, j]) - 0.5) > 0.3
            ax.text(j, i, text, ha="center", va="center", fontsize=9,
                    color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(len(xs)), [_tick(v) for v in xs])
    ax.set_yticks(range(len(ys)), [_tick(v) for v in ys])
    ax.set(xlabel=x_label, ylabel=y_label, title=title)
    bar = fig.colorbar(image, ax=ax, label=colorbar)
    if log:  # five labelled ticks, evenly spaced on the log scale
        ticks = np.geomspace(low, high, 5)
        bar.ax.yaxis.set_minor_formatter(NullFormatter())
        bar.set_ticks(ticks, labels=[f"{t:.3g}" for t in ticks])
    fig.tight_layout()
    return fig


def _tick(value: AxisValue) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _scale(value: float, log: bool) -> float:
    return math.log(value) if log else value


def _unscale(value: float, log: bool) -> float:
    return math.exp(value) if log else value


def trend_figure(
    fit: TrendFit,
    features: Mapping[str, Sequence[float]],
    ratio: Sequence[float],
    se: Sequence[float],
    *,
    along: str,
    at: Mapping[str, float],
    at_label: str,
    published: Mapping[str, float] | None = None,
    title: str,
    ylabel: str = "exposure-lag ratio",
) -> Figure:
    """The trend along feature ``along`` (log-log axes) through the points, extended to ``at``.

    With more than one feature, each point is moved to ``at``'s values of the other features
    by the fitted slopes (a component-plus-residual plot: ``ratio · prod_k (at_k / x_k)^b_k``),
    so points and line are drawn at the same values of the features not on the axis. The band
    is the trend's confidence interval; the extrapolated point carries its confidence (thick)
    and prediction (thin) intervals; ``published`` values (label -> ratio) are drawn at ``at``.
    """
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    plt = pyplot()
    ratios = np.asarray(ratio, dtype=np.float64)
    errors = np.asarray(se, dtype=np.float64)
    moved = ratios.copy()
    for feature in fit.features:
        if feature != along:
            slope, _ = fit.slope(feature)
            moved *= (at[feature] / np.asarray(features[feature], dtype=np.float64)) ** slope
    xs = np.asarray(features[along], dtype=np.float64)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.errorbar(xs, moved, yerr=errors * moved / ratios, fmt="o", color="C0", capsize=2,
                label="measured (geometric mean ± SE)")  # fmt: skip
    grid = np.geomspace(min(xs.min(), at[along]), max(xs.max(), at[along]), 60)
    line = [fit.predict({**at, along: float(v)}) for v in grid]
    ax.plot(grid, [p.ratio for p in line], color="C0", label="fitted trend")
    level = line[0].confidence.level
    ax.fill_between(grid, [p.confidence.low for p in line], [p.confidence.high for p in line],
                    color="C0", alpha=0.2, label=f"{level:.0%} confidence band")  # fmt: skip
    point = fit.predict(at)
    for interval, width in ((point.prediction, 1.0), (point.confidence, 3.0)):
        ax.plot([at[along]] * 2, [interval.low, interval.high], color="C3", linewidth=width)
    ax.plot([at[along]], [point.ratio], "D", color="C3",
            label=f"{at_label}: {point.ratio:.2f} [{point.confidence.low:.2f}, "
            f"{point.confidence.high:.2f}]")  # fmt: skip
    markers = iter("*PX^")
    for label, value in (published or {}).items():
        ax.plot([at[along]], [value], next(markers), color="black", markersize=9,
                mfc="none", label=f"{label}: {value:.2f}")  # fmt: skip
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set(xscale="log", yscale="log", xlabel=along, ylabel=ylabel, title=title)
    ticks = sorted({*xs.tolist(), float(at[along])})
    ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
    ax.set_xticks([], minor=True)
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    return fig
