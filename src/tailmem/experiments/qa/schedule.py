"""The order of the knowledge-QA runs, and a pool that trains them.

For every FFN type and arm: first the LR sweep (one run per learning rate of the arm's swept
kind, seed ``sweep_seed``, ``sweep_steps`` steps), scored by the mean FTA over all people at its
end; then one run per seed at the best learning rate. An arm's sweep starts once the arms it
borrows learning rates from (:func:`~tailmem.experiments.qa.arms.dependencies`) are tuned, and its
seed runs start once its own sweep is done, so independent work fills the workers. A seed run
identical to a sweep run (same learning rates, seed and steps) is not trained twice.

Every run is deterministic, so the results do not depend on the number of workers or on the
order in which runs finish.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from tailmem import progress
from tailmem.experiments.qa.arms import ARMS, BASE_ARM, KINDS, dependencies
from tailmem.experiments.qa.single import RunSpec, Setup, execute

FAILED_SCORE = -1.0

RunFn = Callable[[RunSpec, Setup, "str | Path"], dict[str, Any]]
"""Trains one run and returns its result (:func:`~tailmem.experiments.qa.single.execute`)."""
Report = Callable[[RunSpec, dict[str, Any], float], None]


def score(result: dict[str, Any]) -> float:
    """The sweep's criterion: mean FTA over every question at the last evaluation; a diverged
    run scores :data:`FAILED_SCORE` (below any accuracy)."""
    if result["status"] != "complete" or not result["evals"]:
        return FAILED_SCORE
    value = result["evals"][-1]["fta_mean"]
    return float(value) if math.isfinite(value) else FAILED_SCORE


@dataclass
class Plan:
    """Sweep and seed runs of the arms for one or more FFN types (see the module docstring)."""

    ffns: Sequence[str]
    arms: Sequence[str]
    grids: dict[str, Sequence[float]]
    fallback_lr: dict[str, float]
    seeds: Sequence[int]
    steps: int
    sweep_seed: int
    sweep_steps: int
    results: dict[RunSpec, dict[str, Any]] = field(default_factory=dict)
    best: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    sweeps: dict[tuple[str, str], list[RunSpec]] = field(default_factory=dict)
    seed_runs: dict[tuple[str, str], list[RunSpec]] = field(default_factory=dict)

    def total(self) -> int:
        """Number of distinct runs the plan will train (sweep + seeds, overlap counted once)."""
        per_arm = 0
        for arm in self.arms:
            per_arm += len(self.grids[ARMS[arm].swept]) + len(self.seeds)
            if self.sweep_steps == self.steps and self.sweep_seed in self.seeds:
                per_arm -= 1
        return per_arm * len(self.ffns)

    def total_steps(self) -> int:
        """Training steps of every run the plan will train (the unit of its progress)."""
        per_arm = 0
        for arm in self.arms:
            per_arm += len(self.grids[ARMS[arm].swept]) * self.sweep_steps
            per_arm += len(self.seeds) * self.steps
            if self.sweep_steps == self.steps and self.sweep_seed in self.seeds:
                per_arm -= self.steps
        return per_arm * len(self.ffns)

    def _lrs(self, ffn: str, arm: str, lr: float) -> dict[str, float]:
        spec = ARMS[arm]
        lrs = {spec.swept: lr}
        for kind in spec.kinds:
            if kind != spec.swept:
                base = (ffn, BASE_ARM[kind])
                lrs[kind] = self.best[base][kind] if base in self.best else self.fallback_lr[kind]
        return lrs

    def _ready(self, ffn: str) -> list[str]:
        return [
            arm
            for arm in self.arms
            if (ffn, arm) not in self.sweeps
            and all((ffn, d) in self.best for d in dependencies(arm, self.arms))
        ]

    def _start_sweeps(self) -> list[RunSpec]:
        jobs = []
        for ffn in self.ffns:
            for arm in self._ready(ffn):
                grid = self.grids[ARMS[arm].swept]
                specs = [
                    RunSpec.make(
                        ffn, arm, self._lrs(ffn, arm, lr), self.sweep_seed, self.sweep_steps
                    )
                    for lr in grid
                ]
                self.sweeps[(ffn, arm)] = specs
                jobs += specs
        return jobs

    def start(self) -> list[RunSpec]:
        """The runs that can start at once."""
        return self._start_sweeps()

    def done(self, spec: RunSpec, result: dict[str, Any]) -> list[RunSpec]:
        """Record a finished run; returns the runs that it unlocks."""
        self.results[spec] = result
        key = (spec.ffn, spec.arm)
        sweep = self.sweeps.get(key, [])
        if key in self.best or not all(s in self.results for s in sweep):
            return []
        scores = [score(self.results[s]) for s in sweep]
        self.best[key] = sweep[scores.index(max(scores))].lr
        seeds = [
            RunSpec.make(spec.ffn, spec.arm, self.best[key], seed, self.steps)
            for seed in self.seeds
        ]
        self.seed_runs[key] = seeds
        return [s for s in seeds if s not in self.results] + self._start_sweeps()

    def sweep_rows(self) -> list[dict[str, Any]]:
        """One row per sweep run: FFN, arm, learning rates, score, status, whether it was chosen
        and whether its swept LR is at an end of the grid (a chosen LR there may not be the
        optimum)."""
        rows = []
        for (ffn, arm), specs in self.sweeps.items():
            grid = self.grids[ARMS[arm].swept]
            for s in specs:
                result = self.results[s]
                rows.append(
                    {
                        "ffn": ffn,
                        "arm": arm,
                        "swept": ARMS[arm].swept,
                        **{f"lr_{k}": s.lr.get(k) for k in KINDS},
                        "fta_mean": score(result),
                        "fta_rarest": _rarest(result),
                        "status": result["status"],
                        "chosen": s.lr == self.best.get((ffn, arm)),
                        "grid_edge": s.lr[ARMS[arm].swept] in (min(grid), max(grid)),
                    }
                )
        return rows


def _rarest(result: dict[str, Any]) -> float:
    return float(result["evals"][-1]["fta"][-1]) if result["evals"] else float("nan")


def _init_worker(threads: int | None) -> None:
    if threads:
        torch.set_num_threads(threads)


def _label(spec: RunSpec) -> str:
    lrs = " ".join(f"{k}={v:.3g}" for k, v in spec.lrs)
    return f"{spec.ffn}/{spec.arm} {lrs} seed={spec.seed} steps={spec.steps}"


def drive(
    plan: Plan,
    setup: Setup,
    root: str | Path,
    *,
    workers: int = 1,
    threads: int | None = None,
    run_fn: RunFn = execute,
) -> Plan:
    """Train every run of ``plan`` with ``workers`` processes (1: in this process)."""
    main = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 reports
    show = main and sys.stderr.isatty()
    bar = tqdm(total=plan.total(), disable=not show, unit="run", desc="knowledge-qa")
    count = 0
    progress.plan(plan.total_steps(), "steps")

    def report(spec: RunSpec, result: dict[str, Any], seconds: float) -> None:
        nonlocal count
        count += 1
        bar.update(1)
        if not main:
            return
        message = (
            f"[{count}/{plan.total()}] {_label(spec)}: {result['status']}, "
            f"mean FTA {score(result):.3f}, rarest group {_rarest(result):.3f} ({seconds:.0f}s)"
        )
        if show:
            bar.write(message, file=sys.stderr)
        else:
            print(message, file=sys.stderr, flush=True)

    try:
        if workers <= 1:
            _drive_inline(plan, setup, root, threads, run_fn, report)
        else:
            _drive_pool(plan, setup, root, workers, threads, run_fn, report)
    finally:
        bar.close()
    return plan


def _drive_inline(
    plan: Plan, setup: Setup, root: str | Path, threads: int | None, run_fn: RunFn, report: Report
) -> None:
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        queue = list(plan.start())
        while queue:
            spec = queue.pop(0)
            start = time.perf_counter()
            with progress.span(spec.steps):
                result = run_fn(spec, setup, root)
            report(spec, result, time.perf_counter() - start)
            queue += [s for s in plan.done(spec, result) if s not in queue]
    finally:
        torch.set_num_threads(before)


def _drive_pool(
    plan: Plan,
    setup: Setup,
    root: str | Path,
    workers: int,
    threads: int | None,
    run_fn: RunFn,
    report: Report,
) -> None:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=(threads,)
    ) as pool:
        running: dict[Future, tuple[RunSpec, float]] = {}

        def submit(specs: Iterable[RunSpec]) -> None:
            queued = {s for s, _ in running.values()}
            for spec in specs:
                if spec not in queued:
                    running[pool.submit(run_fn, spec, setup, root)] = (spec, time.perf_counter())
                    queued.add(spec)

        submit(plan.start())
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                spec, start = running.pop(future)
                result = future.result()
                progress.advance(spec.steps)  # the workers' own loops report to no one
                report(spec, result, time.perf_counter() - start)
                submit(plan.done(spec, result))
