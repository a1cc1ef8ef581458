"""``clusterctl bootstrap`` applying the node phases over isolated sshd mock hosts.

Each host is a real sshd in its own mount and UTS namespaces (private /etc, /var/lib, /opt,
/run and hostname: ``sshd_hosts(..., isolated=True)``), replaying the demo's DGX A100 profile,
with a REAL containerd (Debian's 1.6) behind its simulated ``systemctl``: the config the
containerd phase writes is the one the daemon reads, and ``ctr`` talks to that daemon. The
in-process versions of these scenarios: tests/bootstrap/test_node_phases_sim.py and
tests/bootstrap/test_containerd_daemon.py. Skipped, with the reason, where unshare, sshd or
containerd is missing.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from clirun import run_clusterctl
from sshd_hosts import SSHDHosts, containerd_missing_reason

from clusterctl.bootstrap.registry import all_phases

pytestmark = pytest.mark.sshd

PROFILE = Path(__file__).resolve().parents[2] / "inventories" / "demo" / "profiles" / "dgx-a100"
NODE_PHASES = ["preflight", "kernel", "packages", "containerd", "nvidia-runtime"]
CLUSTER_PHASES = ",".join(p.name for p in all_phases() if p.name not in NODE_PHASES)


@pytest.fixture(autouse=True)
def _needs_isolation_and_containerd() -> None:
    reason = containerd_missing_reason()
    if reason:
        pytest.skip(reason)


#: /usr is this machine's own on an isolated host, so the program the simulated toolkit package
#: installs is stood in for by a rule (the rest of ``ls`` is the real one).
TOOLKIT_BINARY = """\
extends: {demo}
commands:
  - match: "ls -1 /usr/bin/nvidia-container-runtime"
    stdout_text: "/usr/bin/nvidia-container-runtime\\n"
"""


class Fleet:
    def __init__(self, farm: SSHDHosts, tmp_path: Path, names: list[str]) -> None:
        profile = tmp_path / "profile"
        profile.mkdir()
        (profile / "profile.yaml").write_text(TOOLKIT_BINARY.format(demo=PROFILE))
        self.hosts = farm(len(names), profile=profile, names=names, containerd=True)
        # Workers only: the hosts are this small machine, below kubeadm's control-plane minimum.
        # Debian's containerd 1.6 is what runs: Kubernetes 1.32 is the newest minor it supports.
        extra = {n: {"roles": ["worker"], "stack": {"kubernetes": "1.36.2", "containerd": "2.2.1"}} for n in names}
        inventory = farm.write_inventory(tmp_path / "inv.yaml", self.hosts, extra)
        known = farm.write_known_hosts(tmp_path / "known_hosts", self.hosts)
        self.common = ["-i", str(inventory), "--known-hosts", str(known), "-o", "json"]
        self.state = tmp_path / "state"
        self.home = tmp_path / "home"

    def ssh(self, host: object, command: str) -> object:
        return run_clusterctl([*self.common, "-l", host.name, "exec", "--sudo", "--", command],  # type: ignore[attr-defined]
                              home=self.home, timeout_s=120)

    def bootstrap(self, *args: str) -> object:
        return run_clusterctl([*self.common, "bootstrap", *args, "--state-dir", str(self.state)],
                              home=self.home, timeout_s=300)


def test_full_apply_over_sshd_then_a_second_apply_changes_nothing(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    fleet = Fleet(sshd_hosts, tmp_path, ["node1", "node2"])
    first = fleet.bootstrap("--skip-phases", CLUSTER_PHASES)
    assert first.exit_code == 0, first.output
    data = first.json()
    assert data["ok"] and data["changed"]
    for host in ("node1", "node2"):
        assert {r["phase"]: r["status"] for r in data["results"] if r["host"] == host} == {
            "preflight": "ok", "kernel": "changed", "packages": "changed", "containerd": "changed",
            "nvidia-runtime": "ok"}
    node = fleet.hosts[0]
    # The real containerd of node1 runs with the config the phase wrote in node1's own /etc.
    config = (node.tree / "etc/containerd/config.toml").read_text()
    assert "version = 2" in config and '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in config
    assert node.daemon_pids() and (node.tree / "run/containerd/containerd.sock").exists()
    assert "br_netfilter" in (node.tree / "etc/modules-load.d/clusterctl-kubernetes.conf").read_text()
    assert not Path("/etc/modules-load.d/clusterctl-kubernetes.conf").exists()  # nothing reached this machine

    second = fleet.bootstrap("--skip-phases", CLUSTER_PHASES)
    assert second.exit_code == 0, second.output
    again = second.json()
    assert again["ok"] and not again["changed"]
    assert {r["status"] for r in again["results"]} == {"ok"} and not any(r["changes"] for r in again["results"])
    assert [(p["phase"], p["changed"]) for p in again["recap"]["phases"]] == [(n, 0) for n in NODE_PHASES]


def test_rollback_when_the_real_containerd_does_not_start_with_the_new_config(
    sshd_hosts: SSHDHosts, tmp_path: Path
) -> None:
    """As tests/bootstrap/test_containerd_daemon.py, on the host's own real containerd: the old
    root has no ``imports`` line, so a leftover drop-in lay dormant; the new config imports it,
    containerd cannot bind that drop-in's metrics port (held here) and exits. The phase restores
    the backup, restarts containerd again and reports both."""
    fleet = Fleet(sshd_hosts, tmp_path, ["node1"])
    (node,) = fleet.hosts
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        (node.tree / "etc/containerd/conf.d").mkdir(parents=True, exist_ok=True)
        (node.tree / "etc/containerd/conf.d/50-metrics.toml").write_text(
            f'version = 2\n[metrics]\n  address = "127.0.0.1:{port}"\n')
        original = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.9"\n'
        (node.tree / "etc/containerd/config.toml").write_text(original)
        started = fleet.ssh(node, "systemctl restart containerd")
        assert started.exit_code == 0, started.output
        report = fleet.bootstrap("phase", "containerd")
    finally:
        holder.close()
    assert report.exit_code == 1, report.output
    (result,) = report.json()["results"]
    assert result["status"] == "failed"
    # What systemd says, as on a real host; the daemon's own log says why.
    assert result["message"].startswith("restart containerd: exit 1: Job for containerd.service failed")
    assert "address already in use" in (node.state.folder / "containerd.log").read_text()
    assert any(line.startswith("restored /etc/containerd/config.toml from ") for line in result["rollback"])
    assert "restarted containerd with the previous config: it answers, CRI plugin ok" in result["rollback"]
    assert (node.tree / "etc/containerd/config.toml").read_text() == original
    answers = fleet.ssh(node, "ctr plugins ls")
    assert answers.exit_code == 0 and "io.containerd.grpc.v1" in answers.stdout
