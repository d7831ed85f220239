"""Figures of the knowledge-QA gap measures (:mod:`tailmem.metrics.qa_gaps`).

Both return the matplotlib figure, for a study's :class:`tailmem.outputs.Figure` (saved as PNG
and SVG, atomically, then closed, by :func:`tailmem.outputs.write`).

- :func:`fta_vs_exposures_figure`: FTA against exposures per group for two arms, seed mean with a
  ± standard-error band, the tau levels as dotted lines: how far right the lagging arm's
  curves sit is the exposure-lag ratio.
- :func:`lag_ratio_figure`: the lag ratio against tau per group for one pair of arms, geometric
  mean over seeds with its 95 % interval where measured, bounds as triangles (▲ at least, ▼ at
  most), optionally beside a reference (the paper's values computed the same way) in grey; a
  pair that reached no level says so on the axes.

Arms are named by ``labels`` (an arm id such as ``adam_split`` → "Adam (own rate)"), never by
their ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tailmem.metrics.qa_gaps import FTACurves, LagRatio, PairMeasure, band
from tailmem.plotting import legend_outside, note_no_data, pyplot


def fta_vs_exposures_figure(
    curves: FTACurves,
    lead: str,
    lag: str,
    groups: Sequence[int] | None = None,
    taus: Sequence[float] = (),
    title: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Any:
    """FTA of ``lead`` (solid) and ``lag`` (dashed) against exposures (log axis; zero-exposure
    points are left out) for ``groups`` (default all), one colour per group; each arm named by
    ``labels`` (default: its id)."""
    name = dict(labels or {})
    plt = pyplot()
    chosen = list(curves.groups) if groups is None else list(groups)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    colours = plt.cm.viridis(np.linspace(0.0, 0.9, max(len(chosen), 1)))
    for colour, group in zip(colours, chosen, strict=True):
        k = curves.groups.index(group)
        x = curves.exposures[k]
        shown = x > 0
        for arm, style in ((lead, "-"), (lag, "--")):
            mean, se = band(curves.fta[arm][:, k, :])
            label = f"{name.get(arm, arm)}, group {group}"
            ax.plot(x[shown], mean[shown], style, color=colour, label=label)
            ax.fill_between(
                x[shown], (mean - se)[shown], (mean + se)[shown], color=colour, alpha=0.2
            )
    for tau in taus:
        ax.axhline(tau, color="grey", linestyle=":", linewidth=0.8)
    ax.set(xscale="log", xlabel="exposures per fact", ylabel="first-token accuracy")
    shown_lead, shown_lag = name.get(lead, lead), name.get(lag, lag)
    ax.set(ylim=(0.0, 1.02), title=title or f"{shown_lead} (solid) vs {shown_lag} (dashed)")
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    return fig


def _ratio_points(rows: Sequence[LagRatio]) -> dict[str, list[tuple[float, float, Any]]]:
    """(tau, value, error bar) of each kind: measured geometric means with their 95 % interval
    (as a lower and upper distance), lower bounds, upper bounds of the seed-mean curves."""
    points: dict[str, list[tuple[float, float, Any]]] = {"measured": [], "lower": [], "upper": []}
    for row in rows:
        central = row.of_mean
        if row.ratio is not None:
            interval = row.interval()
            err = (0.0, 0.0) if interval is None else (row.ratio - interval[0],
                                                        interval[1] - row.ratio)  # fmt: skip
            points["measured"].append((row.tau, row.ratio, err))
        elif central.ratio is not None:
            points["measured"].append((row.tau, central.ratio, (0.0, 0.0)))
        elif central.lower is not None:
            points["lower"].append((row.tau, central.lower, (0.0, 0.0)))
        elif central.upper is not None:
            points["upper"].append((row.tau, central.upper, (0.0, 0.0)))
    return points


def lag_ratio_figure(
    pair: PairMeasure,
    reference: PairMeasure | None = None,
    reference_label: str = "paper",
    title: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Any:
    """Lag ratio of ``pair.lag`` behind ``pair.lead`` against τ, one colour per group (and
    pooled): geometric mean over seeds with its 95 % t interval, bounds as triangles; beside
    it, in grey, ``reference`` (the paper's tables computed the same way). Arms are named by
    ``labels`` (default: their ids); where the pair reached no level, the axes say so."""
    lead, lag = (dict(labels or {}).get(arm, arm) for arm in (pair.lead, pair.lag))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    sources: list[tuple[PairMeasure, str | None, str]] = [(pair, None, "")]
    if reference is not None:
        sources.append((reference, "grey", f"{reference_label} "))
    markers = {"measured": "o", "lower": "^", "upper": "v"}
    ours = 0
    for source, fixed, prefix in sources:
        rows = source.lag_ratios
        groups = list(dict.fromkeys(row.group for row in rows))
        colours = plt.cm.plasma(np.linspace(0.0, 0.85, max(len(groups), 1)))
        for i, (group, colour) in enumerate(zip(groups, colours, strict=True)):
            points = _ratio_points([row for row in rows if row.group == group])
            offset = 0.006 * (i - len(groups) / 2) + (0.012 if fixed else 0.0)  # apart
            name: str | None = f"{prefix}group {group}"
            for kind, entries in points.items():
                if not entries:
                    continue
                tau = np.array([e[0] for e in entries], dtype=float)
                value = np.array([e[1] for e in entries], dtype=float)
                err = np.array([e[2] for e in entries], dtype=float).T
                ax.errorbar(tau + offset, value, yerr=err if err.any() else None,
                            fmt=markers[kind], color=fixed or colour,
                            mfc="none" if fixed else None, capsize=2, label=name)  # fmt: skip
                name = None
                ours += source is pair
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set(xlabel="FTA level tau", ylabel=f"exposures {lag} needs / {lead} needs")
    ax.set(title=title or f"exposure-lag ratio of {lag} behind {lead} (▲ at least, ▼ at most)")
    ax.grid(True, alpha=0.3)
    if not ours:
        note_no_data(ax, f"neither {lead} nor {lag} brought any group to a level τ")
    if ax.get_legend_handles_labels()[0]:
        legend_outside(ax)
    fig.tight_layout()
    return fig
