"""``undo`` passes release's checks only where it returns a node from quarantine (clusterctl's taint put on a
node that had none, ``MAKES_QUARANTINE`` in the journal), never by a change's summary text: undoing a second
quarantine, whose taint replaced the first one's, puts the first one back and returns nothing to service."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import clusterctl
from day2_helpers import DEMO
from demo_cluster import node

from clusterctl.undo_journal import read_journal


def _taint(name: str) -> str:
    (taint,) = [t["value"] for t in node(DEMO, name)["spec"]["taints"] if t["key"] == "clusterctl.dev/unhealthy"]
    return str(taint)


def test_undo_of_a_second_quarantine_keeps_the_node_quarantined_without_release_checks(
        bootstrapped_demo: Path) -> None:
    first = clusterctl("-i", DEMO, "-o", "json", "quarantine", "gpu-a3", "--reason", "nvlink", "--yes")
    assert first.exit_code == 0, first.output
    second = clusterctl("-i", DEMO, "-o", "json", "quarantine", "gpu-a3", "--reason", "maintenance", "--yes")
    assert second.exit_code == 0 and _taint("gpu-a3") == "maintenance", second.output
    journal = json.loads(second.stdout)["undo_journal"]
    # gpu-a3's NVLink is down in the demo: release's checks would refuse it (the summary-text rule ran them).
    undone = clusterctl("-i", DEMO, "undo", "--yes", journal)
    assert undone.exit_code == 0 and "REFUSED" not in undone.output, undone.output
    assert _taint("gpu-a3") == "nvlink" and node(DEMO, "gpu-a3")["spec"]["unschedulable"] is True
    # Undoing the first quarantine would return gpu-a3 to service: that one is refused.
    refused = clusterctl("-i", DEMO, "undo", "--yes", json.loads(first.stdout)["undo_journal"])
    assert refused.exit_code == 1 and "REFUSED gpu-a3: stays quarantined: NVLINK" in refused.output, refused.output


def test_undo_limited_to_a_node_takes_back_that_node_of_a_quarantine(bootstrapped_demo: Path, state_dir: Path) -> None:
    """A quarantine's changes run on the control plane (gpu-a1) and are about their nodes: ``-l NODE`` selects
    the node (it selected the control plane: ``-l gpu-a2`` was 'none of them is selected'), ``--last`` the
    newest journal that changed it, and the node's undo leaves the journal's other nodes to theirs."""
    def quarantine(*hosts: str) -> str:
        done = clusterctl("-i", DEMO, "-o", "json", "quarantine", *hosts, "--reason", "maintenance", "--yes")
        assert done.exit_code == 0, done.output
        return str(done.json()["undo_journal"])

    def undo(node: str, *args: str) -> None:
        done = clusterctl("-i", DEMO, "-l", node, "undo", *args, "--yes", "--skip-checks")
        assert done.exit_code == 0, done.output

    def tainted() -> list[str]:
        return [h for h in ("gpu-a2", "gpu-b1", "gpu-b2") if "taints" in node(DEMO, h)["spec"]]

    quarantine("gpu-a2")
    both = quarantine("gpu-b1", "gpu-b2")
    undo("gpu-a2", "--last", "quarantine")
    assert tainted() == ["gpu-b1", "gpu-b2"]
    undo("gpu-b1", "--last", "quarantine")
    assert tainted() == ["gpu-b2"] and list(read_journal(both).used) == ["gpu-b1"]
    undo("gpu-b2", both)  # not refused as already used: gpu-b2's changes were not undone yet
    assert tainted() == []
    listed = clusterctl("-o", "json", "undo", "--list").json()["journals"]
    assert [j["hosts"] for j in listed] == [["gpu-a2"], ["gpu-b1", "gpu-b2"]]
