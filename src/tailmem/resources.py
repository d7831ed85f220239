"""What this machine can run: memory for refusing a config before it dies in the allocator, and
the devices a config names (:func:`check_devices`).

An experiment's ``preflight(cfg)`` (see :mod:`tailmem.runner`) estimates the bytes its largest
allocations need and calls :func:`require_memory`; the estimate should count only what surely
gets allocated, so a config that fits is never refused.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
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


def _device_fields(cfg: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted name, value)`` of every field named ``device`` in a config, nested included."""
    for spec in dataclasses.fields(cfg):
        value = getattr(cfg, spec.name)
        if spec.name == "device":
            yield f"{prefix}{spec.name}", value
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _device_fields(value, f"{prefix}{spec.name}.")


def check_devices(cfg: Any) -> None:
    """Refuse any ``device`` field this machine cannot run: not a torch device string, a kind
    other than cpu/cuda (``meta`` computes nothing), or CUDA where there is none (the usual cause:
    ``--preset paper``, which trains on GPUs, on a CPU machine)."""
    import torch

    for name, value in _device_fields(cfg):
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
                    "cpu/smoke preset here or pass device=cpu"
                )
            if device.index is not None and device.index >= count:
                raise ConfigError(f"{name}: got {value!r}; this machine has {count} CUDA devices")
