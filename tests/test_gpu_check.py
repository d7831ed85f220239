"""``scripts/gpu_check.sh`` at toy sizes on the CPU (``GPU_CHECK_TOY=1``): every section runs and
writes what the GPU run will bring back, so the script cannot rot between GPU sessions."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = {"summary.txt", "env.txt", "pytest_cuda.txt", "optim_step.txt", "step_modes.txt",
         "ensemble.txt", "qa_point.txt", "qa_run.tar.gz"}  # fmt: skip


def test_the_gpu_check_runs_every_section_at_toy_sizes(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "GPU_CHECK_TOY": "1", "OUT": str(out), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
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
    assert "final FTA rarest group" in qa and "source tailmem, group pooled, τ = 0.3" in qa
    with tarfile.open(out / "qa_run.tar.gz") as archive:
        names = archive.getnames()
    assert "qa/results.json" in names and not any("/ckpt" in name for name in names)
