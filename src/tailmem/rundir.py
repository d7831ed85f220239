"""Run directories: the only hand-off between an experiment and the report.

A run directory holds ``config.yaml`` (the full config plus the environment that produced it),
the experiment's outputs (``results.json``, CSVs, figures, ``claims.json``) and, once the
experiment has finished, ``COMPLETE``. Every write is atomic (temp file in the same folder, then
``os.replace``) so an interrupted run never leaves a half-written file behind; files get the mode
the process umask gives (like ``open``), not ``mkstemp``'s 0600.

``COMPLETE`` lists the run's top-level files with their SHA-256; a run counts as complete only
while every listed file exists with that hash. One process at a time writes a run:
:meth:`RunDir.lock` takes an advisory ``flock`` on ``.lock`` for the life of the run.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import fcntl
import hashlib
import io
import json
import math
import os
import platform
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from tailmem.config import dump_yaml, to_dict
from tailmem.errors import ConfigError, DataError

COMPLETE_MARKER = "COMPLETE"
LOCK_FILE = ".lock"
UNLISTED = frozenset({COMPLETE_MARKER, "progress.json"})
"""Top-level files that COMPLETE does not list: itself, and progress that is rewritten later."""


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Stream a file through ``write(handle)``; readers see the old file or the whole new one.

    The data goes to a temp file in the same folder, is fsynced, renamed over ``path`` and the
    rename is made durable; on any error the temp file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
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


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _temp_owner(path: Path) -> int | None:
    """The pid an atomic write's temp file ``.NAME.PID.HEX.tmp`` was made by (None: unknown)."""
    parts = path.name.split(".")
    try:
        return int(parts[-3])
    except (IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            problem = " ".join(str(exc).split())
            raise DataError(f"{target} is not valid YAML text ({problem})") from None
        if not isinstance(record, dict) or "experiment" not in record or "config" not in record:
            raise DataError(f"{target} lacks the experiment/config fields of a tailmem run record")
        return record

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run's writer lock (``flock`` on ``.lock``) for the block; a second writer
        gets a :class:`ConfigError` at once. The kernel drops the lock when the holder dies, so a
        killed run never leaves a stale lock behind."""
        target = self.file(LOCK_FILE)
        fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                raise ConfigError(
                    f"{self.path} is being written by another tailmem process (pid {holder}); "
                    "wait for it to finish or choose another --out"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    def listed_files(self) -> list[str]:
        """The top-level files :meth:`mark_complete` records (not hidden, not in UNLISTED)."""
        return sorted(
            p.name
            for p in self.path.iterdir()
            if p.is_file() and not p.name.startswith(".") and p.name not in UNLISTED
        )

    @property
    def is_complete(self) -> bool:
        """COMPLETE exists and every file it lists is there with its recorded SHA-256."""
        return self.incomplete_reason() is None

    def incomplete_reason(self) -> str | None:
        """Why this run does not count as complete (None: it does)."""
        marker = self.file(COMPLETE_MARKER)
        if not marker.is_file():
            return "it has no COMPLETE marker"
        try:
            files = json.loads(marker.read_text()).get("files")
        except (OSError, ValueError, AttributeError):
            return f"{marker} is not a JSON record"
        if not isinstance(files, dict) or not files:
            return f"{marker} lists no files with hashes"
        for name, recorded in files.items():
            target = self.file(str(name))
            if Path(str(name)).name != str(name) or not target.is_file():
                return f"{target} listed in COMPLETE is missing"
            if file_sha256(target) != recorded:
                return f"{target} does not match the hash recorded in COMPLETE"
        return None

    def mark_complete(self, wall_seconds: float | None = None) -> None:
        """Write COMPLETE, recording every listed file's SHA-256 (see :meth:`is_complete`)."""
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        files = {name: file_sha256(self.file(name)) for name in self.listed_files()}
        record = {"finished": stamp, "wall_seconds": wall_seconds, "files": files}
        self.write_json(COMPLETE_MARKER, record)

    def clear_complete(self) -> None:
        self.file(COMPLETE_MARKER).unlink(missing_ok=True)

    def remove_stale_temp_files(self) -> list[Path]:
        """Delete the temp files of atomic writes that a killed process (SIGKILL, power loss)
        never renamed. Call while holding :meth:`lock`; a temp file whose writer (the pid in its
        name) is still alive is kept all the same."""
        stale = [
            p
            for p in self.path.rglob(".*.tmp")
            if p.is_file() and not ((pid := _temp_owner(p)) is not None and _alive(pid))
        ]
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
