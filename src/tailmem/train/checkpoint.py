"""Training checkpoints: atomic save, safe load, and finding the latest one.

A checkpoint is one ``torch.save`` file ``<dir>/step_<NNNNNN>.pt`` holding a dict of tensors and
plain Python containers only, so it loads with ``torch.load(weights_only=True)`` (no arbitrary
code runs when a checkpoint is opened). The dict carries ``format`` = :data:`FORMAT`, ``version``
and ``step``; the training loop adds model, optimiser, schedule, RNG, data-position and loop state.

Files are written to a temporary name in the same directory, flushed to disk, then renamed over
the final name, so a crash never leaves a half-written ``step_*.pt`` behind.
"""

from __future__ import annotations

import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from tailmem.atomic import atomic_write
from tailmem.errors import CheckpointError

FORMAT = "tailmem-train-checkpoint"
VERSION = 1
_NAME = re.compile(r"^step_(\d+)\.pt$")


def checkpoint_path(ckpt_dir: Path, step: int) -> Path:
    """Path of the checkpoint taken after ``step`` updates."""
    return Path(ckpt_dir) / f"step_{step:06d}.pt"


def list_checkpoints(ckpt_dir: Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every checkpoint in ``ckpt_dir``, oldest first (none if it is absent)."""
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    found = []
    for path in ckpt_dir.iterdir():
        match = _NAME.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(ckpt_dir: Path) -> Path | None:
    """The checkpoint with the highest step in ``ckpt_dir``, or None."""
    found = list_checkpoints(ckpt_dir)
    return found[-1][1] if found else None


def save_checkpoint(path: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (which must contain an int ``step``) atomically to ``path``."""
    path = Path(path)
    payload = {"format": FORMAT, "version": VERSION, **state}
    atomic_write(path, lambda handle: torch.save(payload, handle))
    return path


RESUME_ADVICE = "delete it or resume from an earlier one"
"""What a damaged checkpoint's error advises where training resumes from it."""


def load_checkpoint(
    path: Path, map_location: str | torch.device = "cpu", advice: str = RESUME_ADVICE
) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``; any defect raises :class:`CheckpointError`
    ending in ``advice`` (what the reader can do: resuming training is told to fall back to an
    earlier checkpoint, a reader of a user's file what it expected)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = load_weights(path, map_location)
    except pickle.UnpicklingError as exc:
        reason = _first_sentence(exc)
        raise CheckpointError(
            f"checkpoint {path} is truncated, corrupt or holds objects that weights_only loading "
            f"refuses ({reason}); {advice}"
        ) from exc
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as exc:
        reason = _first_sentence(exc)
        raise CheckpointError(
            f"checkpoint {path} is truncated or corrupt ({reason}); {advice}"
        ) from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a tailmem training checkpoint (no format={FORMAT!r})")
    if state.get("version") != VERSION:
        raise CheckpointError(
            f"checkpoint {path} has format version {state.get('version')!r}; "
            f"this tailmem reads version {VERSION}"
        )
    if not isinstance(state.get("step"), int):
        raise CheckpointError(f"checkpoint {path} has no integer 'step'")
    return state


def load_weights(path: Path, map_location: str | torch.device = "cpu") -> Any:
    """``torch.load(path, weights_only=True)`` without torch's warnings: a file that is not a
    torch checkpoint (a raw pickle) draws two lines about pickle protocols before the refusal
    that the caller turns into one line of its own."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch(\.|$)")
        return torch.load(path, map_location=map_location, weights_only=True)


def _first_sentence(exc: BaseException) -> str:
    """The first sentence of an exception message (torch's are long), or its type name."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    return text.splitlines()[0].split(". ")[0].rstrip(".")[:160]


def prune_checkpoints(ckpt_dir: Path, keep: int) -> list[Path]:
    """Delete all but the ``keep`` newest checkpoints; returns the deleted paths."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    old = [path for _, path in list_checkpoints(ckpt_dir)[:-keep]]
    for path in old:
        path.unlink(missing_ok=True)
    return old
