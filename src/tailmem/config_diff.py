"""Which settings differ between runs' configs: the keys, dotted, whose values are not the same
in every config, each value as the user writes it. ``tailmem compare`` lists them; the runner
names the first few when it refuses to replace a run of another config."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MISSING = "—"
"""A value a config lacks (and, in the comparison's tables, a cell a run has nothing for)."""


@dataclass(frozen=True)
class Difference:
    """One config key (dotted) whose value differs between the runs, each run's as text
    (:data:`MISSING` where a run's config lacks the key)."""

    key: str
    values: tuple[str, ...]


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{"a.b.c": leaf}`` (lists are leaves)."""
    if not isinstance(value, Mapping) or (prefix and not value):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def as_text(value: Any) -> str:
    """A config value as the user writes it on the command line."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def differences(views: Sequence[Mapping[str, Any]]) -> tuple[Difference, ...]:
    """The keys of flat ``views`` (in first-seen order) whose values are not the same in
    every view."""
    keys = list(dict.fromkeys(k for view in views for k in view))
    found = []
    for key in keys:
        values = [as_text(view[key]) if key in view else MISSING for view in views]
        if len(set(values)) > 1:
            found.append(Difference(key, tuple(values)))
    return tuple(found)
