"""Signal dispositions for the tests that send Ctrl-C or SIGTERM, whatever started pytest.

A background shell job (``pytest &``, ``nohup pytest &``) starts with SIGINT ignored, and Python
keeps it ignored (it installs its KeyboardInterrupt handler only over the default); a service
manager may start it with SIGTERM ignored too. Children inherit both across ``exec``. A test
that interrupts itself wraps that in :func:`terminal_signals`; one that interrupts a child starts
it with ``preexec_fn=terminal_job``. Either way the test gets what a job in a terminal has.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def terminal_signals() -> Iterator[None]:
    """In this process, for the block: SIGINT raises KeyboardInterrupt and SIGTERM ends the
    process, as in a terminal; the dispositions before are restored afterwards."""
    before = {s: signal.getsignal(s) for s in SIGNALS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        for s, handler in before.items():  # None: a handler installed outside Python
            signal.signal(s, signal.SIG_DFL if handler is None else handler)


def terminal_job() -> None:
    """``preexec_fn`` of a child that must react to Ctrl-C and SIGTERM: both at their defaults
    (Python in the child then turns SIGINT into KeyboardInterrupt)."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_DFL)
