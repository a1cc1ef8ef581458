"""``upgrade plan|apply`` leaves the CNI and the GPU add-ons alone where bootstrap does.

A site that brings its own CNI (``bootstrap.network.cni: none``), installs its own GPU add-ons
(``bootstrap.addons.mode: none``) or has no GPU host at all (``gpus: false`` everywhere) gets no
Calico and no device plugin from an upgrade: the cluster phases after the last node say
"nothing to do" and why, in the same words as ``bootstrap plan`` (one decision,
``clusterctl.bootstrap.cluster.settings.left_to_site``), in plan, dry-run and apply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clirun import clusterctl
from day2_helpers import DEMO, mock_cluster_folder, state_digest

OWN_CNI = "nothing to do: the site brings its own CNI (bootstrap.network.cni: none)"
OWN_ADDONS = "nothing to do: the site installs its own GPU add-ons (bootstrap.addons.mode: none)"
NO_GPUS = "nothing to do: no host of the cluster has GPUs (inventory: gpus: false on every host)"
CALICO = "daemonset/calico-system/calico-node"
SITE_CNI = "daemonset/kube-flannel/kube-flannel-ds"


def _variant(state: Path, tmp_path: Path, *, bootstrap: str = "", defaults: str = "") -> Path:
    """The demo inventory on the same (bootstrapped) mock hosts, with a ``bootstrap:`` section and defaults added."""
    text = DEMO.read_text().replace("profile: demo/", f"profile: {DEMO.parent / 'demo'}/")
    text = text.replace("defaults:\n", f"defaults:\n  mock_state: {mock_cluster_folder(state)}\n{defaults}", 1)
    inventory = tmp_path / "site.yaml"
    inventory.write_text(text + (f"\nbootstrap:\n{bootstrap}" if bootstrap else ""))
    return inventory


def _kube(state: Path) -> dict[str, Any]:
    from clusterctl.mock.state import ClusterState

    kube: dict[str, Any] = ClusterState(mock_cluster_folder(state)).read()["kubernetes"]
    return kube


def _swap_in_the_sites_own_cni(state: Path) -> None:
    """What a site with its own CNI has: no Calico, its CNI's DaemonSet (nodes stay Ready)."""
    from clusterctl.mock.state import ClusterState

    with ClusterState(mock_cluster_folder(state)).edit() as data:
        objects = data["kubernetes"]["objects"]
        for key in [k for k in objects if k.startswith("daemonset/calico-system/")]:
            del objects[key]
        objects[SITE_CNI] = {"spec": "{}"}


def _addon_rows(inventory: Path, *args: str) -> dict[str, dict[str, Any]]:
    done = clusterctl("-i", inventory, "-o", "json", "upgrade", *args)
    assert done.exit_code == 0, done.output
    return {s["step"]: s for s in done.json()["addons"]}


def _live_lines(stdout: str, phase: str) -> list[str]:
    """What apply's live progress said of ``phase`` (the lines before the final report)."""
    live = stdout.split("\ncluster demo: Kubernetes ", 1)[0]
    return [line for line in live.splitlines() if line.split()[1:2] == [phase]]


def _bootstrap_message(inventory: Path, phase: str) -> str:
    done = clusterctl("-i", inventory, "-o", "json", "bootstrap", "phase", phase, "--dry-run")
    assert done.exit_code == 0, done.output
    (first,) = [r for r in done.json()["results"] if r["host"] == "gpu-a1"]
    return str(first.get("message", ""))


def test_a_site_with_its_own_cni_gets_no_calico_from_an_upgrade(bootstrapped_demo: Path, tmp_path: Path) -> None:
    _swap_in_the_sites_own_cni(bootstrapped_demo)
    # Where the inventory leaves the CNI to clusterctl, the upgrade brings Calico back: the case to avoid.
    ours = _addon_rows(DEMO, "plan", "--to", "1.36.3")
    assert any("calico" in c.get("command", "") for c in ours["network"]["changes"])

    site = _variant(bootstrapped_demo, tmp_path, bootstrap="  network: {cni: none}\n")
    assert _bootstrap_message(site, "network") == OWN_CNI
    before = state_digest(bootstrapped_demo)
    for args in (("plan", "--to", "1.36.3"), ("apply", "--to", "1.36.3", "--dry-run", "--yes")):
        rows = _addon_rows(site, *args)
        assert (rows["network"]["status"], rows["network"]["message"], rows["network"]["changes"]) == \
            ("skipped", OWN_CNI, [])
        assert (rows["gpu-addons"]["status"], rows["gpu-addons"]["changes"]) == ("ok", [])  # at its pins
    assert state_digest(bootstrapped_demo) == before
    human = clusterctl("-i", site, "upgrade", "plan", "--to", "1.36.3")
    assert human.exit_code == 0, human.output
    assert f"\nnetwork: {OWN_CNI}\n" in human.stdout
    assert "calico" not in human.stdout.lower()

    done = clusterctl("-i", site, "upgrade", "apply", "--to", "1.36.3", "--yes", "--state-dir",
                      bootstrapped_demo / "progress", "--ready-timeout", "2")
    assert done.exit_code == 0, done.output
    assert f"\nnetwork: {OWN_CNI}\n" in done.stdout and "upgraded: every node runs 1.36.3" in done.stdout
    assert _live_lines(done.stdout, "network") == [f"gpu-a1           network          skipped  {OWN_CNI}"]
    objects = _kube(bootstrapped_demo)["objects"]
    assert SITE_CNI in objects and CALICO not in objects


def test_a_cluster_without_gpus_or_with_its_own_addons_gets_no_device_plugin(bootstrapped_demo: Path,
                                                                               tmp_path: Path) -> None:
    no_gpus = _variant(bootstrapped_demo, tmp_path, defaults="  gpus: false\n")
    assert _bootstrap_message(no_gpus, "gpu-addons") == NO_GPUS
    releases = dict(_kube(bootstrapped_demo)["releases"])
    rows = _addon_rows(no_gpus, "plan", "--to", "1.36.3")
    assert (rows["gpu-addons"]["status"], rows["gpu-addons"]["message"], rows["gpu-addons"]["changes"]) == \
        ("skipped", NO_GPUS, [])
    human = clusterctl("-i", no_gpus, "upgrade", "apply", "--to", "1.36.3", "--dry-run", "--yes")
    assert human.exit_code == 0, human.output
    assert f"\ngpu-addons: {NO_GPUS}\n" in human.stdout and "helm" not in human.stdout

    own = _variant(bootstrapped_demo, tmp_path, bootstrap="  addons: {mode: none}\n")
    assert _bootstrap_message(own, "gpu-addons") == OWN_ADDONS
    rows = _addon_rows(own, "plan", "--to", "1.36.3")
    assert (rows["gpu-addons"]["message"], rows["gpu-addons"]["changes"]) == (OWN_ADDONS, [])
    done = clusterctl("-i", own, "upgrade", "apply", "--to", "1.36.3", "--yes", "--state-dir",
                      bootstrapped_demo / "progress", "--ready-timeout", "2")
    assert done.exit_code == 0, done.output
    assert f"\ngpu-addons: {OWN_ADDONS}\n" in done.stdout
    assert _live_lines(done.stdout, "gpu-addons") == [f"gpu-a1           gpu-addons       skipped  {OWN_ADDONS}"]
    assert _kube(bootstrapped_demo)["releases"] == releases  # no helm release touched


def test_settings_that_mean_nothing_without_clusterctls_cni_or_addons_are_refused(tmp_path: Path) -> None:
    for section, words in (("network: {cni: none, version: v3.31.7}", "bootstrap.network.version"),
                           ("addons: {mode: none, charts: {dcgm-exporter: {version: 4.8.2}}}",
                            "bootstrap.addons.charts")):
        inventory = tmp_path / "bad.yaml"
        inventory.write_text(f"cluster: lab\nhosts: {{a: {{address: 10.0.0.1}}}}\n"
                             f"bootstrap:\n  {section}\n")
        done = clusterctl("-i", inventory, "inventory", "check")
        assert done.exit_code == 2, done.output
        assert words in done.stderr and "nothing to set" in done.stderr and "Traceback" not in done.stderr
