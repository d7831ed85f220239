"""Worker processes that do not outlive the process that started them.

A worker pool's workers keep running when their parent is killed with SIGKILL (nothing runs in
the parent to stop them), and would go on writing into run directories that a rerun is using.
:func:`die_with_parent`, called first thing in a worker (a pool's ``initializer``), asks the
Linux kernel to send the worker SIGTERM when its parent dies (``PR_SET_PDEATHSIG``) and, as a
fallback where that is unavailable, starts a daemon thread that polls the parent's pid and
sends the same signal. SIGTERM rather than SIGKILL so that the worker's own handler can remove
the temp file of a write in progress; a worker still alive ``grace_s`` later is killed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
POLL_S = 0.5


def _set_pdeathsig(signum: int) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent dies; False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int, signum: int, grace_s: float) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    os.kill(os.getpid(), signum)
    time.sleep(grace_s)
    os.kill(os.getpid(), signal.SIGKILL)


def die_with_parent(parent: int, signum: int = signal.SIGTERM, grace_s: float = 10.0) -> None:
    """Make this process end when process ``parent`` (the one that started it) ends.

    ``parent`` is passed in, not read here, because the parent may already have died before
    this runs (then this process was re-parented and ends at once).
    """
    _set_pdeathsig(signum)
    watcher = threading.Thread(
        target=_watch_parent, args=(parent, signum, grace_s), name="die-with-parent", daemon=True
    )
    watcher.start()
    if os.getppid() != parent:  # the parent died before the kernel could be told
        os.kill(os.getpid(), signum)
