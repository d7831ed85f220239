"""Knowledge-QA's per-group accuracy over training, read once per arm as typed values.

Every table, figure and gap measure of knowledge-QA (and of the studies built on its points)
reads the same thing: an arm's per-group FTA or exact match at some evaluated step, over its
seed runs. :class:`PlanCurves` reads each seed run's evaluations once (:class:`RunCurve`: one
array per metric), grouped by arm (:class:`ArmCurve`); the readers then select steps and seeds
from arrays instead of scanning every run's evaluations on each call.

An arm's steps are those all its seed runs evaluated (a run cut short evaluates fewer); a step
evaluated twice by one run reads its first evaluation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tailmem.lm.entries import EntryId
from tailmem.lm.plan import TrainedPlan
from tailmem.lm.spec import Eval, RunResult, per_group, step_of

METRICS = ("fta", "em")
"""The per-group metrics of every evaluation: first-token accuracy and whole-answer exact match."""


@dataclass(frozen=True, eq=False)
class RunCurve:
    """One seed run's per-group metrics at each step it evaluated: ``values[metric]`` is
    ``(steps, groups)``, row ``rows[step]``; ``ok``: the run completed (did not diverge)."""

    seed: int
    ok: bool
    rows: Mapping[int, int]
    values: Mapping[str, np.ndarray]

    @staticmethod
    def of(result: RunResult, metrics: Sequence[str] = METRICS) -> RunCurve:
        """The curve of ``result``'s evaluations (a missing metric is a KeyError, a value that
        is not one per group a TypeError: :func:`~tailmem.lm.spec.per_group`)."""
        first: dict[int, Eval] = {}
        for evaluation in result.evals:
            first.setdefault(step_of(evaluation), evaluation)
        steps = sorted(first)
        values = {}
        for metric in metrics:
            array = np.array([per_group(first[s], metric) for s in steps], dtype=np.float64)
            array.flags.writeable = False
            values[metric] = array
        return RunCurve(result.seed, result.ok, {s: i for i, s in enumerate(steps)}, values)


@dataclass(frozen=True, eq=False)
class ArmCurve:
    """The curves of one arm's seed runs (in seed order), and what the tables read of them."""

    runs: tuple[RunCurve, ...]

    @staticmethod
    def of(results: Sequence[RunResult], metrics: Sequence[str] = METRICS) -> ArmCurve:
        return ArmCurve(tuple(RunCurve.of(r, metrics) for r in results))

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(run.seed for run in self.runs)

    @property
    def by_seed(self) -> dict[int, RunCurve]:
        """The runs by seed (a seed run twice: its last)."""
        return {run.seed: run for run in self.runs}

    def complete(self) -> ArmCurve:
        """The runs that completed (did not diverge)."""
        return ArmCurve(tuple(run for run in self.runs if run.ok))

    def only(self, seeds: Iterable[int]) -> ArmCurve:
        """The runs of ``seeds``, in that order (for pairing arms by seed)."""
        runs = self.by_seed
        return ArmCurve(tuple(runs[s] for s in seeds))

    @cached_property
    def steps(self) -> np.ndarray:
        """The steps every run evaluated, ascending ``(E,)``."""
        if not self.runs:
            raise ValueError("an arm without seed runs has no evaluated steps")
        return np.array(sorted(set.intersection(*(set(run.rows) for run in self.runs))))

    def on(self, steps: Iterable[int], metric: str = "fta") -> np.ndarray:
        """``metric`` (:data:`METRICS`) per run, step and group at ``steps`` (every run's):
        ``(seeds, len(steps), groups)``."""
        wanted = [int(s) for s in steps]
        return np.array(
            [[run.values[metric][run.rows[s]] for s in wanted] for run in self.runs],
            dtype=np.float64,
        )

    def history(self, metric: str = "fta") -> tuple[np.ndarray, np.ndarray]:
        """Eval steps ``(E,)`` and ``metric`` ``(seeds, E, groups)`` over the steps all seeds
        evaluated."""
        return self.steps, self.on(self.steps, metric)

    def at(self, step: int, metric: str = "fta") -> np.ndarray:
        """``metric`` per seed and group at ``step``: ``(seeds, groups)``; a step not every
        run evaluated is a ValueError listing those they did."""
        if step not in self.steps:
            raise ValueError(
                f"step {step} was not evaluated; evaluated steps: {self.steps.tolist()}"
            )
        return self.on([step], metric)[:, 0]


NO_RUNS = ArmCurve(())
"""The curve of an arm not run."""


@dataclass(frozen=True, eq=False)
class PlanCurves:
    """Every arm's curve of a trained plan, by FFN type and arm, each read once."""

    arms: Mapping[EntryId, ArmCurve]

    @staticmethod
    def read(plan: TrainedPlan, metrics: Sequence[str] = METRICS) -> PlanCurves:
        """The curves of every entry's seed runs that ``plan`` keeps (a plan made
        :meth:`~tailmem.lm.plan.TrainedPlan.completed` keeps none that diverged)."""
        return PlanCurves({e: ArmCurve.of(plan.seed_results(e), metrics) for e in plan.seed_runs})

    def arm(self, ffn: str, arm: str) -> ArmCurve:
        """The curve of ``arm``'s seed runs in ``ffn`` (:data:`NO_RUNS` if it was not run)."""
        return self.arms.get((ffn, arm), NO_RUNS)
