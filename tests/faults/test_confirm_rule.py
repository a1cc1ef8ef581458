"""One confirmation rule for every command that changes hosts: --yes, or a question on a
terminal (default no); off a terminal without --yes the command refuses before touching a host."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import clusterctl

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "inventories" / "demo.yaml")


@pytest.fixture
def asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTERCTL_YES")


def _untouched(state: Path) -> bool:
    return not any(p.is_file() and "fs" in p.parts for p in state.rglob("*"))


@pytest.mark.parametrize("argv", [
    ["bootstrap", "--skip-phases", "preflight"],
    ["bootstrap", "phase", "kernel"],
    ["reset"],
    ["copy", str(REPO / "README.md"), "/tmp/readme-copy"],
])
def test_off_a_terminal_every_changing_command_refuses_without_yes(asks: None, argv: list[str]) -> None:
    state = Path(os.environ["CLUSTERCTL_MOCK_STATE"])
    done = clusterctl("-i", DEMO, "-l", "gpu-a1", *argv)
    assert done.exit_code == 2, done.stderr
    assert "refusing without a terminal" in done.stderr and "gpu-a1" in done.stderr and "--yes" in done.stderr
    assert _untouched(state)


def test_bootstrap_names_what_it_does_on_a_real_host(asks: None) -> None:
    done = clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "--skip-phases", "preflight")
    for words in ("sudo", "/etc/fstab", "install packages", "restart", "kubeadm init"):
        assert words in done.stderr


def test_plans_and_read_only_phases_never_ask(asks: None) -> None:
    assert clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "plan").exit_code == 0
    assert clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "phase", "preflight").exit_code in (0, 1)
    assert clusterctl("-i", DEMO, "-l", "gpu-a1", "reset", "--dry-run").exit_code == 0


def test_yes_applies(asks: None, tmp_path: Path) -> None:
    done = clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "phase", "kernel", "--yes", "--state-dir",
                      tmp_path / "progress")
    assert done.exit_code == 0, done.stderr
    assert not _untouched(Path(os.environ["CLUSTERCTL_MOCK_STATE"]))  # the kernel phase wrote its files


def test_on_a_terminal_bootstrap_asks_and_no_changes_nothing(asks: None, tmp_path: Path) -> None:
    main, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("CLUSTERCTL_INVENTORY", "CLUSTERCTL_YES")}
    env.update(NO_COLOR="1", PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "clusterctl", "-i", DEMO, "-l", "gpu-a1", "bootstrap", "phase",
                             "kernel", "--state-dir", str(tmp_path / "progress")],
                            stdin=secondary, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    os.close(secondary)
    os.write(main, b"n\n")
    _out, err = proc.communicate(timeout=60)
    os.close(main)
    assert proc.returncode == 2, err
    assert "Continue?" in err and "not confirmed" in err
    assert _untouched(Path(os.environ["CLUSTERCTL_MOCK_STATE"]))
