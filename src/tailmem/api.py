"""tailmem from Python: run a study, and read a run directory as typed values.

:func:`run` runs one experiment as ``tailmem run`` does (the same checks before anything is
written, the same reuse of a complete run) and returns a :class:`RunView` of its run directory;
:func:`load` reads one that exists. A :class:`RunView` holds what the report reads, checked as the
report checks it (:func:`tailmem.report.reader.read_run`): the experiment, its preset and full
config, its claims (:class:`~tailmem.claims.core.ClaimResult`, the registry claims it did not
measure included as "not measured"), the headline answers and figures of its ``report.json``,
and the names of its CSV tables, which :meth:`RunView.rows` reads as lists of dicts (numbers as
numbers) and :meth:`RunView.frame` as pandas DataFrames (pandas is not a dependency of tailmem:
imported when asked for). For the language-model studies, :meth:`RunView.sub_runs` gives every
training run's :class:`~tailmem.lm.spec.RunResult`. Bad input is a one-line
:class:`~tailmem.errors.TailmemError` (a missing table, a damaged file), as on the command line::

    from tailmem import api

    view = api.run("knowledge-qa", preset="smoke", out="runs/qa-smoke")
    print(view.claim("A3.plain.tail_muon_vs_adam").verdict)
    rows = view.rows("head_tail_gap.csv")
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailmem.claims.core import ClaimResult
from tailmem.errors import DataError, TailmemError
from tailmem.outputs import Answer
from tailmem.report.layout import Figure
from tailmem.report.reader import read_run, require_run

if TYPE_CHECKING:
    from tailmem.lm.spec import RunResult

Cell = str | int | float | None
"""A table cell as :meth:`RunView.rows` gives it: a whole number, a number, text, or None for an
empty cell."""


@dataclass(frozen=True)
class RunView:
    """One run directory, read and checked (see the module docstring). ``preset`` is the
    preset's name (``smoke``, ``cpu``, ``paper``, or ``custom`` for ``config=FILE``);
    ``config`` the full config the run recorded (as a dict; :meth:`typed_config` builds the
    study's typed config from it); ``tables`` the CSV files of the run."""

    path: Path
    experiment: str
    preset: str
    config: dict[str, Any]
    complete: bool
    claims: tuple[ClaimResult, ...]
    answers: tuple[Answer, ...]
    figures: tuple[Figure, ...]
    tables: tuple[str, ...]

    def typed_config(self) -> Any:
        """The run's config as its study's typed config (the frozen dataclass the study ran
        with: ``view.typed_config().train.steps``), built from ``config`` as the loader builds
        a preset's, and checked as it checks one. A config this version of tailmem cannot
        build (a run of another version whose fields changed) is a one-line DataError.
        (Typed ``Any``: which class an experiment's name stands for is known only at run
        time.)"""
        from tailmem.experiments import get_study
        from tailmem.typecheck import from_dict

        try:
            return from_dict(get_study(self.experiment).config, self.config)
        except TailmemError as exc:
            raise DataError(
                f"{self.path}: its config does not build as {self.experiment}'s config of this "
                f"version of tailmem ({exc}); expected a run of this version (the dict is "
                "RunView.config)"
            ) from None

    def claim(self, claim_id: str) -> ClaimResult:
        """The claim ``claim_id`` (an id of ``tailmem claims``); another id is a DataError."""
        for claim in self.claims:
            if claim.id == claim_id:
                return claim
        known = ", ".join(c.id for c in self.claims)
        raise DataError(f"{self.path}: no claim {claim_id!r}; expected one of: {known}")

    def rows(self, table: str) -> list[dict[str, Cell]]:
        """The CSV ``table`` of the run as one dict per row, its cells as numbers where they
        read as numbers (whole numbers as ``int``), None where empty, text otherwise."""
        with open(self._table(table), newline="") as handle:
            return [{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(handle)]

    def frame(self, table: str) -> Any:
        """The CSV ``table`` of the run as a ``pandas.DataFrame`` (needs pandas, which tailmem
        does not install; typed ``Any`` so that tailmem type-checks without pandas' stubs)."""
        try:
            import pandas
        except ModuleNotFoundError:
            raise ModuleNotFoundError(
                "RunView.frame needs pandas, which tailmem does not install: pip install pandas "
                "(RunView.rows gives the same table as lists of dicts)",
                name="pandas",
            ) from None
        return pandas.read_csv(self._table(table))

    def sub_runs(self) -> dict[str, RunResult]:
        """Every training run of a language-model study, by its folder relative to the run
        (``runs/plain/muon/muon0.02-adam0.003-seed0-steps40``): the result it recorded in its
        ``result.json`` (empty for the other studies)."""
        from tailmem.lm.spec import read_results

        return read_results(self.path)

    def _table(self, name: str) -> Path:
        if name not in self.tables:
            raise DataError(
                f"{self.path}: no table {name!r}; expected one of: {', '.join(self.tables)}"
            )
        return self.path / name


def _cell(text: str) -> Cell:
    if not text:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def load(path: str | os.PathLike[str]) -> RunView:
    """The run directory ``path`` (written by ``tailmem run``, or one experiment's folder of a
    ``tailmem reproduce``), read and checked."""
    path = Path(path)
    require_run(path)
    summary = read_run(path)
    return RunView(
        path=summary.path,
        experiment=summary.experiment,
        preset=summary.preset.name,
        config=dict(summary.record["config"]),
        complete=summary.complete,
        claims=summary.claims,
        answers=summary.layout.answers,
        figures=summary.layout.figures,
        tables=tuple(sorted(p.name for p in path.glob("*.csv") if p.is_file())),
    )


def run(
    experiment: str,
    preset: str | None = None,
    overrides: Sequence[str] | Mapping[str, object] = (),
    out: str | os.PathLike[str] | None = None,
    *,
    config: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> RunView:
    """Run ``experiment`` at the packaged ``preset`` (``smoke``, ``cpu``, ``paper``) or from
    the YAML file ``config`` (exactly one of the two), with ``overrides`` — ``"key=value"``
    strings, as on the command line, or a mapping ``{"train.steps": 8}``; anything else is a
    :class:`~tailmem.errors.ConfigError` — into ``out`` (default ``runs/EXP-PRESET``), as
    ``tailmem run`` does
    (:func:`tailmem.runner.run_experiment`; a complete run with the same config is reused,
    ``force`` redoes it); returns the view of its run directory."""
    from tailmem.config import as_overrides
    from tailmem.runner import run_experiment

    items = as_overrides(overrides)
    where = None if out is None else os.fspath(out)  # an empty path is refused, not "."
    run_dir, _ = run_experiment(experiment, preset, items, where, force=force, config=config)
    return load(run_dir.path)
