"""Runs commands on this machine, for when clusterctl runs on the GPU host itself."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from clusterctl.transport.base import CommandResult, FailureKind, RunRequest, Transport, TransportError
from clusterctl.transport.output import CappedOutput, captures
from clusterctl.wording import seconds

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host

#: Seconds a timed-out command gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 2.0


class LocalTransport(Transport):
    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    def execute(self, request: RunRequest) -> CommandResult:
        command, timeout = request.command, request.timeout
        as_root = request.sudo and os.geteuid() != 0
        line, feed = self.command_line(request, sudo=as_root)
        start = time.monotonic()
        # A new session so that a timeout ends the whole process group, not only the shell.
        proc = subprocess.Popen(
            ["/bin/sh", "-c", line],
            stdin=subprocess.PIPE if feed is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        with self._lock:
            self._running.add(proc)
        out, err = captures(request.max_output, request.on_line)
        threads = [_thread(_read, proc.stdout, out), _thread(_read, proc.stderr, err)]
        if feed is not None:
            threads.append(_thread(_write, proc.stdin, feed))
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            _stop_group(proc, STOP_GRACE_S)
            raise TransportError(
                FailureKind.TIMED_OUT, f"no answer within {seconds(timeout)} (the command was stopped): {command}"
            ) from exc
        finally:
            for thread in threads:
                thread.join(timeout=5.0)
            with self._lock:
                self._running.discard(proc)
        return self.finish(command, out.value(), err.value(), proc.returncode, start, sudo=as_root)

    def _running_now(self) -> list[subprocess.Popen[bytes]]:
        with self._lock:
            return list(self._running)

    def stop_remote(self) -> None:
        for proc in self._running_now():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)

    def close(self) -> None:
        for proc in self._running_now():
            _stop_group(proc, 0.3)


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            # The shell is gone; children it left in the group get the same signal.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue


def _read(stream: IO[bytes] | None, into: CappedOutput) -> None:
    assert stream is not None
    with stream:
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            into.add(chunk)
    into.flush()


def _write(stream: IO[bytes] | None, data: bytes) -> None:
    assert stream is not None
    with contextlib.suppress(BrokenPipeError, OSError), stream:
        stream.write(data)


def _thread(work: Callable[..., None], *args: object) -> threading.Thread:
    """``work(*args)`` on a daemon thread, named ``clusterctl-local-read`` (or ``-write``) after it."""
    name = "clusterctl-local" + work.__name__.replace("_", "-")
    thread = threading.Thread(target=work, args=args, daemon=True, name=name)
    thread.start()
    return thread
