"""``tailmem reproduce``: every experiment at one preset into one results folder, then the report.

Each experiment gets ``OUT/<experiment>``. A run that is complete with the identical config is
skipped; an incomplete one resumes. A run whose config differs (another preset, or a preset file
changed since) is never replaced unasked: reproduce refuses in one line, before anything is
written, naming the folder, what it holds and how it differs; with ``--force`` it is redone,
training again only the sub-runs whose own spec changed (:func:`tailmem.runner.run_experiment`'s
``update``), and the display shows it "replacing".
``OUT`` must be a new or empty folder or a results folder (never a run folder, a diagnose folder
or a folder of the user's own, whose ``report.html`` the report would overwrite), and each
``OUT/<experiment>`` a new folder or a run folder; all of it is checked, with every config,
before anything is written, and ``OUT`` is held under its writer lock
(:func:`tailmem.rundir.claim`) until the report is written.
Experiments run on the worker pool the LM studies use (:class:`tailmem.lm.pool.Pool`: in this
process with ``jobs=1``, in ``jobs`` worker processes otherwise) or as a Slurm job array through
submitit (``launcher="slurm"``). Whatever runs them, each experiment's
own output goes to ``OUT/.logs/<experiment>.log`` and its progress to ``OUT/<exp>/progress.json``
(:mod:`tailmem.progress`); this process polls those files and shows one display
(:mod:`tailmem.progress_display`), so local workers and cluster jobs look the same.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailmem.config import PRESETS, preset_source
from tailmem.errors import ConfigError, TailmemError
from tailmem.experiments import expected_seconds, headline_questions, in_reproduce, study_names
from tailmem.lm.pool import Pool
from tailmem.progress_display import Board, watching
from tailmem.report.render import write_report
from tailmem.rundir import check_folder, claim
from tailmem.runner import decide, planned, prepare, run_experiment, user_code

LAUNCHERS = ("local", "slurm")
LOG_DIR = ".logs"
SUBMITIT_DIR = ".submitit"


@dataclass(frozen=True)
class SlurmOptions:
    """Resources of each job of the Slurm array (``--slurm-*`` options; None: cluster default).

    ``time_min`` defaults to 12 h because submitit's own default (5 min) ends any real run.
    """

    partition: str | None = None
    time_min: int = 720
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None

    def validate(self) -> None:
        for flag, value in (
            ("--slurm-time-min", self.time_min),
            ("--slurm-gpus-per-node", self.gpus_per_node),
            ("--slurm-cpus-per-task", self.cpus_per_task),
        ):
            minimum = 0 if flag == "--slurm-gpus-per-node" else 1
            if value is not None and value < minimum:
                raise ConfigError(f"{flag}: got {value}; expected an integer >= {minimum}")
        if self.partition is not None and not self.partition.strip():
            raise ConfigError("--slurm-partition: got an empty name; expected a partition name")

    def parameters(self, jobs: int) -> dict[str, Any]:
        """``AutoExecutor.update_parameters`` keywords (at most ``jobs`` array tasks at once)."""
        params: dict[str, Any] = {
            "name": "tailmem",
            "timeout_min": self.time_min,
            "slurm_array_parallelism": jobs,
        }
        if self.partition is not None:
            params["slurm_partition"] = self.partition
        if self.gpus_per_node is not None:
            params["gpus_per_node"] = self.gpus_per_node
        if self.cpus_per_task is not None:
            params["cpus_per_task"] = self.cpus_per_task
        return params


def default_results(preset: str) -> Path:
    return Path("results") / preset


def run_order(names: Sequence[str], preset: str) -> list[str]:
    """``names`` quickest first by their measured time at ``preset`` (untimed ones last, ties
    by name): the first results arrive in seconds, and an interrupted reproduce has finished
    as many studies as it could."""
    seconds = {name: expected_seconds(name, preset) for name in names}
    return sorted(names, key=lambda n: (seconds[n] is None, seconds[n] or 0.0, n))


def select_experiments(only: Sequence[str] | None, preset: str = "cpu") -> list[str]:
    """The experiments to run, in :func:`run_order` at ``preset`` (None: every one whose record
    puts it in ``reproduce``); unknown names or an empty selection (``--only ,``) are a
    ConfigError."""
    names = run_order(study_names(), preset)
    if only is None:
        return [name for name in names if in_reproduce(name)]
    if not only:
        raise ConfigError(f"--only: names no experiment; expected names from: {', '.join(names)}")
    unknown = [name for name in only if name not in names]
    if unknown:
        raise ConfigError(
            f"--only: unknown experiment {unknown[0]!r}; expected names from: {', '.join(names)}"
        )
    return [name for name in names if name in only]


def _plan(name: str, preset: str, out: Path, force: bool) -> str:
    """What reproduce will do with ``name``: skip, resume, redo (replace a run of another
    config: only with ``force``, refused otherwise) or run (:func:`tailmem.runner.decide`)."""
    cfg = prepare(name, preset)  # config, environment, devices and the preflight
    path = out / name
    plan = planned(name, preset_source(name, preset), cfg)
    status = decide(path, plan, user_code(cfg), replace=force, redo=False)
    if status != "ran":
        return "skip" if status == "skipped" else "resume"
    return "redo" if force and path.is_dir() and any(path.iterdir()) else "run"


@contextlib.contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (Python objects and file descriptors 1 and 2, so
    child processes and C code follow) to ``log`` until the block ends."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", buffering=1, encoding="utf-8") as handle:
        saved = []
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                saved.append((fd, os.dup(fd)))
                os.dup2(handle.fileno(), fd)
        try:
            with contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
                yield
        finally:
            handle.flush()
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)


def _run_one(name: str, preset: str, out: Path, update: bool, command: str) -> str:
    """Run one experiment into ``out/name``, its output into ``out/.logs/name.log``; ``update``:
    it replaces a run of another config (``--force``), keeping the sub-runs it can reuse;
    ``command``: the command line that started the reproduce
    (:func:`~tailmem.runner.run_experiment`)."""
    with _output_to(out / LOG_DIR / f"{name}.log"):
        run_experiment(name, preset, (), out=out / name, update=update, command=command)
    return name


@dataclass(frozen=True)
class _Work:
    """The experiments one reproduce call runs, where, and the board that shows them."""

    todo: list[str]
    updates: dict[str, bool]
    preset: str
    out: Path
    board: Board
    command: str

    def args(self, name: str) -> tuple[str, str, Path, bool, str]:
        """:func:`_run_one`'s arguments for ``name``."""
        return name, self.preset, self.out, self.updates[name], self.command


def _run_local(work: _Work, jobs: int) -> None:
    """Run the experiments on the shared worker pool (``jobs`` at once; 1: in this process)."""
    board = work.board
    (work.out / LOG_DIR).mkdir(parents=True, exist_ok=True)
    with Pool(jobs, log=work.out / LOG_DIR / "workers.log") as pool:
        for name in work.todo:
            pool.submit(name, _run_one, *work.args(name))
        for outcome in pool.finished():
            board.finish(outcome.tag, ok=outcome.error is None)
            if outcome.error is None:
                continue
            pool.cancel_pending()
            if isinstance(outcome.error, BrokenProcessPool):
                log = work.out / LOG_DIR / f"{outcome.tag}.log"
                raise TailmemError(
                    f"{outcome.tag}: its worker process died (killed, or out of memory); "
                    f"see {log}; rerun to resume"
                )
            raise outcome.error


def _import_submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise ConfigError("--launcher slurm needs submitit: pip install 'tailmem[slurm]'") from None
    return submitit


SLURM_COMMANDS = ("sbatch", "srun", "sacct", "scancel")
"""What submitit runs to submit a job array, watch it and cancel it (without srun it picks
its local executor)."""


def _check_slurm() -> None:
    """Refuse ``--launcher slurm`` where Slurm's commands are not on the PATH: submitit would
    silently run every job on this machine instead."""
    missing = [command for command in SLURM_COMMANDS if shutil.which(command) is None]
    if missing:
        raise ConfigError(
            f"--launcher slurm: this machine has no Slurm ({', '.join(missing)} not found on "
            "PATH); expected a Slurm login node, or --launcher local"
        )


def _run_slurm(
    work: _Work, jobs: int, slurm: SlurmOptions, cluster: str | None = None, poll_s: float = 2.0
) -> None:
    """Submit ``todo`` as one job array and wait for it; ``cluster`` picks a submitit executor
    (None: auto-detect Slurm; tests use "local")."""
    todo, out, board = work.todo, work.out, work.board
    submitit = _import_submitit()
    executor = submitit.AutoExecutor(folder=out / SUBMITIT_DIR, cluster=cluster)
    executor.update_parameters(**slurm.parameters(jobs))
    array = executor.map_array(_run_one, *zip(*(work.args(n) for n in todo), strict=True))
    pending = dict(zip(array, todo, strict=True))
    try:
        while pending:
            for job, name in list(pending.items()):
                if not job.done():
                    continue
                del pending[job]
                error = job.exception()
                board.finish(name, ok=error is None)
                if error is not None:
                    raise RuntimeError(
                        f"{name}: job {job.job_id} failed; see {out / LOG_DIR / f'{name}.log'} "
                        f"and {job.paths.stderr}"
                    ) from error
            if pending:
                time.sleep(poll_s)
    except BaseException:
        for job in pending:
            with contextlib.suppress(Exception):
                job.cancel(check=False)
        raise


def reproduce(
    preset: str = "cpu",
    only: Sequence[str] | None = None,
    out: str | Path | None = None,
    jobs: int = 1,
    launcher: str = "local",
    slurm: SlurmOptions | None = None,
    cluster: str | None = None,
    command: str | None = None,
    force: bool = False,
) -> Path:
    """Run the selected experiments at ``preset`` into ``out`` and write the report there.

    ``force`` replaces a run in ``out`` whose config differs (refused without it, before
    anything is written); ``cluster`` is the submitit executor behind ``launcher="slurm"``
    (None: Slurm itself);
    ``command``: the command line that started it, which each run records as its provenance
    (None: ``reproduce --preset PRESET``).
    """
    if preset not in PRESETS:
        raise ConfigError(f"--preset: got {preset!r}; expected one of: {', '.join(PRESETS)}")
    if jobs < 1:
        raise ConfigError(f"--jobs: got {jobs}; expected a positive integer")
    if launcher not in LAUNCHERS:
        raise ConfigError(f"--launcher: got {launcher!r}; expected one of: {', '.join(LAUNCHERS)}")
    if slurm is not None and launcher != "slurm":
        raise ConfigError("--slurm-* options need --launcher slurm")
    slurm = slurm or SlurmOptions()
    slurm.validate()
    if launcher == "slurm":
        _import_submitit()
        if cluster is None:
            _check_slurm()
    names = select_experiments(only, preset)
    if out is not None and not str(out).strip():
        raise ConfigError("out: got an empty path; expected a folder ('.' for this one)")
    out = Path(out) if out is not None else default_results(preset)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; expected a folder (or a path to create)")
    check_folder(out, ("results",))
    plans = {
        name: _plan(name, preset, out, force) for name in names
    }  # validates every config first
    with claim(out, ("results",), "reproduce", record_new=True):  # one reproduce per folder
        command = command or f"reproduce --preset {preset}"
        return _reproduce_locked(names, plans, preset, out, jobs, launcher, slurm, cluster, command)


def _reproduce_locked(
    names: list[str],
    plans: dict[str, str],
    preset: str,
    out: Path,
    jobs: int,
    launcher: str,
    slurm: SlurmOptions,
    cluster: str | None,
    command: str,
) -> Path:
    todo = [n for n in names if plans[n] != "skip"]
    updates = {n: plans[n] == "redo" for n in todo}
    parallel = jobs if launcher == "slurm" else min(jobs, max(len(todo), 1))
    expected = {name: expected_seconds(name, preset) for name in names}  # the ETA's prior
    board = Board(out, plans, parallel=parallel, expected=expected)
    work = _Work(todo, updates, preset, out, board, command)
    with watching(board, sys.stderr):
        if launcher == "slurm" and todo:
            _run_slurm(work, jobs, slurm, cluster)
        else:
            _run_local(work, min(jobs, max(len(todo), 1)))
    return write_report(out, headline_questions())
