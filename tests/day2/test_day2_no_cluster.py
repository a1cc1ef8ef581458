"""Every day-2 command that needs a working control plane says "no cluster here" the same way.

On the demo before any bootstrap (kubectl and kubeadm are not even installed): exit 2, nothing on
stdout (with -o json too), one paragraph on stderr that says what could not be done through which
control plane, what it answered and what to run first; no Python class name, no nested "error:"
(issue #33). A first control plane that runs no API server (its static pod manifest gone) is no
cluster either, said the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clirun import CliRun, clusterctl
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
    ("status", "gpu-a3"),
    ("heal", "gpu-a3", "--dry-run"),
    ("heal", "gpu-a3", "gpu-a2", "--yes"),
]


def assert_no_cluster(done: CliRun, answered: str) -> None:
    """``done`` stopped with the one "no cluster here" error: exit 2, stdout empty, one paragraph."""
    assert done.exit_code == 2, done.output
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and re.match(r"error: no working cluster: cannot .+ through the control plane gpu-a1 "
                                        r"\(.+\)\. Run 'clusterctl bootstrap' first", lines[0]), done.stderr
    assert answered in lines[0]
    assert lines[0].count("error") == 1 and not re.search(r"\b[A-Z]\w*(Error|Exception)\b", lines[0])


@pytest.mark.parametrize("output", ["table", "json"])
@pytest.mark.parametrize("command", NEEDS_A_CLUSTER, ids=" ".join)
def test_no_cluster_is_one_paragraph_with_exit_2_and_what_to_run_first(command: tuple[str, ...], output: str,
                                                                        tmp_path: Path) -> None:
    args = [*command, "--state-dir", str(tmp_path)] if command[0] == "upgrade" and "apply" in command else command
    assert_no_cluster(clusterctl("-i", DEMO, "-o", output, *args), ": not found")


@pytest.mark.parametrize("output", ["table", "json"])
def test_a_first_control_plane_without_an_api_server_is_no_cluster(bootstrapped_demo: Path, output: str) -> None:
    moved = clusterctl("-i", DEMO, "-l", "gpu-a1", "exec", "--sudo", "--",
                       "mv /etc/kubernetes/manifests/kube-apiserver.yaml /root/kube-apiserver.yaml")
    assert moved.exit_code == 0, moved.output
    done = clusterctl("-i", DEMO, "-o", output, "upgrade", "plan", "--to", "1.36.3")
    assert_no_cluster(done, "kube-apiserver.yaml: No such file or directory")


def test_a_host_that_is_no_node_is_not_released_and_does_not_stay_quarantined(bootstrapped_demo: Path) -> None:
    removed = clusterctl("-i", DEMO, "remove-node", "gpu-b3", "--yes")
    assert removed.exit_code == 0, removed.output
    done = clusterctl("-i", DEMO, "release", "gpu-b3")
    assert done.exit_code == 1
    assert "REFUSED gpu-b3: not released: gpu-b3 is not a node of the cluster" in done.stdout
    assert "stays quarantined" not in done.output
    assert "nothing to release" in clusterctl("-i", DEMO, "release", "gpu-a2").stdout
