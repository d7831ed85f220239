"""Files written whole or not at all, and JSON every strict parser reads.

:func:`atomic_write` streams into a temp file ``.NAME.PID.HEX.tmp`` in the same folder, fsyncs
it, renames it over the target and makes the rename durable, so a reader sees the old file or
the whole new one and an interrupted write leaves at most a temp file (:func:`is_temp`,
:func:`temp_owner`: whose it is). Files get the mode the process umask gives (like ``open``),
not ``mkstemp``'s 0600. :func:`strict_json` writes no NaN or Infinity: a non-finite number
becomes null with a ``<key>_status`` beside it (:func:`finite_json`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO


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


def temp_owner(path: Path) -> int | None:
    """The pid an atomic write's temp file ``.NAME.PID.HEX.tmp`` was made by (None: unknown)."""
    parts = path.name.split(".")
    try:
        return int(parts[-3])
    except (IndexError, ValueError):
        return None


def is_temp(name: str) -> bool:
    """Whether ``name`` is an atomic write's temp file (``.NAME.PID.HEX.tmp``)."""
    return name.startswith(".") and name.endswith(".tmp")


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
