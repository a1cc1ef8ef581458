"""A cluster with a control plane that has no GPUs (inventory ``gpus: false``), on simulated hosts:
the GPU phases have nothing to do there, verify expects no GPU of it, and the DCGM exporter is kept
to nodes with an NVIDIA device."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sim_cluster import SimCluster, SimHost

from clusterctl.bootstrap.cluster.addons import NVIDIA_PCI_LABEL
from clusterctl.engine.run import Status
from clusterctl.mock.profile import load_profile

#: A CPU-only machine: the demo's recordings without a GPU or driver.
CPU_ONLY = """\
extends: {base}
commands:
  - regex: "^nvidia-smi"
    exit: 127
    stderr_text: "sh: 1: nvidia-smi: not found\\n"
"""


def test_a_gpu_less_control_plane_gets_no_gpu_work_and_verify_expects_none(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, ["cp1", "gpu-a1"])
    folder = tmp_path / "cpu-only"
    folder.mkdir()
    (folder / "profile.yaml").write_text(CPU_ONLY.format(base=tmp_path / "profile"))
    host = dataclasses.replace(sim.hosts_by_name["cp1"], gpus=False)
    sim.hosts_by_name["cp1"] = host
    sim.transports["cp1"] = SimHost(host, load_profile(str(folder)), state_folder=sim.state)
    assert not sim.transports["cp1"].run("nvidia-smi -L").ok
    report = sim.run(survey=None)
    assert report.ok, report.failed_hosts
    labels = {r.host: r for r in report.results if r.phase == "topology-labels"}
    assert labels["cp1"].status is Status.SKIPPED
    assert labels["cp1"].message == "nothing to do: the host has no GPUs (inventory: gpus: false)"
    assert labels["gpu-a1"].status is not Status.SKIPPED
    codes = {(f.host, f.code) for f in report.all_findings()}
    assert ("cp1", "NO_GPU_ALLOCATABLE") not in codes
    works = [f.message for f in report.all_findings() if f.code == "CLUSTER_WORKS"]
    assert works and "on each of 1 GPU node(s)" in works[0], works
    values = sim.file("cp1", "/etc/kubernetes/clusterctl/helm/dcgm-exporter.values.yaml")
    assert values is not None and NVIDIA_PCI_LABEL in values.decode()
