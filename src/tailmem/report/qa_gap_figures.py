"""Figures of the knowledge-QA gap measures (:mod:`tailmem.metrics.qa_gaps`).

Both return the matplotlib figure; save it with :meth:`tailmem.rundir.RunDir.save_figure` or
``save_report_figure`` (PNG and SVG, written atomically, figure closed).

- :func:`fta_vs_exposures_figure`: FTA against exposures per group for two arms, seed mean with a
  ± standard-error band, the tau levels as dotted lines: how far right the lagging arm's
  curves sit is the exposure-lag ratio.
- :func:`lag_ratio_figure`: the lag ratio against tau per group for one pair of arms, seed mean
  ± SE where measured, bounds as triangles (▲ at least, ▼ at most), optionally beside a
  reference (the paper's values computed the same way) in grey.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tailmem.metrics.qa_gaps import FTACurves, band
from tailmem.plotting import legend_outside, pyplot


def fta_vs_exposures_figure(
    curves: FTACurves,
    lead: str,
    lag: str,
    groups: Sequence[int] | None = None,
    taus: Sequence[float] = (),
    title: str | None = None,
) -> Any:
    """FTA of ``lead`` (solid) and ``lag`` (dashed) against exposures (log axis; zero-exposure
    points are left out) for ``groups`` (default all), one colour per group."""
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
            label = f"{arm}, group {group}"
            ax.plot(x[shown], mean[shown], style, color=colour, label=label)
            ax.fill_between(
                x[shown], (mean - se)[shown], (mean + se)[shown], color=colour, alpha=0.2
            )
    for tau in taus:
        ax.axhline(tau, color="grey", linestyle=":", linewidth=0.8)
    ax.set(xscale="log", xlabel="exposures per fact", ylabel="first-token accuracy")
    ax.set(ylim=(0.0, 1.02), title=title or f"{lead} (solid) vs {lag} (dashed)")
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    return fig


def _ratio_points(
    rows: Sequence[Mapping[str, Any]],
) -> dict[str, list[tuple[float, float, float | None]]]:
    """(tau, value, se) of each kind: measured seed means, lower bounds, upper bounds."""
    points: dict[str, list[tuple[float, float, float | None]]] = {
        "measured": [],
        "lower": [],
        "upper": [],
    }
    for row in rows:
        tau, central = row["tau"], row["of_mean"]
        if row["mean"] is not None:
            points["measured"].append((tau, row["mean"], row["se"]))
        elif central["lower"] is not None:
            points["lower"].append((tau, central["lower"], None))
        elif central["upper"] is not None:
            points["upper"].append((tau, central["upper"], None))
    return points


def _pair(measures: Mapping[str, Any], lead: str, lag: str) -> list[Mapping[str, Any]]:
    for pair in measures["pairs"]:
        if (pair["lead"], pair["lag"]) == (lead, lag):
            return pair["lag_ratio"]
    raise ValueError(f"no pair ({lead!r}, {lag!r}) in the gap measures")


def lag_ratio_figure(
    measures: Mapping[str, Any],
    lead: str,
    lag: str,
    reference: Mapping[str, Any] | None = None,
    reference_label: str = "paper",
    title: str | None = None,
) -> Any:
    """Lag ratio of ``lag`` behind ``lead`` against tau, one colour per group (and pooled),
    from :func:`~tailmem.metrics.qa_gaps.gap_measures` output."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    sources = [(measures, None, "")]
    if reference is not None:
        sources.append((reference, "grey", f"{reference_label} "))
    markers = {"measured": "o", "lower": "^", "upper": "v"}
    for source, fixed, prefix in sources:
        rows = _pair(source, lead, lag)
        labels = list(dict.fromkeys(row["group"] for row in rows))
        colours = plt.cm.plasma(np.linspace(0.0, 0.85, max(len(labels), 1)))
        for i, (label, colour) in enumerate(zip(labels, colours, strict=True)):
            points = _ratio_points([row for row in rows if row["group"] == label])
            offset = 0.006 * (i - len(labels) / 2) + (0.012 if fixed else 0.0)  # apart
            name: str | None = f"{prefix}group {label}"
            for kind, entries in points.items():
                if not entries:
                    continue
                tau, value, se = (np.array(v, dtype=float) for v in zip(*entries, strict=True))
                err = np.nan_to_num(se) if np.isfinite(se).any() else None
                ax.errorbar(
                    tau + offset,
                    value,
                    yerr=err,
                    fmt=markers[kind],
                    color=fixed or colour,
                    mfc="none" if fixed else None,
                    capsize=2,
                    label=name,
                )
                name = None
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set(xlabel="FTA level tau", ylabel=f"exposures {lag} needs / {lead} needs")
    ax.set(title=title or f"exposure-lag ratio of {lag} behind {lead} (▲ at least, ▼ at most)")
    ax.grid(True, alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    return fig
