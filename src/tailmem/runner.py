"""Run one experiment into a run directory: validate, lock, record, run, mark complete.

Everything that can be checked is checked before anything is written: the config (types, ranges,
:func:`tailmem.config.load_config`), every ``device`` field of it against this machine
(:func:`check_devices`), and the experiment's own ``preflight(cfg)`` if its module defines one
(sizes, memory: it must raise a :class:`~tailmem.errors.TailmemError` and write nothing). A refused
run therefore leaves no trace, and the corrected rerun starts afresh.

A run directory is then locked for the life of the run (:meth:`RunDir.lock`: a second writer is
refused at once) and reused only when it holds the identical config (same digest): a complete one
is skipped, an incomplete one is handed back to the experiment to resume from its checkpoints. A
folder holding only the config record of a run that never produced anything is not a run to
protect: a different config simply replaces it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tailmem import progress
from tailmem.config import load_config, to_dict
from tailmem.errors import ConfigError
from tailmem.experiments import get_experiment
from tailmem.resources import check_devices
from tailmem.rundir import COMPLETE_MARKER, LOCK_FILE, RunDir, config_digest
from tailmem.train import seed_everything
from tailmem.train.distributed import is_main_process

BOOKKEEPING = frozenset({"config.yaml", LOCK_FILE, COMPLETE_MARKER, progress.PROGRESS_FILE})
"""Files a run directory holds before the experiment has written anything of its own."""


def default_out(experiment: str, preset: str) -> Path:
    return Path("runs") / f"{experiment}-{preset}"


def prepare(experiment: str, preset: str, overrides: Sequence[str] = ()) -> tuple[Any, Any]:
    """The experiment's module and its checked config; raises before anything is written."""
    module = get_experiment(experiment)
    cfg = load_config(module.Config, experiment, preset, overrides)
    check_devices(cfg)
    preflight = getattr(module, "preflight", None)
    if callable(preflight):
        preflight(cfg)
    return module, cfg


def _usable_folder(path: Path) -> None:
    """Refuse an ``--out`` that cannot be a folder (an existing file), before creating it."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {path} is a file; expected a folder (or a path to create)")


def _holds_results(path: Path) -> bool:
    """Whether ``path`` holds anything beyond a run's bookkeeping files."""
    return any(
        p.name not in BOOKKEEPING and not (p.name.startswith(".") and p.name.endswith(".tmp"))
        for p in path.iterdir()
    )


def run_experiment(
    experiment: str,
    preset: str = "cpu",
    overrides: Sequence[str] = (),
    out: str | Path | None = None,
    force: bool = False,
) -> tuple[RunDir, str]:
    """Run ``experiment`` at ``preset`` into ``out``; returns the run and what happened.

    The status is ``"skipped"`` (already complete with this config), ``"resumed"`` or ``"ran"``.
    Under ``torchrun`` every rank calls this; only rank 0 locks the folder, checks it for foreign
    content and writes ``config.yaml`` / ``COMPLETE`` (the other ranks only make the same skip
    decision).
    """
    module, cfg = prepare(experiment, preset, overrides)
    path = Path(out) if out is not None else default_out(experiment, preset)
    _usable_folder(path)
    main = is_main_process()
    if not main:
        return _run_unlocked(module, cfg, experiment, preset, path, force, main=False)
    run = RunDir(path)
    with run.lock():
        return _run_unlocked(module, cfg, experiment, preset, path, force, main=True)


def _run_unlocked(
    module: Any, cfg: Any, experiment: str, preset: str, path: Path, force: bool, main: bool
) -> tuple[RunDir, str]:
    digest = config_digest(experiment, to_dict(cfg))
    status = "ran"
    if (path / "config.yaml").is_file():
        previous = RunDir(path).read_config()
        same = previous.get("digest") == digest and previous.get("experiment") == experiment
        if same and RunDir(path).is_complete and not force:
            return RunDir(path), "skipped"
        if not same and not force and _holds_results(path):
            raise ConfigError(
                f"{path} holds a run of {previous.get('experiment')} with a different config; "
                "choose another --out or pass --force to overwrite it"
            )
        status = "resumed" if same and not force else "ran"
    elif main and path.exists() and _holds_results(path) and not force:
        raise ConfigError(f"{path} exists and is not a tailmem run directory; choose another --out")
    run = RunDir(path)
    if main:
        run.clear_complete()
        run.remove_stale_temp_files()
        run.write_config(experiment, preset, cfg)
    seed_everything(cfg.seed)
    start = time.perf_counter()
    with progress.tracking(run.path, enabled=main):
        module.run(cfg, run)
    if main:
        run.mark_complete(wall_seconds=time.perf_counter() - start)
    return run, status
