"""A study as one typed value: :class:`Study`, the record each study module exports as ``STUDY``.

A study is a module (or package) in :mod:`tailmem.experiments` whose ``STUDY`` says everything
the rest of tailmem needs to know about it: its name, its config type, how it runs (``run``,
and the ``preflight`` that refuses a config before anything is written), what it reproduces,
each preset's size and measured time, the headline question its report answers, whether a plain
``tailmem reproduce`` runs it, whether the documentation's results page shows it and how
``tailmem tune`` tunes it. The registry (:mod:`tailmem.experiments`) finds the modules by their
names alone; ``tailmem list``, the runner, the CLI, the report's questions and the results page
all read this record::

    STUDY = Study(
        name="assoc-capacity", config=Config, run=run, preflight=preflight,
        reproduces="beyond the papers: Cabannes et al.'s d < K capacity law",
        presets=(Preset("smoke", "", 0.9), Preset("cpu", "10^3 facts", 19.0),
                 Preset("paper", "10^4 facts")),
    )

Adding a study is then its own package (or module) with its ``STUDY``, its presets
(``tailmem/configs/<name>/``) and its claims: nothing else is registered anywhere.

Preset times are wall-clock seconds of ``tailmem reproduce`` on a 2-core machine (cpu: from a
fresh clone on a quiet machine; smoke: every study in one ``reproduce --preset smoke`` at load 5,
so that their ratios agree: the overall ETA rescales the others by the finished ones); None
where the preset was not timed here (the ``paper`` presets are meant for GPUs or long CPU runs).

A leaf module: it imports nothing of tailmem at run time, so every layer may read the type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from tailmem.rundir import RunDir


class StudyConfig(Protocol):
    """What the runner needs of every study's config: its (first) seed."""

    @property
    def seed(self) -> int: ...


C = TypeVar("C", bound=StudyConfig)


@dataclass(frozen=True)
class Provenance:
    """Where a run came from, as the runner knows it and passes it in: the preset its config
    came from (``custom`` for a user's file) and the command line that started it (what a rate
    it tunes records as its provenance)."""

    preset: str
    command: str


@dataclass(frozen=True)
class Preset:
    """One packaged preset of a study: its name, its size in words (``K ≤ 3000``; empty for a
    toy size) and its measured wall time in seconds (None: not timed here)."""

    name: str
    size: str = ""
    seconds: float | None = None


@dataclass(frozen=True)
class Study(Generic[C]):
    """One study (see the module docstring).

    ``run(cfg, run_dir, provenance)`` computes and writes the run's outputs;
    ``preflight(cfg)`` refuses, with a :class:`~tailmem.errors.TailmemError` and without
    writing anything, a config this machine cannot run (data sources, sizes, memory).
    ``question``: the headline question its ``report.json`` answers (None: it states no
    headline answers). ``in_reproduce``: a plain ``tailmem reproduce`` runs it (False for the
    long studies beyond the papers, which ``--only`` adds). ``on_results_page``: the
    documentation's results page shows its cpu run. ``tune_overrides``: the overrides that make
    its run train the tuning trials only and write the choices (``tailmem tune``; None: it
    tunes no learning rate)."""

    name: str
    config: type[C]
    run: Callable[[C, RunDir, Provenance], None]
    reproduces: str
    presets: tuple[Preset, ...]
    preflight: Callable[[C], None] | None = None
    question: str | None = None
    in_reproduce: bool = True
    on_results_page: bool = False
    tune_overrides: tuple[str, ...] | None = None

    def seconds(self, preset: str) -> float | None:
        """The measured wall time of ``preset`` (None: not timed, or no such preset)."""
        return next((p.seconds for p in self.presets if p.name == preset), None)
