"""``reset`` decides what bootstrap made from bootstrap's own undo journals (``<state dir>/undo/``).

On the demo's mock hosts, as a user runs it: bootstrap two hosts, then a user adds files of their
own, edits one file bootstrap created and one it changed; reset removes and restores only what the
journals say bootstrap wrote and still holds what it wrote, lists the rest, lists the packages
bootstrap installed (``--purge-packages`` purges those, no other), marks the journals used, and
falls back to known names, saying so, where no journal names a host. The real-shell half (rm, the
restore through the transport, rmdir, over sshd) is in test_reset_safety.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from clirun import CliRun, clusterctl

from clusterctl.bootstrap.reset_journals import bootstrap_journals
from clusterctl.changes import Change, GateRecord
from clusterctl.undo_journal import WriteAheadJournal

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "inventories" / "demo.yaml")
SURVEY = str(REPO / "tests" / "bootstrap_cluster" / "fixtures" / "demo-survey.json")
HOSTS = "gpu-a1,gpu-b1"
VALUES = "/etc/kubernetes/clusterctl/helm/dcgm-exporter.values.yaml"


def _tree(host: str) -> Path:
    (folder,) = Path(os.environ["CLUSTERCTL_MOCK_STATE"]).glob(f"demo-*/hosts/{host}/fs")
    return folder


def _file(host: str, path: str) -> Path:
    return _tree(host) / path.lstrip("/")


def _reset(state: Path, *args: str) -> CliRun:
    return clusterctl("-i", DEMO, "-l", HOSTS, "-o", "json", "reset", "--state-dir", state, *args)


def _changes(run: CliRun) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for result in json.loads(run.stdout)["results"]:
        out.setdefault(result["host"], []).extend(result["changes"])
    return out


def _findings(run: CliRun, code: str) -> dict[str, str]:
    return {r["host"]: f["message"] for r in json.loads(run.stdout)["results"] for f in r["findings"]
            if f["code"] == code}


def _touches(changes: list[dict[str, Any]], text: str) -> bool:
    return any(text in (c.get("command") or c.get("path") or "") for c in changes)


def test_reset_takes_back_what_the_journals_say_lists_the_rest_and_marks_them_used(tmp_path: Path) -> None:
    state = tmp_path / "state"
    fresh_fstab = _seeded_fstab()
    ran = clusterctl("-i", DEMO, "-l", HOSTS, "bootstrap", "--yes", "--survey", SURVEY, "--state-dir", state)
    assert ran.exit_code == 0, ran.output
    (journal,) = (state / "undo").glob("bootstrap-*.json")
    # What a user did since: their own CNI file and etcd data on the worker, a hand edit of a file
    # bootstrap created (gpu-a1) and of one it changed (gpu-b1's fstab).
    _file("gpu-b1", "/etc/cni/net.d/99-user.conflist").write_text('{"name": "mine"}\n')
    _file("gpu-b1", "/var/lib/etcd/member/db").parent.mkdir(parents=True)
    _file("gpu-b1", "/var/lib/etcd/member/db").write_text("someone else's etcd\n")
    with _file("gpu-a1", VALUES).open("a") as values:
        values.write("# tuned by hand\n")
    with _file("gpu-b1", "/etc/fstab").open("a") as fstab:
        fstab.write("/dev/sdb1 /data ext4 defaults 0 2\n")

    planned = _reset(state, "--dry-run")
    assert planned.exit_code == 0, planned.output
    plan = _changes(planned)
    for host in ("gpu-a1", "gpu-b1"):
        assert _touches(plan[host], "kubeadm reset")  # bootstrap's kubeadm init/join made them nodes
        assert _touches(plan[host], "/etc/cni/net.d/10-calico.conflist")  # the CNI bootstrap installed
        assert _touches(plan[host], "/etc/modules-load.d/clusterctl-kubernetes.conf")
    assert not _touches(plan["gpu-b1"], "99-user") and not _touches(plan["gpu-b1"], "/var/lib/etcd")
    assert _touches(plan["gpu-a1"], "rm -rf /var/lib/etcd")  # the etcd member bootstrap's kubeadm init made
    # kubeadm's own reset would empty a worker's /var/lib/etcd too (its remove-etcd-member phase):
    # the ResetConfiguration skips that phase there (and the simulated kubeadm honours skipPhases).
    kubeadm = {h: next(c["summary"] for c in plan[h] if "kubeadm reset" in c.get("command", "")) for h in plan}
    assert "etcd data left alone" in kubeadm["gpu-b1"] and "etcd data left alone" not in kubeadm["gpu-a1"]
    assert not _touches(plan["gpu-a1"], VALUES) and not _touches(plan["gpu-b1"], "/etc/fstab")
    assert not any("known names" in c["summary"] for c in plan["gpu-a1"] + plan["gpu-b1"])
    kept = _findings(planned, "RESET_KEPT_CHANGED")
    assert VALUES in kept["gpu-a1"] and "/etc/fstab" in kept["gpu-b1"]
    left = _findings(planned, "RESET_LEFT_IN_PLACE")
    assert "/etc/cni/net.d/99-user.conflist" in left["gpu-b1"] and "/var/lib/etcd" in left["gpu-b1"]
    assert "kubeadm" in _findings(planned, "RESET_PACKAGES_KEPT")["gpu-b1"]
    assert "used" not in json.loads(journal.read_text())  # a dry run marks nothing

    done = _reset(state, "--yes")
    assert done.exit_code == 0, done.output
    assert not _file("gpu-a1", "/etc/kubernetes/clusterctl/kubeadm-config.yaml").exists()
    assert not _file("gpu-b1", "/etc/cni/net.d/10-calico.conflist").exists()
    assert _file("gpu-a1", "/etc/fstab").read_text() == fresh_fstab  # restored from the gate's backup
    assert "# tuned by hand" in _file("gpu-a1", VALUES).read_text()
    assert _file("gpu-b1", "/etc/cni/net.d/99-user.conflist").exists()
    assert _file("gpu-b1", "/var/lib/etcd/member/db").exists()
    assert "/data" in _file("gpu-b1", "/etc/fstab").read_text()
    # Both hosts kept a changed file: their journal stays unused, so that --force can still use it.
    assert "used" not in json.loads(journal.read_text())

    forced = _reset(state, "--yes", "--force", "--purge-packages")
    assert forced.exit_code == 0, forced.output
    assert not _file("gpu-a1", VALUES).exists()
    assert _file("gpu-b1", "/etc/fstab").read_text() == fresh_fstab
    assert not _file("gpu-b1", "/etc/cni/net.d/99-user.conflist").exists()
    purge = [c["command"] for c in _changes(forced)["gpu-b1"] if "apt-get purge" in c.get("command", "")]
    assert len(purge) == 1 and "kubeadm" in purge[0] and "nvidia-container-toolkit" not in purge[0]
    listed = clusterctl("-i", DEMO, "-l", "gpu-b1", "-o", "json", "exec", "--",
                        "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' kubeadm nvidia-container-toolkit")
    status = json.loads(listed.stdout)["hosts"][0]["stdout"]
    assert "nvidia-container-toolkit ii" in status and "kubeadm ii" not in status  # only bootstrap's purged
    assert set(json.loads(journal.read_text())["used"]) == {"gpu-a1", "gpu-b1"}
    again = _reset(state, "--yes")
    assert again.exit_code == 0 and not json.loads(again.stdout)["changed"], again.output


def test_purge_packages_after_a_reset_purges_what_it_listed(tmp_path: Path) -> None:
    """A reset lists the packages bootstrap installed and says to rerun with --purge-packages: that
    rerun purges them, though the first reset marked the journals used."""
    state = tmp_path / "state"
    ran = clusterctl("-i", DEMO, "-l", "gpu-b1", "bootstrap", "phase", "packages", "--yes", "--state-dir", state)
    assert ran.exit_code == 0, ran.output
    common = ("-i", DEMO, "-l", "gpu-b1", "-o", "json", "reset", "--yes", "--state-dir", state)
    done = clusterctl(*common)
    assert done.exit_code == 0, done.output
    assert "--purge-packages" in json.dumps(json.loads(done.stdout)["results"])
    assert "kubeadm" in _findings(done, "RESET_PACKAGES_KEPT")["gpu-b1"]
    purged = clusterctl(*common, "--purge-packages")
    assert purged.exit_code == 0, purged.output
    assert _touches(_changes(purged)["gpu-b1"], "apt-get purge"), purged.output
    again = clusterctl(*common, "--purge-packages")
    assert again.exit_code == 0 and not json.loads(again.stdout)["changed"], again.output


def _folders(host: str) -> set[str]:
    tree = _tree(host)
    return {"/" + str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_dir() and not p.is_symlink()}


def _mirrored_demo(tmp_path: Path) -> Path:
    """The demo's inventory with a registry mirror (containerd's certs.d/<registry>/hosts.toml)."""
    inventory = tmp_path / "demo.yaml"
    inventory.write_text(Path(DEMO).read_text().replace("profile: demo/", f"profile: {Path(DEMO).parent}/demo/")
                         + 'bootstrap:\n  registry_mirrors:\n    registry.k8s.io: ["https://mirror.site:5000"]\n')
    return inventory


def test_undo_removes_the_folders_the_run_made(tmp_path: Path) -> None:
    common = ("-i", _mirrored_demo(tmp_path), "-l", "gpu-b1")
    state = tmp_path / "state"
    assert clusterctl(*common, "bootstrap", "phase", "packages", "--yes", "--state-dir", state).exit_code == 0
    before = _folders("gpu-b1")
    ran = clusterctl(*common, "-o", "json", "bootstrap", "phase", "containerd", "--yes", "--state-dir", state)
    assert ran.exit_code == 0, ran.output
    assert "/etc/containerd/certs.d/registry.k8s.io" in _folders("gpu-b1") - before
    undone = clusterctl(*common, "undo", json.loads(ran.stdout)["undo_journal"], "--yes")
    assert undone.exit_code == 0, undone.output
    assert "undid 'create /etc/containerd, /etc/containerd/certs.d, /etc/containerd/certs.d/registry.k8s.io'" \
        in undone.stdout
    assert _folders("gpu-b1") == before


def test_reset_removes_the_folders_bootstrap_made_and_keeps_those_that_were_there(tmp_path: Path) -> None:
    """Every folder bootstrap makes (containerd's certs.d, NFD's features.d, the node agent's, clusterctl's,
    with their parents) is journalled as made, and reset removes it once empty; a folder that was there
    before (here gpu-b1's certs.d and NFD folder, empty) stays."""
    common = ("-i", _mirrored_demo(tmp_path), "-l", HOSTS)
    assert clusterctl(*common, "exec", "true").exit_code == 0  # the mock hosts are made
    for kept in ("/etc/containerd/certs.d", "/etc/kubernetes/node-feature-discovery"):
        _file("gpu-b1", kept).mkdir(parents=True)
    before = {h: _folders(h) for h in ("gpu-a1", "gpu-b1")}
    ran = clusterctl(*common, "bootstrap", "--yes", "--survey", SURVEY, "--state-dir", tmp_path / "state")
    assert ran.exit_code == 0, ran.output
    made = _folders("gpu-a1") - before["gpu-a1"]
    assert {"/etc/containerd/certs.d/registry.k8s.io", "/etc/kubernetes/node-feature-discovery/features.d",
            "/usr/local/lib/clusterctl", "/etc/kubernetes/clusterctl/helm"} <= made

    done = clusterctl(*common, "-o", "json", "reset", "--yes", "--state-dir", tmp_path / "state")
    assert done.exit_code == 0, done.output
    # What stays was not made by a folder change of bootstrap's: the CNI's folder (its DaemonSet),
    # kubeadm's (kubeadm reset empties them and keeps them), and /etc/kubernetes, which bootstrap made on
    # gpu-a1 before kubeadm init and which holds kubeadm's folders: listed. The host lock's folder, made
    # by the lock outside the journal, went with the lock of the run that made it.
    others = ("/etc/cni", "/etc/kubernetes/manifests", "/etc/kubernetes/pki")
    left = {h: {f for f in _folders(h) - before[h] if not f.startswith(others)} for h in before}
    assert left == {"gpu-a1": {"/etc/kubernetes"}, "gpu-b1": set()}, left
    said = _findings(done, "RESET_LEFT_IN_PLACE")["gpu-a1"]
    # The finding's head must not contradict its item: bootstrap made the folder, others' files keep it.
    assert "/etc/kubernetes (bootstrap made it" in said and "not made by clusterctl bootstrap" not in said
    assert before["gpu-b1"] <= _folders("gpu-b1")  # nothing that was there before is gone


def _seeded_fstab() -> str:
    """gpu-a1's /etc/fstab before bootstrap (reading it creates the mock host)."""
    seen = clusterctl("-i", DEMO, "-l", HOSTS, "exec", "true")
    assert seen.exit_code == 0, seen.output
    return _file("gpu-a1", "/etc/fstab").read_text()


def test_without_a_journal_reset_says_so_and_marks_its_known_name_choices_in_the_plan(tmp_path: Path) -> None:
    ran = clusterctl("-i", DEMO, "-l", "gpu-b1", "bootstrap", "--yes", "--skip-phases",
                     "network,gpu-addons,topology-labels,alert-rules,verify,join", "--state-dir", tmp_path / "a")
    assert ran.exit_code == 0, ran.output
    _file("gpu-b1", "/etc/cni/net.d").mkdir(parents=True, exist_ok=True)
    _file("gpu-b1", "/etc/cni/net.d/10-flannel.conflist").write_text("{}\n")
    # Another state folder: as a cluster bootstrapped by an older clusterctl, which kept no journal.
    planned = clusterctl("-i", DEMO, "-l", "gpu-b1", "-o", "json", "reset", "--dry-run", "--state-dir", tmp_path / "b")
    assert planned.exit_code == 0, planned.output
    assert "no undo journal" in _findings(planned, "RESET_NO_JOURNAL")["gpu-b1"]
    (changes,) = _changes(planned).values()
    assert changes and all(c["summary"].endswith("(known names: no journal)") for c in changes)
    text = clusterctl("-i", DEMO, "-l", "gpu-b1", "reset", "--dry-run", "--state-dir", tmp_path / "b")
    assert "rm -f /etc/cni/net.d/10-flannel.conflist   # (known names: no journal)" in text.stdout
    # With the journal bootstrap wrote, the same file is not bootstrap's: this host never joined a
    # cluster whose CNI bootstrap installed.
    journaled = clusterctl("-i", DEMO, "-l", "gpu-b1", "-o", "json", "reset", "--dry-run", "--state-dir",
                           tmp_path / "a")
    assert "10-flannel.conflist" in _findings(journaled, "RESET_LEFT_IN_PLACE")["gpu-b1"]
    assert "RESET_NO_JOURNAL" not in journaled.stdout


def _journal(folder: Path, *, cluster: str, fleet: str | None, now: float) -> Path:
    change = Change.write_file("node1", "/etc/x.conf", "x\n", current=None)
    record = GateRecord(change, applied=True, changed=True)
    journal = WriteAheadJournal(command="bootstrap", folder=folder, now=now, cluster=cluster, fleet=fleet)
    journal.after(journal.before(change), record)
    path = journal.finish([record])
    assert path is not None
    return path


def test_only_this_fleets_journals_count_and_a_broken_one_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "undo"
    ours = _journal(folder, cluster="demo", fleet="abc", now=1_700_000_000)
    _journal(folder, cluster="demo", fleet="another-checkout", now=1_700_000_100)
    _journal(folder, cluster="other", fleet="abc", now=1_700_000_200)
    old = _journal(folder, cluster="demo", fleet="abc", now=1_700_000_300)
    data = json.loads(old.read_text())
    data.update(version=1)
    data.pop("fleet")
    old.write_text(json.dumps(data))  # as an older clusterctl wrote it: no fleet, no makes
    (folder / "bootstrap-20261201-000000.json").write_text("{not json")
    found = bootstrap_journals(folder, cluster="demo", fleet="abc")
    assert [j.path for j in found.hosts["node1"]] == [str(ours)]
    assert list(found.unreadable) == [str(folder / "bootstrap-20261201-000000.json")]
