"""One display of every experiment of a ``reproduce`` call (or of the one of a ``run``): status,
percent, elapsed, ETA.

The :class:`Board` learns what runs from the files the experiments write
(``<run dir>/progress.json``, see :mod:`tailmem.progress`) and how each ended from the launcher
(:meth:`Board.finish`), so it works the same whether an experiment runs in this process, in a
worker process or as a cluster job. :func:`watching` shows it while a block runs: a ``rich``
live table on a terminal, otherwise plain lines (one per state change, and at most one per
running experiment every ``plain_every`` seconds) that read well in CI logs. For an experiment
that runs in this process (``in_process``: ``tailmem run``), it shows nothing until the run has
begun, and on a terminal the run's output (its workers' too) is printed above the live table.

The overall ETA adds up, per experiment, its measured time at the preset (its
:class:`~tailmem.studies.Study` record) scaled by how much slower or faster the finished ones
ran on this machine today (:meth:`Board.speed`, which trusts a few seconds of finished work little),
blended with its own ETA as its work gets done (:meth:`Board.remaining`).
"""

from __future__ import annotations

import contextlib
import heapq
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tailmem import progress
from tailmem.progress import Snapshot, format_seconds

if TYPE_CHECKING:  # rich is imported when the board is first drawn
    from rich.table import Table

STATUSES = ("queued", "running", "resuming", "replacing", "skipped", "done", "failed")
ACTIVE = ("running", "resuming", "replacing")
"""The statuses of an experiment under way ("replacing": a run of another config in its folder
is being replaced, as ``reproduce --force`` was told to)."""
STARTED = {"resume": "resuming", "redo": "replacing"}
"""The status an experiment under way shows by its plan (any other plan: "running")."""
SPEED_PRIOR_SECONDS = 60.0
"""How much expected time the measured pace (speed 1) weighs in :meth:`Board.speed`, as
if that many seconds of work had run exactly as measured. A short experiment is mostly fixed
cost (start-up, imports, writing figures) and varies twofold from run to run on a shared
machine (assoc-two-group at cpu: 14 s and 27 s at the same load, timed here); scaling every
other experiment by its ratio alone made a smoke reproduce's overall ETA two to three and a
half times the time left (at its sixth of eleven experiments: 4m46s estimated, 1m43s left)."""


@dataclass(frozen=True)
class Row:
    """What the display shows for one experiment."""

    name: str
    status: str
    fraction: float | None
    done: float
    total: float | None
    unit: str
    elapsed: float | None
    eta: float | None

    def progress_text(self) -> str:
        if self.fraction is None:
            return "-"
        return f"{100 * self.fraction:.0f}% ({self.done:.0f}/{self.total:.0f} {self.unit})"


class Board:
    """The state of every experiment of one reproduce call.

    ``plans`` maps each experiment to ``run`` / ``redo`` / ``resume`` / ``skip``. An experiment
    counts as started once its ``progress.json`` carries a start time other than the one found
    at construction (a file left by an earlier, interrupted call does not count).
    ``parallel`` is how many experiments run at once (it decides how ETAs add up).
    ``expected`` holds each experiment's measured wall time at this preset (seconds, None: not
    timed; each study's :class:`~tailmem.studies.Study` record): the overall ETA's estimate for
    an experiment that has not measured its own rate yet. ``title`` heads the live table.
    """

    def __init__(
        self,
        out: Path,
        plans: Mapping[str, str],
        parallel: int = 1,
        clock: Callable[[], float] = time.time,
        expected: Mapping[str, float | None] | None = None,
        title: str = "tailmem reproduce",
    ) -> None:
        self.out, self.plans, self.parallel, self.clock = Path(out), dict(plans), parallel, clock
        self.title = title
        self.expected = dict(expected or {})
        self.began = clock()
        self._lock = threading.Lock()
        self._ended: dict[str, str] = {n: "skipped" for n, p in self.plans.items() if p == "skip"}
        self._before = {
            name: getattr(progress.read(self.out / name), "started", None) for name in self.plans
        }

    def finish(self, name: str, ok: bool) -> None:
        """The launcher's word that ``name`` ended (``ok``: done, else failed)."""
        with self._lock:
            self._ended[name] = "done" if ok else "failed"

    def _snapshot(self, name: str) -> Snapshot | None:
        snap = progress.read(self.out / name)
        if snap is None or snap.started == self._before[name]:
            return None
        return snap

    def rows(self) -> list[Row]:
        now = self.clock()
        with self._lock:
            ended = dict(self._ended)
        rows = []
        for name, plan in self.plans.items():
            snap = None if ended.get(name) == "skipped" else self._snapshot(name)
            status = ended.get(name)
            if status is None:
                status = "queued" if snap is None else STARTED.get(plan, "running")
            running = status in ACTIVE
            if snap is None:
                rows.append(Row(name, status, None, 0.0, None, "", None, None))
                continue
            rows.append(
                Row(
                    name=name,
                    status=status,
                    fraction=1.0 if status == "done" else snap.fraction,
                    done=snap.total if status == "done" and snap.total else snap.done,
                    total=snap.total,
                    unit=snap.unit,
                    elapsed=(now if running else snap.updated) - snap.started,
                    eta=snap.eta(now) if running else None,
                )
            )
        return rows

    def speed(self, rows: list[Row]) -> float:
        """How much longer than ``expected`` the experiments finished in this call took: total
        over total, so a long experiment weighs more than a short one, each total starting from
        :data:`SPEED_PRIOR_SECONDS` of work at the measured pace. 1 before any has finished; a
        12 s experiment that took 24 s makes it 1.17, ten minutes of experiments that took
        twice their time 1.9."""
        took = expected = SPEED_PRIOR_SECONDS
        for r in rows:
            measured = self.expected.get(r.name)
            if r.status == "done" and r.elapsed is not None and measured:
                took += r.elapsed
                expected += measured
        return took / expected

    def remaining(self, rows: list[Row]) -> tuple[float | None, int]:
        """Seconds until every open experiment is done, and how many open ones have no
        estimate at all (neither a rate of their own nor an ``expected`` time).

        An experiment's prior is its expected time scaled by :meth:`speed`, less the time it
        has run. Once it measures its own rate, its own ETA counts in proportion to the part
        done: an early rate (one slow first step) or a stale one (work after the last
        reported step) does not swing the total. Queued experiments start in board order on
        the first of ``parallel`` slots to free up.
        """
        speed = self.speed(rows)
        running: list[float] = []
        queued: list[float] = []
        unknown = 0
        for r in rows:
            if r.status != "queued" and r.status not in ACTIVE:
                continue
            prior = None
            measured = self.expected.get(r.name)
            if measured is not None:
                prior = max(measured * speed - (r.elapsed or 0.0), 0.0)
            if r.eta is not None and prior is not None:
                done = r.fraction or 0.0
                left = done * r.eta + (1.0 - done) * prior
            elif r.eta is not None:
                left = r.eta
            elif prior is not None:
                left = prior
            else:
                unknown += 1
                continue
            (queued if r.status == "queued" else running).append(left)
        if not running and not queued:
            return None, unknown
        slots = sorted(running + [0.0] * max(self.parallel - len(running), 0))
        for left in queued:
            heapq.heappush(slots, heapq.heappop(slots) + left)
        return max(slots), unknown

    def overall(self, rows: list[Row] | None = None) -> str:
        """``2/5 finished, elapsed 3m10s, ETA 4m02s (+1 not estimated yet)``."""
        rows = self.rows() if rows is None else rows
        finished = sum(r.status in ("done", "skipped", "failed") for r in rows)
        text = (
            f"{finished}/{len(rows)} finished, elapsed {format_seconds(self.clock() - self.began)}"
        )
        if finished < len(rows):
            eta, unknown = self.remaining(rows)
            text += f", ETA {format_seconds(eta)}"
            if unknown and eta is not None:
                text += f" (+{unknown} not estimated yet)"
        return text

    def table(self) -> Table:
        """The ``rich`` renderable of the board."""
        from rich.table import Table

        rows = self.rows()
        table = Table(title=self.title, caption=self.overall(rows), expand=False)
        for column in ("experiment", "status", "progress", "elapsed", "ETA"):
            table.add_column(column, justify="right" if column in ("elapsed", "ETA") else "left")
        colours = {"done": "green", "skipped": "dim", "failed": "bold red", "queued": "dim"}
        for r in rows:
            style = colours.get(r.status, "cyan")
            table.add_row(
                r.name,
                f"[{style}]{r.status}[/]",
                r.progress_text(),
                format_seconds(r.elapsed),
                format_seconds(r.eta),
            )
        return table


class PlainLines:
    """Plain progress lines for a stream that is not a terminal."""

    def __init__(
        self, board: Board, stream: IO[str], every: float = 30.0, prefix: str = "reproduce"
    ) -> None:
        self.board, self.stream, self.every, self.prefix = board, stream, every, prefix
        self.status: dict[str, str] = {}
        self.last_line: dict[str, float] = {}

    def _say(self, text: str) -> None:
        print(f"[{self.prefix}] {text}", file=self.stream, flush=True)

    def poll(self) -> None:
        """Print what changed (and what is due), then the overall line: printed only on a
        change, it would always show the ETA of an experiment that has just started."""
        now = time.monotonic()
        rows = self.board.rows()
        said = False
        for r in rows:
            if self.status.get(r.name) == r.status and not (
                r.status in ACTIVE and now - self.last_line[r.name] >= self.every
            ):
                continue
            self.status[r.name], self.last_line[r.name] = r.status, now
            self._say(f"{r.name}: {_plain(r)}")
            said = True
        if said:
            self._say(self.board.overall(rows))


def _plain(r: Row) -> str:
    if r.status == "skipped":
        return "complete, skipped"
    parts = [r.status]
    if r.fraction is not None and r.status != "done":
        parts.append(r.progress_text())
    if r.elapsed is not None:
        parts.append(f"{'in' if r.status == 'done' else 'elapsed'} {format_seconds(r.elapsed)}")
    if r.eta is not None:
        parts.append(f"ETA {format_seconds(r.eta)}")
    return ", ".join(parts)


def _own_copy(stream: IO[str]) -> IO[str] | None:
    """A private copy of ``stream``'s file descriptor, so that output redirected away from
    descriptor 2 while an experiment runs in this process does not take the display with it;
    None when ``stream`` has no descriptor (a test's capture object: it is used as it is)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None
    return os.fdopen(os.dup(fd), "w", buffering=1, encoding=getattr(stream, "encoding", None))


@contextlib.contextmanager
def watching(
    board: Board,
    stream: IO[str] | None = None,
    poll_s: float = 0.5,
    prefix: str = "reproduce",
    in_process: bool = False,
) -> Iterator[None]:
    """Show ``board`` on ``stream`` (default stderr) while the block runs; a last update at
    the end, also when the block raises. Plain lines start with ``[prefix]``. ``in_process``:
    the experiment runs in this process (``tailmem run``): nothing is shown until it has begun
    (:func:`tailmem.progress.sessions`; a refusal before that stays one line), and on a terminal
    its output is printed above the live table (:func:`_above`)."""
    stream = sys.stderr if stream is None else stream
    before = progress.sessions()

    def started() -> bool:
        return not in_process or progress.sessions() > before

    with contextlib.ExitStack() as stack:
        copy = _own_copy(stream)
        if copy is not None:
            stream = stack.enter_context(copy)
        if stream.isatty():
            from rich.console import Console
            from rich.live import Live

            console = Console(file=stream)
            live = Live(
                get_renderable=board.table,
                console=console,
                refresh_per_second=2,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            if in_process:
                stack.enter_context(_above(console))
                stack.enter_context(_once_started(live, started, poll_s))
            else:
                stack.enter_context(live)
            yield
        else:
            with _plain_lines(board, stream, poll_s, prefix, started):
                yield


@contextlib.contextmanager
def _once_started(live: Any, started: Callable[[], bool], poll_s: float) -> Iterator[None]:
    """``live`` shown from the moment ``started()`` holds to the end of the block (not at all
    if it never does)."""
    stop = threading.Event()
    shown = threading.Event()

    def wait() -> None:
        while not stop.is_set():
            if started():
                live.start(refresh=True)
                shown.set()
                return
            stop.wait(poll_s)

    thread = threading.Thread(target=wait, name="tailmem-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if shown.is_set():
            live.stop()


@contextlib.contextmanager
def _above(console: Any) -> Iterator[None]:
    """Descriptors 1 and 2 into a pipe whose lines ``console`` prints above its live display,
    until the block ends: Python's writes, C code's and those of worker processes started in
    the block (they inherit the descriptors) alike. The process's stderr is then no terminal,
    so the training loop prints lines instead of its own progress bar."""
    from rich.text import Text

    read, write = os.pipe()
    for handle in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            handle.flush()
    saved = [(fd, os.dup(fd)) for fd in (1, 2)]
    for fd in (1, 2):
        os.dup2(write, fd)
    os.close(write)

    def pump() -> None:
        with open(read, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                console.print(Text(line.rstrip("\n")), soft_wrap=True)

    thread = threading.Thread(target=pump, name="tailmem-output", daemon=True)
    thread.start()
    try:
        yield
    finally:
        for handle in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                handle.flush()
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        thread.join(timeout=5.0)  # the pipe ends when the last writer (a worker) has gone


@contextlib.contextmanager
def _plain_lines(
    board: Board, stream: IO[str], poll_s: float, prefix: str, started: Callable[[], bool]
) -> Iterator[None]:
    """Plain lines while the block runs, from the moment ``started()`` holds; a block that
    raises gets no closing lines (its error is the one line that ends the command)."""
    lines = PlainLines(board, stream, prefix=prefix)
    stop = threading.Event()
    failed = False

    def poll() -> None:
        if lines.status or started():
            lines.poll()

    def loop() -> None:
        while not stop.wait(poll_s):
            poll()

    poll()
    thread = threading.Thread(target=loop, name="tailmem-progress", daemon=True)
    thread.start()
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        stop.set()
        thread.join()
        if not failed:
            poll()
