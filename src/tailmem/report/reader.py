"""The run directories a report is made of, read and checked; the report never re-runs anything.

From each run it reads ``config.yaml`` (the experiment, its preset:
:mod:`tailmem.report.presets`), ``claims.json``, ``COMPLETE`` and ``report.json``
(:mod:`tailmem.report.layout`: answers, figures, tables). Verdicts come from ``claims.json`` as
written by the experiment (computed by each claim's check from its results), never from here.
The claims registry (:data:`~tailmem.claims.registry.CLAIMS`) adds what the runs do not say: a
registry claim of an experiment that its run lacks is listed as "not measured" with the reason.

Nothing read is trusted (:func:`read_run`): ``config.yaml`` must name a tailmem experiment
(:func:`experiment_names`) and one of its presets, every ``claims.json`` entry must have fields
of the right types, a known verdict and a claim id of that experiment (each once), and every
``report.json`` entry must be a file inside the run. What does not fit is handled by where it
was found:

- a run directory given on its own is refused with one line naming the file and the problem
  (the user asked about that run; a report without it says nothing);
- in a results folder a damaged run is *not rendered*: the report names it with the reason,
  its verdicts are not counted (its experiment's registry claims count as "not measured"), and
  the other runs render — one broken run does not hide the results of a whole ``reproduce``. A
  folder in which no run can be rendered is refused like a single run.

A damaged ``report.json`` makes the whole run not rendered, not only the entry: the experiment
writes it together with ``claims.json``, so a run whose files do not read as tailmem wrote them
is not one whose verdicts the summary should count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailmem import config
from tailmem.claims.core import ClaimResult
from tailmem.claims.listing import EXPERIMENTS
from tailmem.claims.registry import lookup, not_measured, read_claims
from tailmem.errors import DataError
from tailmem.report.layout import Layout, read_layout
from tailmem.report.presets import Preset, read_preset
from tailmem.rundir import RunDir


@dataclass(frozen=True)
class RunSummary:
    """What the report needs from one run directory, validated (see :func:`read_run`):
    ``claims`` are the run's with the registry claims it lacks added as not measured."""

    name: str
    path: Path
    record: dict[str, Any]
    preset: Preset
    incomplete: str | None
    wall_seconds: float | None
    claims: tuple[ClaimResult, ...]
    layout: Layout

    @property
    def experiment(self) -> str:
        return str(self.record["experiment"])

    @property
    def complete(self) -> bool:
        return self.incomplete is None

    @property
    def title(self) -> str:
        return self.layout.title


@dataclass(frozen=True)
class NotRendered:
    """A run directory of a results folder that failed validation, with the reason.

    ``experiment`` is the registry experiment its ``config.yaml`` names (None where it names
    none or cannot be read): the summary says that experiment's run was not rendered.
    """

    name: str
    experiment: str | None
    reason: str


@dataclass(frozen=True)
class Results:
    """The runs of a results folder, in the papers' order: those that render and those that
    do not."""

    runs: tuple[RunSummary, ...]
    not_rendered: tuple[NotRendered, ...] = ()


def collect_runs(root: str | Path) -> Results:
    """Every run directory directly below ``root`` (or ``root`` itself), in the papers' order
    (:data:`~tailmem.claims.listing.EXPERIMENTS`: docs/PAPERS.md's), then by folder name.

    ``root`` itself a run: a damaged run is a :class:`DataError`. A results folder: damaged runs
    are returned as :class:`NotRendered`; a DataError only when none of its runs renders.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root} is not a directory; expected a results folder from reproduce")
    if (root / "config.yaml").is_file():
        return Results((read_run(root),))
    runs, broken = [], []
    for path in sorted(root.iterdir()):
        if not (path / "config.yaml").is_file():
            continue
        try:
            runs.append(read_run(path))
        except (DataError, OSError) as exc:
            reason = " ".join(str(exc).split())
            broken.append(NotRendered(path.name, _named_experiment(path), reason))
    if not runs and not broken:
        raise DataError(f"{root} holds no run directories (no */config.yaml); run reproduce first")
    if not runs:
        if len(broken) == 1:
            raise DataError(broken[0].reason)
        raise DataError(
            f"{root}: none of its {len(broken)} runs can be rendered; the first, "
            f"{broken[0].name}: {broken[0].reason}"
        )
    rank = {name: i for i, name in enumerate(EXPERIMENTS)}
    runs.sort(key=lambda r: (rank.get(r.experiment, len(rank)), r.name))
    return Results(tuple(runs), tuple(broken))


def experiment_names() -> list[str]:
    """The tailmem experiments: those with packaged presets (``tailmem/configs/<name>/``).

    The experiment registry (:data:`tailmem.experiments.EXPERIMENTS`) lies in a layer the report
    may not import; every registered experiment ships its presets, and a test keeps the two sets
    the same.
    """
    root = config.CONFIGS_ROOT
    return sorted(p.name for p in root.iterdir() if p.is_dir() and config.available_presets(p.name))


def _named_experiment(path: Path) -> str | None:
    """The claims-registry experiment a damaged run's ``config.yaml`` names, if it names one."""
    try:
        named = RunDir(path).read_config()["experiment"]
    except (DataError, OSError):
        return None
    return named if isinstance(named, str) and named in EXPERIMENTS else None


def require_run(path: Path) -> None:
    """Refuse, in one line, a folder that holds no run (no ``config.yaml``)."""
    if not (path / "config.yaml").is_file():
        raise DataError(
            f"{path} is not a run folder (no config.yaml); expected one written by tailmem run, "
            "or one study's folder of a reproduce (results/PRESET/STUDY)"
        )


def read_run(path: str | Path) -> RunSummary:
    """Read one run directory and check everything the report shows from it.

    Raises a one-line :class:`DataError` naming the file and what was expected: an experiment
    that is not in the registry or a preset it does not have, a claim of another experiment or
    one listed twice, a claim field of the wrong type (see
    :class:`~tailmem.claims.core.ClaimResult`), a damaged ``COMPLETE`` time or a
    ``report.json`` entry that is damaged, missing or outside the run.
    """
    run = RunDir(path)
    record = run.read_config()
    experiment = _check_record(run, record)
    preset = read_preset(run.file("config.yaml"), record, experiment)
    incomplete = run.incomplete_reason()
    wall = None if incomplete else _wall_seconds(run)
    if run.file("claims.json").is_file():
        claims = read_claims(run)
        _check_claims(run, experiment, claims)
        claims += not_measured(experiment, claims)
    else:
        claims = not_measured(experiment, [], "the run wrote no claims.json")
    layout = read_layout(run, experiment)
    return RunSummary(
        run.path.name, run.path, record, preset, incomplete, wall, tuple(claims), layout
    )


def _check_record(run: RunDir, record: dict[str, Any]) -> str:
    """The experiment ``config.yaml`` names, checked against the registry (and the fields the
    report prints checked for their type)."""
    source = run.file("config.yaml")
    experiment = record["experiment"]
    known = experiment_names()
    if not isinstance(experiment, str) or experiment not in known:
        raise DataError(
            f"{source}: experiment {experiment!r} is not a tailmem experiment; expected one of: "
            f"{', '.join(known)}"
        )
    if not isinstance(record.get("environment", {}), dict):
        raise DataError(f"{source}: 'environment' must map names to values")
    return experiment


def _wall_seconds(run: RunDir) -> float | None:
    """The wall time ``COMPLETE`` records (None: not recorded)."""
    wall = run.read_json("COMPLETE").get("wall_seconds")
    if wall is None:
        return None
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not 0 <= wall < math.inf:
        raise DataError(
            f"{run.file('COMPLETE')}: wall_seconds is {wall!r}; expected seconds (a number ≥ 0)"
        )
    return float(wall)


def _check_claims(run: RunDir, experiment: str, claims: list[ClaimResult]) -> None:
    """Each claim of ``claims.json`` once, and each a claim of the run's ``experiment``."""
    source = run.file("claims.json")
    seen: set[str] = set()
    for claim in claims:
        if claim.id in seen:
            raise DataError(f"{source}: claim {claim.id!r} is listed twice; expected each once")
        seen.add(claim.id)
        registered = lookup(claim.id)
        owner = registered.experiment if registered is not None else None
        if owner != experiment:
            raise DataError(
                f"{source}: claim {claim.id!r} belongs to "
                f"{repr(owner) if owner else 'no experiment'}, but config.yaml names "
                f"{experiment!r}; expected only that experiment's claims (files of two runs?)"
            )
