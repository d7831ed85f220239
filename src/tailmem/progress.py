"""How far an experiment has got, written to ``<run dir>/progress.json`` for whoever watches.

An experiment declares its total work once (:func:`plan`, e.g. training steps over all arms and
seeds) and reports work as it goes (:func:`advance`, :func:`iterate`); work found already done
(a reused arm, steps restored from a checkpoint) is reported with :func:`skip`, so a rate
measured from the work actually done in this session gives an honest ETA. The state
``{done, skipped, total, unit, started, planned, updated}`` (times in seconds since the epoch;
``planned``: when the total was declared, so set-up time such as data preparation does not
count towards the rate) is written
atomically and at most once per ``interval`` seconds, so a watcher in another process, or on
another machine sharing the folder, never reads a torn file and training never waits on disk.

Only the process that :func:`tracking` activated writes; every function is a no-op otherwise,
so library code (the training loop) can report unconditionally.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tailmem.atomic import atomic_write_text, strict_json

PROGRESS_FILE = "progress.json"
T = TypeVar("T")


class Tracker:
    """The progress of one run, flushed to ``path`` at most once per ``interval`` seconds."""

    def __init__(
        self, path: Path, interval: float = 1.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.path, self.interval, self.clock = Path(path), interval, clock
        self.started = clock()
        self.done = 0.0
        self.skipped = 0.0
        self.total: float | None = None
        self.planned: float | None = None
        self.unit = "units"
        self.last_write = -math.inf

    def state(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "skipped": self.skipped,
            "total": self.total,
            "unit": self.unit,
            "started": self.started,
            "planned": self.planned,
            "updated": self.clock(),
        }

    def flush(self) -> None:
        """Write the state now."""
        self.last_write = self.clock()
        atomic_write_text(self.path, strict_json(self.state(), indent=None))

    def _maybe_flush(self) -> None:
        if self.clock() - self.last_write >= self.interval:
            self.flush()

    def plan(self, total: float, unit: str) -> None:
        if not total > 0:
            raise ValueError(f"progress total must be positive, got {total!r}")
        self.total, self.unit, self.planned = float(total), unit, self.clock()
        self.flush()

    def advance(self, amount: float, skipped: bool = False) -> None:
        self.done += amount
        if skipped:
            self.skipped += amount
        self._maybe_flush()


_current: Tracker | None = None
_sessions = 0


def sessions() -> int:
    """How many runs this process has started tracking (:func:`tracking`): a display in this
    process tells that its own run has begun by this number going up."""
    return _sessions


@contextlib.contextmanager
def tracking(run_path: str | Path, enabled: bool = True) -> Iterator[Tracker | None]:
    """Activate a tracker writing ``run_path/progress.json`` for the duration of a run.

    On a normal exit the run counts as finished (``done = total``); on an exception the last
    state is written as it stands. ``enabled=False`` (non-zero ranks) tracks nothing.
    """
    global _current, _sessions
    if not enabled:
        yield None
        return
    previous, _current = _current, Tracker(Path(run_path) / PROGRESS_FILE)
    tracker = _current
    tracker.flush()
    _sessions += 1  # after the file: a display that sees it begun finds this run's progress
    try:
        yield tracker
        if tracker.total is not None:
            tracker.done = max(tracker.done, tracker.total)
    finally:
        _current = previous
        tracker.flush()


def plan(total: float, unit: str = "steps") -> None:
    """Declare the total work of the running experiment (before doing any of it)."""
    if _current is not None:
        _current.plan(total, unit)


def extend(amount: float) -> None:
    """Add ``amount`` units to the declared total (work found necessary while running)."""
    if _current is not None and _current.total is not None and amount:
        _current.total += amount


def advance(amount: float = 1) -> None:
    """Report ``amount`` units of work done now."""
    if _current is not None:
        _current.advance(amount)


def skip(amount: float) -> None:
    """Report ``amount`` units found already done (they do not count towards the rate)."""
    if _current is not None and amount:
        _current.advance(amount, skipped=True)


def iterate(items: Iterable[T], desc: str, weight: float = 1.0) -> Iterator[T]:
    """``tqdm(items, desc=desc, disable=None, leave=False)`` that also reports ``weight`` units
    spread evenly over the items (a loop that is one phase of an experiment's plan)."""
    from tqdm.auto import tqdm

    items = list(items)
    share = weight / len(items) if items else 0.0
    for item in tqdm(items, desc=desc, disable=None, leave=False):
        yield item
        advance(share)
    if not items:
        advance(weight)


# ----------------------------------------------------------------------------------------------
# reading (the watcher's side)


@dataclass(frozen=True)
class Snapshot:
    """One read of a ``progress.json``."""

    done: float
    skipped: float
    total: float | None
    unit: str
    started: float
    updated: float
    planned: float | None = None

    @property
    def fraction(self) -> float | None:
        return None if not self.total else min(self.done / self.total, 1.0)

    def eta(self, now: float) -> float | None:
        """Seconds left at the rate of the work done in this session since the total was
        declared (None before any)."""
        worked = self.done - self.skipped
        spent = self.updated - (self.started if self.planned is None else self.planned)
        if self.total is None or worked <= 0 or spent <= 0:
            return None
        remaining = max(self.total - self.done, 0.0) * spent / worked
        return max(remaining - max(now - self.updated, 0.0), 0.0)


def read(run_path: str | Path) -> Snapshot | None:
    """The progress of the run in ``run_path``, or None if it has none (yet) or it is unreadable."""
    try:
        raw = json.loads((Path(run_path) / PROGRESS_FILE).read_text())
        return Snapshot(
            done=float(raw["done"]),
            skipped=float(raw.get("skipped", 0.0)),
            total=None if raw["total"] is None else float(raw["total"]),
            unit=str(raw["unit"]),
            started=float(raw["started"]),
            updated=float(raw["updated"]),
            planned=None if raw.get("planned") is None else float(raw["planned"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def format_seconds(seconds: float | None) -> str:
    """``1h02m03s`` / ``2m05s`` / ``7s``; ``-`` for unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = round(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m{s:02d}s"
    return f"{m}m{s:02d}s" if m else f"{s}s"
