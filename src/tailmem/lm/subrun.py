"""One run — a :class:`~tailmem.lm.spec.RunSpec` — trained in its own sub-run directory, with
one reuse rule.

The parent builds every run's spec (:class:`RunTemplate`); :func:`run_job` trains it from the
spec and a :class:`RunContext` alone. A run's sub-run directory (``<study run dir>/<spec.key>``)
is a :func:`tailmem.train.train` run directory (``metrics.jsonl``, ``ckpt/``) plus

- ``spec.json``: the spec's record (:meth:`~tailmem.lm.spec.RunSpec.record`) and digest;
- ``gpt_config.json``: the model config (read by ``tailmem diagnose``);
- ``initial.json``: the eval hooks on the freshly initialised model (studies that want step 0);
- ``result.json``: written last — status ("complete" or "diverged"), evaluation history, final
  numbers; a diverged run (an update with a non-finite loss or gradient norm, or a last
  evaluation with a non-finite loss: :func:`~tailmem.lm.spec.eval_divergence`) also holds
  ``diverged`` (the update, loss, gradient norm, message and the diagnostics file). Strict
  JSON: a non-finite number is written as null beside a ``<key>_status`` naming it
  (:func:`tailmem.atomic.strict_json`).

The rule: a sub-run whose ``spec.json`` digest differs from the spec's is deleted and trained
again; one with ``result.json`` is reused as is (a diverged run too: divergence is a result,
and training it again would diverge at the same update); anything else trains, resuming from
its newest checkpoint (the loop replays the identical batches). Checkpoints record the spec's key
and digest, and one that records another (copied in from another sub-run) or none (written by
an older tailmem) is refused with a :class:`~tailmem.errors.CheckpointError` naming it, never
resumed; deleting the sub-run trains it again. Under ``torchrun`` every rank calls
:func:`run_job` with the same spec; only rank 0 writes.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from tailmem.atomic import atomic_write_text, strict_json
from tailmem.lm.arms import Arm
from tailmem.lm.config import OptimSection, TrainSection
from tailmem.lm.spec import BatchShape, Divergence, RunResult, RunSpec, eval_divergence
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.models.gpt_io import write_gpt_config
from tailmem.optim.routing import route
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
from tailmem.train.precision import autocast
from tailmem.train.state import COMPLETE, DIVERGED

StepSink = Callable[[int], None]
"""Told the number of updates trained, as they happen (progress across processes)."""


class Materials(Protocol):
    """A study's data, loaded in one process: batches, metrics and loss of its runs."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def identity(self) -> dict[str, Any]:
        """What determines the numbers (enters every sub-run's digest)."""
        ...

    def batches(self, seed: int, batch: BatchShape) -> BatchSource: ...
    def hooks(self, model_cfg: GPTConfig, ctx: D.DistContext) -> list[EvalHook]: ...


class DataSpec(Protocol):
    """A picklable description of a study's data (sent to pool workers)."""

    def load(self, ctx: D.DistContext) -> Materials: ...


@dataclass(frozen=True)
class RunContext:
    """How a worker runs the specs of one study (picklable; pool workers receive it): where
    their sub-runs go (``root``), the data to load, the loss, how a log line describes an
    evaluation, whether a run shows its own progress bar, the threads of each worker and what
    module the model config builds (``model_fn``: the GPT itself, or a study's wrapper such as
    :class:`tailmem.models.icl.ICLRegressor`; what it adds must enter the data's identity).
    ``loss_fn``, ``describe`` and ``model_fn`` must be module-level (picklable)."""

    root: str
    data: DataSpec
    loss_fn: LossFn = token_loss_sum
    describe: Callable[[Mapping[str, Any]], str] = describe_scalars
    show_progress: bool = True
    threads: int | None = 1
    model_fn: Callable[[GPTConfig], nn.Module] = GPT

    def path(self, spec: RunSpec) -> Path:
        return Path(self.root) / spec.key


@dataclass(frozen=True)
class RunTemplate:
    """What every run of one study shares, resolved in the parent: the model config of each
    FFN type, the ``train`` and ``optim`` sections, the data's identity and whether runs are
    evaluated at step 0. :meth:`spec` makes the :class:`~tailmem.lm.spec.RunSpec` of a run."""

    models: Mapping[str, GPTConfig]
    train: TrainSection
    optim: OptimSection
    data: Mapping[str, Any]
    initial_eval: bool = False

    def spec(self, arm: Arm, ffn: str, lrs: Mapping[str, float], seed: int, steps: int) -> RunSpec:
        """The run of ``arm`` on the ``ffn`` model at learning rates ``lrs`` (one per kind of
        the arm), ``seed`` and ``steps``."""
        train = self.train
        return RunSpec(
            arm=arm,
            ffn=ffn,
            seed=seed,
            steps=steps,
            model=self.models[ffn],
            loop=train.loop_config(steps, seed, resolve=True),
            batch=BatchShape(train.batch_size, train.seq_len, train.eval_batch_size),
            data=dict(self.data),
            optimizers=tuple(self.optim[kind].at(float(lrs[kind])) for kind in arm.kinds),
            initial_eval=self.initial_eval,
        )


def template(
    materials: Materials,
    model: Any,
    train: TrainSection,
    optim: OptimSection,
    ffns: Sequence[str],
    initial_eval: bool = False,
) -> RunTemplate:
    """The :class:`RunTemplate` of a study whose data are ``materials`` (loaded in the parent)
    and whose ``model`` section (:class:`~tailmem.lm.config.ModelSection`) builds each FFN
    type's GPT."""
    models = {ffn: model.build(materials.vocab_size, ffn, train.seq_len) for ffn in ffns}
    return RunTemplate(models, train, optim, materials.identity, initial_eval)


def _json_text(obj: Any) -> str:
    """Strict JSON (a diverged run's NaN becomes null with a ``<key>_status``)."""
    return strict_json(obj, indent=1)


def run_job(spec: RunSpec, context: RunContext, on_steps: StepSink | None = None) -> RunResult:
    """Train ``spec`` in its sub-run directory (or reuse / resume it); returns its result.

    The run reads nothing but ``spec`` and ``context``: its data are checked against the
    identity the spec records. Every rank returns the same result; ``reused`` is set when it
    was found complete (or diverged) on disk.
    """
    ctx, device = D.init_distributed(spec.loop.device)
    materials = context.data.load(ctx)
    if materials.identity != dict(spec.data):
        raise RuntimeError(f"run {spec.label}: the data loaded are not the data its spec names")
    sub = context.path(spec)
    reused = _reusable(sub, spec.digest) if ctx.is_main else None
    reused = D.broadcast_object(reused, ctx)
    if reused is not None:
        return RunResult.from_json(reused, reused=True)
    D.barrier(ctx)
    started = time.perf_counter()
    seed_everything(spec.seed)
    model = context.model_fn(spec.model)
    if ctx.is_main:
        sub.mkdir(parents=True, exist_ok=True)
        atomic_write_text(sub / "spec.json", _json_text({"digest": spec.digest, **spec.record()}))
        write_gpt_config(sub, spec.model)
    D.barrier(ctx)
    hooks = materials.hooks(spec.model, ctx)
    initial = None
    if spec.initial_eval:
        initial = _initial_eval(sub, model, hooks, device, spec.loop.precision, ctx)
    settings = {setting.kind.name: setting for setting in spec.optimizers}
    optimizer = route(model, spec.arm.recipe, settings)
    outcome = train(
        model,
        optimizer,
        materials.batches(spec.seed, spec.batch),
        dataclasses.replace(spec.loop, progress=context.show_progress),
        sub,
        eval_hooks=hooks,
        loss_fn=context.loss_fn,
        on_step=on_steps,
        label=spec.label,
        describe=context.describe,
        identity=f"{spec.key} spec {spec.digest}",
        config={"digest": spec.digest, **spec.record()},
        group=Path(context.root).name,
    )
    rows = read_metrics(sub / "metrics.jsonl")
    evals = [{"step": 0, **initial}] if initial is not None else []
    evals += [{"step": r["step"], **r["eval"]} for r in rows if "eval" in r]
    stopped = None if outcome.ok else divergence(outcome)
    if stopped is None and (stopped := eval_divergence(evals)) is not None:
        outcome = dataclasses.replace(outcome, status=DIVERGED, message=stopped.message)
    result = RunResult(
        digest=spec.digest,
        key=spec.key,
        arm=spec.arm.name,
        recipe=spec.arm.recipe,
        ffn=spec.ffn,
        lrs=spec.lrs,
        seed=spec.seed,
        steps=spec.steps,
        status=outcome.status,
        message=outcome.message,
        steps_done=outcome.step,
        final_loss=outcome.loss,
        tokens=rows[-1]["tokens"] if rows else 0,
        evals=evals,
        final=evals[-1] if outcome.ok and evals else {},
        diverged=stopped,
        wall_seconds=round(time.perf_counter() - started, 3),
    )
    text = _json_text(result.to_json())
    if ctx.is_main:
        atomic_write_text(sub / "result.json", text)
    return RunResult.from_json(D.broadcast_object(json.loads(text) if ctx.is_main else None, ctx))


def divergence(outcome: TrainResult) -> Divergence:
    """Where a diverged run stopped (:class:`~tailmem.lm.spec.Divergence`)."""
    return Divergence(outcome.step + 1, outcome.loss, outcome.message)


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
    try:
        RunResult.from_json(result)
    except (KeyError, TypeError):
        return None  # not a whole result: train it again
    return result


def _initial_eval(
    sub: Path, model: nn.Module, hooks: Sequence[EvalHook], device: torch.device, precision: str,
    ctx: D.DistContext,
) -> dict[str, Any]:  # fmt: skip
    """Eval hooks on the freshly initialised model, in the run's precision like every later
    evaluation (cached in ``initial.json``)."""
    path = sub / "initial.json"
    cached = json.loads(path.read_text()) if ctx.is_main and path.is_file() else None
    cached = D.broadcast_object(cached, ctx)
    if cached is not None:
        return cached
    model.to(device).eval()
    merged: dict[str, Any] = {}
    with torch.no_grad(), autocast(device, precision):
        for hook in hooks:
            merged.update(hook(0, model))
    model.train()
    if ctx.is_main:
        atomic_write_text(path, _json_text(merged))
    return merged


def drop_checkpoints(root: str | Path, keys: Sequence[str]) -> None:
    """Delete the ``ckpt/`` folder of every sub-run in ``keys`` (folders under ``root``)."""
    for key in keys:
        shutil.rmtree(Path(root) / key / "ckpt", ignore_errors=True)
