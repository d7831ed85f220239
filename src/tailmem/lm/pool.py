"""The one worker pool: independent calls in spawned processes, or one after another here.

Used by the LM studies (one call per training run) and by ``tailmem reproduce`` (one call per
experiment). ``Pool(workers=1)`` runs every call in this process, in submission order; more
workers run calls in that many spawned processes, each with ``threads`` torch threads, and
hand results back as they finish.

Interrupts: the first SIGINT/SIGTERM a worker receives while a call runs raises
KeyboardInterrupt in that call (so atomic writes clean up their temp files); the call's outcome
goes back to the parent, which raises it. Any other signal only marks the worker interrupted: it
runs no further call and exits when the pool shuts down, so it is never interrupted while it
waits, cleans up or exits (an exit cut short leaves multiprocessing's semaphores behind) and
prints nothing — after Ctrl-C the parent's one line is the only output. The handler stays
installed throughout (switching to SIG_IGN would make Python report a signal caught in between as
"ignored due to race condition"), and a worker starts with both signals blocked (inherited from
the submitting thread) until its handler is in place, so one that arrives while it imports is
not a KeyboardInterrupt traceback either. The parent signals each worker once, shuts the pool
down and kills a worker that has not exited after :data:`STOP_GRACE_S` seconds. In the parent,
an interrupt that arrives while a call is being submitted (which starts processes and a thread)
is held until the submission is complete. A call that raises makes the pool cancel what has not
started, wait for the calls that are running, and re-raise.

Progress: :meth:`Pool.sink` gives a picklable callable a call can report trained steps to; the
counts reach ``on_steps(tag, n)`` in this process while the pool waits (through a pipe each
worker receives when it starts).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tailmem.procs import die_with_parent
from tailmem.threads import torch_threads

STOP_GRACE_S = 10.0
"""How long interrupted workers get to clean up before they are killed."""
POLL_S = 0.5
"""How often the parent forwards the workers' step counts while it waits."""


@dataclass(frozen=True)
class Finished:
    """One call that ended: its tag, and its result or the exception it raised."""

    tag: Any
    result: Any = None
    error: BaseException | None = None


_worker_channel: Any = None
"""In a worker process: the pipe end its calls' step counts go to (set by :func:`_init_worker`;
a pipe can only reach a spawned process when it starts). Each count is one small message,
written in one atomic write, so the workers need no lock (nor a semaphore) to share it."""


class _QueueSink:
    """Step counts of one call in a worker, sent to the parent (picklable)."""

    def __init__(self, tag: Any) -> None:
        self.tag = tag

    def __call__(self, n: int) -> None:
        if _worker_channel is not None:
            _worker_channel.send((self.tag, n))


class _LocalSink:
    """Step counts of one call that runs in this process."""

    def __init__(self, on_steps: Callable[[Any, int], None], tag: Any) -> None:
        self.on_steps, self.tag = on_steps, tag

    def __call__(self, n: int) -> None:
        self.on_steps(self.tag, n)


SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that interrupt a pool (Ctrl-C, and what :func:`_stop` and ``kill`` send)."""

_interrupted = False
"""In a worker process: a signal has arrived (it then runs no further call)."""
_in_call = False
"""In a worker process: a call is running (only then does a signal raise)."""


def _on_signal(signum: int, frame: Any) -> None:
    """A worker's SIGINT/SIGTERM handler: the first signal raises KeyboardInterrupt in the
    running call; one between calls, and every later one, only marks the worker interrupted."""
    global _interrupted
    first = not _interrupted
    _interrupted = True
    if first and _in_call:
        raise KeyboardInterrupt


def _init_worker(threads: int | None, log: str | None, channel: Any, parent: int) -> None:
    global _worker_channel
    _worker_channel = channel
    if log is not None:  # an idle worker's own noise (a traceback, say) stays out of the display
        handle = open(log, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (lives with it)
        os.dup2(handle.fileno(), 1)
        os.dup2(handle.fileno(), 2)
    die_with_parent(parent)  # a killed parent leaves no worker writing behind it
    for s in SIGNALS:
        signal.signal(s, _on_signal)
    # Blocked since the process started (see Pool.submit): one that came meanwhile runs now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    if threads:
        torch.set_num_threads(threads)


def _call_in_worker(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``fn(*args)``, which a signal interrupts; a worker already interrupted runs nothing (the
    pool is stopping) and raises KeyboardInterrupt at once."""
    global _in_call
    if _interrupted:
        raise KeyboardInterrupt
    try:
        _in_call = True
        return fn(*args)
    finally:
        _in_call = False


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Run the block with SIGINT/SIGTERM held, then act on the first one.

    ``ProcessPoolExecutor.submit`` starts worker processes and a manager thread; an interrupt in
    the middle leaves an executor that cannot be shut down. The signals are blocked in this
    thread, which the processes and the thread started here inherit (a worker unblocks them
    once its handler is installed, see :func:`_init_worker`), and in the main thread recorded
    rather than acted on, since another thread of this process may take them.
    """
    caught: list[int] = []
    before: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        before = {s: signal.signal(s, lambda n, frame: caught.append(n)) for s in SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one blocked meanwhile is caught now
        for s, handler in before.items():  # None: a handler installed outside Python
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if caught:
            signal.raise_signal(caught[0])


def _stop(executor: ProcessPoolExecutor) -> None:
    """Interrupt ``executor``'s workers, let them exit through the shutdown, kill stragglers.

    Each worker is signalled once (one already interrupted ignores it); the shutdown sends each
    a sentinel once its interrupted call has returned, and it exits normally, running its
    clean-up. One still alive after :data:`STOP_GRACE_S` seconds is killed (the shutdown then
    finds the pool broken and returns).
    """
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    killer = threading.Timer(STOP_GRACE_S, _kill, args=(children,))
    killer.daemon = True
    killer.start()
    executor.shutdown(wait=True, cancel_futures=True)
    killer.cancel()


def _kill(children: list[multiprocessing.process.BaseProcess]) -> None:
    for child in children:
        if child.is_alive():
            child.kill()


class Pool:
    """Runs submitted calls on ``workers`` processes (see the module docstring).

    Use as a context manager; :meth:`submit` calls (more may be submitted while iterating),
    and iterate :meth:`finished` for their outcomes. ``log``: where workers' own output goes
    (default: this process's stdout/stderr).
    """

    def __init__(
        self,
        workers: int,
        threads: int | None = None,
        *,
        log: Path | None = None,
        on_steps: Callable[[Any, int], None] | None = None,
    ) -> None:
        self.workers, self.threads, self.on_steps = workers, threads, on_steps
        self._inline: list[tuple[Any, Callable[..., Any], tuple[Any, ...]]] = []
        self._running: dict[Future[Any], Any] = {}
        self._executor: ProcessPoolExecutor | None = None
        self._channel: Any = None
        self._writer: Any = None  # kept open here: workers start when calls are submitted
        if workers > 1:
            context = multiprocessing.get_context("spawn")
            if on_steps is not None:
                self._channel, self._writer = context.Pipe(duplex=False)
            self._executor = ProcessPoolExecutor(
                workers,
                mp_context=context,
                initializer=_init_worker,
                initargs=(threads, None if log is None else str(log), self._writer, os.getpid()),
            )

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, tb: Any) -> None:
        if self._executor is not None:
            if kind is KeyboardInterrupt:
                _stop(self._executor)
            else:
                self._executor.shutdown(wait=True, cancel_futures=kind is not None)
        if self._channel is not None:
            self._channel.close()
            self._writer.close()

    def sink(self, tag: Any) -> Callable[[int], None]:
        """A picklable step counter for the call tagged ``tag`` (see ``on_steps``)."""
        if self._channel is not None:
            return _QueueSink(tag)
        return _LocalSink(self.on_steps or (lambda tag, n: None), tag)

    def submit(self, tag: Any, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)`` (``fn`` and ``args`` picklable when ``workers > 1``)."""
        if self._executor is None:
            self._inline.append((tag, fn, args))
        else:
            with _interrupts_held():
                self._running[self._executor.submit(_call_in_worker, fn, args)] = tag

    def finished(self) -> Iterator[Finished]:
        """Outcomes of the submitted calls as they end, until none is left. A KeyboardInterrupt
        that reached a worker first is raised here."""
        while self._inline:
            tag, fn, args = self._inline.pop(0)
            with torch_threads(self.threads):
                try:
                    result = fn(*args)
                except Exception as exc:  # the caller decides (reproduce marks it failed)
                    yield Finished(tag, error=exc)
                    continue
            yield Finished(tag, result)
        while self._running:
            done, _ = wait(self._running, timeout=POLL_S, return_when=FIRST_COMPLETED)
            self._forward_steps()
            for future in done:
                tag = self._running.pop(future)
                error = future.exception()
                if isinstance(error, KeyboardInterrupt):
                    raise KeyboardInterrupt  # Ctrl-C reached the worker first
                yield Finished(tag, None if error else future.result(), error)

    def _forward_steps(self) -> None:
        if self._channel is None or self.on_steps is None:
            return
        while self._channel.poll():
            tag, n = self._channel.recv()
            self.on_steps(tag, n)

    def cancel_pending(self) -> None:
        """Drop the calls that have not started."""
        self._inline.clear()
        for future in list(self._running):
            if future.cancel():
                del self._running[future]
