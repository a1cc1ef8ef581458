"""A host's share of a fan-out's time limit, enforced on every call its task makes.

(Not to be confused with ``transport/ssh/deadline.py``, the single deadline of one SSH
connection attempt: this one bounds a whole task, connection and commands together.)
"""

from __future__ import annotations

import time
from dataclasses import replace

from clusterctl.transport.base import (
    CommandResult,
    FailureKind,
    PutRequest,
    PutResult,
    RunRequest,
    Transport,
    TransportError,
)


class TimeBoxedTransport(Transport):
    """Wraps a transport so that every call gets at most the time left to the host."""

    def __init__(self, inner: Transport, deadline: float) -> None:
        super().__init__(inner.host)
        self.inner = inner
        self.deadline = deadline

    def _left(self, timeout: float | None) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TransportError(FailureKind.TIMED_OUT, "the host's time ran out")
        return left if timeout is None else min(timeout, left)

    def execute(self, request: RunRequest) -> CommandResult:
        return self.inner.execute(replace(request, timeout=self._left(request.timeout)))

    def write(self, request: PutRequest) -> PutResult:
        self._left(None)
        return self.inner.write(request)

    def stop_remote(self) -> None:
        self.inner.stop_remote()

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        self._left(None)
        return self.inner.get(path, sudo=sudo)

    def create_exclusive(self, path: str, data: bytes, *, sudo: bool = False) -> bytes | None:
        self._left(None)
        return self.inner.create_exclusive(path, data, sudo=sudo)

    def remove(self, path: str, *, sudo: bool = False) -> None:
        self._left(None)
        self.inner.remove(path, sudo=sudo)
