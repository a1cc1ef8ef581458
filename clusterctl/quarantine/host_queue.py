"""Work per host, so that one host's slow or hung work holds up no other host.

Each host has at most one piece of work running and one waiting; work submitted for a host
whose waiting piece has not started yet is merged into it (``merge``), so a storm of alerts for
one host is one piece of work. Up to ``workers`` hosts run at once, each in its own thread; more
wait in arrival order. A piece of work that raises is reported through ``on_error`` and the
host's queue goes on.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class HostQueue(Generic[T]):
    def __init__(self, work: Callable[[str, T], None], merge: Callable[[T, T], T],
                 on_error: Callable[[str, T, Exception], None], *, workers: int = 32) -> None:
        self._work, self._merge, self._workers, self._on_error = work, merge, workers, on_error
        self._lock = threading.Condition()
        self._waiting: dict[str, T] = {}
        self._running: set[str] = set()
        self._ready: deque[str] = deque()

    def submit(self, host: str, item: T) -> None:
        with self._lock:
            before = self._waiting.get(host)
            self._waiting[host] = item if before is None else self._merge(before, item)
            if before is None and host not in self._running:
                self._ready.append(host)
            self._start_ready()

    def _start_ready(self) -> None:
        while self._ready and len(self._running) < self._workers:
            host = self._ready.popleft()
            self._running.add(host)
            threading.Thread(target=self._run, args=(host,), name=f"remediate-{host}", daemon=True).start()

    def _run(self, host: str) -> None:
        while True:
            with self._lock:
                item = self._waiting.pop(host, None)
                if item is None:
                    self._running.discard(host)
                    self._start_ready()
                    self._lock.notify_all()
                    return
            try:
                self._work(host, item)
            except Exception as exc:  # reported; the host's queue goes on
                self._on_error(host, item, exc)

    def settle(self, timeout_s: float) -> bool:
        """Wait until no work is running or waiting; False when ``timeout_s`` passed first."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._running and not self._waiting and not self._ready,
                                       timeout=timeout_s)
