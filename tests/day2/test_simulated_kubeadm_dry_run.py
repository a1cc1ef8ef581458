"""The simulated kubeadm honours ``--dry-run`` on the demo cluster: it says what it would do, nothing changes.

(The real kubeadm's own dry-run lines for reset are compared in tests/upstream/test_contract_kubeadm.py.)
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from clirun import clusterctl
from day2_helpers import DEMO, state_digest

from clusterctl.bootstrap.cluster.kubeadm import (
    RESET_COMMAND,
    render_reset_config,
    render_upgrade_config,
    upgrade_command,
)


def on_host(host: str, line: str, config: str) -> tuple[int, str]:
    piped = f"printf '%s' {shlex.quote(config)} | {line}"
    done = clusterctl("-i", DEMO, "-l", host, "-o", "json", "exec", "--sudo", "--", piped)
    answer = done.json()["hosts"][0]
    return int(answer["exit_code"]), answer["stdout"] + answer.get("stderr", "")


@pytest.mark.parametrize(("host", "line", "config", "said"), [
    ("gpu-a1", upgrade_command("apply", "v1.36.2") + " --dry-run", render_upgrade_config("v1.36.2"),
     '[dryrun] Would upgrade your static Pod-hosted control plane to version "v1.36.2"'),
    ("gpu-b1", upgrade_command("node") + " --dry-run", render_upgrade_config("v1.36.2"),
     "[upgrade/preflight] Would pull the required images"),
    ("gpu-a1", RESET_COMMAND + " --dry-run", render_reset_config("unix:///run/containerd/containerd.sock"),
     "[dryrun] Would remove the etcd member on this node from the etcd cluster"),
    ("gpu-b1", RESET_COMMAND + " --dry-run", render_reset_config("unix:///run/containerd/containerd.sock"),
     "[dryrun] Would delete files: [/etc/kubernetes/admin.conf"),
])
def test_a_dry_run_says_what_kubeadm_would_do_and_changes_nothing(bootstrapped_demo: Path, host: str, line: str,
                                                                   config: str, said: str) -> None:
    before = state_digest(bootstrapped_demo)
    code, output = on_host(host, line, config)
    assert code == 0, output
    assert said in output
    assert state_digest(bootstrapped_demo) == before


def test_without_dry_run_the_same_line_does_change_the_host(bootstrapped_demo: Path) -> None:
    """The check can fail: the reset line itself (no --dry-run) changes the mock state."""
    before = state_digest(bootstrapped_demo)
    code, output = on_host("gpu-b1", RESET_COMMAND, render_reset_config("unix:///run/containerd/containerd.sock"))
    assert code == 0, output
    assert "[reset] Deleting files:" in output
    assert state_digest(bootstrapped_demo) != before
