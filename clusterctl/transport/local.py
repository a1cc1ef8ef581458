"""Runs commands on this machine, for when clusterctl runs on the GPU host itself."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping

from clusterctl.transport.base import CommandResult, FailureKind, Transport, TransportError, wrap_command


class LocalTransport(Transport):
    def run(
        self,
        command: str,
        *,
        sudo: bool = False,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        line = wrap_command(command, sudo=sudo and os.geteuid() != 0, env=env)
        start = time.monotonic()
        # A new session so that a timeout kills the whole process group, not only the shell.
        proc = subprocess.Popen(
            ["/bin/sh", "-c", line],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise TransportError(FailureKind.TIMED_OUT, f"no answer within {timeout:g}s: {command}") from exc
        return CommandResult(
            command,
            out.decode(errors="replace"),
            err.decode(errors="replace"),
            proc.returncode,
            round(time.monotonic() - start, 4),
        )
