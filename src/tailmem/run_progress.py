"""``tailmem run`` shows its progress as ``tailmem reproduce`` does, for its one experiment.

The run's ``progress.json`` (:mod:`tailmem.progress`) feeds a one-row
:class:`~tailmem.progress_display.Board` from the moment the experiment starts: a live table on
a terminal, with the experiment's own output printed above it, and plain ``[run] ...`` lines
otherwise (on each change and every 30 s while it runs, each followed by the overall line). A
refusal before the experiment starts (a bad key, a folder it may not write) shows nothing but
its one line, and a run found complete shows no display. The ETA's prior is the experiment's
measured time at its preset (:func:`tailmem.experiments.catalog.expected_seconds`) unless an
override makes it another run. Under ``torchrun`` only rank 0 shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import IO

from tailmem.experiments.catalog import expected_seconds
from tailmem.progress_display import Board, watching
from tailmem.rundir import RunDir
from tailmem.runner import default_out, run_experiment
from tailmem.train.distributed import is_main_process


def run_shown(
    experiment: str,
    preset: str,
    overrides: Sequence[str] = (),
    out: str | Path | None = None,
    force: bool = False,
    stream: IO[str] | None = None,
) -> tuple[RunDir, str]:
    """:func:`tailmem.runner.run_experiment` with its progress shown on ``stream`` (default
    stderr)."""
    path = Path(out) if out is not None else default_out(experiment, preset)
    if not is_main_process():
        return run_experiment(experiment, preset, overrides, out=path, force=force)
    folder = path.resolve()
    expected = None if overrides else expected_seconds(experiment, preset)
    board = Board(
        folder.parent,
        {folder.name: "run"},
        expected={folder.name: expected},
        title=f"tailmem run {experiment} --preset {preset}",
    )
    with watching(board, stream, prefix="run", in_process=True):
        try:
            run, status = run_experiment(experiment, preset, overrides, out=path, force=force)
        except BaseException:
            board.finish(folder.name, ok=False)
            raise
        board.finish(folder.name, ok=True)
    return run, status
