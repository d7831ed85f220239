"""The benchmark's one-layer associative memory: which optimisers learn the rare facts early.

Paper A's memory (PAPERS.md A4, paper B) trained on its exact population loss from ``W = 0``:
``K`` facts with Zipf frequencies ``p_k ∝ k^(−exponent)`` in log-spaced rank groups, keys and
objects embedded at random in ``d < K`` dimensions (:func:`tailmem.assoc.gaussian`). With
orthogonal embeddings every adaptive family learns every group at once (the directions are then
all sign- or polar-like), so the benchmark uses ``d < K``, where facts interfere and the families
can differ. Each optimiser is the registry's, with the hyper-parameters of the LM part, stepped
as a direction map (:mod:`tailmem.assoc.optimizers`): only the step size is the lab's.

Step sizes are matched on the head, not tuned for the end point. Kunstner et al.'s own protocol
(each optimiser tuned for the total loss at a fixed budget) has no interior optimum here: the
memory is separable, so any optimiser ends lower with a larger step (softmax cross-entropy from
``W = 0`` saturates instead of diverging; at 200 steps on the cpu memory the best of the 25-point
grid 1e-4…100 is its top end for SGD+M, the point below it for Adam, and for Muon one of the
several top points whose loss is already 0 in float64), and every tuned step would sit at the
grid edge. Instead each optimiser's step size is the one of the grid ``lrs`` at
which its most frequent group halves its loss closest to a *pace* of P steps; at that common pace
on the head, how much later each rarer group halves its loss is what the optimiser does for the
tail. The pace is a free choice of the protocol, so the claims' verdicts must hold at every pace
of ``paces`` (3 to 40 steps by default, an order of magnitude); ``head_steps`` is the pace the
leaderboard shows. A run at pace P lasts ``steps · P / head_steps`` steps (the same horizon in
units of the pace). The step is matched on a tuning draw (``seed + seeds``) disjoint from the
``seeds`` evaluation draws ``seed … seed + seeds − 1``, so no evaluation draw chose its own step.

Measured per evaluation draw and frequency group: the first step at which the group's loss is at
most half its initial loss ("time to learn"; censored at the run's length when it never gets
there), and the one-step balance ``ϱ^ε`` (paper A Thm 5.3) of the optimiser's first update — the
worst-learned fact's probability at the first step size where some fact reaches ``1 − ε``.
:func:`bench_memory` gives the claims (:mod:`tailmem.claims.related`) every pace's times.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from tailmem.assoc import build_memory, gaussian, lr_schedule, one_step_balance, train, zipf
from tailmem.assoc.dynamics import first_direction
from tailmem.assoc.optimizers import OptimizerSpec
from tailmem.claims.related import BenchMemory, MemoryPace
from tailmem.columns import column
from tailmem.errors import ConfigError
from tailmem.experiments.assoc_scaling import half_loss_times
from tailmem.optim.registry import OptimizerSetting
from tailmem.typecheck import check_range


@dataclass(frozen=True)
class MemorySection:
    """The memory: ``facts`` K, embedding dimension ``dim`` (< K), Zipf ``exponent``,
    ``groups`` log-spaced rank groups, ``steps`` per run at the leaderboard's head pace
    ``head_steps``, the step-size grid ``lrs``, the head ``paces`` the claims' verdicts must hold
    across (module docstring), ``seeds`` evaluation draws and the balance level ``eps``.

    Eight draws by default: at pace 3 a time to learn is 3-4 steps, so one step (the floor of a
    draw's SD) is a third of it, and showing a log time ratio within ln 1.5 of 0
    (``vasudeva.spectral_gd``) then takes at least 7 draws."""

    facts: int = 48
    dim: int = 32
    exponent: float = 1.0
    groups: int = 4
    steps: int = 200
    lrs: list[float] = field(default_factory=lambda: [10 ** (k / 4) for k in range(-16, 9)])
    head_steps: int = 10
    paces: list[int] = field(default_factory=lambda: [3, 10, 40])
    seeds: int = 8
    eps: float = 0.1

    def run_steps(self, pace: int) -> int:
        """The length of a run at head pace ``pace``: ``steps`` in units of ``head_steps``."""
        return max(pace + 1, round(self.steps * pace / self.head_steps))

    def all_paces(self) -> list[int]:
        """The paces run: ``paces`` and the leaderboard's ``head_steps``, ascending."""
        return sorted({*self.paces, self.head_steps})

    def validate(self) -> None:
        if self.facts < 4:
            raise ConfigError(f"memory.facts: got {self.facts}; expected >= 4")
        if not 1 <= self.dim < self.facts:
            raise ConfigError(
                f"memory.dim: got {self.dim}; expected 1..facts-1 = {self.facts - 1} (with d >= K "
                "the embeddings can be orthogonal and every adaptive optimiser learns every group "
                "at once)"
            )
        check_range("memory.exponent", self.exponent, gt=0)
        check_range("memory.eps", self.eps, gt=0, lt=1)
        if not 1 <= self.head_steps < self.steps:
            raise ConfigError(
                f"memory.head_steps: got {self.head_steps}; expected 1..steps-1 = {self.steps - 1}"
            )
        for name in ("groups", "steps", "seeds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"memory.{name}: got {getattr(self, name)}; expected >= 1")
        if not self.paces or any(pace < 1 for pace in self.paces):
            raise ConfigError(f"memory.paces: got {self.paces}; expected positive step counts")
        if not self.lrs or any(not lr > 0 for lr in self.lrs):
            raise ConfigError(f"memory.lrs: got {self.lrs}; expected positive step sizes")


@dataclass(frozen=True)
class MemoryRun:
    """One optimiser on one embedding draw at its chosen step size."""

    optimizer: str
    seed: int
    lr: float
    final_loss: float
    times: tuple[int | None, ...]
    """Per group, the first step with loss ≤ half the initial loss (None: not within the run)."""
    rho: float | None
    """The one-step balance ϱ^ε of the first update (None where no step reaches 1 − ε)."""


def _spec(name: str, setting: OptimizerSetting) -> OptimizerSpec:
    return OptimizerSpec(name, setting=setting)


def _memory(section: MemorySection, spec: OptimizerSpec, seed: int) -> Any:
    """The dense memory of embedding draw ``seed``."""
    spectrum = zipf(section.facts, section.exponent, n_buckets=section.groups)
    return build_memory(spectrum, gaussian(section.facts, section.dim, seed), spec, backend="dense")


def _run(section: MemorySection, spec: OptimizerSpec, seed: int, lr: float, steps: int) -> Any:
    """The trajectory of ``steps`` steps at step size ``lr`` on draw ``seed``."""
    memory = _memory(section, spec, seed)
    return train(memory, spec, lr_schedule("constant", steps, section.facts, lr=lr))


def head_miss(
    section: MemorySection, spec: OptimizerSpec, seed: int, lr: float, pace: int
) -> float:
    """How far (in log steps) the most frequent group's time to halve its loss is from
    ``pace`` at step size ``lr`` (inf: it never halves within ``4·pace`` steps, or the run is
    not finite)."""
    trajectory = _run(section, spec, seed, lr, 4 * pace)
    if not bool(torch.isfinite(trajectory.loss).all()):
        return math.inf
    head = half_loss_times(trajectory.group_loss[:, :1])[0]
    return math.inf if head is None else abs(math.log(max(head, 1) / pace))


def balance(section: MemorySection, spec: OptimizerSpec, seed: int) -> float | None:
    """ϱ^ε of the optimiser's first update on draw ``seed`` (None where undefined)."""
    spectrum = zipf(section.facts, section.exponent, n_buckets=section.groups)
    memory = build_memory(
        spectrum, gaussian(section.facts, section.dim, seed), spec, backend="dense"
    )
    rho = one_step_balance(memory, first_direction(memory, spec), section.eps).rho
    return float(rho) if math.isfinite(rho) else None


@dataclass(frozen=True)
class SweepPoint:
    """One step size of an optimiser's sweep at one pace (a row of ``memory_sweep.csv``)."""

    optimizer: str = column("the optimiser")
    lr: float = column("the step size")
    head_miss: float | None = column(
        "how far (in log steps) the most frequent group's time to halve its loss is from the "
        "pace, on the tuning draw (empty: it never halved)"
    )


@dataclass(frozen=True)
class PaceResult:
    """Every optimiser at one head pace: its ``pace``, run length ``steps``, the ``sweep`` (each
    optimiser's step sizes, in the order of the grid), each optimiser's ``chosen`` step size
    (the smallest miss, the smaller step on a tie), the optimisers whose choice is an end of the
    grid (``edges``) and the ``runs`` (one per optimiser and evaluation draw)."""

    pace: int
    steps: int
    sweep: tuple[SweepPoint, ...]
    chosen: Mapping[str, float]
    edges: tuple[str, ...]
    runs: tuple[MemoryRun, ...]


@dataclass(frozen=True)
class MemoryResult:
    """The memory at every pace (ascending), the evaluation ``draws``, the ``tuning_draw`` and
    the leaderboard's pace ``head_steps`` (:attr:`board`)."""

    paces: tuple[PaceResult, ...]
    draws: tuple[int, ...]
    tuning_draw: int
    head_steps: int

    @property
    def board(self) -> PaceResult:
        """The pace the leaderboard shows."""
        (found,) = [p for p in self.paces if p.pace == self.head_steps]
        return found


def run_memory(
    section: MemorySection, settings: Mapping[str, OptimizerSetting], seed: int = 0
) -> MemoryResult:
    """Every optimiser of ``settings`` on the memory at every pace (module docstring)."""
    draws = tuple(range(seed, seed + section.seeds))
    tuning = seed + section.seeds
    specs = {name: _spec(name, setting) for name, setting in settings.items()}
    rhos = {(name, d): balance(section, spec, d) for name, spec in specs.items() for d in draws}
    ends = (min(section.lrs), max(section.lrs))
    paces = []
    for pace in section.all_paces():
        steps = section.run_steps(pace)
        sweep: list[SweepPoint] = []
        chosen: dict[str, float] = {}
        runs: list[MemoryRun] = []
        for name, spec in specs.items():
            scored = [(lr, head_miss(section, spec, tuning, lr, pace)) for lr in section.lrs]
            sweep += [SweepPoint(name, lr, s if math.isfinite(s) else None) for lr, s in scored]
            chosen[name] = lr = min(scored, key=lambda item: (item[1], item[0]))[0]
            for draw in draws:
                trajectory = _run(section, spec, draw, lr, steps)
                times = tuple(half_loss_times(trajectory.group_loss))
                loss = float(trajectory.loss[-1])
                runs.append(MemoryRun(name, draw, lr, loss, times, rhos[name, draw]))
        edges = tuple(name for name, lr in chosen.items() if lr in ends)
        paces.append(PaceResult(pace, steps, tuple(sweep), chosen, edges, tuple(runs)))
    return MemoryResult(tuple(paces), draws, tuning, section.head_steps)


def bench_memory(result: MemoryResult) -> BenchMemory:
    """The claims' inputs (:class:`~tailmem.claims.related.BenchMemory`) from a
    :func:`run_memory` result: per pace, each optimiser's times per evaluation draw and the
    optimisers whose matched step is an end of the grid."""
    paces = []
    for entry in result.paces:
        times: dict[str, list[tuple[int | None, ...]]] = {}
        for run in entry.runs:
            times.setdefault(run.optimizer, []).append(run.times)
        paces.append(MemoryPace(pace=entry.pace, steps=entry.steps, times=times,
                                edges=list(entry.edges)))  # fmt: skip
    return BenchMemory(seeds=list(result.draws), paces=paces)


def tail_head_ratio(run: MemoryRun, steps: int) -> tuple[float, bool]:
    """``time(rarest group) / time(most frequent group)`` and whether it is a lower bound (the
    rarest group not learned within the run: its time counts as ``steps``)."""
    head, tail = run.times[0], run.times[-1]
    if head is None:
        return math.nan, False
    return (steps if tail is None else tail) / max(head, 1), tail is None


@dataclass(frozen=True)
class MemoryRow:
    """One optimiser on one embedding draw at the leaderboard's pace (a row of
    ``memory.csv``)."""

    optimizer: str = column("the optimiser")
    seed: int = column("the embedding draw")
    lr: float = column("its step size, matched so that the most frequent group halves its loss "
                       "at about the pace")  # fmt: skip
    final_loss: float = column("the loss at the end of the run")
    times: tuple[int | None, ...] = column(
        "the first step at which the group's loss is at most half its initial loss (group 0 the "
        "most frequent; empty: not within the run)",
        each="steps_group{}",
    )
    tail_head_ratio: float | None = column(
        "the rarest group's time ÷ the most frequent group's (empty: the head not learned)"
    )
    tail_censored: bool = column("the rarest group not learned within the run: the ratio is a "
                                 "lower bound (its time counted as the run's length)")  # fmt: skip
    rho: float | None = column(
        "ϱ^ε, the one-step balance of the optimiser's first update (empty: not finite)"
    )


def memory_rows(result: MemoryResult, steps: int) -> list[MemoryRow]:
    """One row per optimiser and draw at the leaderboard's pace."""
    rows = []
    for run in result.board.runs:
        ratio, bound = tail_head_ratio(run, steps)
        shown = None if math.isnan(ratio) else round(ratio, 4)
        rows.append(MemoryRow(run.optimizer, run.seed, run.lr, run.final_loss, run.times, shown,
                              bound, run.rho))  # fmt: skip
    return rows
