"""Every day-2 command that needs a working control plane says "no cluster here" the same way.

On the demo before any bootstrap (kubectl and kubeadm are not even installed): exit 2, nothing on
stdout (with -o json too), one paragraph on stderr that names the control plane, what it answered
and what to run first; no Python class name, no nested "error:" (issue #33).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clirun import clusterctl
from day2_helpers import DEMO

NEEDS_A_CLUSTER = [
    ("status",),
    ("certs", "check"),
    ("certs", "renew", "--dry-run"),
    ("certs", "renew", "--yes"),
    ("upgrade", "plan", "--to", "1.36.3"),
    ("upgrade", "apply", "--to", "1.36.3", "--yes"),
    ("remove-node", "gpu-b3", "--dry-run"),
    ("remove-node", "gpu-b3", "--yes"),
    ("quarantine", "gpu-a3", "--reason", "nvlink", "--dry-run"),
    ("quarantine", "gpu-a3", "--reason", "nvlink", "--yes"),
    ("release", "gpu-a3", "--dry-run"),
    ("release", "gpu-a3", "--yes"),
    ("health", "--quarantine"),
]


@pytest.mark.parametrize("output", ["table", "json"])
@pytest.mark.parametrize("command", NEEDS_A_CLUSTER, ids=" ".join)
def test_no_cluster_is_one_paragraph_with_exit_2_and_what_to_run_first(command: tuple[str, ...], output: str,
                                                                        tmp_path: Path) -> None:
    args = [*command, "--state-dir", str(tmp_path)] if command[0] == "upgrade" and "apply" in command else command
    done = clusterctl("-i", DEMO, "-o", output, *args)
    assert done.exit_code == 2, done.output
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no working cluster: "), done.stderr
    assert "the control plane gpu-a1" in lines[0] and "not found" in lines[0]
    assert "Run 'clusterctl bootstrap' first" in lines[0]
    assert lines[0].count("error") == 1 and not re.search(r"\b[A-Z]\w*(Error|Exception)\b", lines[0])


def test_a_host_that_is_no_node_is_not_released_and_does_not_stay_quarantined(bootstrapped_demo: Path) -> None:
    removed = clusterctl("-i", DEMO, "remove-node", "gpu-b3", "--yes")
    assert removed.exit_code == 0, removed.output
    done = clusterctl("-i", DEMO, "release", "gpu-b3")
    assert done.exit_code == 1
    assert "REFUSED gpu-b3: not released: gpu-b3 is not a node of the cluster" in done.stdout
    assert "stays quarantined" not in done.output
    assert "nothing to release" in clusterctl("-i", DEMO, "release", "gpu-a2").stdout
