"""The worker pool under interrupts: Ctrl-C at any moment must leave a pool that shuts down."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import process
from pathlib import Path

import pytest

from signals import terminal_job, terminal_signals
from tailmem.lm import pool as pool_module
from tailmem.lm.pool import Pool

SRC = Path(__file__).resolve().parents[1] / "src"


def _square(x: int) -> int:
    return x * x


def test_calls_run_in_workers_and_results_come_back():
    with Pool(2, 1) as pool:
        for x in range(4):
            pool.submit(x, _square, x)
        results = {done.tag: done.result for done in pool.finished()}
    assert results == {x: x * x for x in range(4)}


def test_ctrl_c_while_a_call_is_submitted_is_held_until_the_pool_is_whole(monkeypatch):
    """Submitting starts the executor's manager thread; a KeyboardInterrupt inside that start
    used to leave an executor whose shutdown raised "cannot join thread before it is started".
    """
    start = process._ExecutorManagerThread.start

    def interrupted_start(thread):
        os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C does at this very moment
        time.sleep(0.2)  # the interrupt is due here
        start(thread)

    monkeypatch.setattr(process._ExecutorManagerThread, "start", interrupted_start)
    with terminal_signals():
        with pytest.raises(KeyboardInterrupt), Pool(2, 1) as pool:
            pool.submit("first", _square, 3)
        assert multiprocessing.active_children() == []
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _interrupted_call() -> None:
    signal.raise_signal(signal.SIGTERM)  # what the pool's stop, or a `kill`, sends a worker
    time.sleep(30)  # not reached: the signal interrupts the call


def test_a_call_interrupted_in_its_worker_interrupts_the_parent():
    """The worker's KeyboardInterrupt comes back as the call's outcome; the parent raises it
    rather than dropping the call and carrying on as if it had never been submitted."""
    seen = []
    with pytest.raises(KeyboardInterrupt), Pool(2, 1) as pool:
        pool.submit("interrupted", _interrupted_call)
        for done in pool.finished():
            seen.append(done.tag)
    assert seen == []
    assert multiprocessing.active_children() == []


def _interrupt_myself() -> None:
    signal.raise_signal(signal.SIGINT)
    time.sleep(30)  # not reached


def test_a_worker_is_interrupted_only_inside_a_call_and_then_runs_no_more(monkeypatch):
    """A signal raises only inside a call, once; between calls, and after the first, it only
    marks the worker, which then runs no further call (a KeyboardInterrupt outside a call would
    print a traceback and cut the worker's exit short: multiprocessing then reports leaked
    semaphores)."""
    monkeypatch.setattr(pool_module, "_interrupted", False)
    before = {s: signal.getsignal(s) for s in pool_module.SIGNALS}
    ran = []
    try:
        for s in pool_module.SIGNALS:
            signal.signal(s, pool_module._on_signal)
        assert pool_module._call_in_worker(_square, (4,)) == 16
        with pytest.raises(KeyboardInterrupt):
            pool_module._call_in_worker(_interrupt_myself, ())
        signal.raise_signal(signal.SIGTERM)  # a later one, between calls: nothing raised
        with pytest.raises(KeyboardInterrupt):
            pool_module._call_in_worker(ran.append, (1,))
        assert ran == []
        # A worker signalled while idle (or while it started) runs no call either.
        monkeypatch.setattr(pool_module, "_interrupted", False)
        signal.raise_signal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            pool_module._call_in_worker(ran.append, (2,))
        assert ran == [] and signal.getsignal(signal.SIGINT) is pool_module._on_signal
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def test_ctrl_c_during_a_pooled_run_prints_one_line_and_no_worker_traceback(tmp_path):
    """Ctrl-C reaches the parent and every worker (one process group); the parent then signals
    each worker once more. Workers used to print KeyboardInterrupt tracebacks and "Signal 15
    ignored due to race condition" before the parent's line."""
    out = tmp_path / "run"
    args = ["run", "knowledge-qa", "--preset", "smoke", "workers=2", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tailmem", *args],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a job in a terminal has
        preexec_fn=terminal_job,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(out.glob("runs/*/*/*/metrics.jsonl")):
            assert proc.poll() is None, f"the run ended before it was interrupted: {proc}"
            assert time.monotonic() < deadline, "no run started training in time"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGSTOP)  # a smoke run trains in a second: freeze it mid-way
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: to the parent and each worker
        os.killpg(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert lines[-1] == "tailmem: interrupted; completed runs are kept, rerun to resume", err
    assert [line for line in lines if "interrupt" in line.lower()] == lines[-1:], err
    # Everything before it is a run's own progress ("[plain/adam ...] step 4/40 ...").
    assert [line for line in lines[:-1] if not line.startswith("[")] == [], err
