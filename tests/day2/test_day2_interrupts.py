"""Ctrl-C and SIGTERM at every step of a day-2 command on the demo mock cluster: the cluster is either
put back at once, or left with an undo journal that ``clusterctl undo`` (after SIGINT: the manifests back,
the renewed certificates named as staying, exit 1) or the command's ``--resume`` (after SIGTERM)
completes. Never a control-plane manifest left out of place.
``upgrade apply``, whose packages and ``kubeadm upgrade`` cannot be taken back, is completed by
``upgrade apply --resume`` after either signal, with its journal named every time."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path

import pytest
from clirun import clusterctl
from day2_helpers import DEMO, mock_cluster_folder
from interrupts import Cut, at_every, every_signal, interrupted

from clusterctl.day2.certs import COMPONENTS, MANIFESTS_DIR

CERTS_STEPS = [Cut("renew", "kubeadm certs renew all")] + [
    cut for index, component in enumerate(COMPONENTS, 1) for cut in (
        Cut(f"{component} out", f"mv {MANIFESTS_DIR}/{component}.yaml"),
        Cut(f"{component} kubelet wait", "sleep ", index),
        Cut(f"{component} back", f"{component}.yaml {MANIFESTS_DIR}/{component}.yaml"))
] + [Cut("api-ready", "get --raw /readyz"),
      # The first read of the certificates is the one before anything changes (no cluster: exit 2).
      Cut("certificates read before", "check-expiration"), Cut("certificates read again", "check-expiration", 2)]


def _in_place(state: Path) -> set[str]:
    folder = mock_cluster_folder(state) / "hosts" / "gpu-a1" / "fs" / MANIFESTS_DIR.lstrip("/")
    return {p.name.removesuffix(".yaml") for p in folder.glob("*.yaml")}


def _journals(state_dir: Path) -> list[Path]:
    return sorted((state_dir / "undo").glob("certs-renew-*.json"))


@every_signal
@at_every(CERTS_STEPS)
def test_certs_renew_interrupted_at_every_step(cut: Cut, sig: signal.Signals, bootstrapped_demo: Path,
                                               state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _in_place(bootstrapped_demo) == set(COMPONENTS)
    cut_short = interrupted(monkeypatch, cut, sig, "-i", DEMO, "certs", "renew", "--yes", "--restart-wait", "1")
    if cut.step == "certificates read before":  # nothing changed yet: nothing to undo or resume
        assert _journals(state_dir) == [] and _in_place(bootstrapped_demo) == set(COMPONENTS)
        return
    # Something changed from the first step on: there is a journal, and the interrupt names it.
    (journal,) = _journals(state_dir)
    assert cut_short.stderr.count(f"clusterctl undo {journal}") == 1, cut_short.stderr  # named once
    assert "certs renew --restart-wait 1 --resume --yes" in cut_short.stderr
    if sig is signal.SIGINT:
        undone = clusterctl("-i", DEMO, "undo", str(journal), "--yes")
        # The manifests go back; the certificates stay renewed, which undo names, exiting 1 (not a whole undo).
        assert undone.exit_code == 1, undone.output
        assert "gpu-a1: cannot undo 'kubeadm certs renew all': kubeadm keeps no copy of the certificates it " \
            "replaces: they stay renewed" in undone.output
    else:
        resumed = clusterctl("-i", DEMO, "-o", "json", "certs", "renew", "--resume", "--yes", "--restart-wait", "1")
        assert resumed.exit_code == 0, resumed.output
        assert resumed.json()["hosts"][0]["soonest_days_left"] >= 364
    assert _in_place(bootstrapped_demo) == set(COMPONENTS)
    checked = clusterctl("-i", DEMO, "certs", "check")
    assert checked.exit_code == 0, checked.output


def test_an_interrupted_renew_of_some_control_planes_goes_on_with_those(bootstrapped_demo: Path, state_dir: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The line that goes on after an interrupt names the run's hosts and the phases it left out: it said
    'certs renew --resume --yes', which renewed every control plane of the inventory and restarted what
    --skip-phases had left alone."""
    cut_short = interrupted(monkeypatch, Cut("renew", "kubeadm certs renew all"), signal.SIGINT, "-i", DEMO, "-l",
                            "gpu-a1", "certs", "renew", "--skip-phases", "restart-etcd", "--yes", "--restart-wait", "1")
    goes_on = f"clusterctl -i {DEMO} -l gpu-a1 certs renew --restart-wait 1 --skip-phases restart-etcd --resume --yes"
    assert f"to go on where it stopped: {goes_on}" in cut_short.stderr, cut_short.stderr
    resumed = clusterctl("-o", "json", *goes_on.split()[1:])
    assert resumed.exit_code == 0, resumed.output
    assert "restart-etcd" not in resumed.json()["run"]["phases"]


def test_certs_check_names_a_manifest_left_out_of_place(bootstrapped_demo: Path) -> None:
    moved = clusterctl("-i", DEMO, "-l", "gpu-a1", "exec", "--sudo", "--",
                       "mkdir -p /etc/kubernetes/clusterctl/restart && mv /etc/kubernetes/manifests/etcd.yaml "
                       "/etc/kubernetes/clusterctl/restart/etcd.yaml && "
                       "rm /etc/kubernetes/manifests/kube-scheduler.yaml")
    assert moved.exit_code == 0, moved.output
    checked = clusterctl("-i", DEMO, "-o", "json", "certs", "check")
    assert checked.exit_code == 1, checked.output
    codes = {f["code"]: f["message"] for f in checked.json()["findings"]}
    assert "etcd.yaml is not in /etc/kubernetes/manifests but in /etc/kubernetes/clusterctl/restart" in \
        codes["CONTROL_PLANE_MANIFEST_PARKED"]
    assert "kube-scheduler.yaml is missing" in codes["CONTROL_PLANE_MANIFEST_MISSING"]
    # Each names its component as its subject (a restart reads back its own by it, not by its message's words).
    assert {f["code"]: f["subject"] for f in checked.json()["findings"]} == {
        "CONTROL_PLANE_MANIFEST_PARKED": "etcd", "CONTROL_PLANE_MANIFEST_MISSING": "kube-scheduler"}
    # --resume puts the parked one back; the one gone altogether stops the renew before anything changes.
    resumed = clusterctl("-i", DEMO, "certs", "renew", "--yes", "--restart-wait", "1")
    assert resumed.exit_code == 1 and "kube-scheduler.yaml is missing" in resumed.output


QUARANTINE_STEPS = [Cut("taint", "taint nodes gpu-b2"), Cut("cordon", "cordon gpu-b2"),
                    Cut("annotate", "annotate --overwrite node gpu-b2"),
                    Cut("drain: list the pods", "spec.nodeName=gpu-b2")]


def _node(name: str) -> dict[str, object]:
    import json

    done = clusterctl("-i", DEMO, "-l", "gpu-a1", "-o", "json", "exec", "--sudo", "--",
                      f"kubectl --kubeconfig /etc/kubernetes/admin.conf get node {name} -o json")
    assert done.exit_code == 0, done.output
    node: dict[str, object] = json.loads(done.json()["hosts"][0]["stdout"])
    return node


@every_signal
@at_every(QUARANTINE_STEPS)
def test_quarantine_drain_interrupted_at_every_step(cut: Cut, sig: signal.Signals, bootstrapped_demo: Path,
                                                    state_dir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A node is never left tainted or cordoned without a journal: each change is in it before it is made,
    and the interrupt names it; undo puts the node back as it was."""
    monkeypatch.chdir(tmp_path)
    as_it_was = _node("gpu-b2")
    cut_short = interrupted(monkeypatch, cut, sig, "-i", DEMO, "quarantine", "gpu-b2", "--reason", "nvlink", "--drain",
                            "--yes")
    (journal,) = sorted((state_dir / "undo").glob("quarantine-*.json"))
    assert f"clusterctl undo {journal}" in cut_short.stderr
    undone = clusterctl("-i", DEMO, "undo", str(journal), "--yes", "--skip-checks")
    assert undone.exit_code == 0, undone.output
    back = _node("gpu-b2")
    assert back["spec"] == as_it_was["spec"]
    assert back["metadata"].get("annotations") == as_it_was["metadata"].get("annotations")  # type: ignore[union-attr]


REMOVAL_STEPS = [Cut("drain: cordon", "cordon gpu-b3"), Cut("drain: pods gone", "spec.nodeName=gpu-b3", 2),
                 Cut("reset", "kubeadm reset", host="gpu-b3"),
                 # The node as delete-node reads it (the drain read it once before).
                 Cut("delete-node", "get node gpu-b3", 2)]


@every_signal
@at_every(REMOVAL_STEPS)
def test_remove_node_interrupted_at_every_step(cut: Cut, sig: signal.Signals, bootstrapped_demo: Path,
                                               state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal every time, named with the line that goes on; the same command again completes."""
    cut_short = interrupted(monkeypatch, cut, sig, "-i", DEMO, "remove-node", "gpu-b3", "--yes")
    (journal,) = sorted((state_dir / "undo").glob("remove-node-gpu-b3-*.json"))
    assert f"clusterctl undo {journal}" in cut_short.stderr
    assert f"clusterctl -i {DEMO} remove-node gpu-b3 --yes" in cut_short.stderr
    if cut.step == "drain: cordon" and sig is signal.SIGINT:  # only cordoned: undo puts it back in service
        undone = clusterctl("-i", DEMO, "undo", str(journal), "--yes", "--skip-checks")
        assert undone.exit_code == 0, undone.output
        assert not _node("gpu-b3")["spec"].get("unschedulable")  # type: ignore[attr-defined]
    again = clusterctl("-i", DEMO, "-o", "json", "remove-node", "gpu-b3", "--yes")
    assert again.exit_code == 0, again.output
    nodes = clusterctl("-i", DEMO, "-l", "gpu-a1", "exec", "--sudo", "--",
                       "kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes")
    assert "gpu-b3" not in nodes.stdout and "gpu-b2" in nodes.stdout


#: Every phase of the upgrade on the first control plane (gpu-a1), the phases a worker (gpu-b1) runs from
#: it, and the cluster's phases after the last node; each cut right after the command that shows the phase.
UPGRADE_STEPS = [
    Cut("kubeadm", "'kubeadm=1.36.3-*'"), Cut("kubeadm-upgrade", "kubeadm upgrade apply"),
    Cut("drain: cordon", "cordon gpu-a1"), Cut("drain: pods gone", "spec.nodeName=gpu-a1", 3),
    Cut("kubelet", "'kubelet=1.36.3-*'"),
    # The node phases read the host (their check) before they plan nothing on a patch upgrade; the
    # packages probe was run by the pre-check (the node's first phases use its read) and the kubelet phase.
    Cut("packages", "dpkg --print-architecture", 3), Cut("containerd", "ctr plugins ls"),
    Cut("nvidia-runtime", "nvidia-ctk --version", 2), Cut("restart-kubelet", "systemctl restart kubelet"),
    # The nodes were read once before the run began.
    Cut("ready", "get nodes -o json", 2), Cut("uncordon", "uncordon gpu-a1"),
    Cut("worker: kubeadm-upgrade", "kubeadm upgrade node", host="gpu-b1"),
    # gpu-a1, its kubelet restarted, stays Ready over two reads (settles) before its uncordon: the third
    # read after the first is the worker's.
    Cut("worker: drain", "cordon gpu-b1"), Cut("worker: ready", "get nodes -o json", 4),
    Cut("network", "rollout status daemonset/calico-node"), Cut("gpu-addons", "helm list"),
]
UPGRADE = ("-i", str(DEMO), "-l", "gpu-a1,gpu-b1", "upgrade")


@every_signal
@at_every(UPGRADE_STEPS)
def test_upgrade_interrupted_at_every_step(cut: Cut, sig: signal.Signals, bootstrapped_demo: Path, state_dir: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The first control plane and a worker upgraded, cut after each phase's command: a journal every
    time, named with the line that goes on; ``upgrade apply --resume`` completes the rollout (every
    node at the target, none left cordoned, every lock given back)."""
    cut_short = interrupted(monkeypatch, cut, sig, *UPGRADE, "apply", "--to", "1.36.3", "--yes", "--ready-timeout", "5")
    (journal,) = sorted((state_dir / "undo").glob("upgrade-1.36.3-*.json"))
    assert cut_short.stderr.count(f"clusterctl undo {journal}") == 1, cut_short.stderr  # named once
    assert f"clusterctl -i {DEMO} -l gpu-a1,gpu-b1 upgrade apply --ready-timeout 5 --resume --yes" in cut_short.stderr
    resumed = clusterctl(*UPGRADE, "-o", "json", "apply", "--resume", "--yes", "--ready-timeout", "5")
    assert resumed.exit_code == 0, resumed.output
    assert {h["status"] for h in resumed.json()["hosts"]} <= {"upgraded", "up to date"}
    again = clusterctl(*UPGRADE, "-o", "json", "plan", "--to", "1.36.3")
    assert again.exit_code == 0, again.output
    assert again.json()["nothing_to_do"] is True  # at the target, uncordoned, nothing left for the node phases


#: A part of the upgrade, and the line that goes on with it after an interrupt ('upgrade phase' has no --resume).
PARTS = {"phase": (("phase", "drain"), "upgrade phase drain --to 1.36.3 --ready-timeout 5 --yes"),
         "skip-phases": (("apply", "--skip-phases", "network,gpu-addons"),
                         "upgrade apply --skip-phases network,gpu-addons --ready-timeout 5 --resume --yes")}


@pytest.mark.parametrize("part", PARTS)
def test_an_interrupted_part_of_the_upgrade_goes_on_with_that_part(part: str, bootstrapped_demo: Path,
                                                                    state_dir: Path, monkeypatch: pytest.MonkeyPatch
                                                                    ) -> None:
    """The line that goes on after an interrupt runs what the run did (its hosts, its phases): it said
    'upgrade apply --resume --yes' whatever the run was: the whole upgrade on every node of the inventory
    after 'upgrade phase drain -l ...', the add-ons too after '--skip-phases network,gpu-addons'."""
    given, goes_on = PARTS[part]
    cut_short = interrupted(monkeypatch, Cut("drain: cordon", "cordon gpu-a1"), signal.SIGINT, *UPGRADE, *given,
                            "--to", "1.36.3", "--yes", "--ready-timeout", "5")
    assert f"to go on where it stopped: clusterctl -i {DEMO} -l gpu-a1,gpu-b1 {goes_on}" in cut_short.stderr, \
        cut_short.stderr
    done = clusterctl(*UPGRADE[:-1], "-o", "json", *goes_on.split())
    assert done.exit_code == 0, done.output
    report = done.json()
    assert [h["host"] for h in report["hosts"]] == ["gpu-a1", "gpu-b1"] and report["addons"] == [], report
    if part == "phase":
        assert {s["step"] for h in report["hosts"] for s in h["steps"]} <= {"drain"}, report["hosts"]


#: Cut while the node is cordoned by the rollout: during its drain, and after it (the kubelet's package).
CORDONED_BY_THE_ROLLOUT = [c for c in UPGRADE_STEPS if c.step in ("drain: pods gone", "kubelet", "worker: ready")]
CORDONED_NODE = {"drain: pods gone": "gpu-a1", "kubelet": "gpu-a1", "worker: ready": "gpu-b1"}


@at_every(CORDONED_BY_THE_ROLLOUT)
def test_a_plain_rerun_after_an_interrupt_uncordons_what_the_rollout_cordoned(
        cut: Cut, bootstrapped_demo: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user runs the same command again instead of ``--resume``: the cordon the interrupted rollout
    made is clusterctl's, not the user's, so the rerun takes it off; a node the user had cordoned before
    either run stays cordoned."""
    users_own = clusterctl("-i", DEMO, "-l", "gpu-a1", "exec", "--sudo", "--",
                           "kubectl --kubeconfig /etc/kubernetes/admin.conf cordon gpu-b2")
    assert users_own.exit_code == 0, users_own.output
    interrupted(monkeypatch, cut, signal.SIGINT, *UPGRADE, "apply", "--to", "1.36.3", "--yes", "--ready-timeout", "5")
    node = CORDONED_NODE[cut.step]
    assert _node(node)["spec"].get("unschedulable")  # type: ignore[attr-defined]
    again = clusterctl("-i", DEMO, "-l", "gpu-a1,gpu-b1,gpu-b2", "-o", "json", "upgrade", "apply", "--to", "1.36.3",
                       "--yes", "--ready-timeout", "5")
    assert again.exit_code == 0, again.output
    assert not _node(node)["spec"].get("unschedulable"), again.output  # type: ignore[attr-defined]
    assert _node("gpu-b2")["spec"].get("unschedulable")  # type: ignore[attr-defined]


def _nccl_conf(state: Path, host: str) -> bytes | None:
    path = mock_cluster_folder(state) / "hosts" / host / "fs" / "etc" / "nccl.conf"
    return path.read_bytes() if path.exists() else None


def _lock_left(state: Path, host: str) -> bool:
    from clusterctl.engine.lock import DEFAULT_LOCK_PATH

    return (mock_cluster_folder(state) / "hosts" / host / "fs" / DEFAULT_LOCK_PATH.lstrip("/")).exists()


PUSH_HOSTS = ("gpu-a1", "gpu-b1")


@every_signal
def test_tune_nccl_push_interrupted_after_a_write(sig: signal.Signals, _private_mock_state: Path, tmp_path: Path,
                                                  state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A push cut off right after it wrote one host's /etc/nccl.conf: the write is in the undo journal
    (written before the file was), the interrupt names it, no host lock is left behind, and either
    ``undo`` puts every host's file back byte for byte (SIGINT) or the same push finishes it (SIGTERM)."""
    from day2_helpers import DEMO_SURVEY

    monkeypatch.chdir(tmp_path)
    base = ("-i", DEMO, "-l", ",".join(PUSH_HOSTS))
    site = clusterctl(*base, "exec", "--sudo", "--", "printf 'NCCL_DEBUG=WARN\\n' > /etc/nccl.conf")
    assert site.exit_code == 0, site.output
    before = {h: _nccl_conf(_private_mock_state, h) for h in PUSH_HOSTS}
    assert before == {h: b"NCCL_DEBUG=WARN\n" for h in PUSH_HOSTS}
    push = (*base, "tune-nccl", "--survey", str(DEMO_SURVEY), "--push", "--yes")
    cut_short = interrupted(monkeypatch, Cut("write", "put /etc/nccl.conf"), sig, *push)
    assert _nccl_conf(_private_mock_state, "gpu-a1") != before["gpu-a1"]  # it was cut off after the write
    (journal,) = sorted((state_dir / "undo").glob("tune-nccl-push-*.json"))
    assert f"clusterctl undo {journal}" in cut_short.stderr, cut_short.stderr
    assert not any(_lock_left(_private_mock_state, h) for h in PUSH_HOSTS)
    if sig is signal.SIGINT:
        undone = clusterctl(*base, "undo", str(journal), "--yes")
        assert undone.exit_code == 0, undone.output + journal.read_text() + cut_short.stderr
        assert {h: _nccl_conf(_private_mock_state, h) for h in PUSH_HOSTS} == before
        return
    again = clusterctl(*base, "-o", "json", *push[len(base):])
    assert again.exit_code == 0, again.output
    for h in PUSH_HOSTS:
        written = _nccl_conf(_private_mock_state, h)
        assert written is not None and written.startswith(b"# BEGIN clusterctl tune-nccl")
        assert written.endswith(b"NCCL_DEBUG=WARN\n")  # the site's own line kept
    # The first run's journal still takes gpu-a1 back to the site's file (gpu-b1's write, if the cut came
    # before it, is the second run's: its own journal has it).
    undone = clusterctl("-i", DEMO, "-l", "gpu-a1", "undo", str(journal), "--yes")
    assert undone.exit_code == 0, undone.output + journal.read_text() + cut_short.stderr
    assert _nccl_conf(_private_mock_state, "gpu-a1") == before["gpu-a1"]


#: A day-2 command given its own state folder and options, cut short, and the line that goes on with them
#: ({state}: the folder): each kept a progress file or a journal in that folder, and its line dropped it.
GIVEN_RUNS = {
    "certs renew": (Cut("renew", "kubeadm certs renew all"), ("certs", "renew", "--restart-wait", "1"),
                    "certs renew --restart-wait 1 --state-dir {state} --resume --yes"),
    "upgrade apply": (Cut("drain: cordon", "cordon gpu-a1"),
                      ("-l", "gpu-a1,gpu-b1", "upgrade", "apply", "--to", "1.36.3", "--max-unavailable", "2",
                       "--drain-timeout", "60", "--ready-timeout", "5"),
                      "-l gpu-a1,gpu-b1 upgrade apply --max-unavailable 2 --drain-timeout 60.0 --ready-timeout 5 "
                      "--state-dir {state} --resume --yes"),
    "remove-node": (Cut("drain: cordon", "cordon gpu-b3"), ("remove-node", "gpu-b3", "--drain-timeout", "60"),
                    "remove-node gpu-b3 --drain-timeout 60.0 --state-dir {state} --yes"),
}


@pytest.mark.parametrize("command", GIVEN_RUNS)
def test_an_interrupted_day2_run_goes_on_with_its_state_folder_and_options(
        command: str, bootstrapped_demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The line that goes on after Ctrl-C keeps the --state-dir DIR the run was given, and its options: it dropped
    them, so 'certs renew --resume' and 'upgrade apply --resume' found no progress in the default state folder
    (exit 2), and the upgrade went on one worker at a time with the default timeouts."""
    cut, given, goes_on = GIVEN_RUNS[command]
    state = tmp_path / "my state"
    cut_short = interrupted(monkeypatch, cut, signal.SIGINT, "-i", DEMO, *given, "--state-dir", state, "--yes")
    line = f"clusterctl -i {DEMO} {goes_on.format(state=shlex.quote(str(state)))}"
    assert f"to go on where it stopped: {line}" in cut_short.stderr, cut_short.stderr
    went_on = clusterctl(*shlex.split(line)[1:])
    assert went_on.exit_code == 0, went_on.output
