"""Simulated tools answer as the real ones do (messages and exit codes from recordings)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest_mock import REPO_ROOT, write_cluster

from clusterctl.inventory.loader import load_inventory
from clusterctl.mock.machine import MockMachine
from clusterctl.mock.profile import load_profile
from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import FailureKind, TransportError

K8S_SOURCE = "echo 'deb https://pkgs.k8s.io/core:/stable:/v1.30/deb/ /' > /etc/apt/sources.list.d/k8s.list"


def node(inventory: Path, name: str = "n1") -> MockTransport:
    return MockTransport(load_inventory(inventory).host(name))


def test_apt_installs_only_known_versions_from_configured_sources(cluster: Path) -> None:
    t = node(cluster)
    hidden = t.run("apt-get install -y kubeadm=1.30.2-1.1")
    assert (hidden.exit_code, hidden.stderr) == (100, "E: Unable to locate package kubeadm\n")
    t.run(K8S_SOURCE)
    assert t.run("apt-get update").ok
    wrong = t.run("apt-get install -y kubeadm=1.30.9-1.1")
    assert (wrong.exit_code, wrong.stderr) == (100, "E: Version '1.30.9-1.1' for 'kubeadm' was not found\n")
    assert wrong.stdout.startswith("Reading package lists...\n")
    ok = t.run("apt-get install -y kubeadm=1.30.1-1.1 kubelet=1.30.1-1.1")
    assert ok.ok and "Setting up kubeadm (1.30.1-1.1) ..." in ok.stdout
    assert t.run("command -v kubeadm").stdout == "/usr/bin/kubeadm\n"
    again = t.run("apt-get install -y kubeadm=1.30.1-1.1")
    assert "kubeadm is already the newest version (1.30.1-1.1)." in again.stdout
    assert t.run("apt-mark hold kubeadm").stdout == "kubeadm set on hold.\n"
    held = t.run("apt-get install -y kubeadm=1.30.2-1.1")
    assert held.exit_code == 100 and "--allow-change-held-packages" in held.stderr
    assert t.run("apt-get install -y --allow-change-held-packages kubeadm=1.30.2-1.1").ok
    assert t.run("dpkg-query -W -f='${Version}' kubeadm").stdout == "1.30.2-1.1"
    no_tty = t.run("apt-get install cri-tools")
    assert no_tty.exit_code == 1 and no_tty.stdout.endswith("Do you want to continue? [Y/n] Abort.\n")


def test_dpkg_query_and_apt_mark_answer_like_debian(cluster: Path) -> None:
    t = node(cluster)
    assert t.run("dpkg-query -W containerd").stdout == "containerd\t1.7.24-0ubuntu1~24.04.2\n"
    missing = t.run("dpkg-query -W nosuchpkg")
    assert (missing.exit_code, missing.stderr) == (1, "dpkg-query: no packages found matching nosuchpkg\n")
    abbrev = t.run("dpkg-query -W -f='${db:Status-Abbrev} ${Version}\\n' containerd")
    assert abbrev.stdout == "ii  1.7.24-0ubuntu1~24.04.2\n"
    # A short option's value may follow it, after one '=' (dpkg 1.21 on Debian 12 printed '=Z' and 'Y1.21.23').
    assert t.run("dpkg-query -W -f==Z containerd").stdout == "=Z"
    assert t.run("dpkg-query -W -fY'${Version}' --showformat '${Version}' containerd").stdout == \
        "1.7.24-0ubuntu1~24.04.2"
    # Held, as real dpkg-query says it (tests/fixtures/apt/dpkg-query-held-debian12.txt): 'hi', not 'ii'.
    assert t.run("apt-mark hold containerd").ok
    assert t.run("dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' containerd").stdout == \
        "containerd\t1.7.24-0ubuntu1~24.04.2\thi \n"
    assert t.run("dpkg-query -s containerd").stdout.startswith("Package: containerd\nStatus: hold ok installed\n")
    unknown = t.run("apt-mark hold nosuchpkg")
    assert (unknown.exit_code, unknown.stderr) == (100, "E: Unable to locate package nosuchpkg\nE: No packages found\n")


def test_systemctl_states_and_messages(cluster: Path) -> None:
    t = node(cluster)
    assert (t.run("systemctl is-active containerd").stdout, t.run("systemctl is-active containerd").exit_code) == \
        ("active\n", 0)
    unknown = t.run("systemctl is-active nosuch")
    assert (unknown.stdout, unknown.exit_code) == ("inactive\n", 3)
    assert t.run("systemctl is-enabled nosuch").stderr == \
        "Failed to get unit file state for nosuch.service: No such file or directory\n"
    restart = t.run("systemctl restart nosuch")
    assert (restart.exit_code, restart.stderr) == (
        5, "Failed to restart nosuch.service: Unit nosuch.service not found.\n")
    assert t.run("systemctl disable containerd").stderr == \
        'Removed "/etc/systemd/system/multi-user.target.wants/containerd.service".\n'
    assert t.run("systemctl is-enabled containerd").exit_code == 1
    assert "Created symlink" in t.run("systemctl enable --now containerd").stderr
    assert t.run("systemctl daemon-reload").ok


def test_containerd_restart_fails_with_a_config_it_cannot_read(cluster: Path) -> None:
    t = node(cluster)
    # Debian's packaged config (recorded) is there after install; a valid edit restarts fine.
    t.run("apt-get install -y --reinstall containerd")
    assert t.put("/etc/containerd/config.toml", b'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n').changed
    assert t.run("systemctl restart containerd").ok
    t.put("/etc/containerd/config.toml", b"version = 2\n[plugins\n")
    broken = t.run("systemctl restart containerd")
    assert broken.exit_code == 1
    assert broken.stderr.startswith("Job for containerd.service failed because the control process exited")
    assert t.run("systemctl is-active containerd").stdout == "failed\n"
    t.put("/etc/containerd/config.toml", b"version = 3\n")  # containerd 1.7 reads v2 at most
    assert t.run("systemctl restart containerd").exit_code == 1


def test_kernel_modules_sysctl_and_swap(cluster: Path) -> None:
    t = node(cluster)
    bridge = t.run("sysctl -n net.bridge.bridge-nf-call-iptables")
    assert (bridge.exit_code, bridge.stderr) == (
        1, "sysctl: cannot stat /proc/sys/net/bridge/bridge-nf-call-iptables: No such file or directory\n")
    missing = t.run("modprobe nosuchmod")
    assert missing.stderr == "modprobe: FATAL: Module nosuchmod not found in directory /lib/modules/6.8.0-45-generic\n"
    assert t.run("modprobe br_netfilter").ok
    assert "br_netfilter" in t.run("lsmod").stdout
    t.put("/etc/sysctl.d/99-kubernetes-cri.conf", b"net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\n")
    applied = t.run("sysctl --system")
    assert applied.stdout == ("* Applying /etc/sysctl.d/99-kubernetes-cri.conf ...\n"
                              "net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\n")
    assert t.run("sysctl -n net.ipv4.ip_forward").stdout == "1\n"
    assert t.run("swapon --show").stdout == "NAME      TYPE SIZE USED PRIO\n/swap.img file   8G   0B   -2\n"
    assert t.run("swapoff -a").ok
    assert t.run("swapon --show").stdout == ""


def test_system_tools_refuse_the_options_they_do_not_know(cluster: Path) -> None:
    """An option systemctl, modprobe, sysctl, hostname or apt-mark does not know is refused as the real one refuses
    it (recordings/ran-here-debian12.txt), and nothing is done: they took any option and went on (sysctl prints
    its usage and exits 0; hostname exits 255). The options clusterctl sends still work."""
    t = node(cluster)
    expected = {
        "systemctl --bogus stop containerd": (1, "systemctl: unrecognized option '--bogus'\n"),
        "systemctl -Z stop containerd": (1, "systemctl: invalid option -- 'Z'\n"),
        "modprobe --bogus br_netfilter": (1, "modprobe: unrecognized option '--bogus'\n"),
        "sysctl -Z -w net.ipv4.ip_forward=1": (0, "sysctl: invalid option -- 'Z'\n"),
        "hostname --bogus": (255, "hostname: unrecognized option '--bogus'\n"),
        "apt-mark --bogus hold containerd": (
            100, "E: Command line option --bogus is not understood in combination with the other options\n"),
        "apt-mark -Z hold containerd": (
            100, "E: Command line option 'Z' [from -Z] is not understood in combination with the other options.\n"),
    }
    answered = {line: t.run(line) for line in expected}
    assert {line: (answer.exit_code, answer.stderr) for line, answer in answered.items()} == expected
    assert answered["sysctl -Z -w net.ipv4.ip_forward=1"].stdout.startswith("\nUsage:\n sysctl [options]")
    assert answered["hostname --bogus"].stdout.startswith("Usage: hostname [-b] {hostname|-F file}")
    assert (t.run("systemctl is-active containerd").stdout, t.run("sysctl -n net.ipv4.ip_forward").stdout,
            t.run("apt-mark showhold").stdout) == ("active\n", "0\n", "")
    assert "br_netfilter" not in t.run("lsmod").stdout
    sent = ["systemctl is-active --quiet containerd", "systemctl disable --now containerd",
            "systemctl enable --now containerd", "sysctl -qw net.ipv4.ip_forward=1", "modprobe br_netfilter",
            "modprobe -r br_netfilter", "hostname -s", "apt-mark hold containerd"]
    assert {line: t.run(line).exit_code for line in sent} == dict.fromkeys(sent, 0)
    assert t.run("sysctl -n net.ipv4.ip_forward").stdout == "1\n"


def test_nvidia_ctk_writes_the_drop_in_and_containerd_loads_it(cluster: Path) -> None:
    t = node(cluster)
    assert t.run("nvidia-ctk runtime configure --runtime=containerd").exit_code == 127  # not installed yet
    assert t.run("apt-get install -y nvidia-container-toolkit cri-tools").ok
    configured = t.run("nvidia-ctk runtime configure --runtime=containerd --set-as-default")
    assert configured.ok
    assert "INFO[0000] Wrote updated config to /etc/containerd/conf.d/99-nvidia.toml\n" in configured.stderr
    drop_in = (t.get("/etc/containerd/conf.d/99-nvidia.toml") or b"").decode()
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in drop_in
    assert 'default_runtime_name = "nvidia"' in drop_in
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in (t.get("/etc/containerd/config.toml") or b"").decode()
    assert t.run("systemctl restart containerd").ok
    assert '"defaultRuntimeName": "nvidia"' in t.run("crictl info").stdout
    socket = "unix:///run/containerd/containerd.sock"
    for options in (f"-r {socket}", f"--runtime-endpoint={socket} -t 10s", f"--runtime-endpoint {socket} --timeout 5s"):
        assert '"defaultRuntimeName": "nvidia"' in t.run(f"crictl {options} info").stdout, options
    assert t.run("nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml").ok
    assert "name: all" in (t.get("/etc/cdi/nvidia.yaml") or b"").decode()


def test_profile_rules_win_and_can_fail_one_chosen_step(tmp_path: Path) -> None:
    inventory = write_cluster(tmp_path)
    profile = tmp_path / "profile" / "profile.yaml"
    profile.write_text(profile.read_text().replace("commands:\n", """commands:
  - match: "systemctl restart containerd"
    skip: 1
    times: 1
    exit: 1
    stderr_text: "Job for containerd.service failed because a timeout was exceeded.\\n"
  - match: "dpkg-query -W containerd"
    stdout_text: "containerd\\t2.2.0-1\\n"
  - match: "nvidia-smi -L"
    fail: unreachable
""", 1))
    t = node(inventory)
    assert t.run("dpkg-query -W containerd").stdout == "containerd\t2.2.0-1\n"
    assert t.run("systemctl restart containerd").ok            # 1st: the simulated tool
    assert t.run("systemctl restart containerd").exit_code == 1  # 2nd: the injected failure
    # The count lasts between processes: a resumed run does not fail again.
    assert node(inventory).run("systemctl restart containerd").ok
    with pytest.raises(TransportError) as err:
        t.run("nvidia-smi -L")
    assert err.value.kind is FailureKind.UNREACHABLE


def test_sshd_replay_shares_the_in_process_state(cluster: Path) -> None:
    """The replay that sshd mock hosts run answers from the same state as MockTransport."""
    host = load_inventory(cluster).host("n1")
    t = MockTransport(host)
    t.run(K8S_SOURCE + " && apt-get update && apt-get install -y kubelet=1.30.2-1.1")

    def replay(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clusterctl.mock.replay", "--profile", str(host.profile), "--state-dir",
             str(host.mock_state), "--host", "n1", "--", *argv],
            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
        )

    assert replay("dpkg-query", "-W", "kubelet").stdout == "kubelet\t1.30.2-1.1\n"
    stopped = replay("systemctl", "stop", "containerd")
    assert stopped.returncode == 0
    assert t.run("systemctl is-active containerd").stdout == "inactive\n"
    assert replay("nvidia-smi", "-L").stdout.startswith("GPU 0: NVIDIA H100")
    assert replay("nosuchtool").returncode == 127


def test_containerd_and_dpkg_versions_as_debian_prints_them(cluster: Path) -> None:
    t = node(cluster)
    version = t.run("containerd --version").stdout.split()
    assert version[:2] == ["containerd", "github.com/containerd/containerd"] and version[3] == "1.7.24-0ubuntu1~24.04.2"
    assert t.run("dpkg --print-architecture").stdout == "amd64\n"
    assert t.run("apt-get remove -y containerd").ok
    assert t.run("containerd --version").exit_code == 127


#: The recorded control plane (tests/fixtures/kubeadm-upgrade-plan/README.md): gpu-a1's pods at v1.37.1, kubelets.
KUBELETS = {"gpu-a1": "v1.37.1", "gpu-a2": "v1.37.1", "gpu-a3": "v1.37.2", "gpu-b1": "v1.37.2", "gpu-b2": "v1.37.2",
            "gpu-b3": "v1.37.2"}


@pytest.mark.parametrize(("target", "recorded"), [("v1.37.2", "patch-behind"), ("v1.37.1", "up-to-date"),
                                                  ("v1.39.0", "two-minors-ahead")])
def test_upgrade_plan_prints_what_the_real_kubeadm_printed(tmp_path: Path, target: str, recorded: str) -> None:
    from fixture_files import read_fixture

    from clusterctl.bootstrap.cluster.kubeadm import render_upgrade_config, upgrade_command
    from clusterctl.mock.machine import MockMachine
    from clusterctl.mock.profile import load_profile

    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "profile.yaml").write_text(
        'simulate: true\nmachine:\n  packages:\n    installed: {kubeadm: "1.37.2-1.1"}\n')
    host = MockMachine.open(load_profile(str(tmp_path / "profile")), tmp_path / "state", "gpu-a1")
    init = (b"apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration: {name: gpu-a1}\n---\n"
            b"apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.1\n")
    assert host.run_line("kubeadm init --config /dev/stdin", init).exit_code == 0
    with host.cluster.edit() as data:
        nodes = data["kubernetes"]["nodes"]
        for name, version in KUBELETS.items():
            nodes.setdefault(name, {"control_plane": False, "host": name})["kubelet_version"] = version
    plan = host.run_line(upgrade_command("plan", target), render_upgrade_config("v1.37.2").encode())
    assert (plan.exit_code, plan.stdout) == (0, read_fixture("kubeadm-upgrade-plan",
                                                             f"recorded-kubeadm-1.37.2-{recorded}.txt"))


def _control_plane(tmp_path: Path) -> MockMachine:
    """A simulated host on which ``kubeadm init`` made a one-node cluster (gpu-a1)."""

    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "profile.yaml").write_text(
        'simulate: true\nmachine:\n  packages:\n    installed: {kubeadm: "1.37.2-1.1", kubectl: "1.37.2-1.1"}\n')
    host = MockMachine.open(load_profile(str(tmp_path / "profile")), tmp_path / "state", "gpu-a1")
    init = b"apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration: {name: gpu-a1}\n"
    assert host.run_line("kubeadm init --config /dev/stdin", init).exit_code == 0
    return host


def test_kubectl_names_a_node_either_way_it_is_asked_for(tmp_path: Path) -> None:
    """``kubectl get node/N -o name`` and ``get node N -o name`` print ``node/N`` as the real kubectl does (the
    first said NotFound of a node the cluster has, the second printed the node's JSON); a node it lacks is NotFound
    both ways; ``patch node/N`` patches it."""
    host = _control_plane(tmp_path)
    kubectl = "kubectl --kubeconfig /etc/kubernetes/admin.conf get"
    answers = {words: host.run_line(f"{kubectl} {words} -o name") for words in
               ("node/gpu-a1", "node gpu-a1", "nodes/gpu-a1", "node/gpu-z9", "node gpu-z9")}
    assert {words: (a.exit_code, a.stdout, a.stderr) for words, a in answers.items()} == {
        "node/gpu-a1": (0, "node/gpu-a1\n", ""), "node gpu-a1": (0, "node/gpu-a1\n", ""),
        "nodes/gpu-a1": (0, "node/gpu-a1\n", ""),
        "node/gpu-z9": (1, "", 'Error from server (NotFound): nodes "gpu-z9" not found\n'),
        "node gpu-z9": (1, "", 'Error from server (NotFound): nodes "gpu-z9" not found\n')}
    condition = '{"status": {"conditions": [{"type": "GpuHealthy", "status": "True"}]}}'
    patched = host.run_line(f"kubectl --kubeconfig /etc/kubernetes/admin.conf patch node/gpu-a1 --subresource=status "
                            f"--type=strategic -p '{condition}'")
    assert (patched.exit_code, patched.stdout) == (0, "node/gpu-a1 patched\n")  # it was an unknown command


def test_kubectl_deletes_a_lease_named_either_way(tmp_path: Path) -> None:
    """``kubectl delete lease/N`` deletes the Lease as ``delete lease N`` does (it looked among the applied
    objects and said NotFound); ``--ignore-not-found`` then says nothing of the one gone."""
    host = _control_plane(tmp_path)
    kubectl = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
    lease = b"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: gate, namespace: kube-system}\n"
    for words in ("lease/gate", "lease gate"):
        assert host.run_line(f"{kubectl} create -f -", lease).exit_code == 0
        deleted = host.run_line(f"{kubectl} delete {words} -n kube-system")
        assert (deleted.exit_code, deleted.stdout) == \
            (0, 'lease.coordination.k8s.io "gate" deleted from kube-system namespace\n'), words
    gone = host.run_line(f"{kubectl} delete lease/gate -n kube-system --ignore-not-found")
    assert (gone.exit_code, gone.stdout, gone.stderr) == (0, "", "")


def test_kubectl_gets_every_lease_it_is_named(tmp_path: Path) -> None:
    """``kubectl get lease a bb`` answers both, as the real kubectl 1.37.2 did against a real API server: one table,
    a ``List`` with ``-o json``, and a NotFound line (exit 1) for each name the cluster lacks (it read the first
    name alone and took no notice of the others)."""
    import json

    host = _control_plane(tmp_path)
    kubectl = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
    for name, holder in (("a", "ha"), ("bb", "holder-b")):
        lease = f"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {name}}}\n" \
                f"spec: {{holderIdentity: {holder}}}\n"
        assert host.run_line(f"{kubectl} create -f -", lease.encode()).exit_code == 0
    both = host.run_line(f"{kubectl} get lease a bb")
    assert (both.exit_code, both.stdout, both.stderr) == (0, "NAME   HOLDER\na      ha\nbb     holder-b\n", "")
    missing = 'Error from server (NotFound): leases.coordination.k8s.io "{}" not found\n'.format
    one_gone = host.run_line(f"{kubectl} get lease nosuch a")
    assert (one_gone.exit_code, one_gone.stdout, one_gone.stderr) == \
        (1, "NAME   HOLDER\na      ha\n", missing("nosuch"))
    listed = host.run_line(f"{kubectl} get lease a nosuch bb -o json")
    assert (listed.exit_code, listed.stderr) == (1, missing("nosuch"))
    as_list = json.loads(listed.stdout)
    assert (as_list["kind"], [item["metadata"]["name"] for item in as_list["items"]]) == ("List", ["a", "bb"])
    none = host.run_line(f"{kubectl} get lease nosuch other -o json")
    assert (none.exit_code, json.loads(none.stdout)["items"], none.stderr) == \
        (1, [], missing("nosuch") + missing("other"))
    assert json.loads(host.run_line(f"{kubectl} get lease a -o json").stdout)["kind"] == "Lease"


def test_a_package_the_profile_holds_is_held_for_every_apt_tool(tmp_path: Path) -> None:
    """``machine.packages.held``: apt-mark lists the hold, apt-get keeps to it, and ``apt-mark unhold`` releases it
    (dpkg-query alone saw it, and still did after the unhold)."""
    from clusterctl.mock.machine import MockMachine
    from clusterctl.mock.profile import load_profile

    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "profile.yaml").write_text(
        "simulate: true\nmachine:\n  packages:\n    installed: {kubelet: 1.30.1-1.1}\n    held: [kubelet]\n"
        "    repository: {kubelet: [1.30.1-1.1, 1.30.2-1.1]}\n")
    host = MockMachine.open(load_profile(str(tmp_path / "profile")), tmp_path / "state", "n1")
    assert host.run_line("apt-mark showhold").stdout == "kubelet\n"
    upgrade = host.run_line("apt-get install -y kubelet=1.30.2-1.1")
    assert (upgrade.exit_code, upgrade.stderr) == (
        100, "E: Held packages were changed and -y was used without --allow-change-held-packages.\n")
    assert host.run_line("apt-mark unhold kubelet").stdout == "Canceled hold on kubelet.\n"
    assert host.run_line("dpkg-query -W -f '${db:Status-Abbrev}' kubelet").stdout == "ii "
