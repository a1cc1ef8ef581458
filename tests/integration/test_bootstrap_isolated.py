"""``clusterctl bootstrap`` applying the node phases over isolated sshd mock hosts.

Each host is a real sshd in its own mount and UTS namespaces (private /etc, /var/lib, /opt,
/run and hostname: ``sshd_hosts(..., isolated=True)``), replaying the demo's DGX A100 profile,
with a REAL containerd (Debian's 1.6) behind its simulated ``systemctl``: the config the
containerd phase writes is the one the daemon reads, and ``ctr`` talks to that daemon. Each
host's lock and apt sources are its own, so ``--resume`` and the lock are shown here
too. The in-process versions of these scenarios: tests/bootstrap/test_node_phases_sim.py and
tests/bootstrap/test_containerd_daemon.py. Skipped, with the reason, where unshare, sshd or
containerd is missing.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from clirun import CliRun, run_clusterctl, start_clusterctl
from host_state import assert_hosts_unchanged
from sshd_hosts import SSHDHost, SSHDHosts

from clusterctl.bootstrap.registry import all_phases
from clusterctl.engine.run import SkipReason

pytestmark = [pytest.mark.sshd, pytest.mark.usefixtures("needs_containerd")]

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "inventories" / "demo" / "profiles" / "dgx-a100"
NODE_PHASES = ["preflight", "kernel", "packages", "containerd", "nvidia-runtime"]
CLUSTER_PHASES = ",".join(p.name for p in all_phases() if p.name not in NODE_PHASES)
CONFIRMED = SkipReason.CONFIRMED.value


#: /usr is this machine's own on an isolated host, so the program the simulated toolkit package
#: installs is stood in for by a rule (the rest of ``ls`` is the real one).
TOOLKIT_BINARY = """\
extends: {demo}
commands:
  - match: "ls -1 /usr/bin/nvidia-container-runtime"
    stdout_text: "/usr/bin/nvidia-container-runtime\\n"
"""


#: A failure injected in the packages phase (the in-process twin: test_node_phases_sim.py).
FETCH_FAILS = (
    "  - regex: 'apt-get install'\n    times: 1\n    exit: 100\n"
    '    stderr_text: "E: Failed to fetch https://pkgs.k8s.io/core:/stable:/v1.36/deb/amd64/'
    'kubeadm_1.36.2-1.1_amd64.deb  Connection timed out\\n"\n'
)


class Fleet:
    def __init__(self, farm: SSHDHosts, tmp_path: Path, names: list[str], *, containerd: bool = True,
                 inject: dict[str, str] | None = None) -> None:
        self.hosts: list[SSHDHost] = []
        for name in names:
            profile = tmp_path / f"profile-{name}"
            profile.mkdir()
            rules = (inject or {}).get(name, "")
            (profile / "profile.yaml").write_text(TOOLKIT_BINARY.format(demo=PROFILE) + rules)
            self.hosts += farm(1, profile=profile, names=[name], isolated=True, containerd=containerd)
        # Workers only: the hosts are this small machine, below kubeadm's control-plane minimum.
        # A current stack is pinned; the real containerd is Debian's 1.6, so the containerd phase
        # writes a version-2 config for it (and warns that the pin differs).
        extra = {n: {"roles": ["worker"], "stack": {"kubernetes": "1.36.2", "containerd": "2.2.1"}} for n in names}
        self.inventory, known = farm.write_client_files(tmp_path, self.hosts, extra)
        self.common = ["-i", str(self.inventory), "--known-hosts", str(known), "-o", "json"]
        self.state = tmp_path / "state"
        self.home = tmp_path / "home"

    def ssh(self, host: SSHDHost, command: str) -> CliRun:
        return run_clusterctl([*self.common, "-l", host.name, "exec", "--sudo", "--", command],
                              home=self.home, timeout_s=120)

    def bootstrap(self, *args: str) -> CliRun:
        return run_clusterctl([*self.common, "bootstrap", *args, "--state-dir", str(self.state)],
                              home=self.home, timeout_s=300)


def test_full_apply_over_sshd_then_a_second_apply_changes_nothing(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    fleet = Fleet(sshd_hosts, tmp_path, ["node1", "node2"])
    node = fleet.hosts[0]
    # A dry run over real sshd hosts reads them and touches nothing (it plans every write below).
    with assert_hosts_unchanged(node.tree / "etc"), assert_hosts_unchanged(node.tree / "var/lib"):
        planned = fleet.bootstrap("--dry-run", "--skip-phases", CLUSTER_PHASES)
    assert planned.exit_code == 0, planned.output
    assert any(c.get("path") == "/etc/containerd/config.toml" for r in planned.json()["results"]
               for c in r["changes"])
    first = fleet.bootstrap("--skip-phases", CLUSTER_PHASES)
    assert first.exit_code == 0, first.output
    data = first.json()
    assert data["ok"] and data["changed"]
    for host in ("node1", "node2"):
        assert {r["phase"]: r["status"] for r in data["results"] if r["host"] == host} == {
            "preflight": "ok", "kernel": "changed", "packages": "changed", "containerd": "changed",
            "nvidia-runtime": "ok"}
    # The real containerd of node1 runs with the config the phase wrote in node1's own /etc.
    config = (node.tree / "etc/containerd/config.toml").read_text()
    assert "version = 2" in config and '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in config
    assert node.daemon_pids() and (node.tree / "run/containerd/containerd.sock").exists()
    assert "br_netfilter" in (node.tree / "etc/modules-load.d/clusterctl-kubernetes.conf").read_text()
    assert not Path("/etc/modules-load.d/clusterctl-kubernetes.conf").exists()  # nothing reached this machine

    # The second run reads each host once (the first run's reads, batched into one command over
    # ssh): they answer as then, so no phase reads, plans or locks anything there.
    second = fleet.bootstrap("--skip-phases", CLUSTER_PHASES)
    assert second.exit_code == 0, second.output
    again = second.json()
    assert again["ok"] and not again["changed"]
    assert {(r["status"], r["message"]) for r in again["results"]} == {("skipped", CONFIRMED)}
    assert not any(r["changes"] for r in again["results"])
    assert [(p["phase"], p["changed"]) for p in again["recap"]["phases"]] == [(n, 0) for n in NODE_PHASES]
    assert any(n.startswith("unchanged since the last run") and "node[1-2]" in n for n in again["notes"])


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
    assert "restart containerd with the previous config: done" in result["rollback"]
    assert result["rollback"][-1] == "after the rollback, verify passes again"  # containerd answers, CRI ok
    assert (node.tree / "etc/containerd/config.toml").read_text() == original
    answers = fleet.ssh(node, "ctr plugins ls")
    assert answers.exit_code == 0 and "io.containerd.grpc.v1" in answers.stdout


def test_lock_refuses_a_concurrent_run_and_resume_finishes_after_an_injected_failure(
    sshd_hosts: SSHDHosts, tmp_path: Path
) -> None:
    fleet = Fleet(sshd_hosts, tmp_path, ["node1", "node2"], containerd=False, inject={"node2": FETCH_FAILS})
    args = [*fleet.common, "bootstrap", "--skip-phases", CLUSTER_PHASES, "--state-dir", str(fleet.state)]
    first = start_clusterctl(args, home=fleet.home, COLUMNS="200")
    try:
        locks = [h.tree / "var/lib/clusterctl/bootstrap.lock" for h in fleet.hosts]
        deadline = time.monotonic() + 120
        while not all(lock.exists() for lock in locks) and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.1)
        assert all(lock.exists() for lock in locks), "the first run never held both hosts' locks"
        second = fleet.bootstrap("--skip-phases", CLUSTER_PHASES)
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert second.exit_code == 1, second.output
    refused = second.json()["failed_hosts"]
    assert set(refused) == {"node1", "node2"}
    assert all("another clusterctl run is working on this host" in m for m in refused.values()), refused

    assert first.returncode == 1, out + err
    data = json.loads(out)
    assert list(data["failed_hosts"]) == ["node2"] and "Connection timed out" in data["failed_hosts"]["node2"]
    status = {(r["host"], r["phase"]): r["status"] for r in data["results"]}
    assert status[("node1", "nvidia-runtime")] == "ok" and status[("node1", "containerd")] == "changed"
    assert status[("node2", "containerd")] == "skipped"  # left out of the later phases
    assert not any(lock.exists() for lock in locks)  # released at the end, failure or not

    resumed = fleet.bootstrap("--skip-phases", CLUSTER_PHASES, "--resume")
    assert resumed.exit_code == 0, resumed.output
    status = {(r["host"], r["phase"]): r["status"] for r in resumed.json()["results"]}
    assert {s for (h, _), s in status.items() if h == "node1"} == {"skipped"}
    assert [status[("node2", p)] for p in NODE_PHASES] == ["skipped", "skipped", "changed", "changed", "ok"]
