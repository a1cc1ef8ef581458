"""Run the real ``clusterctl`` command as a user would, isolated from the user's own ~/.ssh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CliRun:
    exit_code: int
    stdout: str
    stderr: str
    elapsed_s: float

    def json(self) -> Any:
        return json.loads(self.stdout)

    def by_host(self) -> dict[str, dict[str, Any]]:
        return {rec["host"]: rec for rec in self.json()["hosts"]}


def run_clusterctl(args: list[str], *, home: Path, timeout_s: float = 120) -> CliRun:
    """``python -m clusterctl ARGS`` in a fresh process with HOME=home and no ssh-agent.

    A fresh process each time: nothing learned in one run (known_hosts, keys) can leak into
    the next except through files, exactly as for a user.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "CLUSTERCTL_INVENTORY")}
    env.update(HOME=str(home), NO_COLOR="1", PYTHONPATH=str(REPO_ROOT), COLUMNS="200")
    home.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "clusterctl", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(home),
        timeout=timeout_s,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
