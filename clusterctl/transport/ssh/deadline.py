"""The time left of a connection attempt's single deadline, shared by all of its steps."""

from __future__ import annotations

import time

from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh.config import SSHTarget


def remaining(deadline: float, what: str, target: SSHTarget) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TransportError(FailureKind.TIMED_OUT, f"{target.name}: {what} did not finish in time")
    return left
