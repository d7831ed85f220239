"""Shared by the language-model experiment tests: one thread, one corpus cache, one smoke run.

The smoke presets build a small corpus from the embedded standard-library text; the cache folder
is shared by every test of the session so it is built once. ``ablation_smoke`` is the
smoke run in one process (``workers=1``, so tests can patch what its runs use) that several
tests (including the torchrun one) compare against.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tailmem.runner import run_experiment

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def lm_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lm-cache")


@pytest.fixture(scope="session")
def ablation_smoke(tmp_path_factory, lm_cache) -> Path:
    out = tmp_path_factory.mktemp("ablation") / "smoke"
    overrides = [f"data.cache_dir={lm_cache}", "workers=1"]
    run, status = run_experiment("ablation", "smoke", overrides, out=out)
    assert status == "ran" and run.is_complete
    return out


def _reject(constant: str) -> None:
    raise ValueError(f"non-standard JSON constant {constant}")


def strict_json_problems(root: Path) -> list[str]:
    """Every ``*.json`` file and ``*.jsonl`` line under ``root`` that a strict parser (no NaN,
    Infinity) refuses, as ``path: error``."""
    problems = []
    for path in sorted(root.rglob("*.json*")):
        if path.suffix not in (".json", ".jsonl"):
            continue
        text = path.read_text()
        docs = text.splitlines() if path.suffix == ".jsonl" else [text]
        for doc in filter(str.strip, docs):
            try:
                json.loads(doc, parse_constant=_reject)
            except ValueError as exc:
                problems.append(f"{path.relative_to(root)}: {exc}")
    return problems


@pytest.fixture(scope="session")
def strict_json():
    """The checker of :func:`strict_json_problems`, for the studies' smoke tests."""
    return strict_json_problems
