"""Load a repository file that is not a package module (a script under ``scripts/``, an example)
as a module, so a test can call its functions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load(path: Path | str, name: str | None = None) -> ModuleType:
    """The module of the file ``path`` (relative to the repository root, or absolute), named
    ``name`` (default: its stem)."""
    path = ROOT / path
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
