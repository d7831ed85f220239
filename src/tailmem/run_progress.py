"""``tailmem run`` shows its progress as ``tailmem reproduce`` does, for its one experiment.

The run's ``progress.json`` (:mod:`tailmem.progress`) feeds a one-row
:class:`~tailmem.progress_display.Board` from the moment the experiment starts: a live table on
a terminal, with the experiment's own output printed above it, and plain ``[run] ...`` lines
otherwise (on each change and every 30 s while it runs, each followed by the overall line). A
refusal before the experiment starts (a bad key, a folder it may not write) shows nothing but
its one line, and a run found complete shows no display. The ETA's prior is the experiment's
measured time at its preset (its :class:`~tailmem.studies.Study` record) unless an
override makes it another run. Under ``torchrun`` only rank 0 shows it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from tailmem.config import preset_source
from tailmem.experiments import expected_seconds, get_study
from tailmem.progress_display import Board, watching
from tailmem.rundir import RunDir
from tailmem.runner import default_out, run_experiment
from tailmem.train.distributed import is_main_process


def run_shown(
    experiment: str,
    preset: str | None,
    overrides: Sequence[str] = (),
    out: str | Path | None = None,
    force: bool = False,
    stream: IO[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    command: str | None = None,
) -> tuple[RunDir, str]:
    """:func:`tailmem.runner.run_experiment` (a packaged ``preset`` or a user's ``config``
    file) with its progress shown on ``stream`` (default stderr)."""

    def run() -> tuple[RunDir, str]:
        return run_experiment(
            experiment, preset, overrides, out=path, force=force, config=config, command=command
        )

    if out is not None and not str(out).strip():
        return run()  # refused there, in one line
    get_study(experiment)  # an unknown study is named as one, not as a study without presets
    source = preset_source(experiment, preset, config)
    path = Path(out) if out is not None else default_out(experiment, source)
    if not is_main_process():
        return run()
    try:
        folder = path.resolve()
    except (OSError, RuntimeError):  # a symbolic-link loop: the runner refuses it in one line
        return run()
    known = preset is not None and not overrides
    expected = expected_seconds(experiment, preset) if known and preset is not None else None
    given = f"--preset {preset}" if config is None else f"--config {config}"
    board = Board(
        folder.parent,
        {folder.name: "run"},
        expected={folder.name: expected},
        title=f"tailmem run {experiment} {given}",
    )
    with watching(board, stream, prefix="run", in_process=True):
        try:
            run_, status = run()
        except BaseException:
            board.finish(folder.name, ok=False)
            raise
        board.finish(folder.name, ok=True)
    return run_, status
