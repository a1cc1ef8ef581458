"""The fan-out's scheduler: one task on many hosts at once, bounded, with per-host deadlines.

The design follows what a fleet run needs: one bad host never stops or hangs the others
(its deadline passes, its connection is closed under it, and it is reported as timed out);
connections are reused across the tasks of one run; worker threads are daemons bounded by
``parallel``, so 1,000 hosts cost ``parallel`` threads, not 1,000.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from clusterctl.errors import Interrupted
from clusterctl.fanout.outcomes import Failure, FleetResult, HostOutcome, failure_from
from clusterctl.fanout.pool import ConnectionPool, close_quietly
from clusterctl.fanout.time_budget import TimeBoxedTransport
from clusterctl.inventory.model import Host
from clusterctl.transport.base import CommandResult, Connector, FailureKind, Transport, TransportError
from clusterctl.transport.output import OutputStream
from clusterctl.wording import seconds

#: Called with a host's name, the stream and one line of its output, as the line arrives.
HostLine = Callable[[str, OutputStream, str], None]

T = TypeVar("T")
log = logging.getLogger("clusterctl.fanout")

#: ``yes`` in the fan-out's worker threads: a run_task called there is a task's own.
_in_task = threading.local()

DEFAULT_PARALLEL = 64
DEFAULT_TIMEOUT_S = 60.0


#: After Ctrl-C: how long hosts still running get to stop their commands and report.
INTERRUPT_WAIT_S = 3.0
#: How often a long task says which hosts it still waits for (the CLI prints it on stderr).
WAIT_NOTICE_S = 30.0
#: At the end of a run: how long worker threads stuck on a closed connection get to finish.
WORKER_JOIN_S = 5.0


@dataclass
class _TaskRun(Generic[T]):
    """What one ``run_task`` call shares between its workers and its watcher."""

    hosts: Sequence[Host]
    #: Seconds each host may take.
    limit: float
    #: Host index -> (when its worker began, the transport it got, once it got one), for the hosts
    #: whose outcome the watcher has not taken yet.
    started: dict[int, tuple[float, list[Transport]]] = field(default_factory=dict)
    started_lock: threading.Lock = field(default_factory=threading.Lock)
    #: Outcomes the watcher has taken (reported): from workers, or timed out by the watcher.
    results: dict[int, HostOutcome[T]] = field(default_factory=dict)
    #: Outcomes workers have put and the watcher has not taken yet.
    done: queue.SimpleQueue[tuple[int, HostOutcome[T]]] = field(default_factory=queue.SimpleQueue)
    threads: list[threading.Thread] = field(default_factory=list)
    #: The runner's progress display, only in a run_task of the main thread (one display per console: a task's
    #: own run_task, heal's phases, and the receiver's hosts, each in its thread, show none).
    progress: Progress | None = None


class FleetInterrupted(Interrupted):
    """Ctrl-C (or SIGTERM) during ``run_task``: raised once the run has stopped, with what it got so far.

    - ``finished``: the outcomes of hosts that ended before the interrupt (a ``FleetResult``).
    - ``running``: hosts that were still working; their commands were asked to stop on the
      host (SIGTERM, then SIGKILL to the command's process group) and their connections closed.
    - ``waiting``: hosts that were never contacted.

    An ``Interrupted`` (a ``BaseException``, like ``KeyboardInterrupt``): no ``except Exception``
    swallows it, every ``finally`` runs, and the CLI prints what finished and exits 130.
    """

    def __init__(
        self,
        finished: FleetResult[Any],
        running: tuple[Host, ...],
        waiting: tuple[Host, ...],
        signal_name: str = "SIGINT",
        *,
        label: str = "",
        run_hosts: tuple[str, ...] = (),
    ) -> None:
        super().__init__(signal_name)
        self.finished = finished
        self.running = running
        self.waiting = waiting
        #: The step that was stopped (``bench nccl: all_reduce``, ``bootstrap: containerd``).
        self.label = label
        #: Every host this run had worked on or meant to (all its steps), in order: a step may
        #: cover only some of the command's hosts, and the summary says so.
        self.run_hosts = run_hosts
        #: Set by a command that printed its own partial results (machine output included).
        self.reported = False

    @property
    def unfinished(self) -> tuple[Host, ...]:
        return self.running + self.waiting


class Progress(Protocol):
    def start(self, total: int, label: str) -> None: ...
    def advance(self, outcome: HostOutcome[Any]) -> None: ...
    def stop(self) -> None: ...


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
        step_timeout_s: float | None = None,
        on_wait: Callable[[str, list[str], float], None] | None = None,
    ) -> None:
        if parallel < 1:
            raise ValueError("parallel must be at least 1")
        self.parallel = parallel
        self.timeout_s = timeout_s
        self.progress = progress
        #: The most one remote step (connecting, a command, a file) may take, whatever a task's
        #: own limit: a stuck host fails at this bound, alone and named (``--timeout`` as given).
        self.step_timeout_s = step_timeout_s
        #: Called every ``WAIT_NOTICE_S`` of a task's run with the hosts still working.
        self.on_wait = on_wait
        #: Every host that failed a task of this run (or was cut off by Ctrl-C), in order: what
        #: ``--limit @retry`` selects next time.
        self.failed_hosts: dict[str, None] = {}
        #: Every host a task of this run was given, in order (for the summary of an interrupt).
        self.hosts_seen: dict[str, None] = {}
        # Connections stay open across tasks of a run; past this many the least recently
        # used idle one is closed, so a 1,000-host run never holds 1,000 sockets and threads.
        self._pool = ConnectionPool(connect, max_open=max_open or max(parallel * 2, 128))
        #: Set the moment Ctrl-C or SIGTERM reaches a ``run_task``, before its hosts' commands are
        #: stopped and their connections closed: a task that sees a step fail after that knows the
        #: interrupt caused it (the action engine then leaves the step to its journal rather than
        #: undo it over a connection being closed under it). It stays set: the run is stopping.
        self.interrupted = threading.Event()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.close()

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
        main = threading.current_thread() is threading.main_thread()
        run: _TaskRun[T] = _TaskRun(hosts, limit, progress=self.progress if main else None)
        # Ctrl-C reaches the main thread only; a run elsewhere stops once ``interrupted`` is set: a task's own
        # run always (the run that started the task was stopped), a run of its own thread (the receiver's, for
        # one host) when it is set while it runs; one begun after it, the clean-up (the locks given back), ends.
        watch = getattr(_in_task, "yes", False) or not self.interrupted.is_set()
        self.hosts_seen.update((h.name, None) for h in hosts)
        todo: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        stopping = threading.Event()

        def work() -> None:
            _in_task.yes = True
            while True:
                index = todo.get()
                if index is None or stopping.is_set():
                    return
                host = hosts[index]
                begin = time.monotonic()
                holder: list[Transport] = []
                with run.started_lock:
                    run.started[index] = (begin, holder)
                value: T | None = None
                failure: Failure | None = None
                transport: Transport | None = None
                try:
                    transport = self._pool.checkout(host, min(limit, self.step_timeout_s or limit))
                    holder.append(transport)
                    if stopping.is_set():
                        raise TransportError(FailureKind.INTERRUPTED, "interrupted before it started")
                    value = task(TimeBoxedTransport(transport, begin + limit, step_s=self.step_timeout_s))
                except BaseException as exc:  # every failure becomes the host's outcome
                    failure = failure_from(exc)
                    log.debug("host %s failed", host.name, exc_info=True)
                if transport is not None:
                    healthy = failure is None or failure.kind in (FailureKind.COMMAND_FAILED, FailureKind.ERROR)
                    self._pool.checkin(host, transport, healthy)
                run.done.put((index, HostOutcome(host, value, failure, round(time.monotonic() - begin, 3))))

        for i in range(len(hosts)):
            todo.put(i)
        if run.progress:
            run.progress.start(len(hosts), label)
        results = run.results
        began = last_notice = time.monotonic()
        try:
            # Started inside the ``try``: ``thread.start`` may hand the interpreter to the new worker for a
            # while, and a Ctrl-C that lands then must still stop what the workers began on their hosts.
            for _ in range(min(self.parallel, len(hosts))):
                todo.put(None)
                thread = threading.Thread(target=work, daemon=True, name="clusterctl-fanout")
                thread.start()
                run.threads.append(thread)
            while len(results) < len(hosts):
                if watch and self.interrupted.is_set():
                    raise Interrupted("SIGINT")
                if self.on_wait is not None and time.monotonic() - last_notice >= WAIT_NOTICE_S:
                    last_notice = time.monotonic()
                    pending = [hosts[i].name for i in range(len(hosts)) if i not in results]
                    self.on_wait(label, pending, last_notice - began)
                with contextlib.suppress(queue.Empty):
                    index, outcome = run.done.get(timeout=0.05)
                    if index not in results:
                        results[index] = outcome
                        if run.progress:
                            run.progress.advance(outcome)
                    with run.started_lock:
                        # Only hosts still running are watched for their deadline (scanning every
                        # host that ever started, after each result, was quadratic in the fleet).
                        run.started.pop(index, None)
                self._expire(run)
        except (KeyboardInterrupt, Interrupted) as exc:
            self.interrupted.set()
            stopping.set()
            signal_name = exc.signal_name if isinstance(exc, Interrupted) else "SIGINT"
            interrupted = self._interrupted(run, signal_name, label)
            self._note_failures(interrupted.finished)
            for host in interrupted.unfinished:
                self.failed_hosts[host.name] = None
            raise interrupted from None
        finally:
            if run.progress:
                run.progress.stop()
        _join(run.threads, WORKER_JOIN_S)
        fleet = FleetResult(tuple(results[i] for i in range(len(hosts))))
        self._note_failures(fleet)
        return fleet

    def _interrupted(self, run: _TaskRun[T], signal_name: str, label: str) -> FleetInterrupted:
        """Stop a run on Ctrl-C: stop what runs on the hosts, close, and say what finished."""
        hosts, threads = run.hosts, run.threads
        finished = dict(run.results)
        with run.started_lock:
            in_flight = {i: holder for i, (_, holder) in run.started.items() if i not in finished}
        # Outcomes that were already queued count as finished.
        while True:
            try:
                index, outcome = run.done.get_nowait()
            except queue.Empty:
                break
            finished.setdefault(index, outcome)
            in_flight.pop(index, None)
        self._stop_and_close(list(in_flight.values()), threads)
        _join(threads, 1.0)
        running = tuple(hosts[i] for i in sorted(in_flight))
        begun = set(finished) | set(in_flight)
        waiting = tuple(h for i, h in enumerate(hosts) if i not in begun)
        return FleetInterrupted(FleetResult(tuple(finished[i] for i in sorted(finished))), running, waiting,
                                signal_name, label=label, run_hosts=tuple(self.hosts_seen))

    def _expire(self, run: _TaskRun[T]) -> None:
        """Report hosts past their deadline as timed out and close their connection under them."""
        now = time.monotonic()
        limit, results = run.limit, run.results
        # A grace second past the deadline lets the transport's own timeout fire first, which
        # says more precisely what hung (connect, banner, command).
        with run.started_lock:
            late = [(i, b, h) for i, (b, h) in run.started.items() if i not in results and now - b > limit + 1.0]
        for index, begin, _holder in late:
            with run.started_lock:
                run.started.pop(index, None)
            outcome: HostOutcome[T] = HostOutcome(
                run.hosts[index],
                None,
                Failure(FailureKind.TIMED_OUT, f"no result within {seconds(limit)}"),
                round(now - begin, 3),
            )
            results[index] = outcome
            if run.progress:
                run.progress.advance(outcome)
        self._stop_and_close([holder for _, _, holder in late])

    def _stop_and_close(self, holders: list[list[Transport]], threads: Sequence[threading.Thread] = ()) -> None:
        """Ask every host to stop its command first, so they all stop at once (each host's own run(),
        in its worker thread, ends the command's process group on the host); give ``threads`` up to
        ``INTERRUPT_WAIT_S`` for that; then close the connections, each close waiting only for what is left."""
        for holder in holders:
            for transport in holder:
                transport.stop_remote()
        _join(threads, INTERRUPT_WAIT_S)
        for holder in holders:
            for transport in holder:
                close_quietly(transport)
                self._pool.forget(transport)

    def run_command(
        self,
        hosts: Sequence[Host],
        command: str,
        *,
        sudo: bool = False,
        env: Mapping[str, str] | None = None,
        label: str = "",
        on_line: HostLine | None = None,
    ) -> FleetResult[CommandResult]:
        """Run one shell command everywhere; a non-zero exit is a COMMAND_FAILED outcome that keeps its output.

        ``on_line(host, stream, line)`` gets every line as it arrives, from the hosts' threads at once.
        """

        def task(transport: Transport) -> CommandResult:
            lines = None if on_line is None else partial(on_line, transport.host.name)
            return transport.run(command, sudo=sudo, env=env, on_line=lines)

        fleet = self.run_task(hosts, task, label=label or command)
        outcomes = []
        for o in fleet.outcomes:
            if o.ok and o.value is not None and not o.value.ok:
                o = replace(o, failure=Failure(FailureKind.COMMAND_FAILED, f"{command!r} failed", o.value.exit_code,
                                               o.value.stderr_tail(3)))
            outcomes.append(o)
        fleet = FleetResult(tuple(outcomes))
        self._note_failures(fleet)
        return fleet

    def _note_failures(self, fleet: FleetResult[Any]) -> None:
        for o in fleet.failed:
            self.failed_hosts[o.host.name] = None


def _join(threads: Sequence[threading.Thread], within_s: float) -> None:
    """Wait for worker threads to end (a stuck one is a daemon: it cannot keep the process alive)."""
    end = time.monotonic() + within_s
    for thread in threads:
        thread.join(timeout=max(0.0, end - time.monotonic()))
    stuck = sum(t.is_alive() for t in threads)
    if stuck:
        log.debug("%d fan-out worker(s) still busy after %s s", stuck, within_s)
