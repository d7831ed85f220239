"""Figures of the knowledge-QA experiment (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tailmem.experiments.knowledge_qa.curves import METRICS, PlanCurves
from tailmem.experiments.knowledge_qa.tables import mean_std
from tailmem.lm.plan import TrainedPlan
from tailmem.lm.sweeps import TrialRow
from tailmem.plotting import integer_ticks, legend_outside, pyplot

plt = pyplot()


def fta_by_group_figure(plan: TrainedPlan, curves: PlanCurves, ffn: str, chance: float) -> Any:
    """Paper Fig. 3 style: one panel per arm, FTA of every frequency group over the steps (mean
    over seeds, band = ± std), rare groups in light colours; dashed line = chance level."""
    arms = list(plan.arms)
    cols = min(3, len(arms) + 1)  # one slot more than the arms: it holds the legend
    rows = -(-(len(arms) + 1) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(9, 2.9 * rows), sharey=True, squeeze=False)
    axes, spare = grid.ravel()[: len(arms)], grid.ravel()[len(arms) :]
    cmap = plt.get_cmap("viridis")
    for ax, arm in zip(axes, arms, strict=True):
        steps, fta = curves.arm(ffn, arm).history()
        mean, std = mean_std(fta)
        n_groups = mean.shape[1]
        for g in range(n_groups):
            colour = cmap(g / max(n_groups - 1, 1))
            ax.plot(steps, mean[:, g], color=colour, lw=1.4, label=f"group {g}")
            ax.fill_between(
                steps,
                mean[:, g] - std[:, g],
                mean[:, g] + std[:, g],
                color=colour,
                alpha=0.15,
                lw=0,
            )
        ax.axhline(chance, color="grey", ls="--", lw=1)
        ax.set_title(plan.arm(arm).label)
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    for ax in grid[:, 0]:
        ax.set_ylabel("first-token accuracy")
    for ax in spare:
        ax.axis("off")
    handles, labels = axes[0].get_legend_handles_labels()
    spare[0].legend(
        handles,
        labels,
        loc="center",
        ncol=2 if len(labels) > 8 else 1,
        title="frequency group (0 = most frequent)",
    )
    fig.suptitle(f"FTA per frequency group, {ffn} FFN (dashed: chance {chance:.3f})")
    fig.tight_layout()
    return fig


def final_fta_figure(plan: TrainedPlan, curves: PlanCurves, ffn: str, chance: float) -> Any:
    """At the last step, against the frequency group, one line per arm (± std over seeds):
    first-token accuracy (left) and whole-answer exact match (right; at most the FTA)."""
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.6), sharey=True)
    for ax, metric, name in zip(
        axes, METRICS, ("first-token accuracy", "exact match"), strict=True
    ):
        for arm in plan.arms:
            _steps, values = curves.arm(ffn, arm).history(metric)
            mean, std = mean_std(values[:, -1])
            groups = np.arange(len(mean))
            ax.errorbar(
                groups, mean, yerr=std, marker="o", ms=3, capsize=2, label=plan.arm(arm).label
            )
        if metric == "fta":
            ax.axhline(chance, color="grey", ls="--", lw=1, label="chance")
        ax.set_xlabel("frequency group (samples per person halve with each)")
        integer_ticks(ax)
        ax.set(ylabel=f"{name} at the end", ylim=(-0.02, 1.02), title=f"Final {name}, {ffn} FFN")
        ax.grid(alpha=0.3)
    legend_outside(axes[-1], handles=axes[0].get_legend_handles_labels()[0])
    fig.tight_layout()
    return fig


def sweep_figure(rows: Sequence[TrialRow], ffn: str, labels: Mapping[str, str]) -> Any:
    """Each candidate's tuning score (higher is better) against the swept rate, one line per arm
    (named by ``labels``) through the means over the tuning seeds, a dot per trial, a star at
    the choice; failed trials are left out (their candidate ranks last)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for arm in dict.fromkeys(r.arm for r in rows if r.ffn == ffn):
        mine = [r for r in rows if r.ffn == ffn and r.arm == arm]
        kind = mine[0].swept
        means = {r.rate: r.point_score for r in mine if r.point_score is not None}
        xs = sorted(means)
        (line,) = ax.plot(xs, [means[x] for x in xs], marker="", label=f"{labels[arm]} ({kind})")
        trials = [r for r in mine if r.score is not None]
        ax.plot([r.rate for r in trials], [r.score for r in trials], "o", ms=3,
                color=line.get_color())  # fmt: skip
        chosen = [r for r in mine if r.chosen and r.point_score is not None]
        if chosen:
            ax.plot([chosen[0].rate], [chosen[0].point_score], marker="*", ms=11,
                    color=line.get_color())  # fmt: skip
    ax.set_xscale("log")
    ax.set(xlabel="learning rate of the tuned optimiser", ylabel="tuning score (higher is better)")
    ax.grid(alpha=0.3)
    legend_outside(ax)
    ax.set_title(f"Tuning, {ffn} FFN (star: chosen)")
    fig.tight_layout()
    return fig


def _finish(fig: Any, ax: Any, title: str) -> Any:
    """The common end of the one-panel figures: accuracy axis 0..1, grid, legend, title."""
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    legend_outside(ax)
    ax.set_title(title)
    fig.tight_layout()
    return fig
