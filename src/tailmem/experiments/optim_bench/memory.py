"""The benchmark's one-layer associative memory: which optimisers learn the rare facts early.

Paper A's memory (PAPERS.md A4, paper B) trained on its exact population loss from ``W = 0``:
``K`` facts with Zipf frequencies ``p_k ∝ k^(−exponent)`` in log-spaced rank groups, keys and
objects embedded at random in ``d < K`` dimensions (:func:`tailmem.assoc.gaussian`). With
orthogonal embeddings every adaptive family learns every group at once (the directions are then
all sign- or polar-like), so the benchmark uses ``d < K``, where facts interfere and the families
can differ. Each optimiser is the registry's, with the hyper-parameters of the LM part, stepped
as a direction map (:mod:`tailmem.assoc.optimizers`): only the step size is the lab's.

Step sizes are matched on the head, not tuned for the end point: in this loss any optimiser
learns faster with a larger step (softmax cross-entropy from ``W = 0`` saturates instead of
diverging), so "the best step" would sit at the end of any grid. Instead each optimiser's step
size is the one of the grid ``lrs`` at which its most frequent group halves its loss closest
to ``head_steps`` steps (on the first embedding draw); at that common pace on the head, how
much later each rarer group halves its loss is what the optimiser does for the tail. Measured
per draw (``seeds``) and frequency group: the first step at which the group's loss is at most
half its initial loss ("time to learn"; censored at ``steps`` when it never gets there), and
the one-step balance ``ϱ^ε`` (paper A Thm 5.3) of the optimiser's first update — the
worst-learned fact's probability at the first step size where some fact reaches ``1 − ε``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from tailmem.assoc import build_memory, gaussian, lr_schedule, one_step_balance, train, zipf
from tailmem.assoc.dynamics import first_direction
from tailmem.assoc.optimizers import OptimizerSpec
from tailmem.errors import ConfigError
from tailmem.optim.registry import OptimizerSetting
from tailmem.typecheck import check_range


@dataclass
class MemorySection:
    """The memory: ``facts`` K, embedding dimension ``dim`` (< K), Zipf ``exponent``,
    ``groups`` log-spaced rank groups, ``steps`` per run, the step-size grid ``lrs``, the head
    pace ``head_steps`` they are matched to (module docstring), ``seeds`` embedding draws and
    the balance level ``eps``."""

    facts: int = 48
    dim: int = 32
    exponent: float = 1.0
    groups: int = 4
    steps: int = 200
    lrs: list[float] = field(default_factory=lambda: [10 ** (k / 4) for k in range(-16, 9)])
    head_steps: int = 10
    seeds: int = 3
    eps: float = 0.1

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


def head_miss(section: MemorySection, spec: OptimizerSpec, seed: int, lr: float) -> float:
    """How far (in log steps) the most frequent group's time to halve its loss is from
    ``head_steps`` at step size ``lr`` (inf: it never halves within ``4·head_steps``, or the
    run is not finite)."""
    trajectory = _run(section, spec, seed, lr, 4 * section.head_steps)
    if not bool(torch.isfinite(trajectory.loss).all()):
        return math.inf
    head = half_loss_times(trajectory.group_loss[:, :1])[0]
    return math.inf if head is None else abs(math.log(max(head, 1) / section.head_steps))


def half_loss_times(group_loss: torch.Tensor) -> tuple[int | None, ...]:
    """Per group (columns of ``group_loss``, ``(steps + 1, groups)``), the first step whose loss
    is at most half the loss at step 0 (None: never)."""
    out = []
    for g in range(group_loss.shape[1]):
        hit = (group_loss[:, g] <= 0.5 * group_loss[0, g]).nonzero()
        out.append(int(hit[0]) if len(hit) else None)
    return tuple(out)


def balance(section: MemorySection, spec: OptimizerSpec, seed: int) -> float | None:
    """ϱ^ε of the optimiser's first update on draw ``seed`` (None where undefined)."""
    spectrum = zipf(section.facts, section.exponent, n_buckets=section.groups)
    memory = build_memory(
        spectrum, gaussian(section.facts, section.dim, seed), spec, backend="dense"
    )
    rho = one_step_balance(memory, first_direction(memory, spec), section.eps).rho
    return float(rho) if math.isfinite(rho) else None


def run_memory(
    section: MemorySection, settings: Mapping[str, OptimizerSetting], seed: int = 0
) -> dict[str, Any]:
    """Every optimiser of ``settings`` on the memory (module docstring): ``sweeps`` (per
    optimiser, each step size's head miss on the first draw; None: the head never halved),
    ``chosen`` (its step size: the smallest miss, the smaller step on a tie), ``edges`` (those
    chosen at an end of the grid) and ``runs``."""
    sweeps: dict[str, list[dict[str, Any]]] = {}
    chosen: dict[str, float] = {}
    runs: list[MemoryRun] = []
    for name, setting in settings.items():
        spec = _spec(name, setting)
        scored = [(lr, head_miss(section, spec, seed, lr)) for lr in section.lrs]
        sweeps[name] = [{"lr": lr, "head_miss": s if math.isfinite(s) else None}
                        for lr, s in scored]  # fmt: skip
        chosen[name] = lr = min(scored, key=lambda item: (item[1], item[0]))[0]
        for draw in range(seed, seed + section.seeds):
            trajectory = _run(section, _spec(name, setting), draw, lr, section.steps)
            times = half_loss_times(trajectory.group_loss)
            rho = balance(section, spec, draw)
            runs.append(MemoryRun(name, draw, lr, float(trajectory.loss[-1]), times, rho))
    ends = (min(section.lrs), max(section.lrs))
    edges = [name for name, lr in chosen.items() if lr in ends]
    return {"sweeps": sweeps, "chosen": chosen, "edges": edges, "runs": runs}


def tail_head_ratio(run: MemoryRun, steps: int) -> tuple[float, bool]:
    """``time(rarest group) / time(most frequent group)`` and whether it is a lower bound (the
    rarest group not learned within the run: its time counts as ``steps``)."""
    head, tail = run.times[0], run.times[-1]
    if head is None:
        return math.nan, False
    return (steps if tail is None else tail) / max(head, 1), tail is None


def memory_rows(result: Mapping[str, Any], steps: int) -> list[dict[str, Any]]:
    """One row per optimiser and draw: chosen step size, final loss, time to learn each group
    (empty: not within the run), the tail/head ratio and ϱ^ε."""
    rows = []
    for run in result["runs"]:
        ratio, bound = tail_head_ratio(run, steps)
        rows.append(
            {
                "optimizer": run.optimizer,
                "seed": run.seed,
                "lr": run.lr,
                "final_loss": run.final_loss,
                **{f"steps_group{g}": t for g, t in enumerate(run.times)},
                "tail_head_ratio": None if math.isnan(ratio) else round(ratio, 4),
                "tail_censored": bound,
                "rho": run.rho,
            }
        )
    return rows


def per_optimizer(runs: Sequence[MemoryRun], name: str) -> list[MemoryRun]:
    return [r for r in runs if r.optimizer == name]
