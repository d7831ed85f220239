"""A profile of ``tailmem reproduce --preset cpu``: per study, the FLOPs its runs execute, the
achieved FLOP rate against this machine's matmul rate, and where the rest of the wall time goes.

Measured here on short runs of each study's real cpu config, then extrapolated to the preset
with its counts of runs, steps and evaluations (every number printed is one or the other):

- **matmul rate**: fp32 and bf16 products of the study's FFN shape (tokens of one training batch
  × d_model × d_ff), one thread (each worker of the presets has one), best of 0.5 s;
- **per run kind** (each FFN type × arm of the study's plan), in this process with one thread,
  through the loop's own ``train_step`` on the study's own batches, loss, optimiser routing and
  eval hooks: seconds per training step and of its optimiser step (best of 3 after one
  warm-up), in fp32 and in bf16 autocast; seconds of one evaluation (all the study's eval hooks);
  FLOPs of one step, of its optimiser step and of one evaluation, counted by torch's
  ``FlopCounterMode`` (matrix products and attention; Newton–Schulz included, SVDs and
  element-wise work not);
- **fixed costs**, from one short end-to-end ``tailmem run STUDY --preset cpu train.steps=4
  train.warmup_steps=0`` in a fresh process (same runs, arms, seeds, figures): *start + data*
  (launch to the first run's ``spec.json``: interpreter and imports, data set or corpus build,
  plan, worker start), *outputs* (last run's ``result.json`` to ``COMPLETE``: tables, figures,
  claims) and the per-run *setup* (a run's own seconds minus its 4 steps and its evaluations:
  model build, checkpoint, files);
- **extrapolated to the preset**: each run of the plan (its grid as declared, the middle point
  assumed to win: no grid extension) lasts setup + steps × step + evaluations × evaluation; the
  runs are scheduled in the plan's order on ``workers`` workers, first free first (as the pool
  does), which gives the training phase's wall time and the *idle* worker time in it.

The table's seconds are wall seconds of the study: train, optimiser, eval, setup and idle are
worker-seconds divided by the workers, so start + data + those + outputs = the predicted wall.
FLOP rate "busy" is the counted FLOPs per second of a worker's run time against the one-thread
fp32 matmul rate; "wall" is the same over the whole predicted wall time against that rate times
the workers. "bf16 train+opt+eval" is that part of the wall time with every step and evaluation
in bf16 autocast (measured the same way), for the defaults decision.

The assoc studies are small-matrix simulations (eigendecompositions, root finding, products of a
few hundred rows) in the parent process: their wall time is measured by running the cpu preset
end to end; their FLOPs only with ``--assoc-flops`` (under the counter, which slows them 2–11×).

    PYTHONPATH=src python benchmarks/profile_cpu.py [--studies a,b] [--assoc-flops]

About 5 minutes on the shared 2-core machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import importlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from torch.utils.flop_counter import FlopCounterMode

from step_modes import TimedOptimizer
from tailmem.cli import ScriptParser, script_main
from tailmem.experiments import get_study
from tailmem.lm.entries import EntryId
from tailmem.lm.plan import Plan, Score
from tailmem.lm.spec import RunResult, RunSpec
from tailmem.lm.subrun import RunContext
from tailmem.optim.routing import route
from tailmem.rundir import RunDir
from tailmem.runner import prepare
from tailmem.studies import Provenance
from tailmem.train import EvalHook, train_step
from tailmem.train import distributed as D
from tailmem.train.precision import autocast, matmul_gflops

LM_STUDIES = ("knowledge-qa", "ablation", "spectra", "icl-regression")
ASSOC_STUDIES = ("assoc-two-group", "assoc-scaling", "assoc-capacity")
SHORT_STEPS = 4
"""Training steps of every run of the short end-to-end run (the fixed costs)."""


@dataclass
class Kind:
    """One FFN type × arm: seconds of a step, of its optimiser part and of an evaluation (fp32
    and bf16), and their FLOPs."""

    step: dict[str, float] = field(default_factory=dict)
    opt: dict[str, float] = field(default_factory=dict)
    eval: dict[str, float] = field(default_factory=dict)
    step_flops: int = 0
    opt_flops: int = 0
    eval_flops: int = 0


class _Captured(Exception):
    """Raised by the stand-in for ``run_plan`` once a study has built its plan."""


def capture(study: str, root: Path) -> tuple[Any, Plan, RunContext]:
    """The cpu config of ``study`` and the plan and run context its ``run`` builds (its data
    built or loaded on the way), stopped before any run trains."""
    cfg = prepare(study, "cpu", [])
    record = get_study(study)
    found: dict[str, Any] = {}

    def stand_in(plan: Plan, context: RunContext, *args: Any, **kwargs: Any) -> Plan:
        found["plan"], found["context"] = plan, context
        raise _Captured

    module = importlib.import_module(record.run.__module__)  # the study's own run_plan
    with mock.patch.object(module, "run_plan", stand_in), contextlib.suppress(_Captured):
        record.run(cfg, RunDir(root), Provenance("cpu", f"profile {study}"))
    return cfg, found["plan"], found["context"]


def first_specs(plan: Plan) -> dict[EntryId, RunSpec]:
    """One spec per entry: at its stored rate, else its grid's first point (1.0 without a
    sweep), a borrowed rate taken from the spec of the entry it borrows from."""
    chosen: dict[EntryId, dict[str, float]] = {}
    specs: dict[EntryId, RunSpec] = {}
    pending = list(plan.entries)
    while pending:
        entry = next(e for e in pending if all((e.ffn, arm) in chosen for arm in e.rates.lenders))
        pending.remove(entry)
        stored = plan.stored.get(entry.id)
        point = stored.point if stored else entry.sweep.grid[0] if entry.sweep else 1.0
        lenders = {arm: chosen[entry.ffn, arm] for arm in entry.rates.lenders}
        lrs = entry.rates.at(point, lenders)
        chosen[entry.id] = lrs
        specs[entry.id] = plan.spec(entry, lrs, plan.seeds[0], plan.steps)
    return specs


def evaluate(model: torch.nn.Module, hooks: list[EvalHook], precision: str) -> None:
    """Every eval hook once, as the loop calls them (eval mode, no gradients, the precision)."""
    model.eval()
    with torch.no_grad(), autocast(torch.device("cpu"), precision):
        for hook in hooks:
            hook(1, model)
    model.train()


def measure_kind(spec: RunSpec, context: RunContext, materials: Any) -> Kind:
    """Step, optimiser and evaluation seconds (fp32, bf16) and FLOPs of one run kind."""
    kind = Kind()
    ctx = D.DistContext()
    hooks = materials.hooks(spec.model, ctx)
    data = materials.batches(spec.seed, spec.batch)
    for precision in ("fp32", "bf16"):
        torch.manual_seed(spec.seed)
        model = context.model_fn(spec.model)
        settings = {s.kind.name: s for s in spec.optimizers}
        optimizer = TimedOptimizer(route(model, spec.arm.recipe, settings), torch.device("cpu"))
        loop = dataclasses.replace(spec.loop, precision=precision)
        lrs = [float(g["lr"]) for g in optimizer.param_groups]
        steps, opts = [], []
        for step in range(4):
            before, start = optimizer.seconds, time.perf_counter()
            train_step(model, optimizer, data.batch(step, 0, 1), lrs, loop, ctx,
                       context.loss_fn)  # fmt: skip
            steps.append(time.perf_counter() - start)
            opts.append(optimizer.seconds - before)
        best = min(range(1, len(steps)), key=steps.__getitem__)
        kind.step[precision], kind.opt[precision] = steps[best], opts[best]
        start = time.perf_counter()
        evaluate(model, hooks, precision)
        kind.eval[precision] = time.perf_counter() - start
        if precision == "fp32":
            with FlopCounterMode(display=False) as counter:
                train_step(model, optimizer, data.batch(4, 0, 1), lrs, loop, ctx,
                           context.loss_fn)  # fmt: skip
            kind.step_flops = counter.get_total_flops()
            with FlopCounterMode(display=False) as counter:
                optimizer.step()
            kind.opt_flops = counter.get_total_flops()
            with FlopCounterMode(display=False) as counter:
                evaluate(model, hooks, precision)
            kind.eval_flops = counter.get_total_flops()
    return kind


def evaluations(spec: RunSpec) -> int:
    """Evaluations of a run: every ``eval_every`` steps, after the last, and the initial one."""
    every = spec.loop.eval_every
    regular = spec.steps // every + (spec.steps % every > 0) if every else 1
    return regular + spec.initial_eval


@dataclass
class Fixed:
    """Measured on the short end-to-end run: start + data, outputs, setup per run (seconds)."""

    start_data: float
    outputs: float
    setup: float
    wall: float


def short_run(study: str, out: Path, kinds: dict[EntryId, Kind], stored: bool) -> Fixed:
    """``tailmem run study --preset cpu`` with ``SHORT_STEPS`` steps per run, in a new process;
    the run kinds (when known) give each run's steps and evaluations, the rest is setup. A
    study that reads ``stored`` rates tunes its own here (``tuning.rates=sweep``): none is
    stored for runs this short."""
    overrides = [f"train.steps={SHORT_STEPS}", "train.warmup_steps=0"]
    if stored:
        overrides.append("tuning.rates=sweep")
    cmd = [sys.executable, "-m", "tailmem", "run", study, "--preset", "cpu", "--out", str(out)]
    launched = time.time()
    subprocess.run([*cmd, *overrides], check=True, capture_output=True)
    finished = time.time()
    specs = sorted(out.glob("runs/*/*/*/spec.json"), key=lambda p: p.stat().st_mtime)
    results = sorted(out.glob("runs/*/*/*/result.json"), key=lambda p: p.stat().st_mtime)
    setups = []
    for path in results:
        result = json.loads(path.read_text())
        spent = result["wall_seconds"]
        kind = kinds[result["ffn"], result["arm"]]
        spent -= result["steps"] * kind.step["fp32"] + len(result["evals"]) * kind.eval["fp32"]
        setups.append(max(spent, 0.0))
    return Fixed(
        start_data=specs[0].stat().st_mtime - launched,
        outputs=(out / "COMPLETE").stat().st_mtime - results[-1].stat().st_mtime,
        setup=statistics.median(setups),
        wall=finished - launched,
    )


def middle_wins(plan: Plan) -> Score:
    """A sweep score under which the middle of every grid wins (no grid grows): minus the log
    distance of a run's sweep point from its grid's middle."""
    entries = {entry.id: entry for entry in plan.entries}

    def score(result: RunResult) -> float:
        entry = entries[result.ffn, result.arm]
        if entry.sweep is None:
            return 0.0
        kind = entry.rates.swept[0]
        point = result.lrs[kind] / entry.rates.base.get(kind, 1.0)
        logs = sorted(math.log(p) for p in entry.sweep.grid)
        return -abs(math.log(point) - logs[len(logs) // 2])

    return score


def finished(spec: RunSpec, seconds: float) -> RunResult:
    """A stand-in result of a scheduled run."""
    return RunResult(
        digest=spec.digest, key=spec.key, arm=spec.arm.name, recipe=spec.arm.recipe,
        ffn=spec.ffn, lrs=spec.lrs, seed=spec.seed, steps=spec.steps, status="complete",
        message="", steps_done=spec.steps, final_loss=0.0, tokens=0, evals=[], final={},
        diverged=None, wall_seconds=seconds,
    )  # fmt: skip


def schedule(
    plan: Plan, seconds: Callable[[RunSpec], float], workers: int
) -> tuple[float, list[RunSpec]]:
    """The training phase's wall seconds with ``workers`` workers taking the plan's runs in the
    order it releases them, and every run scheduled (in that order). A stored rate decides its
    entry without trials, as in the study; every other grid is run, its middle winning."""
    plan = dataclasses.replace(plan, score=middle_wins(plan))
    results: dict[RunSpec, RunResult] = {}
    queue: deque[RunSpec] = deque()
    released: set[RunSpec] = set()
    running: list[tuple[float, int, RunSpec]] = []
    clock, order, done = 0.0, 0, []

    def release() -> None:
        for job in plan.ready(results):
            if job not in released:
                released.add(job)
                queue.append(job)

    release()
    while queue or running:
        while queue and len(running) < workers:
            job = queue.popleft()
            heapq.heappush(running, (clock + seconds(job), order, job))
            order += 1
        clock, _, job = heapq.heappop(running)
        done.append(job)
        results[job] = finished(job, seconds(job))
        release()
    return clock, done


@dataclass
class Row:
    """One study's line of the table."""

    study: str
    runs: int = 0
    steps: int = 0
    train_flops: float = 0.0
    opt_flops: float = 0.0
    eval_flops: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    bf16: float = 0.0
    fp32_rate: float = 0.0  # 0: not measured (an assoc study)
    bf16_rate: float = 0.0
    workers: int = 1

    @property
    def wall(self) -> float:
        return sum(self.parts.values())

    @property
    def flops(self) -> float:
        return self.train_flops + self.opt_flops + self.eval_flops


def profile_lm(study: str, tmp: Path) -> Row:
    """One LM study: its fixed costs, run kinds, and the preset extrapolated."""
    began = time.perf_counter()
    cfg, plan, context = capture(study, tmp / f"{study}-plan")
    built = time.perf_counter() - began
    materials = context.data.load(D.DistContext())
    specs = first_specs(plan)
    kinds = {key: measure_kind(spec, context, materials) for key, spec in specs.items()}
    fixed = short_run(study, tmp / f"{study}-short", kinds, bool(plan.stored))
    model = next(iter(specs.values())).model
    tokens = cfg.train.batch_size * cfg.train.seq_len
    shape = (tokens, model.d_model, model.d_ff)
    row = Row(study, workers=cfg.workers)
    row.fp32_rate = matmul_gflops(shape, torch.float32, "cpu", 0.5) * 1e9
    row.bf16_rate = matmul_gflops(shape, torch.bfloat16, "cpu", 0.5) * 1e9

    def seconds(job: RunSpec, precision: str = "fp32") -> float:
        kind = kinds[job.ffn, job.arm.name]
        return (fixed.setup + job.steps * kind.step[precision]
                + evaluations(job) * kind.eval[precision])  # fmt: skip

    makespan, jobs = schedule(plan, seconds, cfg.workers)
    parts = {"train": 0.0, "optimiser": 0.0, "eval": 0.0, "setup": 0.0}
    bf16 = 0.0
    for job in jobs:
        kind, evals = kinds[job.ffn, job.arm.name], evaluations(job)
        row.runs, row.steps = row.runs + 1, row.steps + job.steps
        row.train_flops += job.steps * (kind.step_flops - kind.opt_flops)
        row.opt_flops += job.steps * kind.opt_flops
        row.eval_flops += evals * kind.eval_flops
        parts["train"] += job.steps * (kind.step["fp32"] - kind.opt["fp32"])
        parts["optimiser"] += job.steps * kind.opt["fp32"]
        parts["eval"] += evals * kind.eval["fp32"]
        parts["setup"] += fixed.setup
        bf16 += job.steps * kind.step["bf16"] + evals * kind.eval["bf16"]
    busy = sum(parts.values())
    row.parts = {"start+data": fixed.start_data}
    row.parts |= {name: value / cfg.workers for name, value in parts.items()}
    row.parts["idle"] = makespan - busy / cfg.workers
    row.parts["outputs"] = fixed.outputs
    row.bf16 = bf16 / cfg.workers
    print(f"  {study}: config, data and plan in this process {built:.1f} s (a corpus built here "
          f"is cached for the short run); short run {fixed.wall:.0f} s; {len(kinds)} run kinds; "
          f"per-run setup {fixed.setup:.2f} s", flush=True)  # fmt: skip
    for (ffn, arm), kind in kinds.items():
        print(
            f"    {ffn}/{arm}: step {kind.step['fp32'] * 1e3:.0f} ms (optimiser "
            f"{kind.opt['fp32'] * 1e3:.0f} ms; bf16 {kind.step['bf16'] * 1e3:.0f} ms), eval "
            f"{kind.eval['fp32']:.2f} s (bf16 {kind.eval['bf16']:.2f} s), "
            f"{kind.step_flops / 1e9:.2f} GFLOP/step of which optimiser "
            f"{kind.opt_flops / 1e9:.2f}, eval {kind.eval_flops / 1e9:.2f} GFLOP",
            flush=True,
        )
    return row


def profile_assoc(study: str, tmp: Path, count: bool) -> Row:
    """An assoc study: the cpu preset end to end in a new process (its wall time); with
    ``count``, once more in this process under the FLOP counter."""
    row = Row(study)
    cmd = [sys.executable, "-m", "tailmem", "run", study, "--preset", "cpu", "--out",
           str(tmp / study)]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    row.parts = {"whole run": time.perf_counter() - start}
    if count:
        from tailmem.runner import run_experiment

        with FlopCounterMode(display=False) as counter:
            run_experiment(study, "cpu", out=tmp / f"{study}-counted")
        row.train_flops = counter.get_total_flops()
    return row


@contextlib.contextmanager
def fresh_cache(tmp: Path) -> Iterator[None]:
    """A fresh corpus / probe cache for this process and its children (a first reproduce)."""
    before = os.environ.get("TAILMEM_CACHE")
    os.environ["TAILMEM_CACHE"] = str(tmp / "cache")
    try:
        yield
    finally:
        if before is None:
            del os.environ["TAILMEM_CACHE"]
        else:
            os.environ["TAILMEM_CACHE"] = before


def table(rows: list[Row], fp32_rate: float) -> list[str]:
    """The profile as a Markdown table."""
    names = ["start+data", "train", "optimiser", "eval", "setup", "idle", "outputs"]
    head = ("| study | runs | steps | TFLOP train / optimiser / eval | wall (min) | "
            + " | ".join(f"{n} s" for n in names)
            + " | FLOP rate / fp32 matmul: busy, wall | bf16 train+opt+eval s |")  # fmt: skip
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        if "whole run" in row.parts:
            flops = f"{row.train_flops / 1e12:.3f} (matmul, counted)" if row.train_flops else "—"
            rate = "—"
            if row.train_flops:  # the run may use both cores; the rate is one thread's
                rate = f"{row.train_flops / row.wall / fp32_rate:.3f} (wall, vs one thread)"
            cells = ["—"] * len(names)
            lines.append(f"| {row.study} | — | — | {flops} | {row.wall / 60:.1f} (measured) | "
                         + " | ".join(cells) + f" | {rate} | — |")  # fmt: skip
            continue
        busy = sum(row.parts[n] for n in ("train", "optimiser", "eval", "setup")) * row.workers
        rates = (f"{row.flops / busy / row.fp32_rate:.3f}, "
                 f"{row.flops / row.wall / (row.fp32_rate * row.workers):.3f}")  # fmt: skip
        lines.append(
            f"| {row.study} | {row.runs} | {row.steps} | {row.train_flops / 1e12:.1f} / "
            f"{row.opt_flops / 1e12:.1f} / {row.eval_flops / 1e12:.1f} | {row.wall / 60:.1f} | "
            + " | ".join(f"{row.parts[n]:.0f}" for n in names)
            + f" | {rates} | {row.bf16:.0f} |"
        )
    return lines


def main() -> None:
    parser = ScriptParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", default=",".join((*ASSOC_STUDIES, *LM_STUDIES)))
    parser.add_argument("--assoc-flops", action="store_true",
                        help="also count the assoc studies' FLOPs (minutes more)")  # fmt: skip
    args = parser.parse_args()
    torch.set_num_threads(1)
    studies = [s for s in args.studies.split(",") if s]
    load = os.getloadavg()
    print(f"{os.cpu_count()} cores, torch {torch.__version__}, one thread per process; load "
          f"average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)  # fmt: skip
    start = time.perf_counter()
    fp32 = matmul_gflops((1024, 256, 1024), torch.float32, "cpu", 0.5) * 1e9
    bf16 = matmul_gflops((1024, 256, 1024), torch.bfloat16, "cpu", 0.5) * 1e9
    print(f"matmul 1024x256x1024, one thread: fp32 {fp32 / 1e9:.0f} GFLOP/s, bf16 "
          f"{bf16 / 1e9:.0f} GFLOP/s ({bf16 / fp32:.2f}x)", flush=True)  # fmt: skip
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, tailmem.cli"], check=True)
    print(f"process start (interpreter, torch, tailmem.cli): {time.perf_counter() - started:.1f} s")
    rows = []
    with tempfile.TemporaryDirectory() as name, fresh_cache(Path(name)):
        tmp = Path(name)
        for study in studies:
            if study in ASSOC_STUDIES:
                rows.append(profile_assoc(study, tmp, args.assoc_flops))
            else:
                rows.append(profile_lm(study, tmp))
            print(f"  {study} profiled ({time.perf_counter() - start:.0f} s so far)", flush=True)
    for row in rows:
        if row.fp32_rate:
            print(f"{row.study}: matmul at its FFN shape, one thread: fp32 "
                  f"{row.fp32_rate / 1e9:.0f}, bf16 {row.bf16_rate / 1e9:.0f} GFLOP/s")  # fmt: skip
    print("\n" + "\n".join(table(rows, fp32)))
    total = sum(row.wall for row in rows)
    print(f"\npredicted reproduce --preset cpu over these studies: {total / 60:.1f} min; "
          f"profile took {(time.perf_counter() - start) / 60:.1f} min")  # fmt: skip
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: this process {own:.0f} MiB, largest child {children:.0f} MiB")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/profile_cpu.py"))
