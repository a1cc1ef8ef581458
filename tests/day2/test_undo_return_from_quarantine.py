"""``undo`` passes release's checks only where it returns a node from quarantine (clusterctl's taint put on a
node that had none, ``MAKES_QUARANTINE`` in the journal), never by a change's summary text: undoing a second
quarantine, whose taint replaced the first one's, puts the first one back and returns nothing to service."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import clusterctl
from day2_helpers import DEMO
from demo_cluster import node


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
