"""The one way tests run ``clusterctl``: in this process (fast), or as a fresh process (sshd tests).

``clusterctl(*args)`` runs the real entry point (``clusterctl.cli.app.main``: global options
after the command, exit codes, one-paragraph errors) with stdin, stdout and stderr of its own;
``run_clusterctl(args, home=...)`` starts ``python -m clusterctl`` with HOME set and no
ssh-agent, so nothing a run learns (known_hosts, keys) leaks into the next but through files.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO = REPO_ROOT / "inventories" / "demo.yaml"


@dataclass(frozen=True)
class CliRun:
    exit_code: int
    stdout: str
    stderr: str
    elapsed_s: float = 0.0

    @property
    def output(self) -> str:
        """stdout and stderr together, for failure messages."""
        return self.stdout + self.stderr

    def json(self) -> Any:
        return json.loads(self.stdout)

    def by_host(self) -> dict[str, dict[str, Any]]:
        return {rec["host"]: rec for rec in self.json()["hosts"]}


def clusterctl(*args: str | Path, stdin: str | None = None) -> CliRun:
    """``clusterctl ARGS`` in this process, as a user's shell would run it."""
    from clusterctl.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    if stdin is not None:  # else whatever the test left there (pytest's, or a monkeypatched one)
        sys.stdin = io.StringIO(stdin)
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin = saved_stdin
    return CliRun(code, out.getvalue(), err.getvalue(), time.monotonic() - start)


def clusterctl_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh ``python -m clusterctl``: HOME=home, no ssh-agent and no default
    inventory, this checkout's clusterctl; ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "CLUSTERCTL_INVENTORY")}
    env.update(HOME=str(home), NO_COLOR="1", PYTHONPATH=str(REPO_ROOT), **extra)
    return env


def run_clusterctl(args: list[str], *, home: Path, timeout_s: float = 120) -> CliRun:
    """``python -m clusterctl ARGS`` in a fresh process with HOME=home and no ssh-agent."""
    home.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "clusterctl", *args], capture_output=True, text=True,
                          env=clusterctl_env(home, COLUMNS="200"), cwd=str(home), timeout=timeout_s)
    return CliRun(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def start_clusterctl(args: list[str | Path], *, home: Path, **extra_env: str) -> subprocess.Popen[str]:
    """``python -m clusterctl ARGS`` started as ``run_clusterctl`` runs it, for a test that signals it."""
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "clusterctl", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=clusterctl_env(home, **extra_env), cwd=str(home))
