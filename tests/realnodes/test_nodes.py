"""Two namespaced nodes, each a machine to clusterctl: its own sshd, hostname, address, files."""

from __future__ import annotations

import json
from pathlib import Path

from nodes import MASKED_SYSCTLS, RealNodes


def _exec(nodes: RealNodes, script: str) -> dict[str, dict[str, object]]:
    result = nodes.clusterctl("-o", "json", "exec", "--", script, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    return {entry["host"]: entry for entry in json.loads(result.stdout)["hosts"]}


def test_clusterctl_reaches_each_node_over_ssh_as_a_machine(real_nodes: RealNodes) -> None:
    hosts = _exec(real_nodes, "hostname; ip -4 -o addr show dev eth0; id -un; systemctl is-system-running; "
                              "cat /proc/self/cgroup")
    assert sorted(hosts) == ["rn1", "rn2"]
    for node in real_nodes.nodes:
        out = str(hosts[node.name]["stdout"]).splitlines()
        assert out[0] == node.name
        assert f"inet {node.address}/24" in out[1]
        assert out[2] == "root"
        # The node's own systemd is PID 1 there and came up with no failed unit.
        assert out[3] == "running"
        # The SSH session lives in the unit of the node's sshd, in the node's cgroup namespace.
        assert any(line.endswith(":/system.slice/clusterctl-realnode-sshd.service") for line in out[4:]), out
    # ... which is the host's /clusterctl-realnodes/<node>: tear-down finds everything there.
    for node in real_nodes.nodes:
        sessions = Path(f"/sys/fs/cgroup/pids/clusterctl-realnodes/{node.name}/system.slice/"
                        "clusterctl-realnode-sshd.service/cgroup.procs")
        if sessions.parent.parent.parent.exists():
            assert sessions.read_text().split(), "the node's sshd is not in the node's cgroup"


def test_host_keys_are_verified(real_nodes: RealNodes, tmp_path: Path) -> None:
    """clusterctl refuses a node whose key is not the one in known_hosts (a node is a machine)."""
    wrong = tmp_path / "known_hosts"
    first, second = real_nodes.nodes
    wrong.write_text(f"{first.address} {' '.join(second.host_pubkey.split()[:2])}\n")
    result = real_nodes.clusterctl("-l", first.name, "--known-hosts", str(wrong), "exec", "--", "true",
                                   timeout=180)
    assert result.returncode != 0
    assert "host key" in (result.stdout + result.stderr).lower()


def test_a_node_writes_only_its_own_files(real_nodes: RealNodes) -> None:
    hosts = _exec(real_nodes, "mkdir -p /etc/clusterctl-realnodes-probe /var/lib/kubelet && "
                              "hostname > /etc/clusterctl-realnodes-probe/who && "
                              "cat /etc/clusterctl-realnodes-probe/who")
    assert {name: str(h["stdout"]).strip() for name, h in hosts.items()} == {"rn1": "rn1", "rn2": "rn2"}
    assert not Path("/etc/clusterctl-realnodes-probe").exists()
    for node in real_nodes.nodes:
        assert node.upper("/etc/clusterctl-realnodes-probe/who").read_text().strip() == node.name


def test_nodes_reach_each_other_on_their_network(real_nodes: RealNodes) -> None:
    first, second = real_nodes.nodes
    probe = (f"import socket; s = socket.create_connection(('{second.address}', 22), 10); "
             "print(s.recv(64).decode().strip())")
    result = real_nodes.sh(first.name, f"python3 -c {json.dumps(probe)}")
    assert result.stdout.startswith("SSH-2.0-OpenSSH")


def test_host_global_sysctls_written_in_a_node_stay_in_the_node(real_nodes: RealNodes) -> None:
    before = {name: Path("/proc/sys", name).read_text() for name in MASKED_SYSCTLS}
    # What kubelet writes (vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1).
    real_nodes.sh("rn1", "sysctl -qw vm.overcommit_memory=1 kernel.panic=10 kernel.panic_on_oops=1")
    inside = real_nodes.sh("rn1", "cat /proc/sys/vm/overcommit_memory /proc/sys/kernel/panic").stdout.split()
    assert inside == ["1", "10"]
    assert {name: Path("/proc/sys", name).read_text() for name in MASKED_SYSCTLS} == before
