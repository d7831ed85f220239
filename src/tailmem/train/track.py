"""Per-step metrics to TensorBoard and Weights & Biases, beside ``metrics.jsonl``.

A run's ``log_to`` (``train.log_to`` of the LM studies) names the trackers that receive every
line the training loop writes to ``metrics.jsonl``: ``tensorboard`` (event files in
``<run>/tensorboard/``, through ``torch.utils.tensorboard``) and ``wandb`` (a Weights & Biases run
whose local files go to ``<run>/wandb/``; ``WANDB_MODE=offline`` keeps it on disk for a later
``wandb sync``, ``WANDB_PROJECT`` names the project, default ``tailmem``). Both are optional
extras (``pip install 'tailmem[track]'``); a tracker whose library is missing, or W&B without
a login outside its offline mode, is refused by :func:`check_log_to` before anything is
written.

``metrics.jsonl`` stays the source of truth: the trackers get the same numbers, as scalars
named by their path in a metrics line (``loss``, ``lrs/muon:q``, ``eval/fta/0`` for item 0 of
the list ``fta``), at the line's ``step``; nothing is read back from them. Each tracker gets
the run's config: TensorBoard as hparams (the config's leaves, dotted keys) plus the whole
config as text, W&B as the run's config. The tracking choice is how a run is watched, not
what it computes: it enters no run's digest.

Resuming: a resumed run's TensorBoard log purges the events after the checkpoint it resumed
from (the loop logs those steps again), and its W&B run is the same run (an id derived from the
run directory and identity, ``resume="allow"``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import netrc
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from tailmem.errors import ConfigError

TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb"}
"""Every tracker ``log_to`` may name, with the module it needs."""
INSTALL = "pip install 'tailmem[track]'"

Row = Mapping[str, Any]
"""One line of ``metrics.jsonl``."""


def check_log_to(log_to: Sequence[str]) -> None:
    """Refuse an unknown or repeated tracker, or one whose library is not installed (one
    :class:`ConfigError` line, ``log_to: ...``)."""
    if isinstance(log_to, str) or not isinstance(log_to, Sequence):
        raise ConfigError(f"log_to: got {log_to!r}; expected a list of {', '.join(TRACKERS)}")
    for name in log_to:
        if name not in TRACKERS:
            raise ConfigError(
                f"log_to: got {name!r}; expected a list of {', '.join(TRACKERS)} (or [])"
            )
    if len(set(log_to)) != len(log_to):
        raise ConfigError(f"log_to: got {list(log_to)!r}; expected each tracker at most once")
    for name in log_to:
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise ConfigError(f"log_to: {name} needs `{INSTALL}`")
    if "wandb" in log_to and not wandb_can_start():
        raise ConfigError(
            "log_to: wandb has no login on this machine; expected `wandb login` (or "
            "WANDB_API_KEY set), or WANDB_MODE=offline to keep the runs on disk"
        )


WANDB_LOCAL = ("offline", "disabled", "dryrun")
"""``WANDB_MODE`` values under which W&B writes locally and needs no login."""


def wandb_can_start() -> bool:
    """Whether W&B can start a run here without asking for a login, checked without importing
    it: a local mode (:data:`WANDB_LOCAL`), an API key or identity token in the environment, or
    a ``.netrc`` entry for the W&B host (what ``wandb login`` writes)."""
    env = os.environ
    if env.get("WANDB_MODE", "").strip().lower() in WANDB_LOCAL:
        return True
    if env.get("WANDB_API_KEY") or env.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    host = urlsplit(env.get("WANDB_BASE_URL") or "https://api.wandb.ai").netloc
    where = [Path(env["NETRC"]).expanduser()] if env.get("NETRC") else [
        Path("~/.netrc").expanduser(), Path("~/_netrc").expanduser()]  # fmt: skip
    for path in where:
        try:
            if netrc.netrc(path).authenticators(host) is not None:
                return True
        except (OSError, netrc.NetrcParseError):
            continue
    return False


def scalars(row: Row) -> dict[str, float]:
    """The numbers of a metrics line by path (``step`` is the x axis, not a scalar): nested
    mappings and lists give ``parent/child`` names; booleans, strings and nulls are left out."""
    out: dict[str, float] = {}

    def visit(prefix: str, value: Any) -> None:
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return
        if isinstance(value, int | float):
            if math.isfinite(value):
                out[prefix] = float(value)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                visit(f"{prefix}/{key}", item)
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                visit(f"{prefix}/{index}", item)

    for key, value in row.items():
        if key != "step":
            visit(str(key), value)
    return out


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The leaves of a nested config by dotted key; a list is one value, its JSON text."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_config(value, f"{name}."))
        elif isinstance(value, list | tuple):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


class Tracker(Protocol):
    def log(self, step: int, values: Mapping[str, float]) -> None: ...
    def close(self) -> None: ...


class TensorBoard:
    """Event files in ``<run_dir>/tensorboard``; the config as hparams and as text."""

    def __init__(self, run_dir: Path, config: Mapping[str, Any], resumed_from: int | None):
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        purge = None if resumed_from is None else resumed_from + 1
        self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=purge)
        events: Any = self.writer.file_writer  # torch annotates it None until opened here
        for summary in hparams(flat_config(config), {"loss": None}):
            events.add_summary(summary)
        self.writer.add_text("config", f"```\n{json.dumps(config, indent=1)}\n```")

    def log(self, step: int, values: Mapping[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandB:
    """A W&B run with its local files in ``<run_dir>/wandb``; its id follows from the run
    directory and identity, so a resumed run continues it."""

    def __init__(
        self, run_dir: Path, config: Mapping[str, Any], name: str, group: str | None,
        identity: str | None,
    ) -> None:  # fmt: skip
        import wandb

        key = f"{run_dir.resolve()} {identity or ''}"
        try:
            self.run = wandb.init(
                project=os.environ.get("WANDB_PROJECT") or "tailmem",
                name=name,
                group=group,
                id=hashlib.sha256(key.encode()).hexdigest()[:16],
                resume="allow",
                dir=str(run_dir),
                config=dict(config),
                settings=wandb.Settings(console="off", quiet=True),
            )
        except wandb.errors.Error as exc:
            first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
            raise ConfigError(
                f"train.log_to: wandb could not start a run ({first}); run `wandb login`, or set "
                "WANDB_MODE=offline to keep the run on disk"
            ) from None

    def log(self, step: int, values: Mapping[str, float]) -> None:
        self.run.log(dict(values), step=step)

    def close(self) -> None:
        self.run.finish()


@contextlib.contextmanager
def tracking(
    log_to: Sequence[str],
    run_dir: Path,
    config: Mapping[str, Any],
    *,
    name: str,
    group: str | None = None,
    identity: str | None = None,
    resumed_from: int | None = None,
) -> Iterator[Callable[[Row], None]]:
    """Open the trackers of ``log_to`` for the run in ``run_dir`` (``config`` attached,
    ``name`` / ``group`` its W&B names) and yield ``log(row)``, which sends a metrics line to
    each; they are closed on exit."""
    opened: list[Tracker] = []
    with contextlib.ExitStack() as stack:
        for tracker in log_to:
            made: Tracker
            if tracker == "tensorboard":
                made = TensorBoard(run_dir, config, resumed_from)
            else:
                made = WandB(run_dir, config, name, group, identity)
            stack.callback(made.close)
            opened.append(made)

        def log(row: Row) -> None:
            values = scalars(row)
            for made in opened:
                made.log(int(row["step"]), values)

        yield log
