"""``scripts/gpu_check.sh`` at toy sizes on the CPU (``GPU_CHECK_TOY=1``): every section runs and
writes what the GPU run will bring back, so the script cannot rot between GPU sessions.

Each toy section takes 5-20 s on 2 cores at load 4 (about a minute in all); one once ran past a
120-s limit on a loaded machine. Its limit is now :data:`SECTION_LIMIT` (the script's
``GPU_CHECK_TOY_LIMIT``), and the test waits for the script longer than any one section may
take, so a slow machine passes and a hung section is still named in ``summary.txt``."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = {"summary.txt", "env.txt", "pytest_cuda.txt", "optim_step.txt", "step_modes.txt",
         "ensemble.txt", "qa_point.txt", "qa_run.tar.gz"}  # fmt: skip
SECTION_LIMIT = 300
"""Seconds each toy section may take (15-60x what it takes on 2 cores at load 4)."""
SCRIPT_LIMIT = 4 * SECTION_LIMIT
"""Seconds the test waits for the whole script: past any one section's limit."""


def run_check(out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The script at toy sizes into ``out``, with ``env`` added to the environment."""
    env = {**os.environ, "GPU_CHECK_TOY": "1", "OUT": str(out), "PYTHONPATH": str(ROOT / "src"),
           "GPU_CHECK_TOY_LIMIT": str(SECTION_LIMIT), **env}  # fmt: skip
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=SCRIPT_LIMIT)  # fmt: skip


@pytest.mark.timeout(SCRIPT_LIMIT + 60)
def test_the_gpu_check_runs_every_section_at_toy_sizes(tmp_path):
    out = tmp_path / "out"
    done = run_check(out)
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} == FILES  # at most 8 come back from the GPU machine
    summary = (out / "summary.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in summary] == [
        "env", "CUDA tests", "optimiser step", "160M step modes", "ensemble step fp32",
        "ensemble step bf16", "knowledge-QA point", "knowledge-QA summary",
    ]  # fmt: skip
    assert all(": ok, " in line for line in summary[1:]), summary
    assert "skipped" in (out / "pytest_cuda.txt").read_text()  # no CUDA here: they skip
    assert "tailmem ns5" in (out / "optim_step.txt").read_text()
    assert "fp32      eager    adamw" in (out / "step_modes.txt").read_text()
    ensemble = (out / "ensemble.txt").read_text()
    assert ensemble.count("ratio single / ensemble") == 2 and "bf16" in ensemble
    qa = (out / "qa_point.txt").read_text()
    assert "final FTA rarest group" in qa and qa.count("final FTA rarest group") == 4
    assert "factorial.csv:" in qa and "arm muon_own" in qa and "regime.csv:" in qa
    with tarfile.open(out / "qa_run.tar.gz") as archive:
        names = archive.getnames()
    assert "qa/results.json" in names and not any("/ckpt" in name for name in names)


@pytest.mark.timeout(SECTION_LIMIT + 60)
def test_gpu_check_only_runs_the_sections_it_names_and_lists_the_rest_as_skipped(tmp_path):
    out = tmp_path / "out"
    done = run_check(out, GPU_CHECK_ONLY="optimiser")
    assert done.returncode == 0, done.stderr
    summary = (out / "summary.txt").read_text().splitlines()
    ran = [line for line in summary[1:] if "skipped (GPU_CHECK_ONLY=optimiser)" not in line]
    assert [line.split(":")[0] for line in ran] == ["optimiser step"] and ": ok, " in ran[0]
    assert len(summary) == 7  # env, then six sections up to the QA point: one line each
    assert "tailmem ns5" in (out / "optim_step.txt").read_text()
    assert not (out / "qa_run.tar.gz").exists() and not (out / "step_modes.txt").exists()
