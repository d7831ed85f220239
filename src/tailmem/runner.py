"""Run one experiment into a run directory: validate, record, run, mark complete.

A run directory is reused only when it holds the identical config (same digest): a complete one
is skipped, an incomplete one is handed back to the experiment to resume from its checkpoints.
Bad input is rejected before anything is written.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from tailmem import progress
from tailmem.config import load_config, to_dict
from tailmem.errors import ConfigError
from tailmem.experiments import get_experiment
from tailmem.rundir import RunDir, config_digest
from tailmem.train import seed_everything
from tailmem.train.distributed import is_main_process


def default_out(experiment: str, preset: str) -> Path:
    return Path("runs") / f"{experiment}-{preset}"


def run_experiment(
    experiment: str,
    preset: str = "cpu",
    overrides: Sequence[str] = (),
    out: str | Path | None = None,
    force: bool = False,
) -> tuple[RunDir, str]:
    """Run ``experiment`` at ``preset`` into ``out``; returns the run and what happened.

    The status is ``"skipped"`` (already complete with this config), ``"resumed"`` or ``"ran"``.
    Under ``torchrun`` every rank calls this; only rank 0 checks the folder for foreign content
    and writes ``config.yaml`` / ``COMPLETE`` (the other ranks only make the same skip decision).
    """
    module = get_experiment(experiment)
    cfg = load_config(module.Config, experiment, preset, overrides)
    path = Path(out) if out is not None else default_out(experiment, preset)
    digest = config_digest(experiment, to_dict(cfg))
    main = is_main_process()
    status = "ran"
    if (path / "config.yaml").is_file():
        previous = RunDir(path).read_config()
        same = previous.get("digest") == digest and previous.get("experiment") == experiment
        if same and RunDir(path).is_complete and not force:
            return RunDir(path), "skipped"
        if not same and not force:
            raise ConfigError(
                f"{path} holds a run of {previous.get('experiment')} with a different config; "
                "choose another --out or pass --force to overwrite it"
            )
        status = "resumed" if same and not force else "ran"
    elif main and path.exists() and any(path.iterdir()) and not force:
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
