"""Which floating-point precision a run trains in: ``fp32``, ``bf16`` or ``auto``.

``bf16`` autocasts forward and loss to bfloat16 (``torch.autocast`` on the run's device, CPU or
CUDA); weights, gradients and optimiser state stay float32 either way. Whether that is faster
depends on the machine: the CPUs this project has run on multiply bfloat16 matrices anywhere
from 15x faster than float32 (AVX512-BF16/AMX) to 70x slower (emulated). So ``auto`` measures
instead of guessing: it times float32 and bfloat16 products of the shapes the models use
(:data:`PROBE_SHAPES`, one thread on a CPU) and picks ``bf16`` only when every shape is at least
:data:`BF16_MIN_SPEEDUP` times faster in bfloat16.

The measurement is taken once per machine and cached in ``bf16_probe.json`` in the cache
directory (``$TAILMEM_CACHE``, else ``~/.cache/tailmem``), keyed by the device's name and the
torch version (:func:`probe`: processes that start together measure once and agree). A run
records the resolved precision, never ``auto`` (:func:`resolve_precision`): a run whose ``auto``
resolved to ``fp32`` is the same run as an explicit ``fp32`` one.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from tailmem.errors import ConfigError
from tailmem.resources import default_cache_dir
from tailmem.threads import torch_threads

PRECISIONS = ("auto", "fp32", "bf16")
"""What ``precision`` may be set to; a run trains in one of the last two."""

BF16_MIN_SPEEDUP = 1.3
"""How much faster bfloat16 products must be, at every probed shape, for ``auto`` to pick them:
a clear margin, since autocasting adds casts that a bare product does not pay."""

PROBE_SHAPES = ((1024, 256, 1024), (1024, 768, 3072))
"""``(rows, inner, cols)`` of the timed products: a batch of 1024 token rows through the cpu
presets' FFN (d 256, d_ff 1024) and through the paper's (d 768, d_ff 3072)."""

PROBE_FILE = "bf16_probe.json"


@dataclass(frozen=True)
class Probe:
    """One machine's measurement: GFLOP/s of float32 and bfloat16 at each of :data:`
    PROBE_SHAPES` (in order) and the precision ``auto`` resolves to there."""

    device: str
    torch: str
    fp32_gflops: tuple[float, ...]
    bf16_gflops: tuple[float, ...]
    choice: str

    @property
    def speedups(self) -> tuple[float, ...]:
        """bfloat16 / float32 rate at each shape."""
        return tuple(b / f for b, f in zip(self.bf16_gflops, self.fp32_gflops, strict=True))


def device_name(kind: str) -> str:
    """What the probe is keyed by: the CUDA device's name, or the CPU's model name with a short
    hash of its feature flags (``/proc/cpuinfo``; virtual machines may show one model name for
    CPUs with and without bfloat16 instructions), else the platform's processor string."""
    if kind == "cuda":
        return f"cuda: {torch.cuda.get_device_name()}"
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            fields.setdefault(name.strip(), value.strip())
    if "model name" in fields:
        flags = hashlib.sha256(fields.get("flags", "").encode()).hexdigest()[:8]
        return f"cpu: {fields['model name']} (flags {flags})"
    return f"cpu: {platform.processor() or platform.machine()}"


def matmul_gflops(shape: tuple[int, int, int], dtype: torch.dtype, device: str,
                  seconds: float = 0.25) -> float:  # fmt: skip
    """GFLOP/s of a ``(rows, inner) @ (inner, cols)`` product in ``dtype`` on ``device``: the
    best of repeated products over about ``seconds`` (load only ever slows one down)."""
    rows, inner, cols = shape
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(rows, inner, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(inner, cols, generator=gen).to(device=device, dtype=dtype)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    a @ b
    sync()
    best, start = float("inf"), time.perf_counter()
    while time.perf_counter() - start < seconds:
        began = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - began)
    return 2 * rows * inner * cols / best / 1e9


def measure(kind: str) -> Probe:
    """Time every probe shape in float32 and bfloat16 on a ``kind`` device (one thread on a
    CPU: the presets train each run on one) and choose."""
    with torch_threads(1 if kind == "cpu" else None):
        fp32 = tuple(round(matmul_gflops(s, torch.float32, kind), 2) for s in PROBE_SHAPES)
        bf16 = tuple(round(matmul_gflops(s, torch.bfloat16, kind), 2) for s in PROBE_SHAPES)
    fast = all(b >= BF16_MIN_SPEEDUP * f for b, f in zip(bf16, fp32, strict=True))
    return Probe(device_name(kind), torch.__version__, fp32, bf16, "bf16" if fast else "fp32")


def _key(kind: str) -> str:
    return f"{device_name(kind)} | torch {torch.__version__}"


def _read(path: Path) -> dict[str, object]:
    """The cache file's entries (none when it is missing or unreadable: measured again)."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def _probe_of(entry: object) -> Probe | None:
    """The probe an entry of the cache file holds (None: not a whole probe)."""
    if not isinstance(entry, dict):
        return None
    try:
        found = Probe(**entry)
        found = replace(found, fp32_gflops=tuple(found.fp32_gflops),
                        bf16_gflops=tuple(found.bf16_gflops))  # fmt: skip
    except TypeError:
        return None
    return found if found.choice in ("fp32", "bf16") else None


@functools.lru_cache(maxsize=4)
def probe(kind: str) -> Probe:
    """This machine's measurement for a ``kind`` device, from the cache file or, when it holds
    none, measured and stored there. The file is read and written under an exclusive lock, so
    processes that start together measure once and all use that one entry; where the cache
    directory cannot be written the measurement is used without being stored."""
    path = default_cache_dir() / PROBE_FILE
    key = _key(kind)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_name(f".{PROBE_FILE}.lock"), "a")  # noqa: SIM115
    except OSError:
        return measure(kind)
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = _read(path)
        found = _probe_of(entries.get(key))
        if found is not None:
            return found
        found = measure(kind)
        entries[key] = asdict(found)
        with contextlib.suppress(OSError):
            temp = path.with_name(f".{PROBE_FILE}.{os.getpid()}.tmp")
            temp.write_text(json.dumps(entries, indent=1))
            os.replace(temp, path)
        return found


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[None]:
    """The context a resolved ``precision`` computes forward passes in on ``device``: bfloat16
    autocast for ``bf16``, nothing for ``fp32``."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def check_precision(precision: str, device: str) -> None:
    """Refuse (:class:`ConfigError`) a precision not in :data:`PRECISIONS`, a device that is no
    torch device string, and bfloat16 (or ``auto``) on a device kind other than CPU or CUDA."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        raise ConfigError(f"device {device!r} is not a torch device string") from None
    if precision != "fp32" and kind not in ("cpu", "cuda"):
        raise ConfigError(
            f"precision {precision!r} needs a cpu or cuda device (got {device!r}); use fp32"
        )


def resolve_precision(precision: str, device: str) -> str:
    """``fp32`` or ``bf16``: ``precision`` itself, or for ``auto`` the :func:`probe`'s choice
    on ``device``'s kind (checked first by :func:`check_precision`)."""
    check_precision(precision, device)
    if precision != "auto":
        return precision
    return probe(torch.device(device).type).choice
