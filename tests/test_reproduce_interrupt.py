"""Kill ``tailmem reproduce`` mid-way (SIGKILL, then Ctrl-C) and check that nothing is lost.

assoc-capacity (about 2 s at smoke) runs first, then ablation (72 training steps with
checkpoints). The killed call is rerun to completion; its results must equal those of an
uninterrupted call in another folder.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from signals import terminal_job

SRC = Path(__file__).resolve().parents[1] / "src"
EXPERIMENTS = "assoc-capacity,ablation"


def command(out: Path, only: str = EXPERIMENTS, jobs: int = 1) -> list[str]:
    args = [
        "reproduce",
        "--preset",
        "smoke",
        "--only",
        only,
        "--out",
        str(out),
        "--jobs",
        str(jobs),
    ]
    return [sys.executable, "-m", "tailmem", *args]


def env(cache: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC), "TAILMEM_CACHE": str(cache)}


def start(out: Path, cache: Path, only: str = EXPERIMENTS, jobs: int = 1) -> subprocess.Popen:
    return subprocess.Popen(
        command(out, only, jobs),
        env=env(cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell job would have
        preexec_fn=terminal_job,  # Ctrl-C works in it however pytest was started
    )


def wait_for(condition, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"reproduce ended before the test could interrupt it: {proc}"
        assert time.monotonic() < deadline, "timed out waiting for reproduce"
        time.sleep(0.01)


def planned(run: Path) -> bool:
    """The experiment has started: it declared its total work in progress.json."""
    try:
        return json.loads((run / "progress.json").read_text())["total"] is not None
    except (OSError, ValueError, KeyError):
        return False


def first_arm_done(run: Path) -> bool:
    return any(run.glob("runs/*/*/*/result.json"))


def digests(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(folder)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def claims_tables(report: Path) -> str:
    """The claim rows of report.md, without wall times and paths."""
    lines = [line for line in report.read_text().splitlines() if line.startswith("|")]
    return "\n".join(re.sub(r"\d+(\.\d+)? ?s\b|/\S+", "", line) for line in lines)


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corpus-cache")


def test_sigkill_then_rerun_equals_an_uninterrupted_run(tmp_path, cache):
    killed = tmp_path / "killed"
    proc = start(killed, cache)
    wait_for(lambda: first_arm_done(killed / "ablation"), proc)
    assert (killed / "assoc-capacity" / "COMPLETE").is_file()
    first = digests(killed / "assoc-capacity")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert not (killed / "ablation" / "COMPLETE").exists()

    rerun = subprocess.run(
        command(killed), env=env(cache), capture_output=True, text=True, timeout=120
    )
    assert rerun.returncode == 0, rerun.stderr
    assert "assoc-capacity: complete, skipped" in rerun.stderr
    assert "ablation: resuming" in rerun.stderr
    assert digests(killed / "assoc-capacity") == first  # neither rewritten nor touched
    assert (killed / "ablation" / "COMPLETE").is_file()
    progress = json.loads((killed / "ablation" / "progress.json").read_text())
    assert progress["done"] == progress["total"] == 72  # 3 arms x 24 steps at smoke
    assert progress["skipped"] >= 24  # the arm trained before the kill was not redone

    clean = tmp_path / "clean"
    subprocess.run(command(clean), env=env(cache), check=True, capture_output=True, timeout=120)
    for name in ("verdicts.json",):
        assert json.loads((killed / name).read_text()) == json.loads((clean / name).read_text())
    ours, reference = claims_tables(killed / "report.md"), claims_tables(clean / "report.md")
    assert ours == reference, "\n".join(
        difflib.unified_diff(reference.split("\n"), ours.split("\n"))
    )
    assert not leftovers(killed)


@pytest.mark.parametrize(("only", "jobs"), [("ablation", 1), (EXPERIMENTS, 2)])
def test_ctrl_c_stops_promptly_and_leaves_nothing_half_written(tmp_path, cache, only, jobs):
    out = tmp_path / "interrupted"
    proc = start(out, cache, only, jobs)  # jobs=2: the experiments run in worker processes
    wait_for(lambda: planned(out / "ablation"), proc)
    # The smoke run trains in well under a second: freeze it, so Ctrl-C surely lands mid-run.
    os.killpg(proc.pid, signal.SIGSTOP)
    assert proc.poll() is None and not (out / "ablation" / "COMPLETE").exists()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - sent < 10
    assert err.strip().splitlines()[-1] == (
        "tailmem: interrupted; completed runs are kept, rerun to resume"
    )
    assert not (out / "ablation" / "COMPLETE").exists()
    assert not leftovers(out)
    for path in out.rglob("*.json"):
        json.loads(path.read_text())  # every JSON file is whole
