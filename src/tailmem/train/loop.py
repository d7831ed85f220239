"""The training loop shared by every transformer experiment.

``train(model, optimizer, data, cfg, run_dir)`` runs ``cfg.steps`` optimiser updates and writes,
into ``run_dir``:

- ``metrics.jsonl``: one JSON object per logged step — ``step`` (updates done), ``loss`` (mean
  training loss since the previous line; an evaluation's console line shows it as ``loss``
  beside the one update's ``batch loss``, see :func:`losses_text`), ``grad_norm`` (mean
  pre-clip global norm, same window), ``lr`` (first group) and ``lrs`` (every group, when there
  are several), ``tokens`` (input tokens consumed so far, all ranks), ``elapsed`` and
  ``tokens_per_s`` (wall clock; see :data:`TIMING_KEYS`), and ``eval`` (the merged dicts of the
  eval hooks) on evaluation steps;
- ``ckpt/step_NNNNNN.pt``: checkpoints (model, optimiser, base learning rates, RNG states of every
  rank, data-source state, loop counters), written atomically;
- on divergence, ``diverged.json`` and ``nan_diagnostics.json`` / ``nan_batch.pt``;
- with ``log_to``, the same metrics lines to TensorBoard (``tensorboard/``) and Weights & Biases
  (``wandb/``), the run's config attached (:mod:`tailmem.train.track`).

Loss normalisation: the loss of a step is the mean over every counted target (``y != -100``) of
the global batch, whatever the number of ranks or micro-batches. Each rank back-propagates its
summed loss times ``world_size / global_count``; DDP averages gradients over ranks, which yields
exactly the gradient of the global mean. A 2-rank run therefore follows a 1-process run with the
same global batch up to floating-point reassociation.

Resume: if ``run_dir/ckpt`` holds checkpoints, the latest is loaded (all ranks read the same file),
``metrics.jsonl`` is cut back to the lines at or before its step, and training continues with the
same batches (the data position is the step), the same learning rates and the same RNG streams,
so the metrics written after a resume equal those of an uninterrupted run except the timing keys.
A run given an ``identity`` resumes only a checkpoint that records the same one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm import tqdm

from tailmem.errors import ConfigError, DataError
from tailmem.train import distributed as D
from tailmem.train.checkpoint import latest_checkpoint
from tailmem.train.data import BatchSource
from tailmem.train.precision import autocast, check_precision, resolve_precision
from tailmem.train.schedule import check_schedule, lr_multiplier
from tailmem.train.state import (
    COMPLETE,
    DIVERGED,
    DIVERGED_FILE,
    LoopState,
    Restored,
    divergence_message,
    json_value,
    restore,
    save,
    seed_everything,
    truncate_metrics,
    write_divergence,
)
from tailmem.train.track import check_log_to, tracking

IGNORE_INDEX = -100
TIMING_KEYS = ("elapsed", "tokens_per_s")
"""Keys of a metrics line that measure wall-clock time and so differ between identical runs."""

EvalHook = Callable[[int, nn.Module], Mapping[str, Any]]
"""``hook(step, model) -> metrics``; called under ``no_grad`` in eval mode on every rank."""

LossFn = Callable[[nn.Module, Tensor, Tensor], Tensor]
"""``loss_fn(model, x, y) -> summed loss`` over the targets ``y != -100`` (a 0-d tensor)."""


class OptimizerLike(Protocol):
    param_groups: list[dict[str, Any]]

    def step(self, closure: Any = None) -> Any: ...
    def zero_grad(self, set_to_none: bool = True) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class TrainConfig:
    """How to train: length, learning-rate schedule, clipping, cadence, precision, device, seed.

    ``eval_every = 0`` evaluates only after the last step; ``ckpt_every = 0`` checkpoints only at
    the end (if ``save_final``). ``keep_ckpts`` keeps that many newest checkpoints (None: all).
    ``grad_accum`` splits each rank's share of the batch into that many micro-batches.
    ``precision="bf16"`` autocasts forward, loss and evaluation to bfloat16 on a CPU or CUDA
    device (weights, gradients and optimiser state stay fp32); ``"auto"`` is bf16 where this
    machine's bfloat16 products are clearly faster, else fp32 (:mod:`tailmem.train.precision`;
    :func:`train` resolves it before the first step and trains, checkpoints and reports the
    resolved value). ``compile`` trains through ``torch.compile`` of the loss function, which
    traces the model's forward and the loss (and, through AOTAutograd, their backward); the
    optimiser step and the evaluation hooks run eagerly (see :func:`compiled_loss`): compiling
    the step did not pay where measured (cpu-small, one CPU thread: AdamW's step, 1-3% of a
    training step, went from 1.2 to 0.8 ms; the hybrid Muon step gained nothing, 0.96x, and
    recompiled per parameter).
    ``deterministic`` turns on ``torch.use_deterministic_algorithms`` (warn-only) for the
    duration of the run. ``log_to`` names trackers (``tensorboard``, ``wandb``) that receive
    every metrics line too (:mod:`tailmem.train.track`); like ``progress``, it changes how a run
    is watched, not its numbers.
    """

    steps: int
    schedule: str = "constant"
    warmup_steps: int = 0
    decay_frac: float = 0.2
    min_lr_frac: float = 0.0
    grad_clip: float | None = 1.0
    grad_accum: int = 1
    log_every: int = 10
    eval_every: int = 0
    ckpt_every: int = 0
    keep_ckpts: int | None = 3
    save_final: bool = True
    precision: str = "fp32"
    compile: bool = False
    device: str = "cpu"
    seed: int = 0
    deterministic: bool = True
    progress: bool = True
    log_to: tuple[str, ...] = ()

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first invalid field."""
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ConfigError(f"steps must be a positive integer, got {self.steps!r}")
        check_schedule(
            self.schedule, self.steps, self.warmup_steps, self.decay_frac, self.min_lr_frac
        )
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ConfigError(f"grad_clip must be > 0 or None, got {self.grad_clip!r}")
        for name in ("grad_accum", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        for name in ("eval_every", "ckpt_every"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0 (0 = only at the end)")
        if self.keep_ckpts is not None and self.keep_ckpts < 1:
            raise ConfigError(f"keep_ckpts must be >= 1 or None, got {self.keep_ckpts!r}")
        check_precision(self.precision, self.device)
        if not isinstance(self.compile, bool):
            raise ConfigError(f"compile must be true or false, got {self.compile!r}")
        if self.compile:
            check_compile(torch.device(self.device).type)
        check_log_to(self.log_to)

    def due(self, done: int, has_hooks: bool) -> tuple[bool, bool, bool]:
        """Whether to log, to evaluate and to checkpoint after ``done`` updates."""
        last = done == self.steps
        log = done % self.log_every == 0 or last
        evaluate = has_hooks and ((self.eval_every > 0 and done % self.eval_every == 0) or last)
        ckpt = (self.ckpt_every > 0 and done % self.ckpt_every == 0) or (last and self.save_final)
        return log, evaluate, ckpt

    def lr_at(self, step: int) -> float:
        """Learning-rate multiplier of the 0-based update ``step``."""
        return lr_multiplier(
            step,
            name=self.schedule,
            steps=self.steps,
            warmup_steps=self.warmup_steps,
            decay_frac=self.decay_frac,
            min_frac=self.min_lr_frac,
        )


@dataclass
class TrainResult:
    """Outcome of :func:`train`: ``status`` is "complete" or :data:`DIVERGED` (a non-finite loss
    or gradient norm at update ``step + 1``; ``loss`` is that non-finite value); ``loss`` is the
    last update's batch loss (not ``metrics.jsonl``'s windowed mean); ``precision`` the one it
    trained in (``auto`` resolved)."""

    status: str
    step: int
    loss: float | None
    resumed_from: int | None
    message: str
    last_eval: dict[str, Any] = field(default_factory=dict)
    precision: str = "fp32"

    @property
    def ok(self) -> bool:
        return self.status == COMPLETE


def token_loss_sum(model: Callable[[Tensor], Any], x: Tensor, y: Tensor) -> Tensor:
    """Summed next-token cross-entropy over targets ``y != -100``.

    Works with models returning logits or a tuple whose first element is the logits (our GPT).
    """
    out = model(x)
    logits = out[0] if isinstance(out, tuple) else out
    return F.cross_entropy(
        logits.flatten(0, 1).float(), y.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )


def _group_name(group: Mapping[str, Any], index: int) -> str:
    """A param group's label in metrics: its ``name``, else ``kind:role`` (routed optimisers),
    else its index."""
    if group.get("name"):
        return str(group["name"])
    if "kind" in group and "role" in group:
        return f"{group['kind']}:{group['role']}"
    return str(index)


def _run_path(run_dir: Path | Any) -> Path:
    path = getattr(run_dir, "path", run_dir)
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"run_dir must be a path or have a .path attribute, got {run_dir!r}")
    return Path(path)


# --- compiled training -------------------------------------------------------------------------


def check_compile(kind: str) -> None:
    """Refuse ``compile`` where torch's default compiler backend (inductor) cannot build kernels:
    on a CPU without the C++ compiler it calls, on CUDA without Triton."""
    if kind == "cuda":
        from torch.utils._triton import has_triton

        if not has_triton():
            raise ConfigError("compile needs Triton on CUDA, which this torch lacks; use false")
        return
    from torch._inductor.cpp_builder import get_cpp_compiler

    try:
        get_cpp_compiler()
    except Exception as exc:  # inductor names its search in its own exception types
        raise ConfigError(
            f"compile needs a C++ compiler on a CPU and found none ({str(exc).splitlines()[0]}); "
            "install g++ or use false"
        ) from None


def compiled_loss(loss_fn: LossFn) -> LossFn:
    """``loss_fn`` through ``torch.compile`` (default backend, shapes specialised until they
    change, then dynamic). The model is an argument, so the graph covers its forward and the
    loss; a data-dependent step such as selecting the answer positions splits it into two
    graphs. A failure to compile is a :class:`ConfigError` at the first step."""
    compiled = torch.compile(loss_fn)

    def call(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
        try:
            return compiled(model, x, y)
        except torch._dynamo.exc.BackendCompilerFailed as exc:
            cause = getattr(exc, "inner_exception", exc)
            what = f"{type(cause).__name__}: {(str(cause).strip() or '-').splitlines()[0]}"
            raise ConfigError(f"compile: torch.compile failed here ({what}); use false") from None

    return call


# --- the loop ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _deterministic(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    before = torch.are_deterministic_algorithms_enabled()
    before_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=before_warn)


def describe_scalars(metrics: Mapping[str, Any]) -> str:
    """``key=value`` of every number in an eval dict whose key holds no ``/`` (namespaced keys
    such as ``iso/q/0/erank`` are detail for the metrics file, not for a log line)."""
    return ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in metrics.items()
        if "/" not in k and isinstance(v, int | float)
    )


def losses_text(row: Mapping[str, Any], window: int, batch_loss: float) -> str:
    """The losses of an evaluation's console line, named apart: ``loss`` is what
    ``metrics.jsonl`` logs in ``row`` (the mean over its logging window of ``window`` updates;
    left out when the step closes no window), ``batch loss`` this update's loss on its one
    batch, a far noisier number."""
    batch = f"batch loss {batch_loss:.4f}"
    if "loss" not in row:
        return batch
    return f"loss {row['loss']:.4f} (mean of {window} updates), {batch}"


def _fmt_time(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


class _Bar(Protocol):
    """What a run uses of its progress bar (a ``tqdm``, which has no type information)."""

    disable: bool

    def write(self, s: str, file: IO[str] | None = None) -> None: ...

    def update(self, n: int = 1) -> object: ...

    def set_postfix(self, refresh: bool = True, **kwargs: str) -> None: ...


@dataclass
class _Printer:
    """Lines of one run on stderr (through the progress bar when it is shown), each prefixed
    with the run's ``label`` when it has one; silent on ranks other than 0."""

    bar: _Bar
    label: str | None
    enabled: bool

    def say(self, message: str) -> None:
        if not self.enabled:
            return
        line = f"[{self.label}] {message}" if self.label else message
        if self.bar.disable:
            print(line, file=sys.stderr, flush=True)
        else:
            self.bar.write(line, file=sys.stderr)


@dataclass
class _Outputs:
    """Where a run's progress goes: the progress bar and its printer (every rank; silent off
    rank 0), ``metrics.jsonl`` and the trackers of ``log_to`` (rank 0 only)."""

    bar: _Bar
    printer: _Printer
    metrics: IO[str] | None
    track: Callable[[Mapping[str, Any]], None] | None

    def record(self, row: Mapping[str, Any]) -> None:
        """One metrics line: appended to ``metrics.jsonl`` (flushed) and sent to the trackers."""
        line = json_value(row)
        if self.metrics is not None:
            self.metrics.write(json.dumps(line, allow_nan=False) + "\n")
            self.metrics.flush()
        if self.track is not None:
            self.track(line)


@contextlib.contextmanager
def _open_outputs(
    cfg: TrainConfig,
    ctx: D.DistContext,
    run_dir: Path,
    step: int,
    label: str | None,
    config: Mapping[str, Any] | None,
    group: str | None,
    identity: str | None,
    resumed_from: int | None,
) -> Iterator[_Outputs]:
    """A run's outputs, open while training lasts: the bar starts at ``step``; the trackers
    attach ``config`` (default: ``cfg``) and name the run ``label``."""
    show = cfg.progress and ctx.is_main and sys.stderr.isatty()
    with contextlib.ExitStack() as stack:
        bar = stack.enter_context(
            tqdm(total=cfg.steps, initial=step, disable=not show, unit="step")
        )
        metrics: IO[str] | None = None
        if ctx.is_main:
            metrics = stack.enter_context(open(run_dir / "metrics.jsonl", "a", encoding="utf-8"))
        track = None
        if ctx.is_main and cfg.log_to:
            attached = dataclasses.asdict(cfg) if config is None else config
            track = stack.enter_context(
                tracking(cfg.log_to, run_dir, attached, name=label or run_dir.name, group=group,
                         identity=identity, resumed_from=resumed_from)
            )  # fmt: skip
        yield _Outputs(bar, _Printer(bar, label, ctx.is_main), metrics, track)


@dataclass
class StepResult:
    """One update: mean loss over the global batch, pre-clip gradient norm, input tokens."""

    loss: float
    grad_norm: float
    tokens: int

    @property
    def finite(self) -> bool:
        return math.isfinite(self.loss) and math.isfinite(self.grad_norm)


def _batch(
    data: BatchSource, step: int, ctx: D.DistContext, grad_accum: int
) -> tuple[Tensor, Tensor]:
    x, y = data.batch(step, ctx.rank, ctx.world_size)
    if y.ndim != 2 or x.ndim not in (2, 3) or x.shape[:2] != y.shape:
        raise DataError(
            f"batch of step {step} must be x (rows, T) or (rows, T, features) and y (rows, T), "
            f"got {tuple(x.shape)} and {tuple(y.shape)}"
        )
    if x.shape[0] % grad_accum:
        raise ConfigError(
            f"rank batch of {x.shape[0]} rows is not divisible by grad_accum {grad_accum}"
        )
    return x, y


def train_step(
    model: nn.Module,
    optimizer: OptimizerLike,
    batch: tuple[Tensor, Tensor],
    lrs: Sequence[float],
    cfg: TrainConfig,
    ctx: D.DistContext,
    loss_fn: LossFn = token_loss_sum,
) -> StepResult:
    """Forward, backward and — if loss and gradient norm are finite — one optimiser update with
    learning rate ``lrs[i]`` for group ``i`` (after clipping to ``cfg.grad_clip``).

    ``model`` is the (possibly DDP-wrapped) model on its device. The loss is the mean over every
    counted target of the global batch (see the module docstring), accumulated over
    ``cfg.grad_accum`` micro-batches.
    """
    x, y = batch
    device = next(model.parameters()).device
    counts = torch.tensor([int((y != IGNORE_INDEX).sum()), y.numel()], dtype=torch.int64)
    if ctx.distributed:  # counted on the host before the batch moves: one process never syncs
        counts = D.all_reduce_sum(counts.to(device), ctx).cpu()
    count, tokens = counts.tolist()
    if count == 0:
        raise DataError("a global batch has no targets (all y == -100)")
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    scale = ctx.world_size / count
    optimizer.zero_grad(set_to_none=True)
    loss_sum = torch.zeros((), device=device)
    n_micro = cfg.grad_accum
    for i, (xm, ym) in enumerate(zip(x.chunk(n_micro), y.chunk(n_micro), strict=True)):
        defer_sync = ctx.distributed and i < n_micro - 1
        with cast(Any, model).no_sync() if defer_sync else contextlib.nullcontext():
            with autocast(device, cfg.precision):
                part = loss_fn(model, xm, ym)
            (part * scale).backward()
        loss_sum += part.detach().float()
    loss = D.all_reduce_sum(loss_sum / count, ctx)
    params = [p for p in model.parameters() if p.grad is not None]
    gnorm = torch.nn.utils.get_total_norm([g for p in params if (g := p.grad) is not None])
    loss_f, gnorm_f = torch.stack([loss, gnorm.to(loss.device)]).tolist()
    result = StepResult(loss_f, gnorm_f, tokens)
    if result.finite:
        if cfg.grad_clip is not None:
            torch.nn.utils.clip_grads_with_norm_(params, cfg.grad_clip, gnorm)
        for group, lr in zip(optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        optimizer.step()
    return result


def _evaluate(
    model: nn.Module, hooks: Sequence[EvalHook], done: int, precision: str
) -> dict[str, Any]:
    """The merged dicts of the eval hooks, in eval mode, without gradients, RNG untouched."""
    device = next(model.parameters()).device
    merged: dict[str, Any] = {}
    model.eval()
    try:
        with (
            torch.random.fork_rng(devices=[device] if device.type == "cuda" else []),
            torch.no_grad(),
            autocast(device, precision),
        ):
            for hook in hooks:
                merged.update(json_value(dict(hook(done, model))))
    finally:
        model.train()
    return merged


def _log_row(
    state: LoopState, optimizer: OptimizerLike, wall: float, with_window: bool
) -> dict[str, Any]:
    """The metrics line after ``state.step`` updates; ``with_window``: with the means of the
    logging window (its last ``wall`` seconds)."""
    row: dict[str, Any] = {"step": state.step}
    if with_window and state.window:
        row["loss"] = sum(w[0] for w in state.window) / len(state.window)
        row["grad_norm"] = sum(w[1] for w in state.window) / len(state.window)
        row["tokens_per_s"] = state.window_tokens / wall if wall > 0 else None
    lrs = [float(g["lr"]) for g in optimizer.param_groups]
    row["lr"] = lrs[0]
    if len(lrs) > 1:
        names = [_group_name(g, i) for i, g in enumerate(optimizer.param_groups)]
        row["lrs"] = dict(zip(names, lrs, strict=True))
    row["tokens"] = state.tokens
    row["elapsed"] = round(state.elapsed, 3)
    return row


def _diverged(
    run_dir: Path, model: nn.Module, step: int, result: StepResult, lrs: list[float],
    batch: tuple[Tensor, Tensor], ctx: D.DistContext,
) -> str:  # fmt: skip
    """Record a non-finite update (rank 0 writes the diagnostics); returns the message."""
    if ctx.is_main:
        write_divergence(run_dir, model, step, result.loss, result.grad_norm, lrs, batch)
    return divergence_message(run_dir, step, result.loss, result.grad_norm, lrs[0])


def _start(
    run_dir: Path, model: nn.Module, optimizer: OptimizerLike, data: BatchSource,
    cfg: TrainConfig, ctx: D.DistContext, device: torch.device, resume: bool,
    identity: str | None,
) -> tuple[Restored, int | None]:  # fmt: skip
    """A fresh start (seeded) or the state of the newest checkpoint, and the step resumed from."""
    found = None
    if ctx.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        latest = latest_checkpoint(run_dir / "ckpt")
        found = None if latest is None else str(latest)
        if found is None or resume:
            (run_dir / DIVERGED_FILE).unlink(missing_ok=True)
    path = D.broadcast_object(found, ctx)
    if path is not None and not resume:
        raise ConfigError(
            f"run directory {run_dir} already holds checkpoint {path}; resume or use a fresh "
            "directory"
        )
    if path is None:
        if ctx.is_main:
            (run_dir / "metrics.jsonl").unlink(missing_ok=True)
        seed_everything(cfg.seed + ctx.rank)
        return Restored(LoopState(), [float(g["lr"]) for g in optimizer.param_groups]), None
    restored = restore(Path(path), model, optimizer, data, cfg.steps, ctx, device, identity)
    if ctx.is_main:
        truncate_metrics(run_dir / "metrics.jsonl", restored.state.step)
    return restored, restored.state.step


def train(
    model: nn.Module,
    optimizer: OptimizerLike,
    data: BatchSource,
    cfg: TrainConfig,
    run_dir: Path | Any,
    *,
    eval_hooks: Sequence[EvalHook] = (),
    loss_fn: LossFn = token_loss_sum,
    resume: bool = True,
    on_step: Callable[[int], None] | None = None,
    label: str | None = None,
    describe: Callable[[Mapping[str, Any]], str] = describe_scalars,
    identity: str | None = None,
    config: Mapping[str, Any] | None = None,
    group: str | None = None,
) -> TrainResult:
    """Train ``model`` for ``cfg.steps`` updates; see the module docstring for the files written.

    ``optimizer`` is any ``torch.optim.Optimizer``-like object built on ``model``'s parameters;
    the learning rate of each of its groups at construction is that group's base rate, scaled by
    the schedule every update. ``data`` yields batches by step (:class:`BatchSource`).
    ``run_dir`` is a directory path, or any object with a ``.path`` attribute. With ``resume``
    (default) an existing checkpoint in ``run_dir/ckpt`` is continued; otherwise such a
    checkpoint is a :class:`ConfigError`. Under ``torchrun`` every rank calls ``train`` with the
    same arguments; only rank 0 writes files and prints. ``on_step(1)`` is called after every
    update trained here (not for steps restored from a checkpoint); printed lines start with
    ``[label]`` and show an evaluation as ``describe(metrics)``. ``identity`` names what this run
    is (e.g. the digest of everything that determines its numbers); every checkpoint records it,
    and resuming from one that records another identity, or none, is a :class:`CheckpointError`
    (a checkpoint copied in from another run is never continued; without an ``identity`` any
    checkpoint in ``run_dir`` is resumed). ``config`` is the run's config that the trackers of
    ``cfg.log_to`` attach (default: ``cfg`` itself); ``label`` (else the folder's name) and
    ``group`` name the run in W&B.

    Returns a :class:`TrainResult`. Divergence (a non-finite loss or gradient norm) does not
    raise: the bad update is skipped, diagnostics are written, and the result's status is
    "diverged" — an expected outcome of a learning-rate sweep that the caller records.
    """
    cfg.validate()
    cfg = dataclasses.replace(cfg, precision=resolve_precision(cfg.precision, cfg.device))
    run_dir = _run_path(run_dir)
    ctx, device = D.init_distributed(cfg.device)
    model.to(device)
    step_loss = compiled_loss(loss_fn) if cfg.compile else loss_fn
    with _deterministic(cfg.deterministic), contextlib.ExitStack() as stack:
        run, resumed_from = _start(
            run_dir, model, optimizer, data, cfg, ctx, device, resume, identity
        )
        state = run.state
        model.train()
        wrapped = D.wrap_model(model, ctx, device)
        outputs = stack.enter_context(
            _open_outputs(cfg, ctx, run_dir, state.step, label, config, group, identity,
                          resumed_from)
        )  # fmt: skip
        bar, out = outputs.bar, outputs.printer
        origin = "fresh" if resumed_from is None else f"resumed at {state.step}"
        where = run_dir.name if label else run_dir  # a labelled line already names the run
        how = cfg.precision + (", compiled" if cfg.compile else "")
        out.say(f"training {where}: {cfg.steps} steps ({origin}; {how})")
        start, before = state.step, state.elapsed
        session_start = window_start = time.perf_counter()
        last_loss: float | None = None
        last_eval: dict[str, Any] = {}
        for step in range(start, cfg.steps):
            batch = _batch(data, step, ctx, cfg.grad_accum)
            lrs = [base * cfg.lr_at(step) for base in run.base_lrs]
            result = train_step(wrapped, optimizer, batch, lrs, cfg, ctx, step_loss)
            now = time.perf_counter()
            elapsed = before + (now - session_start)
            state.record(step, elapsed, result.tokens, result.loss, result.grad_norm)
            if not result.finite:
                message = _diverged(run_dir, model, step, result, lrs, batch, ctx)
                out.say(message)
                return TrainResult(
                    DIVERGED, step, result.loss, resumed_from, message, last_eval, cfg.precision
                )
            last_loss, done = result.loss, state.step
            bar.update(1)
            if on_step is not None:
                on_step(1)
            is_log, is_eval, is_ckpt = cfg.due(done, bool(eval_hooks))
            if is_log or is_eval:
                row = _log_row(state, optimizer, now - window_start, with_window=is_log)
                window = len(state.window)
                if is_log:
                    bar.set_postfix(loss=f"{row['loss']:.4f}", refresh=False)
                    state.window, state.window_tokens, window_start = [], 0, now
                if is_eval:
                    last_eval = row["eval"] = _evaluate(model, eval_hooks, done, cfg.precision)
                    rate = (done - start) / max(now - session_start, 1e-9)
                    eta = _fmt_time((cfg.steps - done) / rate) if rate > 0 else "?"
                    out.say(
                        f"step {done}/{cfg.steps} {losses_text(row, window, result.loss)} | "
                        f"{describe(last_eval)} | elapsed {_fmt_time(state.elapsed)} ETA {eta}"
                    )
                outputs.record(row)
            if is_ckpt:
                save(run_dir / "ckpt", model, optimizer, data, run, cfg, ctx, device, identity)
        D.barrier(ctx)
        message = f"trained {cfg.steps} steps, final batch loss {last_loss}"
        out.say(message)
        return TrainResult(
            COMPLETE, cfg.steps, last_loss, resumed_from, message, last_eval, cfg.precision
        )
