"""The preset a run was made at, and what a report of it can and cannot show.

A run's ``config.yaml`` records ``preset``: the name of a packaged preset (``smoke``, ``cpu``,
``paper``) or ``custom`` for a config file of the user's (``tailmem run --config FILE``), whose
path and SHA-256 it records as ``config_file``. The report puts a banner on its first screen
saying what each preset in it can show (:data:`SCOPES`): a smoke run checks that the code runs,
and its verdicts are no evidence, whatever they say. Runs of different presets are never
counted together (:mod:`tailmem.report.content` splits every count by preset).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from tailmem.config import USER_PRESET, available_presets
from tailmem.errors import DataError

SCOPES = {
    "smoke": "checks the code runs end to end; its verdicts are not evidence",
    "cpu": "a laptop-scale reproduction: the papers' effects on small models; what it cannot "
    "show: the paper's 160M scale",
    "paper": "the published scale: the papers' model sizes and training lengths",
    USER_PRESET: "a config of your own: what it can show depends on the sizes it sets",
}
"""What a report of each preset can and cannot show (a test keeps every packaged preset here)."""


@dataclass(frozen=True)
class Preset:
    """A run's preset: a packaged preset's ``name``, or ``custom`` with the user's
    ``config_file`` (its path as recorded)."""

    name: str
    config_file: str | None = None

    @property
    def label(self) -> str:
        """How the report names it: ``cpu``, or ``custom (my.yaml)``."""
        if self.config_file is None:
            return self.name
        return f"{self.name} ({PurePath(self.config_file).name})"

    @property
    def scope(self) -> str:
        """What a run of this preset can and cannot show (:data:`SCOPES`)."""
        return SCOPES[self.name]

    def banner(self) -> str:
        """The report's one-line banner for this preset."""
        where = f", from {self.config_file}" if self.config_file is not None else ""
        return f"Preset {self.name}{where}: {self.scope}."


def read_preset(source: Path, record: dict[str, Any], experiment: str) -> Preset:
    """The preset ``config.yaml`` (``source``, read as ``record``) names for a run of
    ``experiment``: one of its packaged presets, or ``custom`` with the ``config_file`` record
    of a ``--config`` run; anything else is a one-line :class:`DataError`."""
    known = available_presets(experiment)
    name = record.get("preset")
    expected = f"expected one of {', '.join([*known, USER_PRESET])}"
    if not isinstance(name, str) or name not in (*known, USER_PRESET):
        raise DataError(f"{source}: preset {name!r} is not a preset of {experiment}; {expected}")
    if name != USER_PRESET:
        return Preset(name)
    file = record.get("config_file")
    path = file.get("path") if isinstance(file, dict) else None
    if not isinstance(path, str) or not path:
        raise DataError(
            f"{source}: preset {USER_PRESET!r} without its config_file path; expected the "
            "record of a 'tailmem run --config FILE' run"
        )
    return Preset(name, path)


def mixed_note(presets: Iterable[Preset]) -> str:
    """The warning of a folder whose runs were made at several presets ("" for one)."""
    labels = list(dict.fromkeys(p.label for p in presets))
    if len(labels) < 2:
        return ""
    smoke = " Smoke verdicts are not evidence." if "smoke" in labels else ""
    return (
        f"This folder mixes runs of {len(labels)} presets ({', '.join(labels)}): every count "
        f"is given per preset, never pooled.{smoke}"
    )
