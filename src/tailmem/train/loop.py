"""The training loop shared by every transformer experiment.

``train(model, optimizer, data, cfg, run_dir)`` runs ``cfg.steps`` optimiser updates and writes,
into ``run_dir``:

- ``metrics.jsonl``: one JSON object per logged step — ``step`` (updates done), ``loss`` (mean
  training loss since the previous line), ``grad_norm`` (mean pre-clip global norm, same window),
  ``lr`` (first group) and ``lrs`` (every group, when there are several), ``tokens`` (input
  tokens consumed so far, all ranks), ``elapsed`` and ``tokens_per_s`` (wall clock; see
  :data:`TIMING_KEYS`), and ``eval`` (the merged dicts of the eval hooks) on evaluation steps;
- ``ckpt/step_NNNNNN.pt``: checkpoints (model, optimiser, base learning rates, RNG states of every
  rank, data-source state, loop counters), written atomically;
- on divergence, ``failed.json`` and ``nan_diagnostics.json`` / ``nan_batch.pt``.

Loss normalisation: the loss of a step is the mean over every counted target (``y != -100``) of
the global batch, whatever the number of ranks or micro-batches. Each rank back-propagates its
summed loss times ``world_size / global_count``; DDP averages gradients over ranks, which yields
exactly the gradient of the global mean. A 2-rank run therefore follows a 1-process run with the
same global batch up to floating-point reassociation.

Resume: if ``run_dir/ckpt`` holds checkpoints, the latest is loaded (all ranks read the same file),
``metrics.jsonl`` is cut back to the lines at or before its step, and training continues with the
same batches (the data position is the step), the same learning rates and the same RNG streams,
so the metrics written after a resume equal those of an uninterrupted run except the timing keys.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm import tqdm

from tailmem import progress
from tailmem.errors import CheckpointError, ConfigError, DataError
from tailmem.rundir import atomic_write_text
from tailmem.train import distributed as D
from tailmem.train.checkpoint import (
    checkpoint_path,
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from tailmem.train.data import BatchSource
from tailmem.train.schedule import check_schedule, lr_multiplier

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


@dataclass
class TrainConfig:
    """How to train: length, learning-rate schedule, clipping, cadence, precision, device, seed.

    ``eval_every = 0`` evaluates only after the last step; ``ckpt_every = 0`` checkpoints only at
    the end (if ``save_final``). ``keep_ckpts`` keeps that many newest checkpoints (None: all).
    ``grad_accum`` splits each rank's share of the batch into that many micro-batches.
    ``precision="bf16"`` autocasts forward and loss to bfloat16 (weights, gradients and optimiser
    state stay fp32) and needs a CUDA device. ``deterministic`` turns on
    ``torch.use_deterministic_algorithms`` (warn-only) for the duration of the run.
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
    device: str = "cpu"
    seed: int = 0
    deterministic: bool = True
    progress: bool = True

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
        if self.precision not in ("fp32", "bf16"):
            raise ConfigError(f"precision must be 'fp32' or 'bf16', got {self.precision!r}")
        try:
            kind = torch.device(self.device).type
        except RuntimeError:
            raise ConfigError(f"device {self.device!r} is not a torch device string") from None
        if self.precision == "bf16" and kind != "cuda":
            raise ConfigError(
                f"precision 'bf16' needs a CUDA device (got device {self.device!r}); "
                "use precision=fp32 on CPU"
            )

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
    """Outcome of :func:`train`: ``status`` is "complete" or "failed" (divergence)."""

    status: str
    step: int
    loss: float | None
    resumed_from: int | None
    message: str
    last_eval: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "complete"


def token_loss_sum(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """Summed next-token cross-entropy over targets ``y != -100``.

    Works with models returning logits or a tuple whose first element is the logits (our GPT).
    """
    out = model(x)
    logits = out[0] if isinstance(out, tuple) else out
    return F.cross_entropy(
        logits.flatten(0, 1).float(), y.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices): call before building the model."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


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


def _json_value(value: Any) -> Any:
    """A JSON-safe copy: tensors and numpy values become numbers or lists, non-finite floats the
    strings "nan" / "inf" / "-inf" (JSON has no literal for them)."""
    if isinstance(value, Tensor):
        value = value.item() if value.numel() == 1 else value.tolist()
    elif isinstance(value, np.generic | np.ndarray):
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return value


# --- RNG state (tensors and plain containers only, for weights_only loading) -----------------


def _rng_state(device: torch.device) -> dict[str, Any]:
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "torch": torch.get_rng_state(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: Mapping[str, Any], device: torch.device) -> None:
    random.setstate(state["python"])
    npst = state["numpy"]
    np.random.set_state(
        (
            npst["kind"],
            npst["keys"].numpy().astype(np.uint32),
            npst["pos"],
            npst["has_gauss"],
            npst["gauss"],
        )
    )
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


# --- metrics file -----------------------------------------------------------------------------


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a metrics file (a torn last line is skipped)."""
    rows = []
    if not Path(path).exists():
        return rows
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _truncate_metrics(path: Path, step: int) -> None:
    """Keep only the lines with ``step`` <= the checkpoint's step (atomic rewrite)."""
    if not path.exists():
        return
    kept = [row for row in read_metrics(path) if row.get("step", 0) <= step]
    atomic_write_text(path, "".join(json.dumps(row) + "\n" for row in kept))


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


def _autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _fmt_time(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


class _Trainer:
    """State and steps of one :func:`train` call (kept private; ``train`` is the API)."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: OptimizerLike,
        data: BatchSource,
        cfg: TrainConfig,
        run_dir: Path,
        eval_hooks: Sequence[EvalHook],
        loss_fn: LossFn,
    ) -> None:
        self.cfg, self.data, self.optimizer = cfg, data, optimizer
        self.eval_hooks, self.loss_fn = list(eval_hooks), loss_fn
        self.ctx, self.device = D.init_distributed(cfg.device)
        self.model = model.to(self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.run_dir = run_dir
        self.ckpt_dir = run_dir / "ckpt"
        self.metrics_path = run_dir / "metrics.jsonl"
        self.base_lrs = [float(g["lr"]) for g in optimizer.param_groups]
        self.group_names = [_group_name(g, i) for i, g in enumerate(optimizer.param_groups)]
        self.step = 0
        self.tokens = 0
        self.elapsed = 0.0
        self.window: list[tuple[float, float]] = []
        self.window_tokens = 0
        self.resumed_from: int | None = None
        self.last_eval: dict[str, Any] = {}
        self.last_loss: float | None = None

    # -- setup --

    def start(self, resume: bool) -> None:
        found = None
        if self.ctx.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            latest = latest_checkpoint(self.ckpt_dir)
            found = None if latest is None else str(latest)
            if found is None or resume:
                (self.run_dir / "failed.json").unlink(missing_ok=True)
        path = D.broadcast_object(found, self.ctx)
        if path is not None and not resume:
            raise ConfigError(
                f"run directory {self.run_dir} already holds checkpoint {path}; resume or use "
                "a fresh directory"
            )
        if path is None:
            if self.ctx.is_main:
                self.metrics_path.unlink(missing_ok=True)
            seed_everything(self.cfg.seed + self.ctx.rank)
        else:
            self._load(Path(path))
        self.model.train()
        self.wrapped = D.wrap_model(self.model, self.ctx, self.device)

    def _load(self, path: Path) -> None:
        state = load_checkpoint(path)
        try:
            self.model.load_state_dict(state["model"])
        except (RuntimeError, KeyError) as exc:
            first = str(exc).strip().splitlines()[0]
            raise CheckpointError(f"checkpoint {path} does not match the model ({first})") from exc
        try:
            self.optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError) as exc:
            raise CheckpointError(
                f"checkpoint {path} does not match the optimiser ({exc})"
            ) from exc
        if len(state["base_lrs"]) != len(self.optimizer.param_groups):
            raise CheckpointError(
                f"checkpoint {path} has {len(state['base_lrs'])} learning rates for "
                f"{len(self.optimizer.param_groups)} parameter groups"
            )
        self.base_lrs = list(state["base_lrs"])
        rngs = state["rng"]
        if len(rngs) != self.ctx.world_size:
            warnings.warn(
                f"checkpoint {path} was written by {len(rngs)} ranks, resuming with "
                f"{self.ctx.world_size}: random streams (dropout) will differ from the "
                "original run",
                stacklevel=3,
            )
        _set_rng_state(rngs[self.ctx.rank % len(rngs)], self.device)
        if state.get("data") is not None and hasattr(self.data, "load_state_dict"):
            self.data.load_state_dict(state["data"])
        if state["step"] > self.cfg.steps:
            raise CheckpointError(
                f"checkpoint {path} is at step {state['step']}, beyond steps={self.cfg.steps}"
            )
        loop = state["loop"]
        self.step, self.tokens, self.elapsed = state["step"], loop["tokens"], loop["elapsed"]
        self.window = [tuple(w) for w in loop["window"]]
        self.window_tokens = loop["window_tokens"]
        self.resumed_from = self.step
        if self.ctx.is_main:
            _truncate_metrics(self.metrics_path, self.step)

    # -- one update --

    def _batch(self, step: int) -> tuple[Tensor, Tensor]:
        x, y = self.data.batch(step, self.ctx.rank, self.ctx.world_size)
        if x.ndim != 2 or x.shape != y.shape:
            raise DataError(
                f"batch of step {step} must be two (rows, T) tensors of one shape, got "
                f"{tuple(x.shape)} and {tuple(y.shape)}"
            )
        if x.shape[0] % self.cfg.grad_accum:
            raise ConfigError(
                f"rank batch of {x.shape[0]} rows is not divisible by grad_accum "
                f"{self.cfg.grad_accum}"
            )
        return x, y

    def _global_counts(self, x: Tensor, y: Tensor) -> tuple[int, int]:
        """Counted targets and input tokens of the global batch (one all-reduce when
        distributed; counted on the host before the batch moves, so one process never syncs)."""
        counts = torch.tensor([int((y != IGNORE_INDEX).sum()), x.numel()], dtype=torch.int64)
        if self.ctx.distributed:
            counts = D.all_reduce_sum(counts.to(self.device), self.ctx).cpu()
        count, ntok = counts.tolist()
        return count, ntok

    def update(self, step: int) -> tuple[float, float, Tensor, Tensor]:
        """Forward, backward and (if finite) optimiser step; returns loss, grad norm, batch."""
        x, y = self._batch(step)
        count, ntok = self._global_counts(x, y)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        if count == 0:
            raise DataError(f"the global batch of step {step} has no targets (all y == -100)")
        scale = self.ctx.world_size / count
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=self.device)
        n_micro = self.cfg.grad_accum
        for i, (xm, ym) in enumerate(zip(x.chunk(n_micro), y.chunk(n_micro), strict=True)):
            defer_sync = self.ctx.distributed and i < n_micro - 1
            sync = self.wrapped.no_sync() if defer_sync else contextlib.nullcontext()
            with sync, _autocast(self.device, self.cfg.precision):
                part = self.loss_fn(self.wrapped, xm, ym)
            (part * scale).backward()
            loss_sum += part.detach().float()
        loss = D.all_reduce_sum(loss_sum / count, self.ctx)
        grads = [p.grad for p in self.params if p.grad is not None]
        gnorm = torch.nn.utils.get_total_norm(grads)
        loss_f, gnorm_f = torch.stack([loss, gnorm.to(loss.device)]).tolist()
        if math.isfinite(loss_f) and math.isfinite(gnorm_f):
            if self.cfg.grad_clip is not None:
                torch.nn.utils.clip_grads_with_norm_(self.params, self.cfg.grad_clip, gnorm)
            mult = self.cfg.lr_at(step)
            for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
                group["lr"] = base * mult
            self.optimizer.step()
        self.tokens += ntok
        self.window_tokens += ntok
        return loss_f, gnorm_f, x, y

    # -- outputs --

    def log_line(self, done: int, wall: float) -> dict[str, Any]:
        row: dict[str, Any] = {"step": done}
        if self.window:
            row["loss"] = sum(w[0] for w in self.window) / len(self.window)
            row["grad_norm"] = sum(w[1] for w in self.window) / len(self.window)
            row["tokens_per_s"] = self.window_tokens / wall if wall > 0 else None
        lrs = [float(g["lr"]) for g in self.optimizer.param_groups]
        row["lr"] = lrs[0]
        if len(lrs) > 1:
            row["lrs"] = dict(zip(self.group_names, lrs, strict=True))
        row["tokens"] = self.tokens
        row["elapsed"] = round(self.elapsed, 3)
        return row

    def evaluate(self, done: int) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        devices = [self.device] if self.device.type == "cuda" else []
        self.model.eval()
        try:
            with (
                torch.random.fork_rng(devices=devices),
                torch.no_grad(),
                _autocast(self.device, self.cfg.precision),
            ):
                for hook in self.eval_hooks:
                    merged.update(_json_value(dict(hook(done, self.model))))
        finally:
            self.model.train()
        return merged

    def save(self, done: int) -> None:
        rngs = D.all_gather_object(_rng_state(self.device), self.ctx)
        if not self.ctx.is_main:
            return
        data_state = self.data.state_dict() if hasattr(self.data, "state_dict") else None
        state = {
            "step": done,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "base_lrs": self.base_lrs,
            "rng": rngs,
            "data": data_state,
            "loop": {
                "tokens": self.tokens,
                "elapsed": self.elapsed,
                "window": [list(w) for w in self.window],
                "window_tokens": self.window_tokens,
            },
            "world_size": self.ctx.world_size,
            "train_config": asdict(self.cfg),
        }
        save_checkpoint(checkpoint_path(self.ckpt_dir, done), state)
        if self.cfg.keep_ckpts is not None:
            prune_checkpoints(self.ckpt_dir, self.cfg.keep_ckpts)

    def fail(self, step: int, loss: float, gnorm: float, x: Tensor, y: Tensor) -> str:
        lrs = [self.base_lrs[i] * self.cfg.lr_at(step) for i in range(len(self.base_lrs))]
        message = (
            f"training diverged at update {step + 1}: loss={loss}, grad_norm={gnorm} "
            f"(lr {lrs[0]:.3g}); the update was not applied; see "
            f"{self.run_dir / 'nan_diagnostics.json'}"
        )
        if not self.ctx.is_main:
            return message
        per_param = {
            name: (p.grad.float().norm().item() if p.grad is not None else None)
            for name, p in self.model.named_parameters()
        }
        nonfinite = [
            name
            for name, p in self.model.named_parameters()
            if not torch.isfinite(p.detach()).all()
        ]
        diagnostics = {
            "step": step + 1,
            "loss": loss,
            "grad_norm": gnorm,
            "lrs": lrs,
            "batch_file": "nan_batch.pt",
            "grad_norms": per_param,
            "nonfinite_params": nonfinite,
        }
        atomic_write_text(
            self.run_dir / "nan_diagnostics.json",
            json.dumps(_json_value(diagnostics), indent=1) + "\n",
        )
        torch.save({"step": step, "x": x.cpu(), "y": y.cpu()}, self.run_dir / "nan_batch.pt")
        atomic_write_text(
            self.run_dir / "failed.json",
            json.dumps({"status": "failed", "step": step + 1, "message": message}) + "\n",
        )
        return message


def _say(message: str, bar: tqdm) -> None:
    if bar.disable:
        print(message, file=sys.stderr, flush=True)
    else:
        bar.write(message, file=sys.stderr)


class _Session:
    """The steps of one :func:`train` call after setup: progress, metrics lines and timing."""

    def __init__(self, trainer: _Trainer, metrics: Any, bar: tqdm) -> None:
        self.t, self.metrics, self.bar = trainer, metrics, bar
        self.start = trainer.step
        self.session_start = self.window_start = time.perf_counter()
        self.elapsed_before = trainer.elapsed

    def after_update(self, done: int, loss: float, now: float) -> None:
        """Log, evaluate and checkpoint as the cadence of the config asks after ``done`` updates."""
        t, cfg = self.t, self.t.cfg
        self.bar.update(1)
        progress.advance(1)
        is_log = done % cfg.log_every == 0 or done == cfg.steps
        is_eval = bool(t.eval_hooks) and (
            (cfg.eval_every > 0 and done % cfg.eval_every == 0) or done == cfg.steps
        )
        if is_log or is_eval:
            row = t.log_line(done, now - self.window_start)
            if is_log:
                self.bar.set_postfix(loss=f"{row['loss']:.4f}", refresh=False)
                t.window, t.window_tokens = [], 0
                self.window_start = now
            else:
                for key in ("loss", "grad_norm", "tokens_per_s"):
                    row.pop(key, None)
            if is_eval:
                t.last_eval = t.evaluate(done)
                row["eval"] = t.last_eval
            if self.metrics is not None:
                self.metrics.write(json.dumps(_json_value(row)) + "\n")
                self.metrics.flush()
            if is_eval and t.ctx.is_main:
                self.report_eval(done, loss, now)
        if (cfg.ckpt_every > 0 and done % cfg.ckpt_every == 0) or (
            done == cfg.steps and cfg.save_final
        ):
            t.save(done)

    def report_eval(self, done: int, loss: float, now: float) -> None:
        """One line per evaluation, so a log without a progress bar still shows progress."""
        cfg = self.t.cfg
        rate = (done - self.start) / max(now - self.session_start, 1e-9)
        eta = _fmt_time((cfg.steps - done) / rate) if rate > 0 else "?"
        evals = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in self.t.last_eval.items()
        )
        _say(
            f"step {done}/{cfg.steps} loss {loss:.4f} | {evals} | "
            f"elapsed {_fmt_time(self.t.elapsed)} ETA {eta}",
            self.bar,
        )

    def run(self) -> TrainResult:
        t, cfg = self.t, self.t.cfg
        for step in range(self.start, cfg.steps):
            loss, gnorm, x, y = t.update(step)
            now = time.perf_counter()
            t.elapsed = self.elapsed_before + (now - self.session_start)
            if not (math.isfinite(loss) and math.isfinite(gnorm)):
                message = t.fail(step, loss, gnorm, x, y)
                if t.ctx.is_main:
                    _say(message, self.bar)
                return TrainResult("failed", step, loss, t.resumed_from, message, t.last_eval)
            t.window.append((loss, gnorm))
            t.last_loss = loss
            self.after_update(step + 1, loss, now)
            t.step = step + 1
        D.barrier(t.ctx)
        message = f"trained {cfg.steps} steps, final loss {t.last_loss}"
        if t.ctx.is_main:
            _say(message, self.bar)
        return TrainResult("complete", cfg.steps, t.last_loss, t.resumed_from, message, t.last_eval)


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
) -> TrainResult:
    """Train ``model`` for ``cfg.steps`` updates; see the module docstring for the files written.

    ``optimizer`` is any ``torch.optim.Optimizer``-like object built on ``model``'s parameters;
    the learning rate of each of its groups at construction is that group's base rate, scaled by
    the schedule every update. ``data`` yields batches by step (:class:`BatchSource`).
    ``run_dir`` is a directory path, or any object with a ``.path`` attribute. With ``resume``
    (default) an existing checkpoint in ``run_dir/ckpt`` is continued; otherwise such a
    checkpoint is a :class:`ConfigError`. Under ``torchrun`` every rank calls ``train`` with the
    same arguments; only rank 0 writes files.

    Returns a :class:`TrainResult`. Divergence (a non-finite loss or gradient norm) does not
    raise: the bad update is skipped, diagnostics are written, and the result's status is
    "failed" — an expected outcome of a learning-rate sweep that the caller records.
    """
    cfg.validate()
    run_path = _run_path(run_dir)
    trainer = _Trainer(model, optimizer, data, cfg, run_path, eval_hooks, loss_fn)
    is_main = trainer.ctx.is_main
    with _deterministic(cfg.deterministic), contextlib.ExitStack() as stack:
        trainer.start(resume)
        progress.skip(trainer.step)
        show = cfg.progress and is_main and sys.stderr.isatty()
        bar = stack.enter_context(
            tqdm(total=cfg.steps, initial=trainer.step, disable=not show, unit="step")
        )
        if is_main:
            origin = "fresh" if trainer.resumed_from is None else f"resumed at {trainer.step}"
            _say(f"training {run_path}: {cfg.steps} steps ({origin})", bar)
        metrics = None
        if is_main:
            metrics = stack.enter_context(open(trainer.metrics_path, "a", encoding="utf-8"))
        return _Session(trainer, metrics, bar).run()
