"""Which runs a study trains, in which order, on the shared pool.

A :class:`Plan` is a frozen declaration: one :class:`Entry` per (FFN type, arm) — how its
learning rates follow from a sweep point (:class:`Rates`), its tuning problem
(:class:`~tailmem.lm.tuning.Sweep`, or none when every rate is set) — the evaluation seeds and
length, and the study's score. Everything else is *derived* from the runs finished so far by
:meth:`Plan.status`, a pure function: which trials each sweep has run, what
:func:`~tailmem.lm.tuning.choose` decided, and the evaluation runs of the arms whose rates are
known. An entry may borrow another arm's chosen rate for one of its kinds (:class:`Rates`): its
sweep starts once the lender has chosen. A rate stored for exactly this tuning problem
(:mod:`tailmem.lm.store`, ``tuning.rates: stored``; ``Plan.stored``) decides an entry without
any trial.

Every run is deterministic, so the results do not depend on the number of workers or on the
order in which runs finish. :func:`run_plans` trains several plans on one
:class:`~tailmem.lm.pool.Pool` (submitting whatever the finished runs unlock), declares their
steps to :mod:`tailmem.progress` (growing as sweeps widen), prints one labelled line per
finished run, and returns each plan's :class:`TrainedPlan`.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from tailmem import progress
from tailmem.lm.arms import Arm
from tailmem.lm.entries import Entry, EntryId
from tailmem.lm.pool import Pool
from tailmem.lm.spec import RunResult, RunSpec
from tailmem.lm.store import StoredRate, StoredTrial, tuning_key
from tailmem.lm.subrun import RunContext, drop_checkpoints, run_job
from tailmem.lm.tuning import Choice, Trial, Widen, choose
from tailmem.optim.registry import kind_order
from tailmem.provenance import environment
from tailmem.train import distributed as D


class Template(Protocol):
    """Builds the :class:`~tailmem.lm.spec.RunSpec` of a run (:class:`~tailmem.lm.subrun.
    RunTemplate`): everything but arm, FFN type, rates, seed and length is the study's."""

    def spec(
        self, arm: Arm, ffn: str, lrs: Mapping[str, float], seed: int, steps: int
    ) -> RunSpec: ...


Train = Callable[[RunSpec, RunContext, Callable[[int], None]], RunResult]
"""Trains one run (:func:`~tailmem.lm.subrun.run_job`)."""
Score = Callable[[RunResult], "float | None"]
"""A study's tuning score of a finished run: higher is better; None when the run failed."""


@dataclass(frozen=True)
class EntryStatus:
    """What is known of an entry given the finished runs: the trials of its sweep so far
    (point, seed, spec), its choice (None while it tunes or waits for a lender) and its
    evaluation runs (empty until chosen)."""

    entry: Entry
    trials: tuple[tuple[float, int, RunSpec], ...] = ()
    choice: Choice | None = None
    lrs: Mapping[str, float] | None = None
    seed_runs: tuple[RunSpec, ...] = ()
    stored: StoredRate | None = None

    @property
    def waiting(self) -> bool:
        return self.lrs is None and not self.trials

    @property
    def failed(self) -> bool:
        """Every candidate of its sweep failed: it has no rate and no evaluation runs."""
        return self.choice is not None and self.choice.failed


@dataclass(frozen=True)
class Plan:
    """A study's runs (module docstring): ``entries``, evaluation ``seeds`` of ``steps`` steps,
    the ``template`` that builds each run's spec, the tuning ``score`` and, per entry, the rate
    ``stored`` for its tuning problem (:func:`~tailmem.lm.store.stored_choices`), which decides
    it without a trial."""

    entries: tuple[Entry, ...]
    seeds: tuple[int, ...]
    steps: int
    template: Template
    score: Score
    stored: Mapping[EntryId, StoredRate] = field(default_factory=dict)
    catalogue: Mapping[str, Arm] = field(default_factory=dict)
    """Every arm by name (kept by :meth:`TrainedPlan.completed`, which may drop entries)."""
    _specs: dict[tuple[Any, ...], RunSpec] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Specs built so far (:meth:`status` runs after every finished run and asks for the same
    specs again: each is built, and its digest computed, once)."""

    def __post_init__(self) -> None:
        if not self.catalogue:
            object.__setattr__(self, "catalogue", {e.arm.name: e.arm for e in self.entries})

    def spec(self, entry: Entry, lrs: Mapping[str, float], seed: int, steps: int) -> RunSpec:
        key = (entry.arm, entry.ffn, tuple(sorted(lrs.items())), seed, steps)
        if key not in self._specs:
            self._specs[key] = self.template.spec(entry.arm, entry.ffn, lrs, seed, steps)
        return self._specs[key]

    def status(self, results: Mapping[RunSpec, RunResult]) -> dict[EntryId, EntryStatus]:
        """Every entry's :class:`EntryStatus` given the finished ``results`` (pure: the same
        results give the same status)."""
        out: dict[EntryId, EntryStatus] = {}
        pending = list(self.entries)
        while pending:
            progressed = False
            for entry in list(pending):
                chosen = {
                    state.entry.arm.name: state.lrs
                    for state in out.values()
                    if state.entry.ffn == entry.ffn and state.lrs is not None
                }
                if not all(arm in chosen for arm in entry.rates.lenders):
                    continue
                out[entry.id] = self._resolve(entry, chosen, results)
                pending.remove(entry)
                progressed = True
            if not progressed:  # lenders still tuning (or never run): these wait
                for entry in pending:
                    out[entry.id] = EntryStatus(entry)
                break
        return {e.id: out[e.id] for e in self.entries}

    def _resolve(
        self,
        entry: Entry,
        chosen: Mapping[str, Mapping[str, float]],
        results: Mapping[RunSpec, RunResult],
    ) -> EntryStatus:
        sweep = entry.sweep
        if sweep is None:
            return self._evaluated(EntryStatus(entry), entry.rates.at(1.0, chosen))
        stored = self.stored.get(entry.id)
        if stored is not None:
            lrs = entry.rates.at(stored.point, chosen)
            return self._evaluated(EntryStatus(entry, stored=stored), lrs)
        points = list(sweep.grid)
        while True:
            trials = [
                (p, s, self.spec(entry, entry.rates.at(p, chosen), s, sweep.steps))
                for p in points
                for s in sweep.seeds
            ]
            if any(spec not in results for _, _, spec in trials):
                return EntryStatus(entry, tuple(trials))
            scored = [Trial(p, s, self._score(results[spec])) for p, s, spec in trials]
            decision = choose(sweep, points, scored)
            if isinstance(decision, Widen):
                points.append(decision.point)
                continue
            status = EntryStatus(entry, tuple(trials), decision)
            if decision.failed:  # no rate to evaluate (nor to lend): reported as diverged
                return status
            return self._evaluated(status, entry.rates.at(decision.point, chosen))

    def _score(self, result: RunResult) -> float | None:
        return None if not result.ok else self.score(result)

    def _evaluated(self, status: EntryStatus, lrs: Mapping[str, float]) -> EntryStatus:
        runs = tuple(self.spec(status.entry, lrs, s, self.steps) for s in self.seeds)
        return replace(status, lrs=dict(lrs), seed_runs=runs)

    def ready(self, results: Mapping[RunSpec, RunResult]) -> list[RunSpec]:
        """Every run the status asks for that has not finished (trials, then seed runs)."""
        wanted: list[RunSpec] = []
        for state in self.status(results).values():
            wanted += [spec for _, _, spec in state.trials] + list(state.seed_runs)
        return [spec for spec in dict.fromkeys(wanted) if spec not in results]

    def declared_steps(self, results: Mapping[RunSpec, RunResult]) -> int:
        """Steps of every run known to be needed: trials so far (each undecided sweep at its
        declared grid at least, a waiting one at its grid) and every entry's seed runs."""
        total = 0
        for state in self.status(results).values():
            sweep = state.entry.sweep
            if state.trials:
                total += len(state.trials) * state.trials[0][2].steps
            elif sweep is not None and state.stored is None and state.lrs is None:
                total += len(sweep.grid) * len(sweep.seeds) * sweep.steps
            if not state.failed:
                total += len(self.seeds) * self.steps
        return total


@dataclass(frozen=True)
class TrainedPlan:
    """A plan with its finished runs: the tables' view of a study (chosen rates, sweeps, seed
    runs), all derived from ``plan.status(results)``."""

    plan: Plan
    results: Mapping[RunSpec, RunResult]
    dropped: frozenset[RunSpec] = frozenset()
    """Seed runs left out of the tables (diverged: :meth:`completed`)."""

    @cached_property
    def states(self) -> dict[EntryId, EntryStatus]:
        return self.plan.status(self.results)

    @property
    def entries(self) -> list[Entry]:
        """The entries with at least one seed run kept."""
        return [s.entry for s in self.states.values() if self.seed_runs.get(s.entry.id)]

    @property
    def ffns(self) -> list[str]:
        return list(dict.fromkeys(e.ffn for e in self.entries))

    @property
    def arms(self) -> list[str]:
        return list(dict.fromkeys(e.arm.name for e in self.entries))

    def arm(self, name: str) -> Arm:
        return self.plan.catalogue[name]

    @property
    def labels(self) -> dict[str, str]:
        return {name: arm.label for name, arm in self.plan.catalogue.items()}

    @property
    def kinds(self) -> list[str]:
        """Every optimiser kind the arms use, in registry order."""
        return kind_order(k for arm in self.plan.catalogue.values() for k in arm.kinds)

    @property
    def steps(self) -> int:
        return self.plan.steps

    @property
    def seeds(self) -> tuple[int, ...]:
        return self.plan.seeds

    @property
    def best(self) -> dict[EntryId, dict[str, float]]:
        """Every decided entry's learning rates, by entry."""
        return {i: dict(s.lrs) for i, s in self.states.items() if s.lrs is not None}

    @property
    def choices(self) -> dict[EntryId, Choice]:
        """The sweep's choice of every entry that tuned in this run."""
        return {i: s.choice for i, s in self.states.items() if s.choice is not None}

    @property
    def failed(self) -> list[EntryId]:
        """The entries whose every tuning candidate failed (no rate chosen, none evaluated)."""
        return [i for i, s in self.states.items() if s.failed]

    @property
    def stored(self) -> dict[EntryId, StoredRate]:
        """The stored rate of every entry decided by the store."""
        return {i: s.stored for i, s in self.states.items() if s.stored is not None}

    @property
    def seed_runs(self) -> dict[EntryId, list[RunSpec]]:
        return {
            i: [spec for spec in s.seed_runs if spec not in self.dropped]
            for i, s in self.states.items()
            if s.seed_runs
        }

    def seed_results(self, entry: EntryId) -> list[RunResult]:
        """The finished seed runs of an entry, in seed order (empty if it was not run)."""
        return [self.results[spec] for spec in self.seed_runs.get(entry, [])]

    def edge(self, entry: EntryId) -> str | None:
        """Where the entry's chosen rate sits among the points tried (or stored), or None."""
        state = self.states[entry]
        if state.choice is not None:
            return None if state.choice.failed else state.choice.edge
        return None if state.stored is None else state.stored.edge

    def tuning_cost(self, entry: EntryId) -> tuple[int, int]:
        """Trials run (in this run, or by the stored tuning) and their budget."""
        state = self.states[entry]
        sweep = state.entry.sweep
        if sweep is None:
            return 0, 0
        if state.stored is not None:
            return len(state.stored.trials), sweep.budget
        return len(state.trials), sweep.budget

    def tuned_rates(
        self, problem: Mapping[str, Any], study: str, preset: str, command: str
    ) -> list[StoredRate]:
        """Every choice made in this run as a :class:`~tailmem.lm.store.StoredRate` of the
        tuning problem ``problem`` (the study's problem record), with its provenance."""
        env = environment()
        out = []
        for state in self.states.values():
            entry, choice, sweep = state.entry, state.choice, state.entry.sweep
            if choice is None or sweep is None or state.lrs is None:
                continue
            borrowed = {kind: self.best[entry.ffn, arm][theirs]
                        for kind, (arm, theirs) in entry.rates.borrowed.items()}  # fmt: skip
            trials = tuple(StoredTrial(t.point, t.seed, t.score) for t in choice.trials)
            out.append(StoredRate(
                tuning_key(problem, entry, borrowed), study, preset, entry.ffn, entry.arm.name,
                choice.point, dict(state.lrs), choice.edge, sweep.score, trials, sweep.budget,
                env.get("git_commit"), str(env.get("tailmem")), date.today().isoformat(), command,
            ))  # fmt: skip
        return out

    def completed(self) -> TrainedPlan:
        """This plan as its tables see it: diverged seed runs left out (an entry without a
        seed run left reads as not run). ``results`` stay whole: the sweep table shows
        diverged trials and :func:`~tailmem.lm.spec.diverged_runs` lists every diverged run."""
        diverged = frozenset(
            spec
            for state in self.states.values()
            for spec in state.seed_runs
            if spec in self.results and self.results[spec].is_diverged
        )
        return replace(self, dropped=diverged)


def run_plan(
    plan: Plan,
    context: RunContext,
    workers: int,
    summary: Callable[[RunResult], str],
    train: Train = run_job,
) -> TrainedPlan:
    """Train every run of ``plan`` with ``train(spec, context, on_steps)`` on a pool of
    ``workers`` processes (1, or under torchrun: in this process); rank 0 prints ``[n/N]
    <run>: <status>, <summary(result)> (<that run's own seconds, or "reused">)``, or
    ``diverged at step N``; a diverged run is a result like any other (the plan carries on)."""
    return run_plans({"": (plan, context)}, workers, summary, train)[""]


def run_plans(
    plans: Mapping[str, tuple[Plan, RunContext]],
    workers: int,
    summary: Callable[[RunResult], str],
    train: Train = run_job,
    more: bool = False,
) -> dict[str, TrainedPlan]:
    """:func:`run_plan` for several plans, by name, on one pool: a run of any plan starts as
    soon as a worker is free, and each printed line starts with its plan's name (``name: ``;
    none for the name ""). Every plan's ``context.threads`` should agree (the pool's workers
    use the first plan's). ``more``: these plans add to work already declared to
    :mod:`tailmem.progress` (a study that trains in stages) instead of declaring it anew."""
    if D.launched_world_size() > 1:
        workers = 1
    main = D.is_main_process()
    results: dict[str, dict[RunSpec, RunResult]] = {name: {} for name in plans}
    declared = sum(plan.declared_steps({}) for plan, _ in plans.values())
    if more:
        progress.extend(declared)
    elif declared:  # nothing to train (every run reused from a store): nothing to declare
        progress.plan(declared, "steps")
    trained: dict[tuple[str, RunSpec], int] = {}
    submitted: set[tuple[str, RunSpec]] = set()

    def on_steps(tag: tuple[str, RunSpec], n: int) -> None:
        trained[tag] = trained.get(tag, 0) + n
        progress.advance(n)

    count = 0
    threads = next(iter(plans.values()))[1].threads
    with Pool(workers, threads, on_steps=on_steps) as pool:

        def submit(name: str) -> None:
            plan, context = plans[name]
            for job in plan.ready(results[name]):
                tag = (name, job)
                if tag not in submitted:
                    submitted.add(tag)
                    pool.submit(tag, train, job, context, pool.sink(tag))

        for name in plans:
            submit(name)
        for outcome in pool.finished():
            if outcome.error is not None:
                pool.cancel_pending()
                raise outcome.error
            (name, job), result = outcome.tag, outcome.result
            progress.skip(job.steps - trained.get(outcome.tag, 0))  # reused, resumed or diverged
            count += 1
            results[name][job] = result
            submit(name)
            took = "reused" if result.reused else f"{result.wall_seconds:.0f}s"
            if result.diverged is not None:  # a diverged run's numbers are not summarised
                text = f"diverged at step {result.diverged.step}"
            else:
                text = f"{result.status}, {summary(result)}"
            if main:  # every run known so far has been submitted
                print(
                    f"[{count}/{len(submitted)}] {name + ': ' if name else ''}{job.label} "
                    f"steps={job.steps}: {text} ({took})",
                    file=sys.stderr,
                    flush=True,
                )
            grown = sum(plan.declared_steps(results[n]) for n, (plan, _) in plans.items())
            progress.extend(max(grown - declared, 0))  # a sweep widened beyond its grid
            declared = max(grown, declared)
    return {name: TrainedPlan(plan, results[name]) for name, (plan, _) in plans.items()}


def tidy(trained: TrainedPlan, root: str, policy: str) -> None:
    """After a study: delete the sub-run folders under ``root/runs`` that no run of the plan
    owns (an earlier config's, kept by an update so that the runs it shares are reused), then
    apply ``train.keep_checkpoints``: keep the final checkpoint of ``all`` runs, of each entry's
    ``first_seed`` run, or of ``none``."""
    if not D.is_main_process():
        return
    used = {spec.key for spec in trained.results}
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
        kept = {jobs[0].key for jobs in trained.seed_runs.values() if jobs}
    drop_checkpoints(root, [spec.key for spec in trained.results if spec.key not in kept])
