"""A real SIGINT or SIGTERM to this process right after the Nth command of a kind on one mock host.

The signal is sent from the fan-out's worker, once the host has answered that command, and the
worker then waits for the run to stop its commands (``stop_remote``, as Ctrl-C does): every later
command on that connection fails as an interrupted one would. So the interrupt lands between two
steps, exactly where the test says, and the CLI's own handler deals with it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from clirun import CliRun, clusterctl

from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import (
    CommandResult,
    FailureKind,
    PutRequest,
    PutResult,
    RunRequest,
    Transport,
    TransportError,
)

#: How long the worker waits for the run to stop it (the fan-out's own wait is 3 s).
STOP_WAIT_S = 20.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Runs a test once for each signal that stops a run (``sig``).
every_signal = pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])


@dataclass(frozen=True)
class Cut:
    """Interrupt after the ``nth`` command on ``host`` that contains ``pattern``; a ``pattern`` that starts
    with ``put `` counts the files written instead (``put /etc/nccl.conf``: the simulator writes its files
    without a command)."""

    step: str
    pattern: str
    nth: int = 1
    host: str = "gpu-a1"


def at_every(steps: Sequence[Cut]) -> pytest.MarkDecorator:
    """Runs a test once for each of ``steps`` (``cut``), named by its step."""
    return pytest.mark.parametrize("cut", steps, ids=[c.step for c in steps])


def exit_status(sig: signal.Signals) -> int:
    """The exit status of a run the signal stopped: 130 for SIGINT, 143 for SIGTERM."""
    return 130 if sig is signal.SIGINT else 143


def install(monkeypatch: pytest.MonkeyPatch, cut: Cut, sig: signal.Signals,
            transport: type[Transport] = MockTransport) -> threading.Event:
    """Patch ``transport`` (the simulator's, or the SSH one); the event is set once the signal was sent."""
    original = transport.execute  # type: ignore[attr-defined]
    original_write = transport.write
    stop = transport.stop_remote
    sent = threading.Event()
    seen = [0]
    lock = threading.Lock()

    def execute(self: Transport, request: RunRequest) -> CommandResult:
        if getattr(self, "_stopped_by_test", False):
            raise TransportError(FailureKind.INTERRUPTED, f"{self.host.name}: interrupted")
        result = original(self, request)
        if cut.pattern.startswith("put ") or self.host.name != cut.host or cut.pattern not in request.command:
            return result
        after(self)
        return result

    def write(self: Transport, request: PutRequest) -> PutResult:
        if cut.pattern.startswith("put ") and getattr(self, "_stopped_by_test", False):
            raise TransportError(FailureKind.INTERRUPTED, f"{self.host.name}: interrupted")
        result = original_write(self, request)
        if cut.pattern.startswith("put ") and self.host.name == cut.host and cut.pattern == f"put {request.path}":
            after(self)
        return result

    def after(self: Transport) -> None:
        with lock:
            seen[0] += 1
            fire = seen[0] == cut.nth and not sent.is_set()
        if fire:
            sent.set()
            os.kill(os.getpid(), sig)
            for _ in range(int(STOP_WAIT_S * 20)):
                if getattr(self, "_stopped_by_test", False):
                    break
                threading.Event().wait(0.05)

    def stop_remote(self: Transport) -> None:
        self._stopped_by_test = True  # type: ignore[attr-defined]
        stop(self)

    monkeypatch.setattr(transport, "execute", execute)
    monkeypatch.setattr(transport, "write", write)
    monkeypatch.setattr(transport, "stop_remote", stop_remote)
    return sent


def interrupted(monkeypatch: pytest.MonkeyPatch, cut: Cut, sig: signal.Signals, *args: str | Path,
                transport: type[Transport] = MockTransport) -> CliRun:
    """``clusterctl ARGS`` in this process with ``sig`` sent at ``cut`` (on ``transport``): the run, once it
    is sure it reached the cut and ended with the signal's exit status (130 for SIGINT, 143 for SIGTERM)."""
    with monkeypatch.context() as patched:
        sent = install(patched, cut, sig, transport)
        done = clusterctl(*args)
    assert sent.is_set(), f"the run never reached step {cut.step}: {done.output}"
    assert done.exit_code == exit_status(sig), done.output
    return done
