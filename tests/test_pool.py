"""The worker pool under interrupts: Ctrl-C at any moment must leave a pool that shuts down."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import process

import pytest

from tailmem.lm import pool as pool_module
from tailmem.lm.pool import Pool


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
    with pytest.raises(KeyboardInterrupt), Pool(2, 1) as pool:
        pool.submit("first", _square, 3)
    assert multiprocessing.active_children() == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _interrupt_myself() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)


def test_an_interrupted_worker_ignores_later_signals_until_it_exits(monkeypatch):
    """A second signal during a worker's exit would cut its clean-up short (multiprocessing then
    reports leaked semaphores); an uninterrupted call leaves the worker interruptible."""
    monkeypatch.setattr(pool_module, "_interrupted", False)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        pool_module._interrupt_on_signals()
        assert pool_module._call_in_worker(_square, (4,)) == 16
        assert signal.getsignal(signal.SIGTERM) is pool_module._interrupt_once
        with pytest.raises(KeyboardInterrupt):
            pool_module._call_in_worker(_interrupt_myself, ())
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
