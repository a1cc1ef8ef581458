"""Ctrl-C stops what a task asked of other hosts too: heal's phases run the drain, the release gate and the node's
Ready check through the control plane from inside a phase (a fan-out inside the engine's); the interrupt that
stops the run stops those commands on their hosts as well, not only the task's own host's."""

from __future__ import annotations

import _thread
import linecache
import sys
import threading
import time

import pytest

from clusterctl.fanout import FleetInterrupted, Runner
from clusterctl.inventory.model import Host
from clusterctl.transport.base import CommandResult, RunRequest, Transport


class Stoppable(Transport):
    """Each command runs until Ctrl-C's stop (``stop_remote``) ends it, or 60 s."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.running = threading.Event()
        self.stopped = threading.Event()

    def execute(self, request: RunRequest) -> CommandResult:
        self.running.set()
        self.stopped.wait(60)
        return CommandResult(request.command, "", "terminated\n", 143, 0.0)

    def stop_remote(self) -> None:
        self.stopped.set()


def _main_thread_waits_in_run_task() -> bool:
    """Whether the main thread is in ``run_task``'s wait for outcomes (where Ctrl-C lands in a real run)."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    return frame is not None and frame.f_code.co_name == "run_task" and \
        "run.done.get" in linecache.getline(frame.f_code.co_filename, frame.f_lineno)


def test_ctrl_c_stops_the_commands_a_task_runs_on_other_hosts() -> None:
    transports = {name: Stoppable(Host(name)) for name in ("node", "cp")}
    inner: list[BaseException] = []

    with Runner(lambda host, _t: transports[host.name], parallel=4, timeout_s=120) as runner:
        def task(_node: Transport) -> None:
            try:  # the drain, from the control plane, inside the node's phase
                runner.run_task([transports["cp"].host], lambda t: t.run("drain the node"), label="drain")
            except BaseException as exc:
                inner.append(exc)

        def ctrl_c() -> None:
            assert transports["cp"].running.wait(30)
            while not _main_thread_waits_in_run_task():
                time.sleep(0.01)
            _thread.interrupt_main()

        threading.Thread(target=ctrl_c, daemon=True).start()
        began = time.monotonic()
        with pytest.raises(FleetInterrupted):
            runner.run_task([transports["node"].host], task, label="phase")
        assert transports["cp"].stopped.wait(20), "the control plane's command was left running"
        assert time.monotonic() - began < 30
        deadline = time.monotonic() + 20
        while not inner and time.monotonic() < deadline:
            time.sleep(0.05)
        assert inner and isinstance(inner[0], FleetInterrupted)
