"""What an install without tailmem's dependencies can do, and the one line when it cannot.

``pip install --no-deps tailmem`` beside torch is the optimiser library alone: ``tailmem.optim``
imports torch and nothing else. The ``tailmem`` commands need the dependencies the experiments
use (:data:`DEPENDENCIES`; ``tailmem claims`` and ``--version`` aside); run without them, a
command stops with one line naming the missing package (:func:`missing_dependency`) instead of a
traceback. This module
imports nothing outside the standard library, so the CLI can say so wherever it fails.
"""

from __future__ import annotations

DEPENDENCIES = {
    "numpy": "numpy",
    "scipy": "scipy",
    "matplotlib": "matplotlib",
    "yaml": "pyyaml",
    "tqdm": "tqdm",
    "tokenizers": "tokenizers",
    "safetensors": "safetensors",
    "rich": "rich",
}
"""The import name of each of tailmem's dependencies besides torch, with its distribution
(``[project] dependencies`` of pyproject.toml)."""


def missing_dependency(exc: BaseException) -> str | None:
    """The one-line message of an import that failed because one of :data:`DEPENDENCIES` is
    not installed (None: ``exc`` is something else)."""
    if not isinstance(exc, ModuleNotFoundError) or exc.name is None:
        return None
    module = exc.name.split(".")[0]
    if module not in DEPENDENCIES:
        return None
    return (
        f"this command needs {DEPENDENCIES[module]}, which is not installed: an install with "
        "--no-deps provides only the optimiser library (tailmem.optim); install tailmem "
        "without --no-deps (from a clone: pip install -e .)"
    )
