"""Run one experiment into a run directory: check, lock, record, run, mark complete.

Everything that can be checked is checked before anything is written, by one preflight
(:func:`prepare`): the config (types, ranges, seeds, repeated overrides:
:func:`tailmem.config.load_config`), the launch environment (``torchrun``'s variables:
:func:`tailmem.train.distributed.check_launch`), every ``device`` field against this machine
(:func:`check_devices`), and the study's own ``preflight(cfg)`` if its
:class:`~tailmem.studies.Study` record has one (data sources, cache folders, sizes and memory:
it must raise a :class:`~tailmem.errors.TailmemError` and write nothing). Then the folder
itself: ``--out`` must be a new or empty folder or a run folder
(:func:`tailmem.rundir.check_folder`), and a run of a different config is replaced only with
``--force`` (or ``update``): the refusal is one line naming what the folder holds and how its
config differs (:func:`decide`). A refused run therefore leaves no trace, and
the corrected rerun starts afresh.

A run directory is then locked for the life of the run (:func:`tailmem.rundir.claim`: a second
writer is refused at once) and reused only when it holds the identical config (same digest): a
complete one is skipped, an incomplete one is handed back to the experiment to resume from its
checkpoints. Otherwise everything tailmem wrote into it before — the previous run's outputs,
sub-runs and data caches, a report of it — is removed first (:meth:`RunDir.clear`), so the new
run's COMPLETE, which lists only the files this run wrote, certifies nothing stale. A folder
holding only the config record of a run that never produced anything is not a run to protect: a
different config simply replaces it. A run that fails having produced nothing (a data cache
found damaged, an interrupt while it starts) in a folder it found new or empty leaves no trace
either: what it wrote is removed again, and so are the folders it created.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tailmem import progress
from tailmem.config import PresetSource, config_from, preset_source, to_dict
from tailmem.config_diff import differences, flatten
from tailmem.errors import ConfigError
from tailmem.experiments import get_study
from tailmem.optim.user_code import code_digest
from tailmem.provenance import run_digest
from tailmem.resources import check_devices
from tailmem.rundir import LOCK_FILE, MANIFEST, RUN_RECORD, RunDir, check_folder, claim
from tailmem.studies import Provenance, Study, StudyConfig
from tailmem.train import seed_everything
from tailmem.train.distributed import check_launch, is_main_process

C = TypeVar("C", bound=StudyConfig)


def default_out(experiment: str, source: PresetSource) -> Path:
    """``runs/EXP-PRESET`` (a user's file: ``runs/EXP-<its name without .yaml>``)."""
    return Path("runs") / f"{experiment}-{source.path.stem if source.user else source.preset}"


def prepare(
    experiment: str,
    preset: str | None,
    overrides: Sequence[str] = (),
    config: str | os.PathLike[str] | None = None,
) -> StudyConfig:
    """The checked config of study ``experiment``, from the packaged ``preset`` or the user's
    file ``config`` (exactly one) plus ``overrides``: the one preflight of a run (module
    docstring); raises before anything is written."""
    return _checked(get_study(experiment), preset_source(experiment, preset, config), overrides)


def _checked(study: Study[C], source: PresetSource, overrides: Sequence[str]) -> C:
    """The config of ``study`` from ``source`` and ``overrides``, through the preflight."""
    cfg = config_from(study.config, source, overrides)
    check_launch()
    check_devices(cfg)
    if study.preflight is not None:
        study.preflight(cfg)
    return cfg


def _usable_folder(path: Path) -> None:
    """Refuse an ``--out`` that cannot be a folder (an existing file), before creating it."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {path} is a file; expected a folder (or a path to create)")


def _holds_results(run: RunDir) -> bool:
    """Whether ``run`` holds anything tailmem wrote beyond a run's bookkeeping files."""
    return any(name not in RUN_RECORD for name in run.entries())


@dataclass(frozen=True)
class Planned:
    """The run about to be made, as a folder's previous run is compared with it: its
    experiment, where its config came from (``preset cpu``, ``--config FILE``) and the plain
    config."""

    experiment: str
    origin: str
    config: Mapping[str, Any]

    @property
    def digest(self) -> str:
        return run_digest(self.experiment, self.config)


def planned(experiment: str, source: PresetSource, cfg: StudyConfig) -> Planned:
    """The :class:`Planned` run of ``experiment`` with ``cfg`` from ``source``."""
    origin = f"--config {source.path.absolute()}" if source.user else f"preset {source.preset}"
    return Planned(experiment, origin, to_dict(cfg))


def decide(path: Path, plan: Planned, code: Mapping[str, str], replace: bool, redo: bool) -> str:
    """What a run of ``plan`` with user code ``code`` (:func:`user_code`) does with folder
    ``path``: "skipped" (complete with this config), "resumed" (incomplete with this config)
    or "ran" (afresh, after :meth:`RunDir.clear`). ``replace``: it may replace a run of another
    config (``--force``, or an update); ``redo``: it redoes a run of this config too
    (``--force``, or an update, which keeps what it can reuse). Refuses a folder that is not a
    run folder, holds a run this one may not replace, or a run of this config whose user code
    has changed since. Reads only."""
    check_folder(path, ("run",))
    if not path.exists():
        return "ran"
    run = RunDir(path)
    previous = run.read_config() if run.file("config.yaml").is_file() else None
    record = previous or {}
    same = record.get("digest") == plan.digest and record.get("experiment") == plan.experiment
    if same and not redo:
        _check_code(path, record.get(USER_CODE) or {}, code)
        return "skipped" if run.is_complete else "resumed"
    if not replace and _holds_results(run):
        raise ConfigError(_refusal(run, previous, plan))
    return "ran"


def _refusal(run: RunDir, previous: Mapping[str, Any] | None, plan: Planned) -> str:
    """The one line refusing to replace the results in ``run`` (record ``previous``; None:
    it has none) with a run of ``plan``: what the folder holds, how it differs, the way out."""
    way_out = "choose another --out or pass --force to replace it"
    if previous is None:
        return (
            f"{run.path} holds a run without its config.yaml record (damaged); pass --force to "
            "redo it, or choose another --out"
        )
    state = "a complete run" if run.is_complete else "an unfinished run"
    origin = _origin(previous)
    if previous.get("experiment") != plan.experiment:
        held = f"of {previous.get('experiment')} ({origin}), not of {plan.experiment}"
        return f"{run.path} holds {state} {held}; {way_out}"
    origins = origin if origin == plan.origin else f"{origin}, not {plan.origin}"
    what = _config_differences(previous.get("config") or {}, plan.config)
    return (
        f"{run.path} holds {state} of {plan.experiment} with a different config ({origins}; "
        f"{what}); {way_out}"
    )


def _origin(record: Mapping[str, Any]) -> str:
    """Where a recorded run's config came from: ``preset NAME`` or ``--config FILE``."""
    config_file = record.get("config_file")
    if isinstance(config_file, Mapping) and config_file.get("path"):
        return f"--config {config_file['path']}"
    return f"preset {record.get('preset')}"


def _config_differences(old: Mapping[str, Any], new: Mapping[str, Any], shown: int = 3) -> str:
    """The first ``shown`` settings that differ between two plain configs, ``key old → new``,
    and how many more do (:func:`tailmem.config_diff.differences`)."""
    found = differences([flatten(old), flatten(new)])
    if not found:
        return "its config digest differs"
    listed = ", ".join(f"{d.key} {d.values[0]} → {d.values[1]}" for d in found[:shown])
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    return f"differs in {listed}{more}"


USER_CODE = "user_code"
"""The run record's field holding the digest of every user optimiser's code, by import path."""


def user_code(cfg: object) -> dict[str, str]:
    """The digest of the code of every user optimiser ``cfg`` imports (any ``factory`` /
    ``*.factory`` key, at any depth: ``optim.mine.factory``, a grid study's ``common``), by
    import path (:func:`tailmem.optim.user_code.code_digest`)."""
    found: set[str] = set()

    def visit(value: object) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if str(key).split(".")[-1] == "factory" and isinstance(item, str):
                    found.add(item)
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    visit(to_dict(cfg))
    return {path: code_digest(path) for path in sorted(found)}


def _check_code(path: Path, recorded: Mapping[str, str], code: Mapping[str, str]) -> None:
    """Refuse to resume (or call complete) a run whose user code differs from the code it
    was trained with: one line naming the factory and both digests."""
    for factory in sorted(set(recorded) | set(code)):
        then, now = recorded.get(factory), code.get(factory)
        if then != now:
            raise ConfigError(
                f"{path}: the code of {factory} has changed since this run was trained (digest "
                f"{then or 'not recorded'}, now {now or 'not imported'}); expected the code it "
                "was trained with, or --force to train it again with this code"
            )


REUSABLE = ("runs", "points", "data")
"""What a run of the same experiment keeps from its predecessor when its config changed
(``update``): sub-runs, each reused only while its own spec's digest is unchanged (the study
deletes the rest when it finishes), and data sets, keyed by their fingerprint."""


def run_experiment(
    experiment: str,
    preset: str | None = None,
    overrides: Sequence[str] = (),
    out: str | Path | None = None,
    force: bool = False,
    update: bool = False,
    config: str | os.PathLike[str] | None = None,
    command: str | None = None,
) -> tuple[RunDir, str]:
    """Run ``experiment`` at ``preset`` (a packaged preset's name) or from ``config`` (a YAML
    file of the user's, recorded in ``config.yaml`` by path and SHA-256) — exactly one of the
    two — into ``out``; returns the run and what happened.

    The status is ``"skipped"`` (already complete with this config), ``"resumed"`` or ``"ran"``.
    ``force`` redoes the run from nothing; ``update`` redoes a run of the same experiment
    keeping what it can reuse (:data:`REUSABLE`), so only the sub-runs whose own spec changed
    train again: a run whose config changed (``tailmem reproduce --force`` after a preset
    changed), or a run of this config whose outputs are to be made again by this version of the
    code without retraining. Under
    ``torchrun`` every rank calls this; only rank 0 claims the folder, clears it and writes
    ``config.yaml`` / ``COMPLETE`` (the other ranks only make the same skip decision).
    ``command``: the command line that started the run, passed to the study with its preset as
    its :class:`~tailmem.studies.Provenance` (None: ``EXP run``).
    """
    if out is not None and not str(out).strip():
        raise ConfigError("out: got an empty path; expected a folder ('.' for this one)")
    study = get_study(experiment)
    source = preset_source(experiment, preset, config)
    cfg = _checked(study, source, overrides)
    path = Path(out) if out is not None else default_out(experiment, source)
    _usable_folder(path)
    plan = planned(experiment, source, cfg)
    code = user_code(cfg)
    replace = force or update
    status = decide(path, plan, code, replace, redo=replace)  # refuse before anything is written
    provenance = Provenance(source.preset, command or f"{experiment} run")
    if not is_main_process():
        return _execute(study, cfg, RunDir(path), provenance, status, main=False)
    made = _first_missing(path)
    fresh = made is not None or not any(path.iterdir())
    with claim(path, ("run",), "run") as run:
        try:
            status = decide(path, plan, code, replace, redo=replace)  # now no one else writes
            if status != "skipped":
                if status == "ran":  # this run's COMPLETE lists its own files only
                    same = _previous_experiment(run) == experiment
                    run.clear(keep=REUSABLE if update and not force and same else ())
                else:
                    run.clear_complete()
                run.remove_stale_temp_files()
                extra = {**source.record(), **({USER_CODE: code} if code else {})}
                run.write_config(experiment, source.preset, cfg, extra, provenance.command)
            return _execute(study, cfg, run, provenance, status, main=True)
        except BaseException:
            if fresh and not _holds_results(run):  # a refusal or failure that made nothing
                _remove_new(run, made)
            raise


def _first_missing(path: Path) -> Path | None:
    """The outermost folder on the way to ``path`` that does not exist yet (None: ``path``
    exists): what a run into ``path`` creates."""
    missing = None
    for folder in (path.absolute(), *path.absolute().parents):
        if folder.exists():
            break
        missing = folder
    return missing


def _remove_new(run: RunDir, made: Path | None) -> None:
    """Remove what a failed run that produced nothing wrote into a folder it found new or
    empty: its bookkeeping, its record and lock, and the folders it created (``made``, the
    outermost); a folder that was there and empty stays, empty."""
    run.clear()
    for name in (MANIFEST, LOCK_FILE):
        run.file(name).unlink(missing_ok=True)
    folder = run.path.absolute()
    while made is not None and made in (folder, *folder.parents):
        try:
            folder.rmdir()  # only when empty: whatever someone else put there stays
        except OSError:
            break
        if folder == made:
            break
        folder = folder.parent


def _previous_experiment(run: RunDir) -> str | None:
    """The experiment of the run record in ``run`` (None: there is none)."""
    if not run.file("config.yaml").is_file():
        return None
    return str(run.read_config().get("experiment"))


def _execute(
    study: Study[C], cfg: C, run: RunDir, provenance: Provenance, status: str, main: bool
) -> tuple[RunDir, str]:
    """Run the study into ``run`` unless it is skipped; the main rank marks it complete."""
    if status == "skipped":
        return run, status
    seed_everything(cfg.seed)
    start = time.perf_counter()
    with progress.tracking(run.path, enabled=main):
        study.run(cfg, run, provenance)
    if main:
        run.mark_complete(wall_seconds=time.perf_counter() - start)
    return run, status
