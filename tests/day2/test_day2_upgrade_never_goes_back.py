"""Nothing takes a node's Kubernetes back silently: not ``upgrade``, not ``undo`` of one (issue #33).

A node whose kubeadm, kubelet or kubectl package is newer than the target (upgraded there by hand,
a newer patch installed) would be taken back by ``apt-get install 'kubelet=X-*'``. The upgrade
refuses it before anything changes (exit 2, one paragraph naming the node, the package, the
version it runs and the target, and the target to pick), and its apt line never carries
``--allow-downgrades``: apt itself refuses any other downgrade (exit 100).

``undo`` of an upgrade's journal reverts what it can (the cordon, the apt source) and names each
change it leaves and why (kubeadm does not support downgrades), with a non-zero exit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clirun import clusterctl
from day2_helpers import DEMO, installed, mock_cluster_folder, state_digest


def _installed_by_hand(state: Path, host: str, package: str, version: str) -> None:
    """What ``apt-get install kubelet=VERSION`` run on the node by someone else leaves there."""
    from clusterctl.mock.state import HostState

    with HostState(mock_cluster_folder(state) / "hosts" / host, host).edit() as data:
        data["packages"][package]["version"] = version


def test_a_node_running_a_newer_kubelet_than_the_target_is_refused_before_anything_changes(
        bootstrapped_demo: Path) -> None:
    _installed_by_hand(bootstrapped_demo, "gpu-b2", "kubelet", "1.37.0-1.1")
    before = state_digest(bootstrapped_demo)
    progress = str(bootstrapped_demo / "progress")
    for args in (("plan",), ("apply", "--dry-run", "--yes"), ("apply", "--yes", "--state-dir", progress)):
        refused = clusterctl("-i", DEMO, "upgrade", *args, "--to", "1.36.3")
        assert refused.exit_code == 2, refused.output
        assert refused.stdout == "" and "Traceback" not in refused.output
        error = refused.stderr.split("error: ", 1)[1]
        assert "upgrade to 1.36.3 would downgrade what the nodes run" in error
        assert "gpu-b2 runs kubelet 1.37.0-1.1; the upgrade installs kubelet 1.36.3 (--to)" in error
        assert "Pick a target at least the version they run (clusterctl upgrade plan --to 1.37.0)." in error
        assert state_digest(bootstrapped_demo) == before  # no node touched, gpu-a1's kubeadm neither

    # The target the refusal names: every node goes there, gpu-b2's kubelet stays where it was.
    plan = clusterctl("-i", DEMO, "-o", "json", "upgrade", "plan", "--to", "1.37.0")
    assert plan.exit_code == 0, plan.output
    installs = [c["command"] for h in plan.json()["hosts"] for s in h["steps"] for c in s["changes"]
                if "apt-get install" in c.get("command", "")]
    assert installs and not [c for c in installs if "--allow-downgrades" in c]
    done = clusterctl("-i", DEMO, "upgrade", "apply", "--to", "1.37.0", "--yes", "--state-dir", progress,
                      "--ready-timeout", "2")
    assert done.exit_code == 0, done.output
    assert {installed(bootstrapped_demo, h, p) for h in ("gpu-a1", "gpu-b2") for p in ("kubeadm", "kubelet")} == \
        {"1.37.0-1.1"}


def test_a_package_made_newer_after_the_pre_check_is_refused_with_what_upgrade_offers(
        bootstrapped_demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # gpu-b2's containerd is installed newer by hand after the pre-check read the nodes: the packages
    # phase refuses it inside the run, and its fix names what 'upgrade' offers, not bootstrap's option.
    from clusterctl.bootstrap.phases.packages import Packages
    from clusterctl.day2 import upgrade

    pre_check, decide = upgrade._refuse_downgrades, Packages.downgrade_finding
    refused: list[Any] = []

    def then_installed_by_hand(*args: Any) -> Any:
        read = pre_check(*args)
        _installed_by_hand(bootstrapped_demo, "gpu-b2", "containerd.io", "2.3.9-1")
        return read

    def recorded(phase: Packages, *args: Any) -> Any:
        found = decide(phase, *args)
        refused.extend([found] if found is not None else [])
        return found

    monkeypatch.setattr(upgrade, "_refuse_downgrades", then_installed_by_hand)
    monkeypatch.setattr(Packages, "downgrade_finding", recorded)
    done = clusterctl("-i", DEMO, "upgrade", "apply", "--to", "1.36.3", "--yes", "--state-dir",
                      bootstrapped_demo / "progress", "--ready-timeout", "2")
    assert done.exit_code == 1, done.output
    assert "gpu-b2: phase packages: runs containerd.io 2.3.9-1, newer than the inventory's pins" in done.stderr
    assert [(f.host, f.code, f.fix) for f in refused] == \
        [("gpu-b2", "DOWNGRADE_REFUSED", "Set stack.containerd to what they run.")]
    assert installed(bootstrapped_demo, "gpu-b2", "containerd.io") == "2.3.9-1"


def test_undo_of_an_upgrade_reverts_the_cordon_and_names_what_it_leaves(bootstrapped_demo: Path) -> None:
    from day2_helpers import state_digest as digest

    from clusterctl.undo_journal import read_journal

    # gpu-a1 upgraded and left cordoned (its uncordon skipped), as a rollout stopped there leaves it.
    done = clusterctl("-i", DEMO, "-l", "gpu-a1", "-o", "json", "upgrade", "apply", "--to", "1.36.3", "--yes",
                      "--skip-phases", "uncordon,network,gpu-addons", "--state-dir", bootstrapped_demo / "progress",
                      "--ready-timeout", "2")
    assert done.exit_code == 0, done.output
    journal = done.json()["undo_journal"]
    kept = [r.change.cannot_undo for r in read_journal(journal).records if "upgrade apply" in r.change.summary]
    assert kept == ["the control plane stays at v1.36.3: kubeadm does not support downgrades"]  # the journal says why

    before = digest(bootstrapped_demo)
    dry = clusterctl("-i", DEMO, "undo", "--dry-run", journal)
    assert dry.exit_code == 1, dry.output  # it would leave changes: a script must not read it as all undone
    assert "gpu-a1: would run:\n  $ kubectl --kubeconfig /etc/kubernetes/admin.conf uncordon gpu-a1\n" in dry.stdout
    assert digest(bootstrapped_demo) == before

    undone = clusterctl("-i", DEMO, "undo", "--yes", journal)
    assert undone.exit_code == 1, undone.output
    lines = undone.stdout.splitlines()
    assert "gpu-a1: undid 'cordon node gpu-a1'" in lines
    assert "gpu-a1: cannot undo 'kubeadm upgrade apply v1.36.3': the control plane stays at v1.36.3: kubeadm does " \
        "not support downgrades" in lines
    for names, stay in (("kubeadm", "stays"), ("kubelet, kubectl", "stay")):
        assert f"gpu-a1: cannot undo 'upgrade {names} to 1.36.3 (unhold, update, install, hold)': {names} {stay} " \
            "at 1.36.3: kubeadm does not support downgrades" in lines
    # What changed nothing to put back is said as such, not as a failure.
    assert "gpu-a1: nothing to undo: 'restart the kubelet' leaves nothing behind" in lines
    assert "gpu-a1: nothing to undo: 'kubeadm upgrade plan (checks)' leaves nothing behind" in lines
    assert not [line for line in lines if line.startswith(("gpu-a1: undid", "gpu-a1: restored"))
                and ("kubeadm" in line or "kubelet" in line)]
    assert installed(bootstrapped_demo, "gpu-a1", "kubeadm") == installed(bootstrapped_demo, "gpu-a1", "kubelet") \
        == "1.36.3-1.1"
    nodes = clusterctl("-i", DEMO, "-o", "json", "upgrade", "plan", "--to", "1.36.3")
    assert {h["host"]: h["status"] for h in nodes.json()["hosts"]}["gpu-a1"] == "up to date"  # uncordoned


def test_undo_of_an_upgrade_uncordons_a_node_release_would_refuse_without_calling_it_quarantined(
        bootstrapped_demo: Path) -> None:
    """gpu-a3's NVLink is down in the demo, so release's checks fail it; but its upgrade only cordoned it:
    undoing that is not a return from quarantine (no checks, no "stays quarantined")."""
    done = clusterctl("-i", DEMO, "-l", "gpu-a3", "-o", "json", "upgrade", "apply", "--to", "1.36.3", "--yes",
                      "--skip-phases", "uncordon,network,gpu-addons", "--state-dir", bootstrapped_demo / "progress",
                      "--ready-timeout", "2")
    assert done.exit_code == 0, done.output
    undone = clusterctl("-i", DEMO, "undo", "--yes", done.json()["undo_journal"])
    assert undone.exit_code == 1, undone.output  # the kubeadm and apt steps it cannot put back, named
    assert "quarantined" not in undone.output and "REFUSED" not in undone.output, undone.output
    assert "gpu-a3: undid 'cordon node gpu-a3'" in undone.stdout.splitlines()  # the node, not the control plane
