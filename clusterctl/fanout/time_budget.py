"""A host's share of a fan-out's time limit, enforced on every call its task makes.

(Not to be confused with ``transport/ssh/deadline.py``, the single deadline of one SSH
connection attempt: this one bounds a whole task, connection and commands together.)
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
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

    def __init__(self, inner: Transport, deadline: float, *, step_s: float | None = None) -> None:
        super().__init__(inner.host)
        self.inner = inner
        self.deadline = deadline
        #: The most any single call may take (``--timeout`` as the user gave it), or None.
        self.step_s = step_s

    def _left(self, timeout: float | None) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TransportError(FailureKind.TIMED_OUT, "the host's time ran out")
        if self.step_s is not None:
            left = min(left, self.step_s)
        return left if timeout is None else min(timeout, left)

    def execute(self, request: RunRequest) -> CommandResult:
        return self.inner.execute(replace(request, timeout=self._left(request.timeout)))

    # File calls: a transport that keeps files by shell commands (ssh, local) is driven through
    # the base class here, so each of its commands passes ``execute`` above and gets the bound;
    # handing the call to the inner transport would run those commands with no limit at all
    # (a host stopped with SIGSTOP then held a run for ever). Transports that keep files
    # themselves (mock) are asked directly.

    def _own(self, name: str) -> bool:
        return getattr(type(self.inner), name) is not getattr(Transport, name)

    def write(self, request: PutRequest) -> PutResult:
        self._left(None)
        return self.inner.write(request) if self._own("write") else Transport.write(self, request)

    def burst(self) -> AbstractContextManager[None]:
        return self.inner.burst()

    def stop_remote(self) -> None:
        self.inner.stop_remote()

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        self._left(None)
        return self.inner.get(path, sudo=sudo) if self._own("get") else Transport.get(self, path, sudo=sudo)

    def create_exclusive(self, path: str, data: bytes, *, sudo: bool = False) -> bytes | None:
        self._left(None)
        if self._own("create_exclusive"):
            return self.inner.create_exclusive(path, data, sudo=sudo)
        return Transport.create_exclusive(self, path, data, sudo=sudo)

    def create_exclusive_then(
        self, path: str, data: bytes, command: str | None, *, sudo: bool = False
    ) -> tuple[bytes | None, CommandResult | None]:
        self._left(None)
        if self._own("create_exclusive_then"):
            return self.inner.create_exclusive_then(path, data, command, sudo=sudo)
        return Transport.create_exclusive_then(self, path, data, command, sudo=sudo)

    def remove(self, path: str, *, sudo: bool = False) -> None:
        self._left(None)
        if self._own("remove"):
            self.inner.remove(path, sudo=sudo)
        else:
            Transport.remove(self, path, sudo=sudo)
