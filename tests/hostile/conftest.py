"""Helpers for the hostile-input tests: run the CLI in-process or as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from clirun import clusterctl as run_cli

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "inventories" / "demo.yaml")


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """``cli("-i", INV, "exec", ...)`` -> Ran(code, stdout, stderr), in this process (``tests/clirun.py``)."""

    def run(*argv: str) -> Ran:
        done = run_cli(*argv)
        return Ran(done.exit_code, done.stdout, done.stderr)

    return run


def clusterctl_process(*argv: str, cwd: Path | None = None, path: str | None = None,
                       **kwargs: object) -> subprocess.Popen[str]:
    """The real command in its own process (for signals, terminals and the environment)."""
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_INVENTORY"}
    env.update(NO_COLOR="1", PYTHONPATH=str(REPO))
    if path is not None:
        env["PATH"] = path
    return subprocess.Popen(
        [sys.executable, "-m", "clusterctl", *argv], cwd=cwd or REPO, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs,  # type: ignore[call-overload]
    )


def local_inventory(tmp_path: Path, *names: str) -> str:
    """An inventory of hosts that all run on this machine (transport: local)."""
    path = tmp_path / "local.yaml"
    lines = ["cluster: local", "hosts:"] + [f"  {n}: {{transport: local}}" for n in names]
    path.write_text("\n".join(lines) + "\n")
    return str(path)
