"""The fan-out: every host gets a result, bad hosts never stop or hang the others."""

from __future__ import annotations

import threading
import time
from typing import ClassVar

import pytest

from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host
from clusterctl.transport.base import CommandResult, FailureKind, RunRequest, Transport, TransportError


class FakeTransport(Transport):
    """Behaves per host name: 'down*' cannot connect, 'hang*' blocks until closed."""

    opened: ClassVar[list[str]] = []

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.closed = threading.Event()
        self.commands: list[str] = []

    def execute(self, request: RunRequest) -> CommandResult:
        command = request.command
        self.commands.append(command)
        if self.host.name.startswith("hang"):
            # Like a SIGSTOPped sshd: nothing comes back until the connection is closed.
            self.closed.wait(30)
            raise TransportError(FailureKind.ERROR, "connection closed")
        if self.host.name.startswith("fail"):
            return CommandResult(command, "", "boom\n", 3, 0.0)
        return CommandResult(command, f"{self.host.name}\n", "", 0, 0.0)

    def close(self) -> None:
        self.closed.set()


def connector(host: Host, timeout: float) -> Transport:
    if host.name.startswith("down"):
        raise TransportError(FailureKind.UNREACHABLE, f"{host.name}:22 connection refused")
    FakeTransport.opened.append(host.name)
    return FakeTransport(host)


def hosts(*names: str) -> list[Host]:
    return [Host(name=n) for n in names]


def test_every_host_gets_an_outcome_in_inventory_order() -> None:
    with Runner(connector, parallel=4) as runner:
        fleet = runner.run_command(hosts("a", "down1", "b", "fail1", "c"), "hostname")
    assert [o.host.name for o in fleet.outcomes] == ["a", "down1", "b", "fail1", "c"]
    assert fleet.values["a"].stdout == "a\n"
    kinds = {o.host.name: o.failure.kind for o in fleet.failed if o.failure}
    assert kinds == {"down1": FailureKind.UNREACHABLE, "fail1": FailureKind.COMMAND_FAILED}
    failed = next(o for o in fleet.outcomes if o.host.name == "fail1")
    assert failed.failure is not None and failed.failure.exit_code == 3 and "boom" in failed.failure.stderr_tail
    # A failed command keeps its output for the report.
    assert failed.value is not None and failed.value.stderr == "boom\n"
    assert not fleet.ok


def test_a_hung_host_times_out_while_the_others_finish() -> None:
    start = time.monotonic()
    with Runner(connector, parallel=8, timeout_s=0.5) as runner:
        fleet = runner.run_command(hosts("a", "hang1", "b"), "hostname")
    elapsed = time.monotonic() - start
    assert elapsed < 5, "the hung host must not hold the run much past its deadline"
    by_name = {o.host.name: o for o in fleet.outcomes}
    assert by_name["a"].ok and by_name["b"].ok
    assert by_name["hang1"].failure is not None
    assert by_name["hang1"].failure.kind is FailureKind.TIMED_OUT


def test_parallel_bound_is_respected() -> None:
    running = 0
    peak = 0
    lock = threading.Lock()

    def task(transport: Transport) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1

    with Runner(connector, parallel=3) as runner:
        fleet = runner.run_task(hosts(*[f"h{i}" for i in range(20)]), task)
    assert fleet.ok
    assert peak <= 3


def test_connections_are_reused_across_tasks_of_a_run() -> None:
    FakeTransport.opened.clear()
    with Runner(connector, parallel=2) as runner:
        runner.run_command(hosts("a", "b"), "one")
        runner.run_command(hosts("a", "b"), "two")
    assert sorted(FakeTransport.opened) == ["a", "b"]


def test_open_connections_are_capped() -> None:
    opened: list[FakeTransport] = []

    def counting(host: Host, timeout: float) -> Transport:
        t = FakeTransport(host)
        opened.append(t)
        return t

    with Runner(counting, parallel=4, max_open=5) as runner:
        runner.run_command(hosts(*[f"h{i}" for i in range(30)]), "true")
        still_open = [t for t in opened if not t.closed.is_set()]
        assert len(still_open) <= 5
    assert all(t.closed.is_set() for t in opened)


def test_task_exceptions_become_host_failures() -> None:
    def task(transport: Transport) -> int:
        if transport.host.name == "y":
            raise RuntimeError("unexpected")
        return 1

    with Runner(connector) as runner:
        fleet = runner.run_task(hosts("y", "z"), task)
    failures = {o.host.name: o.failure for o in fleet.failed}
    assert failures["y"] is not None and "RuntimeError: unexpected" in failures["y"].message
    assert fleet.values == {"z": 1}


def test_parallel_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Runner(connector, parallel=0)


def test_a_run_in_another_thread_stops_when_interrupted_and_its_clean_up_runs_to_its_end() -> None:
    """Ctrl-C reaches the main thread only: a run of another thread (``remediate serve``'s, one host's work)
    stops once ``interrupted`` is set while it runs; one it begins after that (the engine giving its locks
    back) runs to its end; a task's own run, begun after it, stops at once (the run that started it stopped)."""
    seen: dict[str, object] = {}

    def slow(transport: Transport) -> str:
        time.sleep(0.5)
        return transport.host.name

    def nested(runner: Runner) -> object:
        try:
            return runner.run_task(hosts("inner"), slow).values
        except BaseException as exc:
            return type(exc).__name__

    def worker() -> None:
        with Runner(connector, parallel=4) as runner:

            def stopped_meanwhile(transport: Transport) -> str:
                runner.interrupted.set()  # as the receiver's stop does
                return slow(transport)

            try:
                runner.run_task(hosts("a", "b"), stopped_meanwhile)
            except BaseException as exc:
                seen["first"] = type(exc).__name__
            seen["clean-up"] = runner.run_task(hosts("a"), slow).values.get("a")
            seen["nested"] = runner.run_task(hosts("a"), lambda t: nested(runner)).values.get("a")

    thread = threading.Thread(target=worker, name="remediate-a")
    thread.start()
    thread.join(60)
    assert seen == {"first": "FleetInterrupted", "clean-up": "a", "nested": "FleetInterrupted"}
