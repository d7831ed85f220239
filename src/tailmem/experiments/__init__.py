"""The study registry: every public module or package of this package is a study.

A study module exports ``STUDY``, its :class:`~tailmem.studies.Study` record (name, config type,
``run``, ``preflight``, what it reproduces, its presets' sizes and times, its headline
question). The registry finds the studies by their module names alone — ``assoc_two_group`` is
study ``assoc-two-group`` — and imports a study only when its record is asked for, so ``tailmem
run`` imports the one it runs; nothing else registers a study. A study writes ``results.json``,
CSVs, figures and ``claims.json`` into its run directory and never imports another study (the
knowledge-QA grid studies drive knowledge-QA through its library).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from tailmem.errors import ConfigError
from tailmem.progress import format_seconds
from tailmem.studies import Study


def study_names() -> list[str]:
    """Every study's name, in alphabetical order: the public modules and packages of this
    package (``_private`` ones are helpers), ``_`` written ``-``."""
    found = (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return sorted(name.replace("_", "-") for name in found)


def get_study(name: str) -> Study[Any]:
    """The record of study ``name``, its module imported; an unknown name is a ConfigError
    listing the known ones. (Typed ``Study[Any]``: which config type a name stands for is
    known only once its module is imported.)"""
    names = study_names()
    if name not in names:
        known = ", ".join(names) or "none registered"
        raise ConfigError(f"unknown experiment {name!r}; expected one of: {known}")
    module = importlib.import_module(f"{__name__}.{name.replace('-', '_')}")
    study = getattr(module, "STUDY", None)
    if not isinstance(study, Study) or study.name != name:
        raise TypeError(f"{module.__name__} must export STUDY, a Study named {name!r}")
    return study


def studies() -> list[Study[Any]]:
    """Every study's record (each module imported), in :func:`study_names` order."""
    return [get_study(name) for name in study_names()]


def in_reproduce(name: str) -> bool:
    """Whether a plain ``tailmem reproduce`` runs study ``name``."""
    return get_study(name).in_reproduce


def expected_seconds(name: str, preset: str) -> float | None:
    """The measured wall time of study ``name`` at ``preset`` (None: not timed)."""
    return get_study(name).seconds(preset)


def headline_questions() -> dict[str, str]:
    """The question each study that states headline answers answers, by study name (what the
    report names for a study it lacks the answers of)."""
    return {s.name: s.question for s in studies() if s.question is not None}


def presets_text(study: Study[Any]) -> str:
    """``smoke 2s · cpu K ≤ 3000, 6s · paper K ≤ 30000`` (untimed presets: the size only)."""
    parts = []
    for preset in study.presets:
        took = preset.seconds
        time = "" if took is None else ("<1s" if took < 1 else format_seconds(took))
        text = ", ".join(p for p in (preset.size, time) if p)
        parts.append(f"{preset.name} {text}")
    return " · ".join(parts)
