"""What one clusterctl process does to a mock host is there for the next; `mock reset` forgets it."""

from __future__ import annotations

import json
from pathlib import Path

from conftest_mock import clusterctl, write_cluster

from clusterctl.inventory.loader import load_inventory
from clusterctl.mock.transport import MockTransport


def test_a_file_written_in_one_process_is_read_by_the_next(cluster: Path) -> None:
    wrote = clusterctl(cluster, "-l", "n1", "exec", "--", "echo 'NCCL_DEBUG=WARN' > /etc/nccl.conf")
    assert wrote.returncode == 0, wrote.stderr
    read = clusterctl(cluster, "-o", "json", "exec", "--", "cat /etc/nccl.conf")
    by_host = {r["host"]: r for r in json.loads(read.stdout)["hosts"]}
    assert by_host["n1"]["stdout"] == "NCCL_DEBUG=WARN\n"
    # The other host is another machine: the file is not there.
    assert by_host["n2"]["exit_code"] == 1
    assert "No such file or directory" in by_host["n2"]["stderr"]


def test_put_and_get_agree_with_the_shell_across_processes(cluster: Path) -> None:
    host = load_inventory(cluster).host("n1")
    with MockTransport(host) as t:
        assert t.put("/etc/profile.d/nccl.sh", b"export NCCL_IB_HCA=mlx5\n").changed
    later = MockTransport(load_inventory(cluster).host("n1"))
    assert later.run("test -f /etc/profile.d/nccl.sh && cat /etc/profile.d/nccl.sh").stdout == \
        "export NCCL_IB_HCA=mlx5\n"
    later.run("echo more >> /etc/profile.d/nccl.sh")
    assert later.get("/etc/profile.d/nccl.sh") == b"export NCCL_IB_HCA=mlx5\nmore\n"
    # A file in a folder that does not exist fails as it would over ssh.
    assert later.run("echo x > /etc/nope/x").exit_code == 2


def test_service_restart_and_pinned_package_are_remembered(cluster: Path) -> None:
    setup = ("echo 'deb https://pkgs.k8s.io/core:/stable:/v1.30/deb/ /' > /etc/apt/sources.list.d/kubernetes.list"
             " && apt-get update && apt-get install -y kubeadm=1.30.1-1.1 && apt-mark hold kubeadm"
             " && systemctl stop containerd")
    first = clusterctl(cluster, "-l", "n1", "exec", "--", setup)
    assert first.returncode == 0, first.stdout + first.stderr
    check = clusterctl(cluster, "-l", "n1", "-o", "json", "exec", "--",
                       "dpkg-query -W kubeadm; apt-mark showhold; systemctl is-active containerd")
    assert json.loads(check.stdout)["hosts"][0]["stdout"] == "kubeadm\t1.30.1-1.1\nkubeadm\ninactive\n"
    clusterctl(cluster, "-l", "n1", "exec", "--", "systemctl restart containerd")
    again = clusterctl(cluster, "-l", "n1", "exec", "--", "systemctl is-active containerd")
    assert again.returncode == 0 and "active" in again.stdout


def test_mock_reset_forgets_a_host_or_the_whole_cluster(cluster: Path) -> None:
    clusterctl(cluster, "exec", "--", "touch /root/marker")
    one = clusterctl(cluster, "-l", "n1", "mock", "reset")
    assert one.returncode == 0 and "hosts/n1" in one.stdout
    after = json.loads(clusterctl(cluster, "-o", "json", "exec", "--", "test -e /root/marker").stdout)
    assert {r["host"]: r["exit_code"] for r in after["hosts"]} == {"n1": 1, "n2": 0}
    everything = clusterctl(cluster, "mock", "reset")
    assert everything.returncode == 0
    gone = json.loads(clusterctl(cluster, "-o", "json", "exec", "--", "test -e /root/marker").stdout)
    assert {r["host"]: r["exit_code"] for r in gone["hosts"]} == {"n1": 1, "n2": 1}


def test_state_folder_from_the_inventory_or_the_environment(tmp_path: Path, _private_mock_state: Path) -> None:
    pinned = write_cluster(tmp_path / "a", mock_state="../state-here")
    assert load_inventory(pinned).host("n1").mock_state == str((tmp_path / "state-here").resolve())
    default = write_cluster(tmp_path / "b")
    folder = Path(str(load_inventory(default).host("n1").mock_state))
    # Under $CLUSTERCTL_MOCK_STATE, named after the cluster: never beside the inventory.
    assert folder.parent == _private_mock_state and folder.name.startswith("lab-")
    shown = json.loads(clusterctl(default, "-o", "json", "mock", "show").stdout)
    assert [h["folder"] for h in shown["hosts"]] == [str(folder / "hosts" / "n1"), str(folder / "hosts" / "n2")]


def test_an_empty_mock_state_is_no_setting_in_either_format(tmp_path: Path, _private_mock_state: Path) -> None:
    # An empty 'mock_state:' in clusterctl's format kept the state in the inventory's own folder (a checkout),
    # while an empty clusterctl_mock_state in an Ansible inventory meant the default, as it does now in both.
    native = write_cluster(tmp_path / "a", mock_state='""')
    ini = tmp_path / "b" / "hosts.ini"
    ini.parent.mkdir()
    ini.write_text(f"[lab]\nn1 clusterctl_transport=mock clusterctl_profile={tmp_path / 'a' / 'profile'} "
                   "clusterctl_mock_state=''\n")
    for inventory in (native, ini):
        assert Path(str(load_inventory(inventory).host("n1").mock_state)).parent == _private_mock_state


def test_each_mock_command_reports_in_json_when_no_selected_host_is_a_mock_host() -> None:
    """A script reading ``-o json`` gets a report from every ``mock`` command, and the warning on stderr, when the
    selected hosts are no mock hosts (``mock reset`` printed nothing on stdout)."""
    plain = Path("a,b,")  # a host list: ssh hosts
    for command, report in ((("show",), {"hosts": []}), (("reset",), {"removed": []}),
                            (("set", "x=1"), {"hosts": [], "values": {"x": "1"}}), (("timers",), {"runs": []})):
        done = clusterctl(plain, "-o", "json", "mock", *command)
        assert (done.returncode, json.loads(done.stdout or "null")) == (0, report), command
    said = clusterctl(plain, "mock", "reset")
    assert (said.returncode, said.stdout, said.stderr) == \
        (0, "", "warning: no mock hosts among the selected hosts: nothing to reset\n")
