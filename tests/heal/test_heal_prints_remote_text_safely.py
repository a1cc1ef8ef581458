"""heal prints what hosts and the cluster said as text a terminal cannot act on."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import clusterctl
from kube_sim import KubeSim


def test_heals_report_shows_a_hosts_terminal_escapes_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ticket report quotes nvidia-smi's GPU list: a name holding ``ESC ]0;...BEL`` (a window title) or
    ``ESC [2J`` (a cleared screen) reached the terminal raw."""
    monkeypatch.chdir(tmp_path)
    sim = KubeSim(tmp_path)
    assert clusterctl("-i", sim.inventory, "quarantine", "gpu-a3", "--reason", "xid 79", "--code",
                      "GPUFellOffTheBus", "--yes").exit_code == 0
    assert clusterctl("-i", sim.inventory, "-l", "gpu-a3", "mock", "set", "fault=xid-79").exit_code == 0
    from clusterctl.mock.profile import forget_profiles

    profile = tmp_path / "profiles" / "plain" / "profile.yaml"
    profile.write_text(profile.read_text() + 'commands:\n  - regex: "--query-gpu=index,name,serial"\n'
                       '    stdout_text: "0, NVIDIA \\x1b]0;owned\\x07\\x1b[2JH100, 1650, GPU-1, 0000:18:00.0\\n"\n')
    forget_profiles()
    done = clusterctl("-i", sim.inventory, "heal", "gpu-a3", "--yes")
    assert done.exit_code == 1 and "Hardware repair needed: gpu-a3" in done.stdout, done.output
    assert "\x1b" not in done.output and "\x07" not in done.output, done.output
    assert "NVIDIA \\x1b]0;owned\\x07\\x1b[2JH100" in done.stdout, done.stdout
