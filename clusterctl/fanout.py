"""Run one task on many hosts at once, with a bound, per-host deadlines and a result for each.

The design follows what a fleet run needs: one bad host never stops or hangs the others
(its deadline passes, its connection is closed under it, and it is reported as timed out);
connections are reused across the tasks of one run; worker threads are daemons bounded by
``parallel``, so 1,000 hosts cost ``parallel`` threads, not 1,000.
"""

from __future__ import annotations

import logging
import queue
import resource
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from clusterctl.errors import ClusterctlError, ParseError
from clusterctl.inventory.model import Host
from clusterctl.transport.base import CommandResult, Connector, FailureKind, PutResult, Transport, TransportError

T = TypeVar("T")
log = logging.getLogger("clusterctl.fanout")

DEFAULT_PARALLEL = 64
DEFAULT_TIMEOUT_S = 60.0


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
        return text


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


class Progress(Protocol):
    def start(self, total: int, label: str) -> None: ...
    def advance(self, outcome: HostOutcome[object]) -> None: ...
    def stop(self) -> None: ...


class CommandFailed(Exception):
    """Raised by tasks to report a command that ran but failed; becomes a COMMAND_FAILED outcome."""

    def __init__(self, result: CommandResult, message: str | None = None) -> None:
        self.result = result
        super().__init__(message or f"{result.command!r} exited {result.exit_code}")


class DeadlineTransport(Transport):
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

    def run(
        self,
        command: str,
        *,
        sudo: bool = False,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        return self.inner.run(command, sudo=sudo, timeout=self._left(timeout), env=env, stdin=stdin)

    def put(
        self,
        path: str,
        data: bytes,
        *,
        mode: int | None = None,
        sudo: bool = False,
        backup: bool = True,
        owner: str | None = None,
    ) -> PutResult:
        self._left(None)
        return self.inner.put(path, data, mode=mode, sudo=sudo, backup=backup, owner=owner)

    def stop_remote(self) -> None:
        self.inner.stop_remote()

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        self._left(None)
        return self.inner.get(path, sudo=sudo)


def raise_fd_limit() -> None:
    """Lift the soft open-files limit to the hard one: each open connection holds a socket."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
    except (ValueError, OSError):  # pragma: no cover - some sandboxes forbid it
        pass


def failure_from(exc: BaseException) -> Failure:
    if isinstance(exc, TransportError):
        return Failure(exc.kind, exc.message)
    if isinstance(exc, CommandFailed):
        return Failure(FailureKind.COMMAND_FAILED, str(exc), exc.result.exit_code, exc.result.stderr_tail(3))
    if isinstance(exc, ParseError):
        return Failure(FailureKind.ERROR, str(exc))
    if isinstance(exc, ClusterctlError):
        return Failure(FailureKind.ERROR, str(exc))
    return Failure(FailureKind.ERROR, f"{type(exc).__name__}: {exc}")


class Runner:
    """Runs tasks across hosts. Use as a context manager: it closes every connection at the end."""

    def __init__(
        self,
        connect: Connector,
        *,
        parallel: int = DEFAULT_PARALLEL,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        progress: Progress | None = None,
        max_open: int | None = None,
    ) -> None:
        if parallel < 1:
            raise ValueError("parallel must be at least 1")
        self.connect = connect
        self.parallel = parallel
        self.timeout_s = timeout_s
        self.progress = progress
        # Connections stay open across tasks of a run; past this many the least recently
        # used idle one is closed, so a 1,000-host run never holds 1,000 sockets and threads.
        self.max_open = max_open or max(parallel * 2, 128)
        self._open: OrderedDict[str, Transport] = OrderedDict()
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        raise_fd_limit()

    # -- connections ------------------------------------------------------------------

    def _checkout(self, host: Host, timeout_s: float) -> Transport:
        with self._lock:
            transport = self._open.pop(host.name, None)
            self._busy.add(host.name)
        if transport is None:
            transport = self.connect(host, timeout_s)
        return transport

    def _checkin(self, host: Host, transport: Transport, healthy: bool) -> None:
        to_close: list[Transport] = []
        with self._lock:
            self._busy.discard(host.name)
            if healthy:
                self._open[host.name] = transport
            else:
                to_close.append(transport)
            while len(self._open) > self.max_open:
                _, oldest = self._open.popitem(last=False)
                to_close.append(oldest)
        for t in to_close:
            _close_quietly(t)

    def close(self) -> None:
        with self._lock:
            transports = list(self._open.values())
            self._open.clear()
        for t in transports:
            _close_quietly(t)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ----------------------------------------------------------------------

    def run_task(
        self,
        hosts: Sequence[Host],
        task: Callable[[Transport], T],
        *,
        label: str = "",
        timeout_s: float | None = None,
    ) -> FleetResult[T]:
        """Run ``task(transport)`` on every host; never raises for a host's failure."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        todo: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        done: queue.SimpleQueue[tuple[int, HostOutcome[T]]] = queue.SimpleQueue()
        started: dict[int, tuple[float, list[Transport]]] = {}
        state_lock = threading.Lock()

        def work() -> None:
            while True:
                index = todo.get()
                if index is None:
                    return
                host = hosts[index]
                begin = time.monotonic()
                holder: list[Transport] = []
                with state_lock:
                    started[index] = (begin, holder)
                value: T | None = None
                failure: Failure | None = None
                transport: Transport | None = None
                try:
                    transport = self._checkout(host, limit)
                    holder.append(transport)
                    value = task(DeadlineTransport(transport, begin + limit))
                except BaseException as exc:  # every failure becomes the host's outcome
                    failure = failure_from(exc)
                    log.debug("host %s failed", host.name, exc_info=True)
                if transport is not None:
                    healthy = failure is None or failure.kind in (FailureKind.COMMAND_FAILED, FailureKind.ERROR)
                    self._checkin(host, transport, healthy)
                else:
                    with self._lock:
                        self._busy.discard(host.name)
                done.put((index, HostOutcome(host, value, failure, round(time.monotonic() - begin, 3))))

        for i in range(len(hosts)):
            todo.put(i)
        workers = min(self.parallel, len(hosts))
        for _ in range(workers):
            todo.put(None)
            threading.Thread(target=work, daemon=True, name="clusterctl-fanout").start()

        if self.progress:
            self.progress.start(len(hosts), label)
        results: dict[int, HostOutcome[T]] = {}
        try:
            while len(results) < len(hosts):
                try:
                    index, outcome = done.get(timeout=0.05)
                    if index not in results:
                        results[index] = outcome
                        self._report(outcome)
                except queue.Empty:
                    pass
                self._expire(hosts, started, state_lock, results, limit)
        finally:
            if self.progress:
                self.progress.stop()
        return FleetResult(tuple(results[i] for i in range(len(hosts))))

    def _expire(
        self,
        hosts: Sequence[Host],
        started: dict[int, tuple[float, list[Transport]]],
        state_lock: threading.Lock,
        results: dict[int, HostOutcome[T]],
        limit: float,
    ) -> None:
        """Report hosts past their deadline as timed out and close their connection under them."""
        now = time.monotonic()
        # A grace second past the deadline lets the transport's own timeout fire first, which
        # says more precisely what hung (connect, banner, command).
        with state_lock:
            late = [(i, b, h) for i, (b, h) in started.items() if i not in results and now - b > limit + 1.0]
        for index, begin, holder in late:
            outcome: HostOutcome[T] = HostOutcome(
                hosts[index],
                None,
                Failure(FailureKind.TIMED_OUT, f"no result within {limit:g}s"),
                round(now - begin, 3),
            )
            results[index] = outcome
            self._report(outcome)
            for transport in holder:
                _close_quietly(transport)

    def _report(self, outcome: HostOutcome[T]) -> None:
        if self.progress:
            self.progress.advance(outcome)  # type: ignore[arg-type]

    def run_command(
        self,
        hosts: Sequence[Host],
        command: str,
        *,
        sudo: bool = False,
        env: Mapping[str, str] | None = None,
        label: str = "",
    ) -> FleetResult[CommandResult]:
        """Run one shell command everywhere; a non-zero exit is a COMMAND_FAILED outcome that keeps its output."""

        def task(transport: Transport) -> CommandResult:
            return transport.run(command, sudo=sudo, env=env)

        fleet = self.run_task(hosts, task, label=label or command)
        outcomes = []
        for o in fleet.outcomes:
            if o.ok and o.value is not None and not o.value.ok:
                r = o.value
                failure = Failure(FailureKind.COMMAND_FAILED, f"{command!r} failed", r.exit_code, r.stderr_tail(3))
                o = HostOutcome(o.host, r, failure, o.duration_s)
            outcomes.append(o)
        return FleetResult(tuple(outcomes))


def _close_quietly(transport: Transport) -> None:
    try:
        transport.close()
    except Exception:  # closing a broken connection must not mask the real failure
        log.debug("closing %s failed", transport.host.name, exc_info=True)


def hosts_by_name(hosts: Iterable[Host]) -> dict[str, Host]:
    return {h.name: h for h in hosts}
