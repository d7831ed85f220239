"""Names a user chooses that become folder names: checked where they are read, or mapped.

An optimiser kind's name (``optim.<name>.factory``), an arm's name and a grid point's label each
end up in a path (``runs/<ffn>/<arm>/<kind><rate>-...``, ``points/<label>/``). A name taken as
it is must be one folder name on every file system tailmem runs on: letters, digits, ``_``,
``-``, ``+`` and ``.`` (not first), at most :data:`MAX_NAME` characters
(:func:`check_folder_name`); a free-form label is mapped to one of at most :data:`MAX_FOLDER`
(:func:`folder_name`). Two names
whose folders would be one on a case-insensitive disk (macOS, Windows) are refused too
(:func:`check_distinct`): the second run would silently write into the first's folder.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from tailmem.errors import ConfigError

MAX_NAME = 64
"""The longest name taken as a folder name as it is (an optimiser kind's or an arm's: a
sub-run's folder adds rates, seed and length to it)."""
MAX_FOLDER = 120
"""The longest folder name a free-form label is mapped to (a file system allows 255 bytes)."""

_FOLDER = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*")
KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An optimiser kind's name: also a key of dotted overrides and of recipes (``kind:roles``)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def check_folder_name(what: str, name: str, pattern: re.Pattern[str] = _FOLDER) -> str:
    """``name`` when it can be a folder name as it is (module docstring); else one
    :class:`ConfigError` line naming ``what`` it is."""
    if not isinstance(name, str) or not pattern.fullmatch(name) or len(name) > MAX_NAME:
        shown = name if not isinstance(name, str) or len(name) <= 80 else f"{name[:60]}..."
        allowed = "letters, digits and '_' (not a digit first)" if pattern is KIND else (
            "letters, digits, '_', '-', '+' or '.' (not first)")  # fmt: skip
        raise ConfigError(
            f"{what}: got {shown!r}; expected a name of at most {MAX_NAME} {allowed}: it names "
            "a folder"
        )
    return name


def folder_name(label: str) -> str:
    """The folder name of a free-form ``label``: every run of other characters than letters,
    digits, ``.``, ``_`` and ``-`` made one ``_`` (no leading dot: never ``..``); a longer
    result than :data:`MAX_FOLDER` is cut and ends in a digest of the whole label, so two long
    labels never share a folder."""
    name = _UNSAFE.sub("_", label).strip("_").lstrip(".") or "_"
    if len(name) <= MAX_FOLDER:
        return name
    digest = hashlib.sha256(label.encode()).hexdigest()[:8]
    return f"{name[: MAX_FOLDER - 9]}-{digest}"


def check_distinct(what: str, names: Iterable[str]) -> None:
    """Refuse two of ``names`` whose folders (:func:`folder_name`) are one on a
    case-insensitive disk: one line naming both."""
    seen: dict[str, str] = {}
    for name in names:
        key = folder_name(name).casefold()
        if key in seen and seen[key] == name:
            raise ConfigError(f"{what}: {name!r} is listed twice; expected each at most once")
        if key in seen:
            raise ConfigError(
                f"{what}: {name!r} and {seen[key]!r} share one folder; expected names whose "
                "folders differ in more than letter case and punctuation"
            )
        seen[key] = name
