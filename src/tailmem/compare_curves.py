"""The training curves of compared runs, overlaid on one figure (``tailmem compare``).

Every run of a language-model study keeps its training runs' evaluation history
(``result.json``: :func:`~tailmem.lm.spec.read_results`). For each compared run, the runs of one
arm (their folder without the seed's: ``runs/plain/muon``, or ``points/bpe/runs/plain/muon``)
are averaged over their evaluation seeds step by step; tuning trials (seeds from
:data:`~tailmem.lm.tuning.TUNING_SEED_OFFSET` up) are left out. The curve is the rarest group's
value of the first per-group metric every run evaluates (:data:`METRICS`: first-token accuracy,
ICL regression's nMSE, the answer loss). An arm keeps its colour across runs and each run has
its own line style, so one arm's runs sit side by side. Studies that train no language model
have no such history: :func:`curves` returns None.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tailmem.plotting import legend_outside, mark_smoke, pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

    from tailmem.compare import Comparison
    from tailmem.lm.spec import RunResult

METRICS = {
    "fta": "first-token accuracy, rarest group",
    "nmse": "nMSE, rarest group",
    "loss": "answer loss, rarest group",
}
"""Per-group evaluation metrics a curve can show, in order of preference, with their axis label."""
STYLES = ("-", "--", ":", "-.")
STEM = "compare_curves"


@dataclass(frozen=True)
class Curve:
    """One arm of one run: the mean over its evaluation seeds at each evaluated step."""

    run: int
    arm: str
    steps: tuple[int, ...]
    values: tuple[float, ...]
    seeds: int


@dataclass(frozen=True)
class Curves:
    """The overlaid curves of a comparison, of one metric."""

    metric: str
    curves: tuple[Curve, ...]

    @property
    def label(self) -> str:
        return METRICS[self.metric]


def curves(comparison: Comparison) -> Curves | None:
    """The comparison's curves (module docstring), or None when its runs have none in common."""
    from tailmem.lm.spec import read_results
    from tailmem.lm.tuning import TUNING_SEED_OFFSET

    per_run = []
    for run in comparison.runs:
        results = read_results(run.path)
        per_run.append(
            {k: r for k, r in results.items() if r.seed < TUNING_SEED_OFFSET and r.evals}
        )
    shared = [m for m in METRICS if all(_evaluates(list(found.values()), m) for found in per_run)]
    if not shared or not all(per_run):
        return None
    metric = shared[0]
    drawn = []
    for index, found in enumerate(per_run):
        arms: dict[str, list[RunResult]] = defaultdict(list)
        for key, result in found.items():
            arms[_arm(key)].append(result)
        drawn += [_mean_curve(index, arm, members, metric) for arm, members in arms.items()]
    return Curves(metric, tuple(drawn))


def _evaluates(results: Sequence[RunResult], metric: str) -> bool:
    """Whether every one of ``results`` evaluates ``metric`` per group (and there is one)."""
    return bool(results) and all(isinstance(r.evals[-1].get(metric), list) for r in results)


def _arm(key: str) -> str:
    """A training run's arm: its folder without the run's own (``points/bpe/runs/plain/muon``),
    shown without the ``runs``/``points`` levels (``bpe plain/muon``)."""
    parts = [p for p in key.split("/")[:-1] if p not in ("runs", "points")]
    return "/".join(parts)


def _mean_curve(run: int, arm: str, members: Sequence[RunResult], metric: str) -> Curve:
    """The seeds' mean of the rarest group's ``metric`` at each step they all evaluated (a
    value that was not finite is left out of its step's mean)."""
    by_step: dict[int, list[float]] = defaultdict(list)
    for result in members:
        for evaluation in result.evals:
            value = evaluation.get(metric)
            step = evaluation.get("step")
            if isinstance(value, list) and value and isinstance(step, int):
                last = value[-1]
                if last is not None and math.isfinite(float(last)):
                    by_step[step].append(float(last))
    steps = sorted(by_step)
    values = tuple(sum(by_step[s]) / len(by_step[s]) for s in steps)
    return Curve(run, arm, tuple(steps), values, len(members))


def figure(found: Curves, labels: Sequence[str], smoke: bool = False) -> PlotFigure:
    """The curves on one axis: an arm's colour, a run's line style (``labels``: the runs');
    ``smoke``: a run is at the smoke preset, and the figure says so (:func:`mark_smoke`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    arms = list(dict.fromkeys(c.arm for c in found.curves))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for curve in found.curves:
        colour = colours[arms.index(curve.arm) % len(colours)]
        seeds = f"{curve.seeds} seed{'s' if curve.seeds > 1 else ''}"
        ax.plot(
            curve.steps,
            curve.values,
            STYLES[curve.run % len(STYLES)],
            color=colour,
            marker="o",
            markersize=3,
            label=f"{curve.arm} — {labels[curve.run]} ({seeds})",
        )
    ax.set(xlabel="training step", ylabel=found.label, title="training curves, runs overlaid")
    ax.grid(True, alpha=0.3)
    legend_outside(ax)
    if smoke:
        mark_smoke(fig)
    return fig
