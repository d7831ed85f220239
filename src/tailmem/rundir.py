"""Run directories: the only hand-off between an experiment and the report.

A run directory holds ``config.yaml`` (the full config plus the environment that produced it),
the experiment's outputs (``results.json``, CSVs, figures, ``claims.json``) and, once the
experiment has finished, ``COMPLETE``. Every write is atomic (temp file in the same folder, then
``os.replace``) so an interrupted run never leaves a half-written file behind.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import io
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from tailmem.config import dump_yaml, to_dict
from tailmem.errors import DataError

COMPLETE_MARKER = "COMPLETE"


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Stream a file through ``write(handle)``; readers see the old file or the whole new one.

    The data goes to a temp file in the same folder, is fsynced, renamed over ``path`` and the
    rename is made durable; on any error the temp file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable; a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def config_digest(experiment: str, config: Mapping[str, Any]) -> str:
    """A short stable hash of an experiment's config, used to decide whether a run can be reused."""
    text = json.dumps({"experiment": experiment, "config": config}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def environment() -> dict[str, Any]:
    """Versions and machine facts recorded with every run."""
    import numpy
    import torch

    from tailmem import __version__

    device = "cpu"
    if torch.cuda.is_available():
        device = f"cuda ({torch.cuda.get_device_name(0)})"
    return {
        "tailmem": __version__,
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "device": device,
        "cpu_threads": torch.get_num_threads(),
        "argv": sys.argv,
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


class RunDir:
    """A folder that one experiment run writes into, atomically, file by file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def file(self, name: str) -> Path:
        return self.path / name

    def subdir(self, name: str) -> RunDir:
        return RunDir(self.path / name)

    def write_text(self, name: str, text: str) -> Path:
        target = self.file(name)
        atomic_write_text(target, text)
        return target

    def write_json(self, name: str, obj: Any) -> Path:
        """Write ``obj`` as strict JSON (see :func:`strict_json`), atomically."""
        return self.write_text(name, strict_json(obj))

    def read_json(self, name: str) -> Any:
        target = self.file(name)
        try:
            return json.loads(target.read_text())
        except FileNotFoundError:
            raise DataError(f"{target} is missing; expected the run to have written it") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(
                f"{target} is not valid JSON ({exc}); delete the run and redo it"
            ) from None

    def write_csv(self, name: str, rows: Iterable[Mapping[str, Any]]) -> Path:
        rows = list(rows)
        buffer = io.StringIO()
        if rows:
            fields = list(dict.fromkeys(key for row in rows for key in row))
            writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return self.write_text(name, buffer.getvalue())

    def save_figure(self, fig: Any, stem: str) -> list[Path]:
        """Save a matplotlib figure as ``stem.png`` and ``stem.svg``, then close it."""
        import matplotlib.pyplot as plt

        paths = []
        for ext in ("png", "svg"):
            buffer = io.BytesIO()
            fig.savefig(buffer, format=ext, dpi=120, bbox_inches="tight")
            target = self.file(f"{stem}.{ext}")
            atomic_write_bytes(target, buffer.getvalue())
            paths.append(target)
        plt.close(fig)
        return paths

    def save_report_figure(self, fig: Any, stem: str, caption: str) -> dict[str, str]:
        """:meth:`save_figure`, returning the ``report.json`` entry that shows it with
        ``caption`` (see :mod:`tailmem.report.render`)."""
        self.save_figure(fig, stem)
        return {"file": f"{stem}.png", "caption": caption}

    def write_config(self, experiment: str, preset: str, cfg: Any) -> Path:
        """Record what a re-run needs: experiment, preset, full config, digest, environment."""
        config = to_dict(cfg)
        record = {
            "experiment": experiment,
            "preset": preset,
            "digest": config_digest(experiment, config),
            "config": config,
            "environment": environment(),
        }
        return self.write_text("config.yaml", dump_yaml(record))

    def read_config(self) -> dict[str, Any]:
        import yaml

        target = self.file("config.yaml")
        try:
            record = yaml.safe_load(target.read_text())
        except FileNotFoundError:
            raise DataError(f"{target} is missing; this is not a tailmem run directory") from None
        except yaml.YAMLError as exc:
            raise DataError(f"{target} is not valid YAML ({exc})") from None
        if not isinstance(record, dict) or "experiment" not in record or "config" not in record:
            raise DataError(f"{target} lacks the experiment/config fields of a tailmem run record")
        return record

    @property
    def is_complete(self) -> bool:
        return self.file(COMPLETE_MARKER).is_file()

    def mark_complete(self, wall_seconds: float | None = None) -> None:
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.write_json(COMPLETE_MARKER, {"finished": stamp, "wall_seconds": wall_seconds})

    def clear_complete(self) -> None:
        self.file(COMPLETE_MARKER).unlink(missing_ok=True)

    def remove_stale_temp_files(self) -> list[Path]:
        """Delete the temp files of atomic writes that a killed process (SIGKILL, power loss)
        never renamed; call only while no other process writes into this run."""
        stale = [p for p in self.path.rglob(".*.tmp") if p.is_file()]
        for path in stale:
            path.unlink(missing_ok=True)
        return stale


def finite_json(obj: Any) -> Any:
    """``obj`` with every NaN/±Infinity float replaced by ``None``.

    In a dict, a replaced ``key`` gets a sibling ``"<key>_status"`` saying what it was
    (``"nan"``, ``"inf"``, ``"-inf"``), so a reader can tell a missing value from a diverged one.
    """
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            out[key] = finite_json(value)
            if isinstance(value, float) and not math.isfinite(value):
                out[f"{key}_status"] = repr(value)
        return out
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def strict_json(obj: Any, indent: int | None = 2) -> str:
    """``obj`` as JSON that every strict parser accepts: no NaN/Infinity (see
    :func:`finite_json`); numpy/torch values, paths and dataclasses converted first."""
    plain = json.loads(json.dumps(obj, default=_json_default, allow_nan=True))
    return json.dumps(finite_json(plain), indent=indent, allow_nan=False, ensure_ascii=False) + "\n"


def _json_default(value: Any) -> Any:
    """Serialise numpy/torch scalars and arrays, paths and dataclasses found in results."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")
