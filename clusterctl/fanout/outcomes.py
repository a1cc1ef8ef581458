"""What a fan-out returns: one ``HostOutcome`` per host, ok or failed with a ``Failure`` a user can act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from clusterctl.errors import ClusterctlError
from clusterctl.inventory.model import Host
from clusterctl.terminal_text import one_line
from clusterctl.transport.base import FailureKind, TransportError

T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    message: str
    exit_code: int | None = None
    stderr_tail: str = ""

    def describe(self) -> str:
        text = f"{self.kind.value}: {self.message}"
        if self.exit_code is not None and self.kind is FailureKind.COMMAND_FAILED:
            text = f"{self.kind.value} (exit {self.exit_code}): {self.message}"
        if self.stderr_tail and self.stderr_tail not in text:
            text += f" | {self.stderr_tail}"
        # Shown on a terminal: remote stderr's control characters are made visible.
        return one_line(text)


@dataclass(frozen=True)
class HostOutcome(Generic[T]):
    host: Host
    value: T | None
    failure: Failure | None
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class FleetResult(Generic[T]):
    outcomes: tuple[HostOutcome[T], ...]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)

    @property
    def failed(self) -> tuple[HostOutcome[T], ...]:
        return tuple(o for o in self.outcomes if not o.ok)

    @property
    def values(self) -> dict[str, T]:
        return {o.host.name: o.value for o in self.outcomes if o.ok and o.value is not None}


def failure_from(exc: BaseException) -> Failure:
    if isinstance(exc, TransportError):
        return Failure(exc.kind, exc.message)
    if isinstance(exc, ClusterctlError):  # a ParseError too
        return Failure(FailureKind.ERROR, str(exc))
    return Failure(FailureKind.ERROR, f"{type(exc).__name__}: {exc}")

