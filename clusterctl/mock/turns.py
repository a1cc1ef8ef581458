"""The in-process simulated hosts take turns: one computes at a time, none holds the turn while it waits.

A fan-out runs each mock host's commands in its own worker thread, but everything a simulated
host does is Python computation under the one interpreter lock: 64 hosts computing "at once"
gain nothing and pay for it. Each file look-up the simulator makes is a system call that lets
go of the interpreter lock, and 63 other runnable workers then fight for it: a 1,000-host survey
made about 250,000 thread switches and spent a third of its time in the kernel. With one turn,
the workers that wait sleep on a plain lock, the host that computes keeps the interpreter, and
the fleet's answers come as fast as one core can give them.

A simulated host never holds the turn while it waits for time to pass (a rule's ``delay:``, a
timeout, a daemon coming up) or for a lock another thread or process holds: ``pause`` and
``waiting`` hand the turn back for that long, so a slow or hung mock host stays as slow as its
profile says and never holds up the others.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

_TURN = threading.Lock()
_held = threading.local()


@contextlib.contextmanager
def simulating() -> Iterator[None]:
    """Hold the turn while the block runs (re-entrant within a thread: nested calls pass through)."""
    depth = getattr(_held, "depth", 0)
    if not depth:
        _TURN.acquire()
    _held.depth = depth + 1
    try:
        yield
    finally:
        _held.depth = depth
        if not depth:
            _TURN.release()


@contextlib.contextmanager
def waiting() -> Iterator[None]:
    """Let the other simulated hosts compute while this one blocks (a no-op outside ``simulating``)."""
    depth = getattr(_held, "depth", 0)
    if not depth:
        yield
        return
    _held.depth = 0
    _TURN.release()
    try:
        yield
    finally:
        _TURN.acquire()
        _held.depth = depth


def pause(seconds: float) -> None:
    """``time.sleep`` for a simulated host: the others go on meanwhile."""
    with waiting():
        time.sleep(seconds)
