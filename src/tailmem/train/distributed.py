"""``torchrun`` / DistributedDataParallel support, and a no-op single-process fallback.

Under ``torchrun`` (environment variables ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``) :func:`init_distributed` creates the default process group —
gloo for CPU training, NCCL for CUDA — and gives each rank its device (``cuda:<LOCAL_RANK>``).
Without those variables, or with ``WORLD_SIZE=1``, nothing is initialised and every collective
below returns its input: the same training code runs in one process without a process group.
"""

from __future__ import annotations

import atexit
import inspect
import os
import socket
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from tailmem.errors import ConfigError


@dataclass(frozen=True)
class DistContext:
    """Where this process sits in the job: rank, number of ranks and its local GPU index."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Only the main rank writes files and prints progress."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        shown = value if len(value) <= 40 else f"{value[:20]}... ({len(value)} characters)"
        raise ConfigError(
            f"environment variable {name}: got {shown!r}; expected an integer"
        ) from None


LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
"""What ``torchrun`` sets beside ``WORLD_SIZE`` and a multi-rank start needs."""


def check_launch() -> None:
    """Refuse (one-line :class:`ConfigError`, before anything is written) a half-set or invalid
    ``torchrun`` environment: with ``WORLD_SIZE`` above 1 every variable of
    :data:`LAUNCH_VARIABLES` must be set, ``RANK`` lie in ``[0, WORLD_SIZE)``, ``LOCAL_RANK`` be
    non-negative, ``MASTER_PORT`` a TCP port (1-65535) and ``MASTER_ADDR`` a host name that
    resolves."""
    world = _env_int("WORLD_SIZE")
    if world is None or world == 1:
        return
    if world < 1:
        raise ConfigError(
            f"environment variable WORLD_SIZE: got {world}; expected a rank count ≥ 1"
        )
    missing = [name for name in LAUNCH_VARIABLES if not os.environ.get(name)]
    if missing:
        raise ConfigError(
            f"environment variable WORLD_SIZE={world} but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not set; expected a launch by torchrun "
            "(which sets them all), or WORLD_SIZE unset for one process"
        )
    rank, local, port = _env_int("RANK"), _env_int("LOCAL_RANK"), _env_int("MASTER_PORT")
    if rank is None or not 0 <= rank < world:
        raise ConfigError(f"environment variable RANK: got {rank}; expected 0..{world - 1}")
    if local is None or local < 0:
        raise ConfigError(f"environment variable LOCAL_RANK: got {local}; expected ≥ 0")
    if port is None or not 1 <= port <= 65535:
        raise ConfigError(f"environment variable MASTER_PORT: got {port}; expected 1..65535")
    master = os.environ["MASTER_ADDR"]
    try:
        socket.getaddrinfo(master, port)
    except (OSError, UnicodeError) as exc:  # torch would retry the lookup for half an hour
        raise ConfigError(
            f"environment variable MASTER_ADDR: {master!r} cannot be resolved "
            f"({getattr(exc, 'strerror', None) or exc}); expected the host of rank 0"
        ) from None


def launched_world_size() -> int:
    """Number of ranks ``torchrun`` launched this job with (1 without torchrun)."""
    return _env_int("WORLD_SIZE") or 1


def is_main_process() -> bool:
    """Whether this process is rank 0 (or the only process): the one that writes and reports.

    The one place that answers "am I rank 0": from the process group once it exists, else from
    the ``RANK`` that torchrun sets (so it holds before :func:`init_distributed` runs too).
    """
    if dist.is_initialized():
        return dist.get_rank() == 0
    return (_env_int("RANK") or 0) == 0


def init_distributed(device: str) -> tuple[DistContext, torch.device]:
    """Join the ``torchrun`` job if there is one; return this rank's context and device.

    ``device`` is the training device kind ("cpu", "cuda" or "cuda:N"). Under torchrun with CUDA
    each rank uses ``cuda:LOCAL_RANK``. Initialising twice is harmless (the group is reused), and
    a group created here is destroyed at interpreter exit.
    """
    world_size = launched_world_size()
    kind = torch.device(device).type
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available")
    if world_size <= 1:
        return DistContext(), torch.device(device)
    rank, local_rank = _env_int("RANK") or 0, _env_int("LOCAL_RANK") or 0
    if kind == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise ConfigError(
                f"LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} CUDA devices"
            )
        torch.cuda.set_device(local_rank)
        rank_device = torch.device("cuda", local_rank)
    else:
        rank_device = torch.device(kind)
    if not dist.is_initialized():
        check_launch()
        backend = "nccl" if kind == "cuda" else "gloo"
        device_id = rank_device if kind == "cuda" else None
        try:
            dist.init_process_group(
                backend=backend, rank=rank, world_size=world_size, device_id=device_id
            )
        except (RuntimeError, ValueError) as exc:  # rendezvous: unreachable master, timeout, ...
            where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ConfigError(
                f"starting torch.distributed ({backend}, rank {rank} of {world_size}, master "
                f"{where}) failed: {first}; expected every rank launched by one torchrun"
            ) from None
        atexit.register(_destroy)
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank), rank_device


def _destroy() -> None:
    """Leave the job together: a rank that tore its group down while rank 0 was still writing
    the run's files made gloo abort (SIGABRT) at exit."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def wrap_model(model: nn.Module, ctx: DistContext, device: torch.device) -> nn.Module:
    """``DistributedDataParallel(model)`` when distributed, else ``model`` itself.

    Buffers are not broadcast on every forward: the GPT's only buffers are the constant RoPE
    tables. DDP averages gradients over ranks; the loop pre-multiplies each rank's loss so that the
    average is the gradient of the global-batch mean (see ``tailmem.train.loop``).
    """
    if not ctx.distributed:
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    # torch >= 2.13 renamed broadcast_buffers to forward_sync_buffers.
    params = inspect.signature(DistributedDataParallel.__init__).parameters
    no_sync = "forward_sync_buffers" if "forward_sync_buffers" in params else "broadcast_buffers"
    options: dict[str, Any] = {no_sync: False}
    return DistributedDataParallel(model, device_ids=device_ids, **options)


def all_reduce_sum(t: Tensor, ctx: DistContext) -> Tensor:
    """Sum of ``t`` over ranks (a new tensor; ``t`` itself is left alone)."""
    if not ctx.distributed:
        return t
    out = t.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out


def broadcast_object(obj: Any, ctx: DistContext) -> Any:
    """The main rank's ``obj`` on every rank (picklable objects only)."""
    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather_object(obj: Any, ctx: DistContext) -> list[Any]:
    """Every rank's ``obj``, in rank order."""
    if not ctx.distributed:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(ctx: DistContext) -> None:
    """Wait for every rank (no-op in one process)."""
    if ctx.distributed:
        dist.barrier()
