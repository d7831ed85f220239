"""Memory available to this process, for refusing a config before it dies in the allocator.

An experiment's ``preflight(cfg)`` (see :mod:`tailmem.runner`) estimates the bytes its largest
allocations need and calls :func:`require_memory`; the estimate should count only what surely
gets allocated, so a config that fits is never refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from tailmem.errors import ConfigError

GIB = 1024**3


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
