"""``clusterctl bootstrap`` read-only runs over real sshd mock hosts: preflight and the plan.

Three sshd hosts replaying the demo's DGX A100 profile; the simulated tools (lsmod, sysctl,
dpkg-query, apt-mark, ...) answer through the hosts' wrappers, the rest of each probe line
runs in the real shell. Only runs that change nothing go over these hosts, which share this
machine's files; runs that write go over isolated hosts (own mount namespace, real
containerd): tests/integration/test_bootstrap_isolated.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import run_clusterctl
from sshd_hosts import SSHDHosts

pytestmark = pytest.mark.sshd

PROFILE = Path(__file__).resolve().parents[2] / "inventories" / "demo" / "profiles" / "dgx-a100"
NAMES = ["node1", "node2", "node3"]


def test_preflight_and_plan_over_sshd_in_parallel(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(3, profile=PROFILE, names=NAMES)
    # Workers only: the hosts are this 2-CPU machine, below kubeadm's control-plane minimum.
    extra = {n: {"roles": ["worker"], "stack": {"kubernetes": "1.36.2", "containerd": "2.2.1"}} for n in NAMES}
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts, extra)
    common = ["-i", str(inventory), "--known-hosts", str(known), "-o", "json"]
    state = tmp_path / "state"

    preflight = run_clusterctl([*common, "bootstrap", "phase", "preflight", "--state-dir", str(state)],
                               home=tmp_path / "home", timeout_s=180)
    assert preflight.exit_code == 0, preflight.stderr
    data = preflight.json()
    assert data["mode"] == "apply" and [r["status"] for r in data["results"]] == ["ok"] * 3
    # Read-only: no lock taken. The progress file is the cluster's, keyed by this inventory file.
    assert len(data["notes"]) == 1 and data["notes"][0].startswith(f"progress kept in {state}/bootstrap/sshd-mock-")

    plan = run_clusterctl([*common, "bootstrap", "plan", "--phase", "kernel"], home=tmp_path / "home",
                          timeout_s=180)
    assert plan.exit_code == 0, plan.stderr
    changes = {r["host"]: [c.get("command") or c["path"] for c in r["changes"]] for r in plan.json()["results"]}
    assert set(changes) == set(NAMES)
    for host in NAMES:  # the simulated lsmod has no br_netfilter, its sysctl no bridge keys yet
        assert "modprobe br_netfilter" in changes[host]
        assert "/etc/sysctl.d/99-clusterctl-kubernetes.conf" in changes[host]
