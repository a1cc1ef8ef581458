"""The cluster phases against simulated hosts (kubeadm, kubectl and helm simulated on one cluster state)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sim_cluster import AdvanceClock, SimCluster

from clusterctl.engine.run import Status

SIX = ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3"]


def statuses(report, phase: str) -> dict[str, Status]:  # type: ignore[no-untyped-def]
    return {r.host: r.status for r in report.results if r.phase == phase}


def test_full_apply_then_second_apply_changes_nothing(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, SIX)
    first = sim.run()
    assert first.ok, first.failed_hosts
    works = [f for f in first.all_findings() if f.code == "CLUSTER_WORKS"]
    assert works and works[0].message.startswith("works: 6 node(s) Ready, 48 GPU(s)")
    second = sim.run()
    assert second.ok and not second.changed, [(r.host, r.phase, [c.summary for c in r.changes])
                                              for r in second.results if r.changes]


def changes_of(report, phase: str) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    return {r.host: [c.summary for c in r.changes] for r in report.results if r.phase == phase and r.changes}


@pytest.mark.parametrize("control_planes", [1, 3])
def test_plan_on_a_fresh_fleet(tmp_path: Path, control_planes: int) -> None:
    sim = SimCluster(tmp_path, SIX, control_planes=control_planes)
    report = sim.run(apply=False)
    assert report.ok
    plan = changes_of(report, "control-plane")
    assert plan["gpu-a1"] == ["create /etc/kubernetes, /etc/kubernetes/clusterctl", "kubeadm configuration (v1beta4)",
                              "kubeadm config validate", "kubeadm init (first control plane)"]
    for name in SIX[1:control_planes]:
        assert plan[name] == ["kubeadm join as a control plane (etcd member, API server)"]
    assert changes_of(report, "join") == {n: ["kubeadm join as a worker"] for n in SIX[control_planes:]}
    assert sim.kube() == {} and sim.file("gpu-a1", "/etc/kubernetes/clusterctl/kubeadm-config.yaml") is None


def test_ha_control_planes_join_with_uploaded_certificates(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, SIX[:4], control_planes=3)
    report = sim.run()
    assert report.ok, report.failed_hosts
    nodes = sim.kube()["nodes"]
    assert [n for n, v in nodes.items() if v["control_plane"]] == ["gpu-a1", "gpu-a2", "gpu-a3"]
    assert sim.file("gpu-a3", "/etc/kubernetes/manifests/kube-apiserver.yaml") is not None
    assert [f.code for f in report.all_findings() if f.code == "NO_HA_ENDPOINT"] == ["NO_HA_ENDPOINT"]
    again = sim.run()
    assert again.ok and not again.changed


def test_a_worker_added_later_joins_with_a_fresh_token_after_the_old_one_expired(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, SIX[:3])
    assert sim.run().ok
    with sim.machine("gpu-a1").cluster.edit() as data:
        data["kubernetes"]["clock_offset_s"] = 3 * 3600  # every token of the first run has expired
    sim.add_host("gpu-b1")
    report = sim.run()
    assert report.ok, report.failed_hosts
    assert changes_of(report, "control-plane") == {"gpu-a1": ["join token (30 min) for gpu-b1"]}
    assert changes_of(report, "join") == {"gpu-b1": ["kubeadm join as a worker"]}
    touched = {r.host for r in report.results if r.changes}
    assert touched == {"gpu-a1", "gpu-b1"}  # gpu-a1 only made the token; gpu-a2, gpu-a3 untouched
    assert "gpu-b1" in sim.kube()["nodes"]


def test_a_token_that_expires_during_the_run_is_named_as_such(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, SIX[:3])
    report = sim.run(["control-plane", AdvanceClock(sim), "join"])
    assert not report.ok
    assert "join token expired" in report.failed_hosts.get("gpu-a2", ""), report.failed_hosts
    again = sim.run()  # the next run makes a fresh token
    assert again.ok, again.failed_hosts


def test_a_gpu_pod_that_fails_makes_verify_fail_naming_the_node(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, SIX[:4])
    with sim.machine("gpu-b1").host.edit() as data:
        data.setdefault("values", {})["gpu-pod"] = "fail"
    report = sim.run()
    assert not report.ok
    assert set(report.failed_hosts) == {"gpu-a1"}  # verify runs on the first control plane
    assert "gpu-b1" in report.failed_hosts["gpu-a1"] and "nvidia-smi -L" in report.failed_hosts["gpu-a1"]
    failing = [f for f in report.all_findings() if f.code == "GPU_POD_FAILED"]
    assert [f.host for f in failing] == ["gpu-b1"]
    assert "Failed to initialize NVML" in failing[0].message


def test_reset_then_bootstrap_again(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, SIX[:3])
    assert sim.run().ok
    first = sim.run(["reset"])
    assert first.ok and first.changed
    assert sim.file("gpu-a2", "/etc/kubernetes/kubelet.conf") is None
    assert sim.file("gpu-a2", "/etc/cni/net.d/10-calico.conflist") is None
    assert sim.kube() == {}
    second = sim.run(["reset"])
    assert second.ok and not second.changed
    again = sim.run()
    assert again.ok, again.failed_hosts
    assert any(f.code == "CLUSTER_WORKS" for f in again.all_findings())


def test_topology_labels_reach_the_nodes_through_nfd(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, SIX)
    assert sim.run().ok
    published = sim.file("gpu-a3", "/etc/kubernetes/node-feature-discovery/features.d/clusterctl-topology")
    assert published is not None and b"clusterctl.dev/nvlink.degraded=true" in published
    names = set(sim.machine("gpu-a3").host.fs.listdir("/etc/kubernetes/node-feature-discovery/features.d"))
    assert names == {"clusterctl-topology"}  # no temporary or backup file where NFD reads


def test_flannel_and_the_gpu_operator(tmp_path: Path) -> None:
    from clusterctl.inventory.model import BootstrapConfig

    sim = SimCluster(tmp_path, SIX[:2], bootstrap=BootstrapConfig(network={"cni": "flannel"},
                                                                   addons={"mode": "gpu-operator"}))
    report = sim.run()
    assert report.ok, report.failed_hosts
    assert "kube-system/gpu-operator" not in sim.kube()["releases"]
    assert "gpu-operator/gpu-operator" in sim.kube()["releases"]
    assert sim.file("gpu-a2", "/etc/cni/net.d/10-flannel.conflist") is not None


def test_a_local_chart_archive_is_copied_and_shown_as_a_binary_change(tmp_path: Path) -> None:
    import gzip

    from clusterctl.inventory.model import BootstrapConfig

    archive = tmp_path / "dcgm-exporter-4.8.2.tgz"
    archive.write_bytes(gzip.compress(b"chart files"))
    sim = SimCluster(tmp_path / "sim", SIX[:2], bootstrap=BootstrapConfig(
        addons={"charts": {"dcgm-exporter": {"archive": str(archive)}}}))
    plan = sim.run(apply=False)
    copies = [c for r in plan.results for c in r.changes if c.path and c.path.endswith(".tgz")]
    assert copies and copies[0].diff().startswith("Binary files /dev/null and gpu-a1:")
    report = sim.run()
    assert report.ok, report.failed_hosts
    assert sim.file("gpu-a1", "/etc/kubernetes/clusterctl/charts/dcgm-exporter-4.8.2.tgz") == archive.read_bytes()
    assert sim.kube()["releases"]["dcgm-exporter/dcgm-exporter"]["chart"] == "dcgm-exporter-4.8.2"


def test_without_a_survey_the_cluster_still_works_and_the_missing_labels_are_said(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, SIX[:2])
    report = sim.run(survey=None)
    assert report.ok, report.failed_hosts
    codes = [f.code for f in report.all_findings()]
    assert codes.count("NO_TOPOLOGY_LABELS") == 2 and "NO_NVLINK_RULE" in codes and "CLUSTER_WORKS" in codes
    rules = sim.file("gpu-a1", "/etc/kubernetes/clusterctl/prometheus/dcgm-alerts.rules.yml")
    assert rules is not None and b"NVLinkBandwidthZero" not in rules
    # Beside the rules, the Alertmanager receiver that sends them to 'remediate serve' with a token over TLS.
    receiver = sim.file("gpu-a1", "/etc/kubernetes/clusterctl/prometheus/alertmanager-receiver.yml")
    assert receiver is not None
    webhook = yaml.safe_load(receiver)["receivers"][0]["webhook_configs"][0]
    assert webhook["url"].startswith("https://") and webhook["url"].endswith(":9095/webhook")
    assert webhook["http_config"]["authorization"]["credentials_file"] == "/etc/alertmanager/clusterctl-remediate.token"


def test_reset_can_put_back_containerds_config_from_the_first_backup(tmp_path: Path) -> None:
    sim = SimCluster(tmp_path, SIX[:1])
    tree = sim.machine("gpu-a1").host.fs
    original = b'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.9"\n'
    # The names the gate gives backups: PATH.bak.<UTC time>.<mktemp's six characters>.
    tree.write("/etc/containerd/config.toml.bak.20261101093000.a1B2c3", original)
    tree.write("/etc/containerd/config.toml.bak.20261120101500.Zz9yX8", b"version = 2\n# a later backup\n")
    tree.write("/etc/containerd/config.toml", b"version = 2\n# what clusterctl wrote\n")
    first = sim.run(["reset"], restore_containerd=True)
    assert first.ok, first.failed_hosts
    summaries = [c.summary for r in first.results for c in r.changes]
    assert any("config.toml.bak.20261101093000.a1B2c3" in s for s in summaries)
    assert tree.read("/etc/containerd/config.toml") == original
    second = sim.run(["reset"], restore_containerd=True)
    assert second.ok and not second.changed
