"""``upgrade apply`` over isolated real-sshd hosts: interrupted on one host, ``--resume`` finishes it.

Three sshd mock hosts in their own mount namespaces (private /etc, /var/lib, /opt, /run:
``sshd_hosts(..., isolated=True)``), each with the simulated tools (kubeadm, kubectl, apt-get,
dpkg, systemctl...) on its PATH and one mock cluster state shared by the three, as the
in-process mock cluster has it. The cluster is bootstrapped first by the same ``clusterctl
bootstrap`` over the same state folder through the in-process mock transport (an "inventory
twin" naming ``mock_state``): the trees the sshd hosts mount are the ones it wrote, so the
upgrade finds a real-looking cluster there at a fraction of the cost of bootstrapping over
ssh. Everything the test checks afterwards comes from the hosts themselves: each host's
``sudo.log`` (every command run as root, in order), its tree and the shared cluster state.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import CliRun, clusterctl, run_clusterctl, start_clusterctl
from interrupts import Cut, every_signal, interrupted
from sshd_hosts import SSHDHosts

pytestmark = [pytest.mark.sshd, pytest.mark.usefixtures("needs_isolation")]

REPO = Path(__file__).resolve().parents[2]
DEMO_PROFILE = REPO / "inventories" / "demo" / "profiles" / "dgx-a100"
NAMES = ["cp1", "w1", "w2"]
LOCK = "var/lib/clusterctl/bootstrap.lock"
#: The phases that need a saved survey (labels, alert rules, verify's GPU pod) are left out, as
#: for a cluster bootstrapped without one.
SKIP = "topology-labels,alert-rules,verify"
#: Helm on every host (the first control plane installs the charts); /usr is this machine's own
#: on an isolated host, so the program the simulated toolkit package installs is a rule.
PROFILE = f"""\
extends: {DEMO_PROFILE}
machine:
  packages:
    installed:
      helm: "3.19.0-1"
commands:
  - match: "ls -1 /usr/bin/nvidia-container-runtime"
    stdout_text: "/usr/bin/nvidia-container-runtime\\n"
"""


class Cluster:
    """The three sshd hosts, bootstrapped, and the ``clusterctl`` command line that reaches them."""

    def __init__(self, farm: SSHDHosts, tmp_path: Path) -> None:
        profile = tmp_path / "profile"
        profile.mkdir()
        (profile / "profile.yaml").write_text(PROFILE)
        self.hosts = farm(len(NAMES), profile=profile, names=NAMES, isolated=True)
        self.by_name = {h.name: h for h in self.hosts}
        roles: dict[str, Any] = {n: {"roles": ["worker"]} for n in NAMES}
        roles["cp1"] = {"roles": ["control-plane", "worker"]}
        stack = {"kubernetes": "1.36.2", "containerd": "2.2.1"}
        extra = {n: {**roles[n], "stack": stack} for n in NAMES}
        self.inventory, known = farm.write_client_files(tmp_path, self.hosts, extra)
        self.common = ["-i", str(self.inventory), "--known-hosts", str(known), "--timeout", "120"]
        self.state = tmp_path / "state"
        self.home = tmp_path / "home"
        # The twin: the same hosts through the in-process mock transport, on the sshd hosts' state.
        twin = farm.inventory_data(self.hosts, extra)
        for entry in twin["hosts"].values():
            entry.update(transport="mock", profile=str(profile), mock_state=str(self.hosts[0].state_root))
            entry.pop("ssh", None)
        self.twin = tmp_path / "twin.yaml"
        self.twin.write_text(yaml.safe_dump(twin, sort_keys=False))

    def bootstrap(self) -> None:
        done = clusterctl("-i", self.twin, "bootstrap", "--yes", "--skip-phases", SKIP, "--state-dir",
                          self.state / "twin")
        assert done.exit_code == 0, done.output

    def run(self, *args: str, timeout_s: float = 300) -> CliRun:
        return run_clusterctl([*self.common, *args], home=self.home, timeout_s=timeout_s)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return start_clusterctl([*self.common, *args], home=self.home, COLUMNS="200")

    def kube(self) -> dict[str, Any]:
        data = json.loads((self.hosts[0].state_root / "cluster.json").read_text())
        return dict(data.get("kubernetes") or {})

    def sudo_lines(self, host: str, needle: str) -> list[str]:
        log = self.by_name[host].sudo_log
        lines = log.read_text().splitlines() if log.exists() else []
        return [line for line in lines if needle in line]

    def installed(self, host: str, package: str) -> str:
        return str(self.by_name[host].state.read()["packages"][package]["version"])


def _wait_for(what: str, ready: Any, proc: subprocess.Popen[str], timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the upgrade ended (exit {proc.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_an_upgrade_interrupted_on_one_host_resumes_to_the_end(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    cluster = Cluster(sshd_hosts, tmp_path)
    cluster.bootstrap()
    state = ["--state-dir", str(cluster.state)]

    # Ctrl-C while w1 is being upgraded: its drain is done (cordoned), its kubelet not yet back.
    proc = cluster.start("upgrade", "apply", "--to", "1.36.3", "--yes", *state)
    try:
        _wait_for("w1 is drained", lambda: cluster.kube().get("nodes", {}).get("w1", {}).get("unschedulable"), proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(out, err)
    assert proc.returncode == 130, out + err
    assert "w1: interrupted in phase drain" in err
    assert "to take back what this run changed: clusterctl undo " in err
    # The inventory, known_hosts and timeout kept: without them the resumed run refused every host's key.
    given = ["-i", str(cluster.inventory), "--timeout", "120.0", "--known-hosts", cluster.common[3]]
    said = " ".join(err.split())  # the command whole on a line of its own where it does not fit after the words
    assert f"to go on where it stopped: clusterctl {shlex.join([*given, 'upgrade', 'apply', *state])} --resume --yes" \
        in said, err
    # Nothing happened on w2; every lock this run took was given back.
    assert cluster.installed("w2", "kubelet") == "1.36.2-1.1"
    assert not cluster.sudo_lines("w2", "=1.36.3-") and not cluster.sudo_lines("w2", "kubeadm upgrade")
    assert not [h.name for h in cluster.hosts if (h.tree / LOCK).exists()]
    # The drain the signal cut short is not rolled back over the connection being closed under it
    # (an uncordon there would happen or not by chance): w1 stays cordoned, no uncordon was even tried,
    # the journal the interrupt names holds the cordon, and the resume below drains it again.
    assert cluster.kube()["nodes"]["w1"].get("unschedulable"), out + err
    assert not cluster.sudo_lines("cp1", "uncordon w1"), err
    journal = err.split("to take back what this run changed: clusterctl undo ", 1)[1].split()[0]
    assert "cordon w1" in Path(journal).read_text()

    resumed = cluster.run("-o", "json", "upgrade", "apply", "--resume", "--yes", *state)
    assert resumed.exit_code == 0, resumed.output
    hosts = {h["host"]: h for h in resumed.json()["hosts"]}
    assert hosts["cp1"]["status"] == "up to date" and hosts["w1"]["status"] == "upgraded"
    assert hosts["w2"]["status"] == "upgraded"
    for name in NAMES:
        assert cluster.installed(name, "kubeadm") == cluster.installed(name, "kubelet") == "1.36.3-1.1"
        assert not cluster.kube()["nodes"][name].get("unschedulable"), f"{name} left cordoned"
    assert not [h.name for h in cluster.hosts if (h.tree / LOCK).exists()]
    # The interrupted host was not upgraded twice: each package and kubeadm's own step ran once there.
    for host in NAMES:
        assert len(cluster.sudo_lines(host, "'kubeadm=1.36.3-*'")) == 1, cluster.sudo_lines(host, "1.36.3")
        assert len(cluster.sudo_lines(host, "'kubelet=1.36.3-*'")) == 1, cluster.sudo_lines(host, "1.36.3")
    assert len(cluster.sudo_lines("cp1", "kubeadm upgrade apply v1.36.3")) == 1
    assert [len(cluster.sudo_lines(w, "kubeadm upgrade node")) for w in ("w1", "w2")] == [1, 1]
    assert len(cluster.sudo_lines("cp1", "uncordon w1")) == 1  # the resume's, once w1 was Ready again

    again = cluster.run("-o", "json", "upgrade", "plan", "--to", "1.36.3")
    assert again.exit_code == 0, again.output
    assert again.json()["nothing_to_do"] is True


CERTS_CUTS = ("etcd out", "kube-apiserver kubelet wait", "kube-scheduler back")


@every_signal
def test_certs_renew_interrupted_over_sshd_never_leaves_a_manifest_out(
        sshd_hosts: SSHDHosts, tmp_path: Path, sig: signal.Signals, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over real sshd, a real signal right after a manifest moved out, during the kubelet's wait, and
    after one moved back: every manifest is in manifests/ when the command has exited, a journal is
    named, and --resume renews the rest."""
    from test_day2_interrupts import CERTS_STEPS

    from clusterctl.day2.certs import COMPONENTS
    from clusterctl.transport.ssh.transport import SSHTransport

    cluster = Cluster(sshd_hosts, tmp_path)
    cluster.bootstrap()
    manifests = cluster.by_name["cp1"].tree / "etc" / "kubernetes" / "manifests"
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(cluster.state / "certs"))
    for cut in (c for c in CERTS_STEPS if c.step in CERTS_CUTS):
        cut = Cut(cut.step, cut.pattern, cut.nth, host="cp1")
        cut_short = interrupted(monkeypatch, cut, sig, *cluster.common, "certs", "renew", "--yes", "--restart-wait",
                                "1", transport=SSHTransport)
        assert "clusterctl undo " in cut_short.stderr, cut_short.stderr
        assert "certs renew --restart-wait 1 --resume --yes" in cut_short.stderr, cut_short.stderr
        assert {p.stem for p in manifests.glob("*.yaml")} >= set(COMPONENTS), cut_short.output
    resumed = clusterctl(*cluster.common, "-o", "json", "certs", "renew", "--resume", "--yes", "--restart-wait", "1")
    assert resumed.exit_code == 0, resumed.output
    assert resumed.json()["hosts"][0]["soonest_days_left"] >= 364
