"""Every script under ``benchmarks/`` runs at its smallest size, as a reader would run it.

Benchmarks are not timed here (their numbers come from full runs on a named host): this only
keeps them runnable, as ``mypy`` (which checks them with ``src/``) keeps them type-correct. Each
runs in a fresh interpreter from a temporary folder and must exit 0 and print its result lines;
those that take more than a few seconds on 2 shared cores are marked slow.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY_GPT = ("--size", "tiny", "--vocab", "64", "--seq", "32", "--batch", "4")


@dataclass(frozen=True)
class Smallest:
    """A benchmark's smallest size: its arguments, a line its output must hold, and whether it
    takes more than a few seconds."""

    args: tuple[str, ...]
    prints: str
    slow: bool = True


SMALLEST = {
    "assoc.py": Smallest(("--baseline-ks", "99"), "peak RSS"),
    "bench_bios.py": Smallest(("1",), "ratio build/baseline", slow=False),
    "corpus.py": Smallest(("--vocab-size", "300"), "cold / hit", slow=False),
    "ensemble_step.py": Smallest((*TINY_GPT, "--repeats", "1", "--window", "1"), "ratio single"),
    "gpt_positions.py": Smallest(
        ("--size", "tiny", "--batch", "2", "--seq-len", "32", "--repeats", "1"),
        "peak RSS",
        slow=False,
    ),
    "gram_table.py": Smallest(
        ("--rows", "16", "--aspects", "2", "--repeats", "1", "--elements", "4096"),
        "measured row",
        slow=False,
    ),
    "lm_presets.py": Smallest(("--steps", "10"), "min budget"),
    "muon_batched.py": Smallest(
        ("--sets", "2x64", "--dtypes", "fp32", "--repeats", "1", "--no-compile"),
        "ceiling: the set's NS5 products",
    ),
    "optim_step.py": Smallest(("--set", "2x128", "--methods", "ns5", "--no-distributed"), "same"),
    "profile_cpu.py": Smallest(("--studies", "icl-regression"), "predicted reproduce"),
    "qa_eval.py": Smallest(("--preset", "smoke", "--repeat", "1"), "FTA-only evaluation"),
    "reproduce_cpu.py": Smallest(("--preset", "smoke", "--studies", "icl-regression"), "pooled"),
    "spectrum.py": Smallest(("--layers", "1", "--naive-layers", "1"), "peak RSS"),
    "step_modes.py": Smallest(
        (
            *TINY_GPT,
            "--precisions",
            "fp32",
            "--modes",
            "eager",
            "--steps",
            "1",
            "--warmup",
            "1",
            "--arms",
            "adamw,hybrid,hybrid_looped",
        ),
        "hybrid_looped / adamw step time",
    ),
    "train_step.py": Smallest(
        (*TINY_GPT, "--large-batch", "0", "--windows", "1", "--repeats", "1"), "step-time ratio"
    ),
}


def test_every_benchmark_has_its_smallest_size_here():
    assert sorted(SMALLEST) == sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize(
    "script",
    [pytest.param(s, marks=[pytest.mark.slow] if SMALLEST[s].slow else []) for s in SMALLEST],
)
def test_benchmark_runs_at_its_smallest_size(script, tmp_path):
    smallest = SMALLEST[script]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg",
           "TAILMEM_CACHE": str(tmp_path / "cache")}  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *smallest.args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=570,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert smallest.prints in done.stdout, done.stdout[-3000:]
