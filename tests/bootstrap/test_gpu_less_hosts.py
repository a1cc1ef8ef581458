"""Hosts without GPUs (inventory ``gpus: false``): control planes and CPU-only nodes of a GPU cluster.

The setting in both inventory formats (inherited like other host settings, errors naming file,
line and field), then bootstrap on mock hosts: no NVIDIA Container Toolkit and no NVIDIA apt
source there, nvidia-runtime and topology-labels with nothing to do "because the host has no
GPUs", preflight asking for no driver, ``bootstrap artifacts`` listing the toolkit for the GPU
hosts only, and the DCGM exporter kept to nodes with an NVIDIA device.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from clirun import clusterctl as run_cli

from clusterctl.bootstrap.apt_sources import TOOLKIT_PACKAGES, chosen_repos, wanted_packages
from clusterctl.bootstrap.artifacts import HostRelease, artifact_list
from clusterctl.bootstrap.cluster.addons import NVIDIA_PCI_LABEL, addon_plan
from clusterctl.bootstrap.registry import all_phases
from clusterctl.bootstrap.run import run_bootstrap
from clusterctl.engine.progress import ProgressStore
from clusterctl.engine.run import RunReport, RunSettings, Status
from clusterctl.errors import InventoryError
from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.inventory.model import BootstrapConfig, Inventory, StackPin
from clusterctl.mock.transport import MockTransport

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"
STACK = StackPin(kubernetes="1.36.2", containerd="2.2.1")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_gpus_false_is_inherited_from_defaults_and_groups_and_a_host_may_say_otherwise(tmp_path: Path) -> None:
    path = _write(tmp_path, "inv.yaml", """\
cluster: lab
defaults: {user: root}
groups:
  control: {vars: {gpus: false, roles: [control-plane]}, hosts: [cp1, cp2]}
hosts:
  cp1: {address: 10.0.0.1}
  cp2: {address: 10.0.0.2, gpus: true}
  gpu1: {address: 10.0.0.3}
""")
    hosts = {h.name: h.gpus for h in load_inventory(str(path)).hosts}
    assert hosts == {"cp1": False, "cp2": True, "gpu1": True}
    shown = run_cli("-i", path, "-o", "json", "inventory", "show")
    assert {h["host"]: h["gpus"] for h in json.loads(shown.stdout)["hosts"]} == hosts
    table = run_cli("-i", path, "inventory", "show").stdout
    assert "(no GPUs)" in table and table.count("(no GPUs)") == 1, table
    everyone = _write(tmp_path, "cpu.yaml", "cluster: lab\ndefaults: {gpus: false}\nhosts: {a: {}, b: {gpus: true}}\n")
    assert [h.gpus for h in load_inventory(str(everyone)).hosts] == [False, True]


def test_a_gpus_value_that_is_not_a_boolean_names_file_line_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "inv.yaml", "cluster: lab\nhosts:\n  cp1:\n    address: 10.0.0.1\n    gpus: \"no\"\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(str(path))
    text = str(caught.value)
    assert "inv.yaml" in text and ":5" in text and "hosts.cp1.gpus" in text and "true or false" in text


def test_ansible_inventories_say_it_with_clusterctl_gpus(tmp_path: Path) -> None:
    path = _write(tmp_path, "hosts.ini", """\
[kube_control_plane]
cp1 ansible_host=10.0.0.1
cp2 ansible_host=10.0.0.2 clusterctl_gpus=yes

[kube_node]
gpu1 ansible_host=10.0.0.3
cpu1 ansible_host=10.0.0.4 clusterctl_gpus=False

[kube_control_plane:vars]
clusterctl_gpus=false
""")
    hosts = {h.name: h.gpus for h in load_inventory(str(path)).hosts}
    assert hosts == {"cp1": False, "cp2": True, "gpu1": True, "cpu1": False}
    assert all("clusterctl_gpus" not in dict(h.vars) for h in load_inventory(str(path)).hosts)
    bad = _write(tmp_path, "bad.ini", "[all]\ncp1 ansible_host=10.0.0.1 clusterctl_gpus=maybe\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(str(bad))
    text = str(caught.value)
    assert "bad.ini" in text and ":2" in text and "clusterctl_gpus" in text and "true or false" in text


def test_no_toolkit_and_no_nvidia_source_for_a_host_without_gpus() -> None:
    gpu = [p.package for p in wanted_packages(STACK, BootstrapConfig())]
    cpu = [p.package for p in wanted_packages(STACK, BootstrapConfig(), gpus=False)]
    assert set(TOOLKIT_PACKAGES) <= set(gpu)
    assert cpu == ["containerd.io", "kubelet", "kubeadm", "kubectl"]
    assert "nvidia-container-toolkit" in [r.name for r in chosen_repos(STACK, BootstrapConfig(), "ubuntu", "noble")]
    assert [r.name for r in chosen_repos(STACK, BootstrapConfig(), "ubuntu", "noble", gpus=False)] == [
        "kubernetes", "docker"]


class Lab:
    """Three demo hosts on the simulated tools, gpu-a3 marked ``gpus: false`` (its recorded
    hardware still shows GPUs: preflight says so)."""

    def __init__(self, tmp_path: Path) -> None:
        demo = load_inventory(str(DEMO))
        hosts = [h for h in demo.hosts if h.name in ("gpu-a1", "gpu-a2", "gpu-a3")]
        self.hosts = tuple(dataclasses.replace(h, gpus=False) if h.name == "gpu-a3" else h for h in hosts)
        self.inventory = Inventory(name="lab", hosts=self.hosts, bootstrap=demo.bootstrap)
        self.progress = tmp_path / "progress.json"

    def run(self, phases: tuple[str, ...]) -> RunReport:
        chosen = [p for p in all_phases() if p.name in phases]
        with Runner(lambda host, _t: MockTransport(host), parallel=8, timeout_s=60) as runner:
            return run_bootstrap(self.inventory, self.hosts, runner, chosen,
                                 RunSettings(apply=True, progress=ProgressStore(self.progress, "lab")))

    def node(self, name: str) -> MockTransport:
        return MockTransport(next(h for h in self.hosts if h.name == name))


def test_bootstrap_installs_no_toolkit_and_the_nvidia_runtime_has_nothing_to_do_there(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    phases = ("preflight", "kernel", "packages", "containerd", "nvidia-runtime")
    report = lab.run(phases)
    assert report.ok, report.failed_hosts
    runtime = {r.host: r for r in report.results if r.phase == "nvidia-runtime"}
    assert runtime["gpu-a3"].status is Status.SKIPPED
    assert runtime["gpu-a3"].message == "nothing to do: the host has no GPUs (inventory: gpus: false)"
    assert runtime["gpu-a1"].status is Status.OK
    cpu, gpu = lab.node("gpu-a3"), lab.node("gpu-a1")
    # The recorded machine came with a toolkit: it is neither installed nor held by bootstrap there.
    packages = {r.host: [c.command or "" for c in r.changes] for r in report.results if r.phase == "packages"}
    assert [c for c in packages["gpu-a3"] if "apt-get install" in c and "kubeadm=1.36.2-*" in c]
    assert not [c for c in packages["gpu-a3"] if "nvidia" in c]
    assert [c for c in packages["gpu-a1"] if "nvidia-container-toolkit" in c]
    assert "kubeadm\t1.36.2-1.1" in cpu.run("dpkg-query -W kubeadm").stdout
    assert cpu.run("apt-mark showhold").stdout.split() == ["containerd.io", "kubeadm", "kubectl", "kubelet"]
    assert cpu.get("/etc/apt/sources.list.d/clusterctl-nvidia-container-toolkit.sources") is None
    assert gpu.get("/etc/apt/sources.list.d/clusterctl-nvidia-container-toolkit.sources") is not None
    assert "nvidia-container-toolkit" in gpu.run("apt-mark showhold").stdout.split()
    # Its recorded hardware shows GPUs the inventory says it has not: a warning, not a failure.
    warned = [f for r in report.results for f in r.findings if f.code == "GPUS_ON_GPU_LESS_HOST"]
    assert [f.host for f in warned] == ["gpu-a3"]
    # A second run has nothing to do.
    again = lab.run(phases)
    assert again.ok and not again.changed


def test_preflight_asks_a_host_without_gpus_for_no_driver(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    # gpu-a3 is now a CPU-only machine: no driver, no nvidia-smi, although the stack pins a driver.
    node = lab.node("gpu-a3")
    probe = node.run("cat /proc/driver/nvidia/version")
    assert probe.ok  # the recorded hardware has a driver ...
    hosts = tuple(dataclasses.replace(h, stack=dataclasses.replace(h.stack, driver="999.1.1")) for h in lab.hosts)
    lab.hosts, lab.inventory = hosts, dataclasses.replace(lab.inventory, hosts=hosts)
    report = lab.run(("preflight",))
    codes = {(f.host, f.code) for r in report.results for f in r.findings}
    # ... at another version than the pin: a GPU host fails, the GPU-less one is not asked.
    assert ("gpu-a1", "DRIVER_PIN_MISMATCH") in codes
    assert not {c for h, c in codes if h == "gpu-a3"} & {"DRIVER_PIN_MISMATCH", "DRIVER_NOT_LOADED", "NO_GPUS"}
    assert "gpu-a3" not in report.failed_hosts and "gpu-a1" in report.failed_hosts


def test_artifacts_list_the_toolkit_for_the_gpu_hosts_only(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    releases = {h.name: HostRelease("ubuntu", "ubuntu", "noble") for h in lab.hosts}
    listed = artifact_list(lab.inventory, lab.hosts, releases)
    toolkit = [a for a in listed.of_kind("apt-package") if a.name == "nvidia-container-toolkit"]
    assert [a.hosts for a in toolkit] == [("gpu-a1", "gpu-a2")]
    kubeadm = [a for a in listed.of_kind("apt-package") if a.name == "kubeadm"]
    assert [a.hosts for a in kubeadm] == [("gpu-a1", "gpu-a2", "gpu-a3")]
    cpu_only = tuple(dataclasses.replace(h, gpus=False) for h in lab.hosts)
    none = artifact_list(dataclasses.replace(lab.inventory, hosts=cpu_only), cpu_only, releases)
    assert not [a for a in none.artifacts if "nvidia-container" in a.name or "nvidia-container" in a.source]
    # No GPU host at all: gpu-addons installs nothing (the decision bootstrap and upgrade share), so no chart.
    assert [a.name for a in listed.of_kind("chart")] and not none.of_kind("chart")
    assert "gpu-addons: nothing to fetch: no host of the cluster has GPUs (inventory: gpus: false on every " \
        "host)" in none.notes


def test_the_dcgm_exporter_stays_on_nodes_with_an_nvidia_device_where_some_have_none(tmp_path: Path) -> None:
    from clusterctl.bootstrap.cluster.settings import cluster_settings

    settings = cluster_settings(Lab(tmp_path).inventory)

    def dcgm_values(gpu_less: bool) -> str:
        plan = addon_plan(settings, runtime_class=True, service_monitor=False, gpu_less_nodes=gpu_less)
        return next(r.values for r in plan.releases if r.chart.release == "dcgm-exporter")

    assert f'"{NVIDIA_PCI_LABEL}": "true"' in dcgm_values(True).replace("'", '"')
    assert "nodeSelector" not in dcgm_values(False)
