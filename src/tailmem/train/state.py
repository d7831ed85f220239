"""What a training run keeps besides the weights: loop counters, RNG states, metrics lines,
checkpoints and divergence diagnostics (the files of :func:`tailmem.train.train`).

Checkpoints hold tensors and plain containers only, so they load with ``weights_only=True``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor, nn

from tailmem.atomic import atomic_write_text
from tailmem.errors import CheckpointError
from tailmem.train import distributed as D
from tailmem.train.checkpoint import (
    checkpoint_path,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)

COMPLETE = "complete"
"""Status of a run that trained every step."""
DIVERGED = "diverged"
"""Status of a run whose loss or gradient norm went non-finite (a result, not an error)."""
DIVERGED_FILE = "diverged.json"
"""The file a diverged run writes: status, the update (1-based) and the one-line message."""


@dataclass
class LoopState:
    """The loop's counters: updates done, input tokens so far (all ranks), training seconds,
    and the (loss, grad norm) pairs and tokens of the current logging window."""

    step: int = 0
    tokens: int = 0
    elapsed: float = 0.0
    window: list[tuple[float, float]] = field(default_factory=list)
    window_tokens: int = 0

    def record(self, step: int, elapsed: float, tokens: int, loss: float, grad_norm: float) -> None:
        """Count update ``step`` (0-based): its tokens and the time so far; a finite update also
        joins the window and advances ``step``."""
        self.tokens += tokens
        self.window_tokens += tokens
        self.elapsed = elapsed
        if math.isfinite(loss) and math.isfinite(grad_norm):
            self.window.append((loss, grad_norm))
            self.step = step + 1

    def to_checkpoint(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "elapsed": self.elapsed,
            "window": [list(w) for w in self.window],
            "window_tokens": self.window_tokens,
        }

    @classmethod
    def from_checkpoint(cls, step: int, loop: Mapping[str, Any]) -> LoopState:
        window = [(float(a), float(b)) for a, b in loop["window"]]
        return cls(step, loop["tokens"], loop["elapsed"], window, loop["window_tokens"])


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices): call before building the model."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def json_value(value: Any) -> Any:
    """A JSON-safe copy: tensors and numpy values become numbers or lists, non-finite floats the
    strings "nan" / "inf" / "-inf" (JSON has no literal for them)."""
    if isinstance(value, Tensor):
        value = value.item() if value.numel() == 1 else value.tolist()
    elif isinstance(value, np.generic | np.ndarray):
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return value


# --- RNG state (tensors and plain containers only, for weights_only loading) -----------------


def rng_state(device: torch.device) -> dict[str, Any]:
    kind, keys, pos, has_gauss, gauss = cast(tuple[Any, ...], np.random.get_state())
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


def set_rng_state(state: Mapping[str, Any], device: torch.device) -> None:
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
    rows: list[dict[str, Any]] = []
    if not Path(path).exists():
        return rows
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def truncate_metrics(path: Path, step: int) -> None:
    """Keep only the lines with ``step`` <= the checkpoint's step (atomic rewrite)."""
    if not path.exists():
        return
    kept = [row for row in read_metrics(path) if row.get("step", 0) <= step]
    atomic_write_text(path, "".join(json.dumps(row, allow_nan=False) + "\n" for row in kept))


# --- checkpoints ------------------------------------------------------------------------------


@dataclass
class Restored:
    """What resuming from a checkpoint gives back besides the model and optimiser state."""

    state: LoopState
    base_lrs: list[float]


def restore(
    path: Path,
    model: nn.Module,
    optimizer: Any,
    data: Any,
    steps: int,
    ctx: D.DistContext,
    device: torch.device,
    identity: str | None = None,
) -> Restored:
    """Load checkpoint ``path`` into model, optimiser, RNGs and data source; a missing or
    malformed field, a step outside ``0..steps``, a run ``identity`` other than the one the
    checkpoint records, or any mismatch is a :class:`CheckpointError` naming the file and what
    was expected. What is resumed is verified against the checkpoint's :data:`VERIFY` record:
    the step it holds (not its file name's), its RNG states and the batch training continues
    with (:func:`position_record`)."""
    state = load_checkpoint(path)
    _check_identity(path, state, identity)
    _check_fields(path, state, steps)
    _check_position(path, state)
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise CheckpointError(f"checkpoint {path} does not match the model ({first})") from exc
    try:
        optimizer.load_state_dict(state["optimizer"])
    except (ValueError, TypeError, KeyError) as exc:
        raise CheckpointError(f"checkpoint {path} does not match the optimiser ({exc})") from exc
    _check_optimizer_shapes(path, optimizer)
    if len(state["base_lrs"]) != len(optimizer.param_groups):
        raise CheckpointError(
            f"checkpoint {path} has {len(state['base_lrs'])} learning rates for "
            f"{len(optimizer.param_groups)} parameter groups"
        )
    rngs = state["rng"]
    if len(rngs) != ctx.world_size:
        warnings.warn(
            f"checkpoint {path} was written by {len(rngs)} ranks, resuming with "
            f"{ctx.world_size}: random streams (dropout) will differ from the original run",
            stacklevel=3,
        )
    try:
        set_rng_state(rngs[ctx.rank % len(rngs)], device)
        if state.get("data") is not None and hasattr(data, "load_state_dict"):
            data.load_state_dict(state["data"])
        loop = LoopState.from_checkpoint(state["step"], state["loop"])
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as exc:
        raise CheckpointError(
            f"checkpoint {path} has a malformed RNG, data or loop state ({type(exc).__name__}: "
            f"{exc}); expected the state a tailmem training run writes"
        ) from exc
    _check_next_batch(path, state, data, steps, ctx)
    return Restored(loop, [float(lr) for lr in state["base_lrs"]])


IDENTITY = "identity"
"""The checkpoint field naming the run that wrote it (``train(..., identity=...)``)."""


def _check_identity(path: Path, state: Mapping[str, Any], identity: str | None) -> None:
    """Refuse a checkpoint of another run: one that records an identity other than ``identity``,
    or none (written by a caller that gave none, or by a tailmem from before identities were
    recorded). Resuming it would continue someone else's weights, optimiser state and learning
    rates under this run's name. Without an ``identity`` the caller claims nothing: any passes."""
    if identity is None:
        return
    recorded = state.get(IDENTITY)
    if recorded == identity:
        return
    written = (
        "records no run identity (written before tailmem recorded one, or without one)"
        if recorded is None
        else f"was written by run {recorded!r}"
    )
    raise CheckpointError(
        f"checkpoint {path} {written}; expected run {identity!r}: it is another run's, not "
        f"resumed; delete {path.parent} to train this run from scratch"
    )


_FIELDS = {"model": dict, "optimizer": dict, "base_lrs": list, "rng": list, "loop": dict}
"""The fields :func:`save` writes that resuming needs, with their types."""


def _check_fields(path: Path, state: Mapping[str, Any], steps: int) -> None:
    """Refuse a checkpoint that lacks a field, has one of the wrong type, or a step outside
    ``0..steps`` (it loads under ``weights_only`` yet cannot be what :func:`save` wrote)."""
    for name, kind in _FIELDS.items():
        if not isinstance(state.get(name), kind):
            got = "no such field" if name not in state else type(state[name]).__name__
            raise CheckpointError(
                f"checkpoint {path}: field {name!r} is {got}; expected a {kind.__name__} "
                "(written by tailmem train)"
            )
    if not state["rng"]:
        raise CheckpointError(f"checkpoint {path}: field 'rng' is empty; expected one per rank")
    if not all(isinstance(lr, int | float) and math.isfinite(lr) for lr in state["base_lrs"]):
        raise CheckpointError(
            f"checkpoint {path}: field 'base_lrs' is {state['base_lrs']!r}; expected finite "
            "learning rates"
        )
    if not 0 <= state["step"] <= steps:
        raise CheckpointError(
            f"checkpoint {path} is at step {state['step']}; expected a step in 0..{steps}"
        )


VERIFY = "verify"
"""The checkpoint field a resume checks the checkpoint against (:func:`position_record`)."""


def digest(value: Any) -> str:
    """SHA-256 of tensors and plain containers by value (a tensor by dtype, shape and bytes)."""
    h = hashlib.sha256()

    def feed(item: Any) -> None:
        if isinstance(item, Tensor):
            flat = item.detach().cpu().contiguous()
            h.update(f"tensor {flat.dtype} {tuple(flat.shape)}".encode())
            h.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
        elif isinstance(item, Mapping):
            h.update(b"{")
            for key in sorted(item, key=str):
                h.update(repr(key).encode())
                feed(item[key])
            h.update(b"}")
        elif isinstance(item, list | tuple):
            h.update(b"[")
            for part in item:
                feed(part)
            h.update(b"]")
        else:
            h.update(repr(item).encode())

    feed(value)
    return h.hexdigest()


def _next_batch(data: Any, step: int, steps: int, world_size: int) -> str | None:
    """The digest of rank 0's batch of ``step`` — where the data stand when training resumes
    there — or None after the last step."""
    if step >= steps:
        return None
    return digest(data.batch(step, 0, world_size))


def position_record(
    step: int, rngs: list[Any], data: Any, steps: int, world_size: int
) -> dict[str, Any]:
    """What a resume verifies (:data:`VERIFY`): the step, the digest of every rank's RNG state
    and the digest of the batch training continues with (the data position)."""
    return {
        "step": step,
        "rng": digest(rngs),
        "next_batch": _next_batch(data, step, steps, world_size),
        "world_size": world_size,
    }


def _check_position(path: Path, state: Mapping[str, Any]) -> None:
    """Refuse a checkpoint whose file name names another step than it holds (a renamed or
    copied file), or whose step or RNG states are not those its verification record was
    written with."""
    match = re.fullmatch(r"step_(\d+)\.pt", path.name)
    if match and int(match.group(1)) != state["step"]:
        raise CheckpointError(
            f"checkpoint {path} holds step {state['step']}, not the step {int(match.group(1))} "
            "its name says (renamed or copied); expected a checkpoint under its own name: "
            f"delete it to resume from an earlier one"
        )
    record = state.get(VERIFY)
    if not isinstance(record, dict):
        raise CheckpointError(
            f"checkpoint {path} records no step, RNG and data position to verify (written by an "
            f"older tailmem); expected one that does: delete {path.parent} to train from scratch"
        )
    if record.get("step") != state["step"]:
        raise CheckpointError(
            f"checkpoint {path} holds step {state['step']} but was written at step "
            f"{record.get('step')!r}; expected the step it was written at (an edited file)"
        )
    if record.get("rng") != digest(state["rng"]):
        raise CheckpointError(
            f"checkpoint {path}: its RNG states are not those it was written with (their digest "
            "differs); expected an unedited checkpoint: delete it to resume from an earlier one"
        )


def _check_next_batch(
    path: Path, state: Mapping[str, Any], data: Any, steps: int, ctx: D.DistContext
) -> None:
    """Refuse to resume when the batch training continues with is not the one the checkpoint
    was written before (the data set or its order changed, or the data position moved); only
    under the world size it was written with (another splits the batches otherwise)."""
    record = state[VERIFY]
    if record.get("world_size") != ctx.world_size or record.get("next_batch") is None:
        return
    found = _next_batch(data, state["step"], steps, ctx.world_size)
    if found != record["next_batch"]:
        raise CheckpointError(
            f"checkpoint {path}: the batch of step {state['step']} is not the one it was written "
            "before (the data or their order changed); expected the data the run started with: "
            f"delete {path.parent} to train from scratch"
        )


def _check_optimizer_shapes(path: Path, optimizer: Any) -> None:
    """Every per-parameter state tensor loaded into ``optimizer`` (momentum, moments) must have
    its parameter's shape: ``load_state_dict`` does not check this, the next update would."""
    children = getattr(optimizer, "optimizers", None)  # a routed optimiser's per-kind children
    states = [opt.state for opt in children.values()] if children else [optimizer.state]
    for group in optimizer.param_groups:
        for param in group["params"]:
            found = [state[param] for state in states if param in state]
            for key, value in (found[0] if found else {}).items():
                if isinstance(value, Tensor) and value.ndim and value.shape != param.shape:
                    raise CheckpointError(
                        f"checkpoint {path}: optimiser state {key!r} has shape "
                        f"{tuple(value.shape)}; expected {tuple(param.shape)} (its parameter's)"
                    )


def save(
    ckpt_dir: Path,
    model: nn.Module,
    optimizer: Any,
    data: Any,
    restored: Restored,
    cfg: Any,
    ctx: D.DistContext,
    device: torch.device,
    identity: str | None = None,
) -> None:
    """Checkpoint after ``restored.state.step`` updates (every rank's RNG; rank 0 writes), with
    the run's ``identity``, then keep the ``cfg.keep_ckpts`` newest."""
    rngs = D.all_gather_object(rng_state(device), ctx)
    if not ctx.is_main:
        return
    done = restored.state.step
    verify = position_record(done, rngs, data, cfg.steps, ctx.world_size)
    payload = {
        "step": done,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "base_lrs": restored.base_lrs,
        "rng": rngs,
        "data": data.state_dict() if hasattr(data, "state_dict") else None,
        "loop": restored.state.to_checkpoint(),
        "world_size": ctx.world_size,
        "train_config": asdict(cfg),
        IDENTITY: identity,
        VERIFY: verify,
    }
    save_checkpoint(checkpoint_path(ckpt_dir, done), payload)
    if cfg.keep_ckpts is not None:
        prune_checkpoints(ckpt_dir, cfg.keep_ckpts)


def divergence_message(run_dir: Path, step: int, loss: float, gnorm: float, lr: float) -> str:
    """The one line that reports a non-finite update ``step`` (0-based)."""
    return (
        f"training diverged at update {step + 1}: loss={loss}, grad_norm={gnorm} "
        f"(lr {lr:.3g}); the update was not applied; see {run_dir / 'nan_diagnostics.json'}"
    )


def write_divergence(
    run_dir: Path, model: nn.Module, step: int, loss: float, gnorm: float, lrs: list[float],
    batch: tuple[Tensor, Tensor],
) -> None:  # fmt: skip
    """Write ``diverged.json``, ``nan_diagnostics.json`` and ``nan_batch.pt`` for the update
    ``step`` (0-based) that went non-finite."""
    message = divergence_message(run_dir, step, loss, gnorm, lrs[0])
    diagnostics = {
        "step": step + 1,
        "loss": loss,
        "grad_norm": gnorm,
        "lrs": lrs,
        "batch_file": "nan_batch.pt",
        "grad_norms": {
            name: (p.grad.float().norm().item() if p.grad is not None else None)
            for name, p in model.named_parameters()
        },
        "nonfinite_params": [
            name for name, p in model.named_parameters() if not torch.isfinite(p.detach()).all()
        ],
    }
    atomic_write_text(
        run_dir / "nan_diagnostics.json",
        json.dumps(json_value(diagnostics), indent=1, allow_nan=False) + "\n",
    )
    x, y = batch
    torch.save({"step": step, "x": x.cpu(), "y": y.cpu()}, run_dir / "nan_batch.pt")
    atomic_write_text(
        run_dir / DIVERGED_FILE,
        json.dumps({"status": DIVERGED, "step": step + 1, "message": message}, allow_nan=False)
        + "\n",
    )
