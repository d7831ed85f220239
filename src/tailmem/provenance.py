"""What every run records of where it came from: its config's digest and the environment
(versions, commit, device, command line, start time)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def config_digest(experiment: str, config: Mapping[str, Any]) -> str:
    """A short stable hash of an experiment's config, used to decide whether a run can be reused."""
    text = json.dumps({"experiment": experiment, "config": config}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


WATCHED = (("train", "log_to"),)
"""Config fields that say how a run is watched, not what it computes (the trackers): a run's
digest holds each at its default, so adding one to a finished run finds it the same run."""


def run_digest(experiment: str, cfg: Any) -> str:
    """The digest of a run of ``experiment`` with config ``cfg`` (a config dataclass or its
    plain form): :func:`config_digest` of the plain config with every :data:`WATCHED` field
    at its default (empty), so the digest of a run recorded before is unchanged."""
    from tailmem.config import to_dict

    config = to_dict(cfg)
    for section, name in WATCHED:
        part = config.get(section)
        if isinstance(part, dict) and name in part:
            config[section] = {**part, name: []}
    return config_digest(experiment, config)


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
