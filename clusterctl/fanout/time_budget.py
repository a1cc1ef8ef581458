"""A host's share of a fan-out's time limit, enforced on every call its task makes.

(Not to be confused with ``transport.ssh.config.remaining``, the single deadline of one SSH
connection attempt: this one bounds a whole task, connection and commands together.)
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import cast

from clusterctl.transport.base import (
    CommandResult,
    Exclusive,
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

    def _files(self, name: str) -> Transport:
        """Who makes the file call ``name``, once the host's time is checked: the inner transport if
        it keeps files itself, else this one through the base class."""
        self._left(None)
        own = getattr(type(self.inner), name) is not getattr(Transport, name)
        return self.inner if own else cast(Transport, super())

    def write(self, request: PutRequest) -> PutResult:
        return self._files("write").write(request)

    def burst(self) -> AbstractContextManager[None]:
        return self.inner.burst()

    def stop_remote(self) -> None:
        self.inner.stop_remote()

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        return self._files("get").get(path, sudo=sudo)

    def create_exclusive_then(self, path: str, data: bytes, command: str | None, *, sudo: bool = False) -> Exclusive:
        return self._files("create_exclusive_then").create_exclusive_then(path, data, command, sudo=sudo)

    def remove(self, path: str, *, sudo: bool = False) -> None:
        self._files("remove").remove(path, sudo=sudo)
