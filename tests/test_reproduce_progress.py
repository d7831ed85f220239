"""progress.json (throttled, atomic, honest about skipped work), the reproduce display, and the
Slurm launcher's job-array plumbing through submitit's local executor."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from tailmem import progress
from tailmem.cli import main
from tailmem.progress_display import Board, PlainLines

SRC = Path(__file__).resolve().parents[1] / "src"


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_tracker_writes_at_most_once_a_second_and_counts_skipped_work(tmp_path, monkeypatch):
    clock = Clock()
    written = []
    real_write = progress.atomic_write_text

    def recording_write(path: Path, text: str) -> None:
        written.append((clock(), json.loads(text)))
        real_write(path, text)

    monkeypatch.setattr(progress, "atomic_write_text", recording_write)
    tracker = progress.Tracker(tmp_path / "progress.json", interval=1.0, clock=clock)
    tracker.plan(100, "steps")  # the plan is written at once
    for _ in range(50):  # 50 steps in 3.125 s
        clock.now += 0.0625
        tracker.advance(1)
    times = [t for t, _ in written]
    assert len(times) == 4  # the plan, then once per elapsed second
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(times))
    assert [state["done"] for _, state in written] == [0, 16, 32, 48]
    tracker.advance(30, skipped=True)
    tracker.flush()
    on_disk = json.loads((tmp_path / "progress.json").read_text())
    assert (on_disk["done"], on_disk["skipped"], on_disk["total"]) == (80, 30, 100)
    assert not list(tmp_path.glob("*.tmp"))


def test_snapshot_eta_uses_only_the_work_done_in_this_session():
    # 30 of 100 steps restored from a checkpoint, 20 trained in 10 s: 2 steps/s, 50 left.
    snap = progress.Snapshot(50, 30, 100, "steps", started=0.0, updated=10.0)
    assert snap.fraction == 0.5
    assert snap.eta(now=10.0) == pytest.approx(25.0)
    assert snap.eta(now=14.0) == pytest.approx(21.0)
    assert progress.Snapshot(30, 30, 100, "steps", 0.0, 10.0).eta(10.0) is None
    # 6 s of data preparation before the total was declared do not slow the rate down.
    prepared = progress.Snapshot(50, 30, 100, "steps", started=0.0, updated=10.0, planned=6.0)
    assert prepared.eta(now=10.0) == pytest.approx(10.0)
    assert progress.format_seconds(3723) == "1h02m03s" and progress.format_seconds(None) == "-"


def test_tracking_skip_and_iterate_fill_the_plan_exactly(tmp_path):
    with progress.tracking(tmp_path):
        progress.plan(10, "steps")
        progress.skip(4)  # a reused result: 4 skipped
        progress.advance(3)  # diverged after 3 of 4 steps: 1 skipped
        progress.skip(1)
        for _ in progress.iterate(range(4), "loop", weight=2):
            pass
        mid = progress.read(tmp_path)
        assert mid is not None and mid.total == 10
    final = progress.read(tmp_path)
    assert (final.done, final.skipped, final.unit) == (10, 5, "steps")
    assert json.loads((tmp_path / "progress.json").read_text())["done"] == 10
    progress.advance(5)  # no tracker active: a no-op
    assert progress.read(tmp_path).done == 10


def write_progress(run: Path, **fields) -> None:
    run.mkdir(parents=True, exist_ok=True)
    base = {"done": 0, "skipped": 0, "total": None, "unit": "steps", "started": 0, "updated": 0}
    (run / "progress.json").write_text(json.dumps({**base, **fields}))


def test_board_status_percent_and_eta_from_progress_files(tmp_path):
    clock = Clock(100.0)
    write_progress(tmp_path / "b", done=5, total=10, started=50.0, updated=60.0)  # earlier call
    plans = {"a": "skip", "b": "resume", "c": "run", "d": "run"}
    board = Board(tmp_path, plans, parallel=1, clock=clock)
    assert [r.status for r in board.rows()] == ["skipped", "queued", "queued", "queued"]
    write_progress(tmp_path / "b", done=8, skipped=5, total=10, started=90.0, updated=96.0)
    write_progress(tmp_path / "c", done=1, total=4, started=95.0, updated=99.0)
    rows = {r.name: r for r in board.rows()}
    assert rows["b"].status == "resuming" and rows["c"].status == "running"
    assert rows["b"].fraction == 0.8 and rows["b"].progress_text() == "80% (8/10 steps)"
    assert rows["b"].elapsed == 10.0
    assert rows["b"].eta == pytest.approx(2 * 6 / 3 - 4)  # 3 steps in 6 s, 2 left, 4 s ago
    assert rows["c"].eta == pytest.approx(3 * 4 - 1)
    assert board.overall() == "1/4 finished, elapsed 0s, ETA 11s (+1 not estimated yet)"
    board.finish("b", ok=True)
    board.finish("c", ok=False)
    rows = {r.name: r for r in board.rows()}
    assert (rows["b"].status, rows["b"].fraction, rows["b"].eta) == ("done", 1.0, None)
    assert rows["c"].status == "failed"


def test_plain_lines_on_changes_and_every_30_seconds(tmp_path, monkeypatch):
    import io

    clock = Clock(100.0)
    board = Board(tmp_path, {"a": "run"}, clock=clock)
    stream = io.StringIO()
    lines = PlainLines(board, stream, every=30.0)
    monotonic = Clock(0.0)
    monkeypatch.setattr("tailmem.progress_display.time.monotonic", monotonic)
    lines.poll()
    write_progress(tmp_path / "a", done=1, total=4, started=95.0, updated=99.0)
    for t in range(0, 65, 1):  # polled every second for a minute
        monotonic.now = float(t)
        lines.poll()
    text = stream.getvalue().splitlines()
    own = [line for line in text if line.startswith("[reproduce] a:")]
    assert own[0] == "[reproduce] a: queued"
    assert own[1].startswith("[reproduce] a: running, 25% (1/4 steps), elapsed 5s, ETA")
    assert len(own) == 4  # queued, running at 0 s, again at 30 s and 60 s


def test_submitit_missing_is_one_line_exit_2(monkeypatch, tmp_path, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "submitit", None)  # makes `import submitit` fail
    args = ["reproduce", "--launcher", "slurm", "--only", "assoc-capacity", "--out", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tailmem: error: --launcher slurm needs submitit: pip install 'tailmem[slurm]'"]
    assert not any(tmp_path.iterdir())


def test_slurm_launcher_runs_a_job_array_and_writes_the_report(tmp_path, monkeypatch, capsys):
    pytest.importorskip("submitit")
    from tailmem.reproduce import SlurmOptions, reproduce

    monkeypatch.setenv("PYTHONPATH", f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    out = tmp_path / "results"
    report = reproduce(
        "smoke",
        only=["assoc-two-group", "assoc-capacity"],
        out=out,
        jobs=2,
        launcher="slurm",
        slurm=SlurmOptions(partition="debug", time_min=5, cpus_per_task=1),
        cluster="local",
    )
    assert report == out / "report.html" and report.is_file()
    for name in ("assoc-two-group", "assoc-capacity"):
        assert (out / name / "COMPLETE").is_file()
        snap = progress.read(out / name)
        assert snap is not None and snap.done == snap.total
    jobs = list((out / ".submitit").glob("*_submitted.pkl"))
    assert len(jobs) == 2  # one array task per experiment
    err = capsys.readouterr().err
    assert "assoc-capacity: done" in err and "2/2 finished" in err
