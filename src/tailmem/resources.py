"""What this machine can run: memory for refusing a config before it dies in the allocator, the
devices a config names (:func:`check_devices`) and the folders it writes outside the run
(:func:`check_writable_folder`).

An experiment's ``preflight(cfg)`` (see :mod:`tailmem.runner`) estimates the bytes its largest
allocations need and calls :func:`require_memory`; the estimate should count only what surely
gets allocated, so a config that fits is never refused.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tailmem.errors import ConfigError

GIB = 1024**3


def default_cache_dir() -> Path:
    """Where tailmem caches what it builds or measures once per machine (corpora, the bf16
    probe): ``$TAILMEM_CACHE`` if set, else ``~/.cache/tailmem``."""
    return Path(os.environ.get("TAILMEM_CACHE") or Path.home() / ".cache" / "tailmem")


def available_memory() -> int | None:
    """Bytes of memory available now (``MemAvailable`` on Linux; None where unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def require_memory(what: str, nbytes: float) -> None:
    """Raise :class:`ConfigError` when ``what`` needs more than the available memory."""
    available = available_memory()
    if available is not None and nbytes > available:
        raise ConfigError(
            f"{what} needs about {nbytes / GIB:.3g} GiB of memory but {available / GIB:.3g} GiB "
            "are available; expected a smaller config"
        )


def rows_bytes(rows: int, fields: int) -> int:
    """Bytes a list of ``rows`` dicts of ``fields`` float values surely takes in CPython (a CSV
    table an experiment builds): each empty dict, an entry (hash, key and value: three
    pointers) and a float object per field, and the list's pointer to the row."""
    return rows * (sys.getsizeof({}) + fields * (24 + sys.getsizeof(0.0)) + 8)


def trajectory_bytes(steps: int, runs: int = 1) -> int:
    """Bytes :func:`tailmem.assoc.train` surely takes for ``steps`` steps of ``runs`` runs at
    once: the loss of every step (float64); a schedule made by ``lr_schedule`` adds 8 bytes a
    step, one broadcast from a grid nothing."""
    return 8 * (steps + 1) * runs


def require_largest(parts: Mapping[str, float]) -> None:
    """:func:`require_memory` for the largest of ``parts`` (``{what: bytes}``), parts a study
    runs one after another, so the message names the one that does not fit."""
    what = max(parts, key=lambda name: parts[name])
    require_memory(what, parts[what])


def check_writable_folder(path: str | os.PathLike[str], what: str, fix: str = "") -> None:
    """Refuse, before anything is written, a folder this process could not create and write
    into: a file in its place or in the way, a read-only file system, no permission, a place
    where no folder can be made (``/proc/x``: tried, with a folder made and removed at once).
    ``what`` names where the path came from (``data.cache_dir``), ``fix`` how to choose
    another."""
    hint = f" ({fix})" if fix else ""
    path = Path(path)
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        where = "is a file" if existing == path else f"cannot be made: {existing} is a file"
        raise ConfigError(f"{what}: {path} {where}; expected a folder{hint}")
    problem = None
    if hasattr(os, "statvfs") and os.statvfs(existing).f_flag & os.ST_RDONLY:
        problem = "is on a read-only file system"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = "is not writable by this user"
    else:
        problem = _probe(existing)
    if problem is not None:
        place = "" if existing == path else f" (its nearest existing folder {existing})"
        raise ConfigError(
            f"{what}: {path}{place} {problem}; expected a folder this user can write{hint}"
        )


def _probe(folder: Path) -> str | None:
    """Why a folder cannot be made in ``folder`` (None: one was, and is gone again). Permission
    bits do not tell: root may "write" /proc, where nothing can be made."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".tailmem-probe-", dir=folder))
    except OSError as exc:
        return f"cannot hold a new folder ({exc.strerror or type(exc).__name__})"
    return None


def _device_fields(cfg: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted name, value)`` of every field named ``device`` in a config, nested included."""
    for spec in dataclasses.fields(cfg):
        value = getattr(cfg, spec.name)
        if spec.name == "device":
            yield f"{prefix}{spec.name}", value
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _device_fields(value, f"{prefix}{spec.name}.")


def check_devices(cfg: Any, within: tuple[str, Mapping[str, Any]] | None = None) -> None:
    """Refuse any ``device`` field this machine cannot run: not a torch device string, a kind
    other than cpu/cuda (``meta`` computes nothing), or CUDA where there is none (the usual cause:
    ``--preset paper``, which trains on GPUs, on a CPU machine). The hint is the override that
    fixes it, by the field's dotted key (``train.device=cpu``); for a config a study builds from
    a mapping of overrides ``within = (key, mapping)``, that mapping with the device added
    (``'common={seeds: 3, train.device: cpu}'``: an override replaces the whole mapping)."""
    import torch
    import yaml

    for name, value in _device_fields(cfg):
        fix = f"{name}=cpu"
        if within is not None:
            key, mapping = within
            entries = yaml.safe_dump(
                {**mapping, name: "cpu"}, default_flow_style=True, sort_keys=False, width=10**6
            )
            fix = f"'{key}={entries.strip()}'"
        if value is None:
            continue
        try:
            device = torch.device(value)
        except (RuntimeError, TypeError):
            raise ConfigError(
                f"{name}: got {value!r}; expected a torch device such as cpu or cuda"
            ) from None
        if device.type not in ("cpu", "cuda"):
            raise ConfigError(f"{name}: got {value!r}; expected cpu or cuda")
        if device.type == "cuda":
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if count == 0:
                raise ConfigError(
                    f"{name}: got {value!r} but this machine has no CUDA device; use a "
                    f"cpu/smoke preset here or pass {fix}"
                )
            if device.index is not None and device.index >= count:
                raise ConfigError(f"{name}: got {value!r}; this machine has {count} CUDA devices")
