"""``reset`` over isolated sshd hosts (private /etc and /var/lib): it removes what bootstrap made,
lists and keeps what it did not (unless --force), and --restore-containerd restores from the
gate's own backup names and says what it did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import CliRun, run_clusterctl
from sshd_hosts import SSHDHost, SSHDHosts

from clusterctl.bootstrap.phases.reset import first_containerd_backup

pytestmark = [pytest.mark.sshd, pytest.mark.usefixtures("needs_isolation")]

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "inventories" / "demo" / "profiles" / "dgx-a100"


def test_the_first_backup_is_found_by_the_gates_own_names() -> None:
    names = ["config.toml", "config.toml.bak.20261201120000.Xy12Ab", "config.toml.bak.20261130090000.q9Zk3P",
             "config.toml.bak.old"]
    assert first_containerd_backup(names) == "/etc/containerd/config.toml.bak.20261130090000.q9Zk3P"


def _worker(sshd_hosts: SSHDHosts, tmp_path: Path) -> tuple[SSHDHost, list[str]]:
    (host,) = sshd_hosts(1, profile=PROFILE, names=["node1"], isolated=True)
    inventory, known = sshd_hosts.write_client_files(tmp_path, [host], {"node1": {"roles": ["worker"]}})
    return host, ["-i", str(inventory), "--known-hosts", str(known)]


def _findings(run: CliRun, code: str) -> list[dict[str, object]]:
    return [f for r in json.loads(run.stdout)["results"] for f in r["findings"] if f["code"] == code]


def _reset(common: list[str], tmp_path: Path, *args: str) -> CliRun:
    return run_clusterctl([*common, "-o", "json", "reset", "--yes", "--state-dir", str(tmp_path / "state"), *args],
                          home=tmp_path / "home", timeout_s=180)


def test_reset_keeps_and_lists_what_bootstrap_did_not_make_and_force_removes_it(
    sshd_hosts: SSHDHosts, tmp_path: Path
) -> None:
    host, common = _worker(sshd_hosts, tmp_path)
    net = host.tree / "etc" / "cni" / "net.d"
    net.mkdir(parents=True, exist_ok=True)
    (net / "10-calico.conflist").write_text('{"name": "k8s-pod-network"}\n')
    (net / "99-user.conflist").write_text('{"name": "mine"}\n')
    etcd = host.tree / "var" / "lib" / "etcd" / "member"
    etcd.mkdir(parents=True)
    (etcd / "db").write_text("a user's data\n")

    run = _reset(common, tmp_path)

    assert run.exit_code == 0, run.output
    assert not (net / "10-calico.conflist").exists()
    assert (net / "99-user.conflist").read_text() == '{"name": "mine"}\n'
    assert (etcd / "db").exists()  # a worker: bootstrap never made etcd data here
    left = _findings(run, "RESET_LEFT_IN_PLACE")
    assert len(left) == 1 and "/etc/cni/net.d/99-user.conflist" in str(left[0]["message"])
    assert "/var/lib/etcd" in str(left[0]["message"]) and "--force" in str(left[0]["fix"])

    forced = _reset(common, tmp_path, "--force")
    assert forced.exit_code == 0, forced.output
    assert not (net / "99-user.conflist").exists() and not (etcd / "db").exists()


def test_restore_containerd_uses_the_first_gate_backup_and_says_so(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    host, common = _worker(sshd_hosts, tmp_path)
    folder = host.tree / "etc" / "containerd"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text("version = 2 # written by clusterctl\n")

    nothing = _reset(common, tmp_path, "--restore-containerd")
    assert nothing.exit_code == 0, nothing.output
    said = _findings(nothing, "CONTAINERD_NOT_RESTORED")
    assert said and "nothing to restore" in str(said[0]["message"])

    (folder / "config.toml.bak.20261130090000.q9Zk3P").write_text("# the distribution's own config\n")
    (folder / "config.toml.bak.20261201120000.Xy12Ab").write_text("version = 2 # an earlier clusterctl run\n")
    run = _reset(common, tmp_path, "--restore-containerd")
    assert run.exit_code == 0, run.output
    assert (folder / "config.toml").read_text() == "# the distribution's own config\n"
    summaries = [c["summary"] for r in json.loads(run.stdout)["results"] for c in r["changes"]]
    assert any("config.toml.bak.20261130090000.q9Zk3P" in s for s in summaries)


def test_reset_over_sshd_takes_back_what_the_journal_says_and_keeps_a_file_edited_since(
    sshd_hosts: SSHDHosts, tmp_path: Path
) -> None:
    """The real shell's half of tests/faults/test_reset_from_journals.py: rm, the restore through the
    transport (ssh), rmdir, on the host's private /etc."""
    host, common = _worker(sshd_hosts, tmp_path)
    etc = host.tree / "etc"
    (etc / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
    (etc / "cni" / "net.d" / "99-user.conflist").write_text('{"name": "mine"}\n')
    fstab_before = (etc / "fstab").read_bytes() if (etc / "fstab").exists() else None
    state = ["--state-dir", str(tmp_path / "state")]
    ran = run_clusterctl([*common, "bootstrap", "phase", "kernel", "--yes", *state], home=tmp_path / "home",
                         timeout_s=180)
    assert ran.exit_code == 0, ran.output
    modules = etc / "modules-load.d" / "clusterctl-kubernetes.conf"
    sysctls = etc / "sysctl.d" / "99-clusterctl-kubernetes.conf"
    assert modules.exists() and sysctls.exists()
    with sysctls.open("a") as edited:
        edited.write("vm.swappiness = 1\n")  # a hand edit since bootstrap wrote it

    run = _reset(common, tmp_path)
    assert run.exit_code == 0, run.output
    assert not modules.exists()  # bootstrap made it, and it holds what bootstrap wrote
    assert "vm.swappiness = 1" in sysctls.read_text()  # changed since: kept, and said so
    kept = _findings(run, "RESET_KEPT_CHANGED")
    assert kept and str(sysctls.relative_to(host.tree)) in str(kept[0]["message"]).replace("/etc", "etc")
    assert not _findings(run, "RESET_NO_JOURNAL")
    if fstab_before is not None:
        assert (etc / "fstab").read_bytes() == fstab_before  # restored from the gate's backup over ssh
    assert (etc / "cni" / "net.d" / "99-user.conflist").exists()
    assert "/etc/cni/net.d/99-user.conflist" in str(_findings(run, "RESET_LEFT_IN_PLACE")[0]["message"])

    forced = _reset(common, tmp_path, "--force")
    assert forced.exit_code == 0, forced.output
    assert not sysctls.exists()
    (journal,) = (tmp_path / "state" / "undo").glob("bootstrap-phase-kernel-*.json")
    assert list(json.loads(journal.read_text())["used"]) == ["node1"]
