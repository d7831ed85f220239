"""Which runs a study trains, in which order, on the shared pool.

For every (FFN type, arm) entry a study declares the candidate points of its learning-rate
sweep (one point: nothing to tune, so its one "sweep run" is its first seed run, whatever the
sweep's seed and length). Each candidate is a full run at the sweep seed and length; the best by
the study's score wins, and every seed then runs at the winner. A winner at an end of
its grid (of two or more points) may not be the optimum: the plan then runs one more point
beyond that end, a grid step away (the ratio of the end point to its neighbour), and chooses
again, until the winner is interior or ``max_extend`` points were added (``extended`` counts
them; 0, the default, keeps the grid as declared). An entry may borrow the winning learning
rates of other arms (``needs``): its sweep starts once those are chosen.
A seed run identical to a sweep run (same learning rates, seed and length) is trained once.
Every run is deterministic, so the results do not depend on the number of workers or on the
order in which runs finish.

:func:`run_plan` declares the steps of every run up front (``progress.json`` then moves
smoothly over the whole study), trains the plan on a :class:`~tailmem.lm.pool.Pool`, and prints
one labelled line per finished run with that run's own wall time. :func:`run_plans` trains
several plans (each with its own :class:`~tailmem.lm.subrun.RunContext`: data, root) on one
pool, so the workers stay busy across them.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tailmem import progress
from tailmem.lm.arms import Arm
from tailmem.lm.pool import Pool
from tailmem.lm.spec import RunResult, RunSpec
from tailmem.lm.subrun import RunContext, drop_checkpoints, run_job
from tailmem.optim.registry import kind_order
from tailmem.train import distributed as D

Best = Mapping[tuple[str, str], Mapping[str, float]]
"""The chosen learning rates so far, by (FFN type, arm name)."""


class Template(Protocol):
    """Builds the :class:`~tailmem.lm.spec.RunSpec` of a run (:class:`~tailmem.lm.subrun.
    RunTemplate`): everything but arm, FFN type, rates, seed and length is the study's."""

    def spec(
        self, arm: Arm, ffn: str, lrs: Mapping[str, float], seed: int, steps: int
    ) -> RunSpec: ...


Train = Callable[[RunSpec, RunContext, Callable[[int], None]], RunResult]
"""Trains one run (:func:`~tailmem.lm.subrun.run_job`)."""


@dataclass(frozen=True)
class Entry:
    """One arm of one FFN type: its sweep points, the arms whose chosen LRs it borrows, and
    ``lrs(point, best)`` — the learning rate of every kind the arm uses at a point."""

    ffn: str
    arm: Arm
    points: tuple[float, ...]
    lrs: Callable[[float, Best], dict[str, float]]
    needs: tuple[str, ...] = ()

    @property
    def id(self) -> tuple[str, str]:
        return (self.ffn, self.arm.name)


@dataclass
class Plan:
    """Sweep and seed runs of a study's entries (see the module docstring). ``score(entry,
    point, result)`` ranks sweep runs (higher wins; ties go to the point listed first: the
    declared grid in its order, then the widened points in the order they were added); a
    diverged sweep run ranks below every other, whatever its score."""

    entries: Sequence[Entry]
    score: Callable[[Entry, float, RunResult], Any]
    seeds: Sequence[int]
    steps: int
    sweep_seed: int
    sweep_steps: int
    template: Template
    results: dict[RunSpec, RunResult] = field(default_factory=dict)
    sweeps: dict[tuple[str, str], list[tuple[float, RunSpec]]] = field(default_factory=dict)
    best: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    chosen: dict[tuple[str, str], float] = field(default_factory=dict)
    seed_runs: dict[tuple[str, str], list[RunSpec]] = field(default_factory=dict)
    max_extend: int = 0
    extended: dict[tuple[str, str], int] = field(default_factory=dict)
    catalogue: dict[str, Arm] = field(default_factory=dict)
    """Every arm the plan was made with, by name (kept by :meth:`completed`, which may drop an
    arm's entries, so that sweeps and labels still name it)."""

    def __post_init__(self) -> None:
        if not self.catalogue:
            self.catalogue = {e.arm.name: e.arm for e in self.entries}

    @property
    def ffns(self) -> list[str]:
        """The FFN types of the entries, in order."""
        return list(dict.fromkeys(e.ffn for e in self.entries))

    @property
    def arms(self) -> list[str]:
        """The arm names of the entries, in order."""
        return list(dict.fromkeys(e.arm.name for e in self.entries))

    def arm(self, name: str) -> Arm:
        """The arm called ``name`` (its label, recipe and kinds)."""
        return self.catalogue[name]

    @property
    def labels(self) -> dict[str, str]:
        """Every arm's label, by name."""
        return {name: arm.label for name, arm in self.catalogue.items()}

    @property
    def kinds(self) -> list[str]:
        """Every optimiser kind the arms use, in registry order."""
        return kind_order(kind for arm in self.catalogue.values() for kind in arm.kinds)

    def _sweep_run(self, entry: Entry) -> tuple[int, int]:
        """Seed and length of an entry's sweep runs: the sweep's, or with one point (nothing to
        choose) the first seed's, so that that run is trained once, as a seed run."""
        if len(entry.points) == 1:
            return self.seeds[0], self.steps
        return self.sweep_seed, self.sweep_steps

    def _overlap(self, entry: Entry) -> bool:
        """Whether an entry's sweep and seed runs share a run (the sweep seed's, at full
        length)."""
        seed, steps = self._sweep_run(entry)
        return steps == self.steps and seed in self.seeds

    def total_steps(self) -> int:
        """Training steps of every run the plan will train (sweep + seeds, overlap once)."""
        total = 0
        for entry in self.entries:
            total += self._points(entry) * self._sweep_run(entry)[1] + len(self.seeds) * self.steps
            total -= self.steps if self._overlap(entry) else 0
        return total

    def total_runs(self) -> int:
        per_entry = [self._points(e) + len(self.seeds) - self._overlap(e) for e in self.entries]
        return sum(per_entry)

    def _points(self, entry: Entry) -> int:
        """Sweep points of ``entry`` so far (its grid plus the points added beyond its ends)."""
        return len(self.sweeps.get(entry.id, entry.points))

    def _spec(self, entry: Entry, lrs: Mapping[str, float], seed: int, steps: int) -> RunSpec:
        return self.template.spec(entry.arm, entry.ffn, lrs, seed, steps)

    def start(self) -> list[RunSpec]:
        """The runs that can start at once."""
        return self._start_sweeps()

    def _start_sweeps(self) -> list[RunSpec]:
        jobs = []
        for entry in self.entries:
            needs = [(entry.ffn, name) for name in entry.needs]
            if entry.id in self.sweeps or not all(n in self.best for n in needs):
                continue
            seed, steps = self._sweep_run(entry)
            sweep = [(p, self._spec(entry, entry.lrs(p, self.best), seed, steps))
                     for p in entry.points]  # fmt: skip
            self.sweeps[entry.id] = sweep
            jobs += [job for _, job in sweep]
            if len(sweep) == 1:  # nothing to choose: the seeds need not wait
                jobs += self._choose(entry)
        return list(dict.fromkeys(jobs))

    def _choose(self, entry: Entry) -> list[RunSpec]:
        sweep = self.sweeps[entry.id]
        scores = [
            (not self.results[job].is_diverged, self.score(entry, p, self.results[job]))
            if job in self.results
            else (True, 0)
            for p, job in sweep
        ]
        winner = max(range(len(sweep)), key=scores.__getitem__)
        point, job = sweep[winner]
        beyond = self._extend(entry, point)
        if beyond is not None:
            return [beyond] if beyond not in self.results else self._choose(entry)
        self.best[entry.id], self.chosen[entry.id] = job.lrs, point
        seeds = [self._spec(entry, job.lrs, s, self.steps) for s in self.seeds]
        self.seed_runs[entry.id] = seeds
        return [s for s in seeds if s not in self.results and s not in dict(sweep).values()]

    def _extend(self, entry: Entry, winner: float) -> RunSpec | None:
        """The sweep run one grid step beyond the end ``winner`` sits at (added to the sweep),
        or None: the winner is interior, the grid has one point, or ``max_extend`` is used."""
        points = sorted(p for p, _ in self.sweeps[entry.id])
        used = self.extended.get(entry.id, 0)
        if len(points) < 2 or used >= self.max_extend or winner not in (points[0], points[-1]):
            return None
        low = winner == points[0]
        point = points[0] ** 2 / points[1] if low else points[-1] ** 2 / points[-2]
        job = self._spec(entry, entry.lrs(point, self.best), self.sweep_seed, self.sweep_steps)
        self.sweeps[entry.id].append((point, job))
        self.extended[entry.id] = used + 1
        return job

    def done(self, job: RunSpec, result: RunResult) -> list[RunSpec]:
        """Record a finished run; returns the runs that it unlocks."""
        self.results[job] = result
        unlocked: list[RunSpec] = []
        for entry in self.entries:
            sweep = self.sweeps.get(entry.id, [])
            if entry.id in self.best or not all(j in self.results for _, j in sweep) or not sweep:
                continue
            unlocked += self._choose(entry)
        return unlocked + self._start_sweeps()

    def seed_results(self, entry_id: tuple[str, str]) -> list[RunResult]:
        """The finished seed runs of an entry, in seed order (empty if it was not run)."""
        return [self.results[job] for job in self.seed_runs.get(entry_id, [])]

    def completed(self) -> Plan:
        """This plan as its tables see it: seed runs that diverged left out, and entries with
        no seed run left dropped (so they read as not run). Sweeps and ``results`` stay whole:
        the sweep table shows diverged points and :func:`~tailmem.lm.subrun.diverged_runs`
        lists every diverged run."""
        seed_runs = {
            entry_id: [job for job in jobs if not self.results[job].is_diverged]
            for entry_id, jobs in self.seed_runs.items()
        }
        entries = [e for e in self.entries if seed_runs.get(e.id)]
        return dataclasses.replace(self, entries=entries, seed_runs=seed_runs)


def run_plan(
    plan: Plan,
    context: RunContext,
    workers: int,
    summary: Callable[[RunResult], str],
    train: Train = run_job,
) -> Plan:
    """Train every run of ``plan`` with ``train(spec, context, on_steps)`` (default
    :func:`~tailmem.lm.subrun.run_job`) on a pool of ``workers`` processes (1, or under
    torchrun: in this process); rank 0 prints ``[n/N] <run>: <status>, <summary(result)>
    (<that run's own seconds, or "reused">)``, or ``diverged at step N`` for a diverged run; a
    diverged run is a result like any other (the plan carries on)."""
    run_plans({"": (plan, context)}, workers, summary, train)
    return plan


def run_plans(
    plans: Mapping[str, tuple[Plan, RunContext]],
    workers: int,
    summary: Callable[[RunResult], str],
    train: Train = run_job,
    more: bool = False,
) -> None:
    """:func:`run_plan` for several plans, by name, on one pool: a run of any plan starts as
    soon as a worker is free, and each printed line starts with its plan's name (``name: ``;
    none for the name ""). Every plan's ``context.threads`` should agree (the pool's workers
    use the first plan's). ``more``: these plans add to work already declared to
    :mod:`tailmem.progress` (a study that trains in stages) instead of declaring it anew."""
    if D.launched_world_size() > 1:
        workers = 1
    main = D.is_main_process()
    declared = sum(plan.total_steps() for plan, _ in plans.values())
    if more:
        progress.extend(declared)
    else:
        progress.plan(declared, "steps")
    trained: dict[tuple[str, RunSpec], int] = {}

    def on_steps(tag: tuple[str, RunSpec], n: int) -> None:
        trained[tag] = trained.get(tag, 0) + n
        progress.advance(n)

    count = 0
    threads = next(iter(plans.values()))[1].threads
    with Pool(workers, threads, on_steps=on_steps) as pool:

        def submit(name: str, jobs: Sequence[RunSpec]) -> None:
            for job in jobs:
                tag = (name, job)
                pool.submit(tag, train, job, plans[name][1], pool.sink(tag))

        for name, (plan, _) in plans.items():
            submit(name, plan.start())
        for outcome in pool.finished():
            if outcome.error is not None:
                pool.cancel_pending()
                raise outcome.error
            (name, job), result = outcome.tag, outcome.result
            progress.skip(job.steps - trained.get(outcome.tag, 0))  # reused, resumed or diverged
            count += 1
            took = "reused" if result.reused else f"{result.wall_seconds:.0f}s"
            outcome_text = f"{result.status}, {summary(result)}"
            if result.diverged is not None:
                outcome_text = f"diverged at step {result.diverged.step}"
            plan = plans[name][0]
            submit(name, plan.done(job, result))
            total = sum(p.total_runs() for p, _ in plans.values())
            if main:
                print(
                    f"[{count}/{total}] {name + ': ' if name else ''}{job.label} "
                    f"steps={job.steps}: {outcome_text} ({took})",
                    file=sys.stderr,
                    flush=True,
                )
            grown = sum(p.total_steps() for p, _ in plans.values())
            progress.extend(grown - declared)  # sweep points added beyond a grid's end
            declared = grown


def tidy(plan: Plan, root: str, policy: str) -> None:
    """After a study: delete the sub-run folders under ``root/runs`` that no run of ``plan``
    owns (an earlier config's, kept by an update so that the runs it shares are reused), then
    apply ``train.keep_checkpoints``: keep the final checkpoint of ``all`` runs, of each entry's
    ``first_seed`` run, or of ``none``."""
    if not D.is_main_process():
        return
    used = {spec.key for spec in plan.results}
    base = Path(root)
    for sub in sorted((base / "runs").glob("*/*/*")):  # runs/<ffn>/<arm>/<rates-seed-steps>
        if sub.is_dir() and sub.relative_to(base).as_posix() not in used:
            shutil.rmtree(sub)
    for folder in [*sorted((base / "runs").glob("*/*")), *sorted((base / "runs").glob("*"))]:
        if folder.is_dir() and not any(folder.iterdir()):  # an FFN type or arm left empty
            folder.rmdir()
    if policy == "all":
        return
    kept = set()
    if policy == "first_seed":
        kept = {jobs[0].key for jobs in plan.seed_runs.values() if jobs}
    drop_checkpoints(root, [spec.key for spec in plan.results if spec.key not in kept])
