"""One arm at one seed: a training run in its own sub-run directory, with one reuse rule.

A job's sub-run directory (``<study run dir>/<job.key>``) is a :func:`tailmem.train.train` run
directory (``metrics.jsonl``, ``ckpt/``) plus

- ``spec.json``: everything that determines the job's numbers and its digest;
- ``gpt_config.json``: the model config (read by ``tailmem diagnose``);
- ``initial.json``: the eval hooks on the freshly initialised model (studies that want step 0);
- ``result.json``: written last — status ("complete" or "diverged"), evaluation history, final
  numbers; a diverged run also holds ``diverged`` (the update, loss, gradient norm, message and
  the diagnostics file). Strict JSON: a non-finite number is written as null beside a
  ``<key>_status`` naming it (:func:`tailmem.rundir.strict_json`).

The rule: a sub-run whose ``spec.json`` digest differs from the job's is deleted and trained
again; one with ``result.json`` is reused as is (a diverged run too: divergence is a result,
and training it again would diverge at the same update); anything else trains, resuming from
its newest checkpoint (the loop replays the identical batches). Checkpoints record the job's key
and digest, and one that records another (copied in from another sub-run) or none (written by
an older tailmem) is refused with a :class:`~tailmem.errors.CheckpointError` naming it, never
resumed; deleting the sub-run trains it again. Under ``torchrun`` every rank calls
:func:`run_job` with the same job; only rank 0 writes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from tailmem.lm.arms import Arm
from tailmem.lm.config import ModelSection, OptimSection, TrainSection
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.models.gpt_io import write_gpt_config
from tailmem.optim.routing import build_optimizer
from tailmem.rundir import atomic_write_text, config_digest, strict_json
from tailmem.train import (
    BatchSource,
    EvalHook,
    LossFn,
    TrainResult,
    describe_scalars,
    read_metrics,
    seed_everything,
    token_loss_sum,
    train,
)
from tailmem.train import distributed as D
from tailmem.train.state import COMPLETE, DIVERGED

REUSED = "reused"
"""Key :func:`run_job` adds (True) to a result it found complete on disk (not stored)."""

StepSink = Callable[[int], None]
"""Told the number of updates trained, as they happen (progress across processes)."""


@dataclass(frozen=True)
class Job:
    """One training run: arm, FFN type, learning rate per optimiser kind, seed and length."""

    arm: Arm
    ffn: str
    lrs: tuple[tuple[str, float], ...]
    seed: int
    steps: int

    @property
    def lr(self) -> dict[str, float]:
        return dict(self.lrs)

    @property
    def key(self) -> str:
        """The sub-run folder, relative to the study's run directory: readable learning rates
        (4 significant digits) plus, when a rate needs more digits than that, a short hash of
        their exact values, so two rates never share a folder."""
        lrs = "-".join(f"{kind}{lr:.4g}" for kind, lr in self.lrs)
        if any(float(f"{lr:.4g}") != lr for _, lr in self.lrs):
            exact = ",".join(f"{kind}={lr!r}" for kind, lr in self.lrs)
            lrs += "-" + hashlib.sha256(exact.encode()).hexdigest()[:8]
        return f"runs/{self.ffn}/{self.arm.name}/{lrs}-seed{self.seed}-steps{self.steps}"

    @property
    def label(self) -> str:
        """How printed lines name the run: arm, learning rates and seed."""
        lrs = " ".join(f"{kind}={lr:.3g}" for kind, lr in self.lrs)
        return f"{self.ffn}/{self.arm.name} {lrs} seed={self.seed}"

    @staticmethod
    def make(arm: Arm, ffn: str, lrs: Mapping[str, float], seed: int, steps: int) -> Job:
        """A job with the learning rates of the kinds ``arm`` uses, in a fixed order."""
        return Job(arm, ffn, tuple((k, float(lrs[k])) for k in arm.kinds), seed, steps)


class Materials(Protocol):
    """A study's data, loaded in one process: batches, metrics and loss of its runs."""

    vocab_size: int
    identity: dict[str, Any]
    """What determines the numbers (enters every sub-run's digest)."""

    def batches(self, seed: int, train: TrainSection) -> BatchSource: ...
    def hooks(self, model_cfg: GPTConfig, ctx: D.DistContext) -> list[EvalHook]: ...


class DataSpec(Protocol):
    """A picklable description of a study's data (sent to pool workers)."""

    def load(self, ctx: D.DistContext) -> Materials: ...


@dataclass(frozen=True)
class Shared:
    """What every job of one study shares; picklable (pool workers receive it).

    ``initial_eval``: evaluate the freshly initialised model too (step 0 of the history).
    ``loss_fn`` and ``describe`` must be module-level functions (picklable). ``model_fn`` builds
    the trained module from the model config (default the GPT itself; a study whose data are not
    tokens wraps the GPT's blocks, e.g. :class:`tailmem.models.icl.ICLRegressor`); picklable
    too, and what it adds to the model must enter the data's ``identity``.
    """

    root: str
    model: ModelSection
    train: TrainSection
    optim: OptimSection
    data: DataSpec
    initial_eval: bool = False
    loss_fn: LossFn = token_loss_sum
    describe: Callable[[Mapping[str, Any]], str] = describe_scalars
    show_progress: bool = True
    model_fn: Callable[[GPTConfig], nn.Module] = GPT

    def path(self, job: Job) -> Path:
        return Path(self.root) / job.key


def _json_text(obj: Any) -> str:
    """Strict JSON (a diverged run's NaN becomes null with a ``<key>_status``)."""
    return strict_json(obj, indent=1)


def job_spec(job: Job, shared: Shared, materials: Materials, model_cfg: GPTConfig) -> dict:
    """Everything that determines the numbers of ``job`` (written to ``spec.json``)."""
    tcfg = shared.train.loop_config(job.steps, job.seed)
    return {
        "arm": dataclasses.asdict(job.arm),
        "ffn": job.ffn,
        "lrs": job.lr,
        "seed": job.seed,
        "steps": job.steps,
        "hparams": shared.optim.hparams(job.arm.recipe, job.lr),
        "model": dataclasses.asdict(model_cfg),
        "train": {k: v for k, v in dataclasses.asdict(tcfg).items() if k != "progress"},
        "batch": [shared.train.batch_size, shared.train.seq_len, shared.train.eval_batch_size],
        "data": materials.identity,
        "initial_eval": shared.initial_eval,
    }


def run_job(job: Job, shared: Shared, on_steps: StepSink | None = None) -> dict[str, Any]:
    """Train ``job`` in its sub-run directory (or reuse / resume it); returns its result.

    The result holds ``status`` ("complete", or "diverged"), ``evals`` (one dict per
    evaluation with ``step`` and every hook's numbers), ``final`` (the last evaluation of a
    complete run, else empty), ``final_loss``, ``tokens``, ``wall_seconds`` (the run's
    training time when it was trained), ``diverged`` (see :func:`divergence`; None for a
    complete run) — and ``reused: True`` when it was found complete on disk. Every rank returns
    the same result.
    """
    ctx, device = D.init_distributed(shared.train.device)
    materials = shared.data.load(ctx)
    model_cfg = shared.model.build(materials.vocab_size, job.ffn, shared.train.seq_len)
    spec = job_spec(job, shared, materials, model_cfg)
    digest = config_digest("lm-subrun", spec)
    sub = shared.path(job)
    reused = _reusable(sub, digest) if ctx.is_main else None
    reused = D.broadcast_object(reused, ctx)
    if reused is not None:
        return {**reused, REUSED: True}
    D.barrier(ctx)
    started = time.perf_counter()
    seed_everything(job.seed)
    model = shared.model_fn(model_cfg)
    if ctx.is_main:
        sub.mkdir(parents=True, exist_ok=True)
        atomic_write_text(sub / "spec.json", _json_text({"digest": digest, **spec}))
        write_gpt_config(sub, model_cfg)
    D.barrier(ctx)
    hooks = materials.hooks(model_cfg, ctx)
    initial = _initial_eval(sub, model, hooks, device, ctx) if shared.initial_eval else None
    hparams = shared.optim.hparams(job.arm.recipe, job.lr)
    optimizer = build_optimizer(model, job.arm.recipe, **hparams)
    outcome = train(
        model,
        optimizer,
        materials.batches(job.seed, shared.train),
        shared.train.loop_config(job.steps, job.seed, progress=shared.show_progress),
        sub,
        eval_hooks=hooks,
        loss_fn=shared.loss_fn,
        on_step=on_steps,
        label=job.label,
        describe=shared.describe,
        identity=f"{job.key} spec {digest}",
    )
    rows = read_metrics(sub / "metrics.jsonl")
    evals = [{"step": 0, **initial}] if initial is not None else []
    evals += [{"step": r["step"], **r["eval"]} for r in rows if "eval" in r]
    result = {
        "digest": digest,
        "key": job.key,
        "arm": job.arm.name,
        "recipe": job.arm.recipe,
        "ffn": job.ffn,
        "lrs": job.lr,
        "seed": job.seed,
        "steps": job.steps,
        "status": outcome.status,
        "message": outcome.message,
        "steps_done": outcome.step,
        "final_loss": outcome.loss,
        "tokens": rows[-1]["tokens"] if rows else 0,
        "evals": evals,
        "final": evals[-1] if outcome.ok and evals else {},
        "diverged": None if outcome.ok else divergence(outcome),
        "wall_seconds": round(time.perf_counter() - started, 3),
    }
    if ctx.is_main:
        atomic_write_text(sub / "result.json", _json_text(result))
    return D.broadcast_object(json.loads(_json_text(result)) if ctx.is_main else None, ctx)


def divergence(outcome: TrainResult) -> dict[str, Any]:
    """What a diverged run's result records: the update (1-based) whose loss or gradient norm
    was non-finite, that loss, the message and the diagnostics file of the sub-run."""
    return {
        "step": outcome.step + 1,
        "loss": outcome.loss,
        "message": outcome.message,
        "diagnostics": "nan_diagnostics.json",
    }


def diverged_runs(results: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The diverged runs among ``results`` (sub-run results), one entry each: ``arm``, ``ffn``,
    ``seed``, ``lrs``, ``key``, ``step`` (the update that diverged) and ``reason`` — the phrase a
    claim that needs this arm reports as its "not measured" reason, e.g.
    ``"arm full diverged at step 7"``. Studies list these in ``results.json``; claim code calls
    it with the runs an arm's claim depends on."""
    out = []
    for result in results:
        if result.get("status") != DIVERGED:
            continue
        step = (result.get("diverged") or {}).get("step", result.get("steps_done"))
        out.append(
            {
                **{k: result.get(k) for k in ("arm", "ffn", "seed", "lrs", "key")},
                "step": step,
                "reason": f"arm {result.get('arm')} diverged at step {step}",
            }
        )
    return out


def _reusable(sub: Path, digest: str) -> dict[str, Any] | None:
    """The stored result of ``sub`` if its digest matches and it is complete or diverged; a
    stale sub-run is deleted."""
    try:
        stored = json.loads((sub / "spec.json").read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError):
        stored = {}
    if stored.get("digest") != digest:
        shutil.rmtree(sub)
        return None
    try:
        result = json.loads((sub / "result.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(result, dict) or result.get("status") not in (COMPLETE, DIVERGED):
        return None  # not a result, or an older one (status "failed"): resume and redo it
    return result


def _initial_eval(
    sub: Path, model: nn.Module, hooks: Sequence[EvalHook], device: torch.device, ctx: D.DistContext
) -> dict[str, Any]:
    """Eval hooks on the freshly initialised model (cached in ``initial.json``)."""
    path = sub / "initial.json"
    cached = json.loads(path.read_text()) if ctx.is_main and path.is_file() else None
    cached = D.broadcast_object(cached, ctx)
    if cached is not None:
        return cached
    model.to(device).eval()
    merged: dict[str, Any] = {}
    with torch.no_grad():
        for hook in hooks:
            merged.update(hook(0, model))
    model.train()
    if ctx.is_main:
        atomic_write_text(path, _json_text(merged))
    return merged


def drop_checkpoints(root: str | Path, results: Sequence[Mapping[str, Any]]) -> None:
    """Delete the ``ckpt/`` folder of every sub-run in ``results`` (each has ``key``)."""
    for result in results:
        shutil.rmtree(Path(root) / result["key"] / "ckpt", ignore_errors=True)
