"""remove-node's etcdctl lines against real etcd: three members with kubeadm's own etcd certificates
(``kubeadm init phase certs etcd-*``), TLS and client-certificate authentication as kubeadm's etcd
manifest sets them, and the etcdctl clusterctl runs, with clusterctl's flags.

clusterctl runs etcdctl inside a control plane's etcd pod (``kubectl exec etcd-NODE -- etcdctl
--endpoints=https://127.0.0.1:2379 --cacert=... --cert=.../healthcheck-client.crt ...``). Here the
same words run on this machine: the ``kubectl exec`` prefix is dropped and the pod's paths and port
are this test's (three members cannot all listen on 2379). What is proven: kubeadm's health-check
client certificate may list, check and remove members; the outputs are what clusterctl's parsers
read (decimal IDs, one health per endpoint, exit 1 with its JSON when one is down); ``member remove``
takes the hexadecimal ID; the simulator's answers have the same shapes.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_tools import find_tool
from toolset import ETCD, KUBERNETES_NEWEST

from clusterctl.facts.etcd import ETCD_PKI, etcd_quorum, etcdctl, member_of, parse_endpoint_health, parse_member_list

CONFIG = """\
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 10.0.0.11
nodeRegistration:
  name: cp1
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
certificatesDir: {pki}
"""


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Members:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.etcd = find_tool("etcd", ETCD)
        self.etcdctl_binary = find_tool("etcdctl", ETCD)
        kubeadm = find_tool("kubeadm", KUBERNETES_NEWEST)
        self.pki = folder / "pki"
        (folder / "kubeadm.yaml").write_text(CONFIG.format(pki=self.pki))
        for cert in ("etcd-ca", "etcd-server", "etcd-peer", "etcd-healthcheck-client"):
            subprocess.run([str(kubeadm), "init", "phase", "certs", cert, "--config", str(folder / "kubeadm.yaml")],
                           check=True, capture_output=True, timeout=120)
        ports = _free_ports(6)
        self.client = {f"cp{i + 1}": ports[i] for i in range(3)}
        self.peer = {f"cp{i + 1}": ports[3 + i] for i in range(3)}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        cluster = ",".join(f"{n}=https://127.0.0.1:{p}" for n, p in self.peer.items())
        etcd = self.pki / "etcd"
        for name in self.client:
            # The flags of kubeadm's etcd manifest (cmd/kubeadm/app/phases/etcd/local.go), on this test's ports.
            args = [str(self.etcd), f"--name={name}", f"--data-dir={self.folder / name}",
                    f"--listen-client-urls=https://127.0.0.1:{self.client[name]}",
                    f"--advertise-client-urls=https://127.0.0.1:{self.client[name]}",
                    f"--listen-peer-urls=https://127.0.0.1:{self.peer[name]}",
                    f"--initial-advertise-peer-urls=https://127.0.0.1:{self.peer[name]}",
                    f"--initial-cluster={cluster}", "--initial-cluster-state=new",
                    "--client-cert-auth=true", f"--cert-file={etcd}/server.crt", f"--key-file={etcd}/server.key",
                    f"--trusted-ca-file={etcd}/ca.crt", "--peer-client-cert-auth=true",
                    f"--peer-cert-file={etcd}/peer.crt", f"--peer-key-file={etcd}/peer.key",
                    f"--peer-trusted-ca-file={etcd}/ca.crt", "--snapshot-count=10000"]
            log = (self.folder / f"{name}.log").open("wb")
            self.processes[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        process.terminate()
        process.wait(timeout=60)

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)

    def run(self, args: str, via: str = "cp1") -> subprocess.CompletedProcess[str]:
        """clusterctl's etcdctl line for ``args``, without its ``kubectl exec`` prefix, paths made this test's."""
        line = etcdctl(via, args)
        words = shlex.split(line.split(" -- ", 1)[1])
        assert words[0] == "etcdctl"
        words = [w.replace(ETCD_PKI, str(self.pki / "etcd"))
                 .replace("https://127.0.0.1:2379", f"https://127.0.0.1:{self.client[via]}") for w in words[1:]]
        return subprocess.run([str(self.etcdctl_binary), *words], capture_output=True, text=True, timeout=120)

    def wait_healthy(self, count: int) -> None:
        deadline = time.monotonic() + 120  # a loaded machine: etcd's first election can take a while
        while True:
            done = self.run("endpoint health --cluster -w json")
            if done.stdout.strip().startswith("["):
                health = parse_endpoint_health(done.stdout)
                if sum(h.healthy for h in health) >= count:
                    return
            if time.monotonic() > deadline:
                logs = {n: (self.folder / f"{n}.log").read_text()[-800:] for n in self.client}
                raise AssertionError(f"etcd did not become healthy: {done.stdout} {done.stderr} {logs}")
            time.sleep(1)


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    found = Members(tmp_path)
    found.start()
    try:
        yield found
    finally:
        found.stop_all()


def test_clusterctls_etcdctl_lines_list_check_and_remove_a_dead_member(members: Members) -> None:
    members.wait_healthy(3)
    listed = members.run("member list -w json")
    assert listed.returncode == 0, listed.stderr
    found = parse_member_list(listed.stdout)
    assert sorted(m.name for m in found) == ["cp1", "cp2", "cp3"]
    assert all(m.client_urls and m.peer_urls for m in found)
    dead = member_of(found, "cp3", "")
    assert dead is not None and dead.peer_urls == (f"https://127.0.0.1:{members.peer['cp3']}",)
    assert member_of(found, "renamed", "127.0.0.1") is not None  # the peer URL's host, when no name matches

    members.stop("cp3")
    health = members.run("endpoint health --cluster -w json")
    # One endpoint down: exit 1 and "unhealthy cluster" on stderr, the JSON still on stdout.
    assert health.returncode == 1 and "unhealthy cluster" in health.stderr
    checked = parse_endpoint_health(health.stdout)
    by_endpoint = {h.endpoint: h for h in checked}
    assert not by_endpoint[f"https://127.0.0.1:{members.client['cp3']}"].healthy
    assert by_endpoint[f"https://127.0.0.1:{members.client['cp3']}"].error
    assert sum(h.healthy for h in checked) == 2
    assert etcd_quorum(found, checked, dead) == ""
    # Were cp2 sick as well, removing cp3 would leave one healthy member of two.
    only_cp1 = [h for h in checked if h.endpoint.endswith(f":{members.client['cp1']}")]
    assert "quorum needs 2" in etcd_quorum(found, only_cp1, dead)

    removed = members.run(f"member remove {dead.hex_id}")
    assert removed.returncode == 0, removed.stderr
    # The simulator answers the same line (clusterctl/mock/tools/etcdctl_exec.py).
    # Go's %16x: an ID of fewer than 16 hex digits (1 in 16 random IDs) is padded with spaces.
    assert re.fullmatch(rf"Member {int(dead.hex_id, 16):16x} removed from cluster [ 0-9a-f]{{16}}\n",
                        removed.stdout), removed.stdout
    after = parse_member_list(members.run("member list -w json").stdout)
    assert sorted(m.name for m in after) == ["cp1", "cp2"]
    again = members.run(f"member remove {dead.hex_id}")
    assert again.returncode != 0 and "member not found" in again.stderr
