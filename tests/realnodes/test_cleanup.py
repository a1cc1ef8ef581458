"""Taking the nodes down leaves the host as it was: after a normal end and after ``kill -9``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import realnode_host as host_state
from nodes import STATE_ROOT, RealNodes
from realnode_site import skip_unless_possible

HERE = Path(__file__).resolve().parent


def _busy(nodes: RealNodes) -> None:
    """What a cluster leaves behind: daemons detached from any session, files, mounts, sysctls."""
    for node in nodes.nodes:
        nodes.sh(node.name, "mkdir -p /var/lib/kubelet /etc/kubernetes && mount -t tmpfs probe /var/lib/kubelet && "
                            "setsid sleep 3600 </dev/null >/dev/null 2>&1 & "
                            "sysctl -qw vm.overcommit_memory=1 net.ipv4.ip_forward=1")
    result = nodes.clusterctl("exec", "--", "nohup sleep 3600 >/dev/null 2>&1 &", timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr


def test_down_leaves_the_host_as_it_found_it() -> None:
    skip_unless_possible()
    before = host_state.snapshot()
    with RealNodes(2) as nodes:
        _busy(nodes)
        assert len(nodes.processes()) >= 2 + 2 * 2
        during = host_state.snapshot()
        assert during["cgroups"] and during["state"]
    assert host_state.snapshot() == before


def test_a_killed_test_run_is_cleaned_up_by_the_reaper() -> None:
    skip_unless_possible()
    before = host_state.snapshot()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; sys.path.insert(0, sys.argv[1]); from nodes import RealNodes\n"
         "n = RealNodes(2); n.up(); print('up', flush=True); time.sleep(3600)", str(HERE)],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "up"
        assert host_state.snapshot()["cgroups"]
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (STATE_ROOT.exists() or host_state.snapshot()["cgroups"]):
        time.sleep(0.5)
    assert host_state.snapshot() == before


def test_a_machine_that_cannot_host_nodes_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    import nodes

    monkeypatch.setattr(nodes.os, "geteuid", lambda: 1000)
    assert nodes.unavailable_reason() == "real nodes need root (mount, network namespaces, cgroups)"
    with pytest.raises(nodes.NodesUnavailable, match="need root"):
        RealNodes(1).up()
