"""The day-2 drain phase (remove-node, upgrade) on a node whose pod list kubectl answers unreadably: that
host's drain phase fails, named as quarantine's drain names it (``quarantine.drain.PodsUnreadable``), and
nothing after it runs on that host; not "no cluster", no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import clusterctl
from kube_sim import KubeSim


def test_an_unreadable_pod_list_fails_the_drain_phase_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sim = KubeSim(tmp_path)
    sim.deploy("web", 3)
    from clusterctl.mock.profile import forget_profiles

    profile = tmp_path / "profiles" / "plain" / "profile.yaml"
    profile.write_text(profile.read_text() + 'commands:\n  - regex: "spec.nodeName=gpu-a3"\n'
                       '    stdout_text: "<html><body>502 Bad Gateway</body></html>"\n    exit: 0\n')
    forget_profiles()
    done = clusterctl("-i", sim.inventory, "remove-node", "gpu-a3", "--yes")
    assert done.exit_code == 1, done.output
    text = " ".join(done.output.split())
    assert "FAILED gpu-a3: phase drain:" in text
    assert ("drain of gpu-a3 stopped: the pods of node gpu-a3 could not be read through gpu-a1 (cannot parse"
            in text)
    assert "[skipped]: left out: an earlier step failed" in text  # kubeadm reset never ran on it
    assert "no working cluster" not in text and "Traceback" not in text
    assert sim.node("gpu-a3")["metadata"]["name"] == "gpu-a3"  # still a node of the cluster


def test_a_control_plane_unreachable_mid_drain_is_named_as_unreachable(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The control plane stops answering while the drain reads the node's pods: the transport's own kind and
    reason (every host's failure), not one node's unreadable pod list ("command failed")."""
    monkeypatch.chdir(tmp_path)
    sim = KubeSim(tmp_path)
    sim.deploy("web", 3)
    from clusterctl.mock.profile import forget_profiles

    profile = tmp_path / "profiles" / "plain" / "profile.yaml"
    profile.write_text(profile.read_text() + 'commands:\n  - regex: "spec.nodeName=gpu-a3"\n    fail: unreachable\n')
    forget_profiles()
    done = clusterctl("-i", sim.inventory, "remove-node", "gpu-a3", "--yes")
    print(done.output)
    assert done.exit_code == 1, done.output
    text = " ".join(done.output.split())
    assert "unreachable" in text
    assert "drain of gpu-a3 stopped" not in text and "command failed" not in text
    assert "Traceback" not in text
