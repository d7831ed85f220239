"""SIGKILL a training process after a checkpoint, resume it, and get the uninterrupted metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tailmem.train import TIMING_KEYS, read_metrics

SCRIPT = Path(__file__).with_name("tiny_run.py")
SRC = Path(__file__).resolve().parents[2] / "src"
ARGS = ["--steps", "80", "--ckpt-every", "20", "--log-every", "10"]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def run(out: Path, *extra: str) -> dict:
    subprocess.run([sys.executable, SCRIPT, out, *ARGS, *extra], env=env(), check=True, timeout=120)
    return json.loads((out / "result.json").read_text())


def comparable(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(path)]


def test_sigkill_then_resume_reproduces_the_uninterrupted_run(tmp_path):
    ref = run(tmp_path / "ref")
    assert ref == {"status": "complete", "resumed_from": None, "crashed_at": None}

    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, out, *ARGS, "--sleep", "0.02"],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    target = out / "ckpt" / "step_000040.pt"
    deadline = time.monotonic() + 90
    while not target.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be killed"
    assert target.exists(), "no checkpoint appeared in time"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "result.json").exists()
    cut_at = max(r["step"] for r in read_metrics(out / "metrics.jsonl"))
    assert 40 <= cut_at < 80

    resumed = run(out)
    assert resumed["status"] == "complete" and resumed["resumed_from"] >= 40
    assert resumed["crashed_at"] is None
    assert comparable(out / "metrics.jsonl") == comparable(tmp_path / "ref" / "metrics.jsonl")
    assert len(comparable(out / "metrics.jsonl")) == 8
