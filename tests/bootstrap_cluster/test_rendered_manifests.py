"""Every Kubernetes manifest the cluster phases render validates against the pinned version's schemas.

``kubernetes-validate`` carries the OpenAPI schemas of each Kubernetes release (strict: unknown
fields fail). Objects of custom resources (Calico's Installation) and Helm values have no such
schema: they are checked for the fields that matter.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from cluster_builders import make_settings

from clusterctl.bootstrap.cluster import addons, alerts, network
from clusterctl.bootstrap.cluster.settings import ClusterSettings

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")


def schema_version(settings: ClusterSettings) -> str:
    """The pinned minor, or the newest kubernetes-validate knows when the pin is newer still."""
    latest = tuple(int(p) for p in kubernetes_validate.latest_version().split(".")[:2])
    pinned = (settings.kubernetes.major, settings.kubernetes.minor)
    major, minor = min(pinned, latest)
    return f"{major}.{minor}.0"


def validate_all(text: str, settings: ClusterSettings) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert docs, "nothing rendered"
    for doc in docs:
        kubernetes_validate.validate(doc, schema_version(settings), strict=True)
    return docs


@pytest.mark.parametrize("version", ["1.31.4", "1.36.2", "1.37.0"])
def test_flannel_manifest_validates_and_carries_the_kubeadm_pod_subnet(version: str) -> None:
    settings = make_settings(kubernetes_version=version, network={"cni": "flannel"}, pod_subnet="10.32.0.0/12")
    plan = network.network_plan(settings)
    docs = validate_all(plan.rendered, settings)
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    assert yaml.safe_load(config["data"]["net-conf.json"])["Network"] == "10.32.0.0/12"
    assert plan.remote_manifests == ()


def test_flannel_images_come_from_the_site_registry_when_air_gapped() -> None:
    settings = make_settings(network={"cni": "flannel", "image_registry": "registry.site:5000"})
    docs = validate_all(network.network_plan(settings).rendered, settings)
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    spec = daemonset["spec"]["template"]["spec"]
    images = {c["image"] for c in spec["initContainers"] + spec["containers"]}
    assert images == {"registry.site:5000/flannel-io/flannel:v0.28.10",
                      "registry.site:5000/flannel-io/flannel-cni-plugin:v1.9.1-flannel3"}


def test_calico_installation_uses_the_pod_subnet_and_pinned_operator_manifests() -> None:
    settings = make_settings(pod_subnet="10.32.0.0/12")
    plan = network.network_plan(settings)
    installation, _ = yaml.safe_load_all(plan.rendered)
    assert installation["kind"] == "Installation"
    assert installation["spec"]["calicoNetwork"]["ipPools"][0]["cidr"] == "10.32.0.0/12"
    assert plan.remote_manifests == (
        "https://raw.githubusercontent.com/projectcalico/calico/v3.31.7/manifests/operator-crds.yaml",
        "https://raw.githubusercontent.com/projectcalico/calico/v3.31.7/manifests/tigera-operator.yaml",
    )
    mirrored = make_settings(network={"manifest_mirror": "https://mirror.site/calico", "image_registry": "reg.site"})
    plan = network.network_plan(mirrored)
    assert all(url.startswith("https://mirror.site/calico/") for url in plan.remote_manifests)
    assert next(yaml.safe_load_all(plan.rendered))["spec"]["registry"] == "reg.site"


@pytest.mark.parametrize("mode", ["device-plugin", "gpu-operator"])
@pytest.mark.parametrize("runtime_class", [True, False])
def test_addon_manifests_validate(mode: str, runtime_class: bool) -> None:
    settings = make_settings(addons={"mode": mode})
    plan = addons.addon_plan(settings, runtime_class=runtime_class, service_monitor=False)
    kinds = [validate_all(m.text, settings)[0]["kind"] for m in plan.manifests]
    assert ("RuntimeClass" in kinds) is runtime_class
    assert "ConfigMap" in kinds and "Namespace" in kinds


@pytest.mark.parametrize("runtime_class", [True, False])
def test_gpu_test_pod_validates_and_asks_for_one_gpu(runtime_class: bool) -> None:
    settings = make_settings()
    (pod,) = validate_all(addons.render_test_pod("gpu-a1.example.org", runtime_class=runtime_class), settings)
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["nvidia-smi", "-L"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "gpu-a1.example.org"}
    assert pod["metadata"]["name"] == "clusterctl-gpu-verify-gpu-a1-example-org"
    assert ("runtimeClassName" in pod["spec"]) is runtime_class



def test_on_a_mig_mixed_node_the_test_pod_asks_for_one_mig_instance() -> None:
    # The device plugin's mixed strategy offers no nvidia.com/gpu there, only nvidia.com/mig-<profile>.
    pod_yaml = addons.render_test_pod("gpu-a1", "nvidia.com/mig-1g.5gb", runtime_class=True)
    (pod,) = validate_all(pod_yaml, make_settings())
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.5gb": 1}

def test_a_misspelt_field_fails_validation() -> None:
    """The validation above can fail: strict schemas refuse unknown fields."""
    settings = make_settings()
    pod = yaml.safe_load(addons.render_test_pod("gpu-a1", runtime_class=False))
    pod["spec"]["nodeSelectr"] = pod["spec"].pop("nodeSelector")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, schema_version(settings), strict=True)


def test_device_plugin_values_turn_gfd_on_and_leave_nfd_to_its_own_release() -> None:
    plan = addons.addon_plan(make_settings(), runtime_class=False, service_monitor=True)
    values = {r.chart.release: yaml.safe_load(r.values) for r in plan.releases}
    assert [r.chart.release for r in plan.releases] == ["node-feature-discovery", "nvidia-device-plugin",
                                                       "dcgm-exporter"]
    assert values["nvidia-device-plugin"]["gfd"]["enabled"] is True
    assert values["nvidia-device-plugin"]["nfd"]["enabled"] is False
    assert "nvidia.com" in values["node-feature-discovery"]["master"]["config"]["extraLabelNs"]
    assert "worker" not in values["node-feature-discovery"]  # NFD 0.19 reads no sources.local.hooksEnabled
    dcgm = values["dcgm-exporter"]
    # kube-prometheus-stack scrapes only ServiceMonitors with its release label: the chart needs it given.
    assert dcgm["serviceMonitor"] == {"enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}}
    mount = dcgm["extraVolumeMounts"][0]["mountPath"]
    assert dcgm["arguments"] == ["-f", f"{mount}/counters.csv"]
    configmap = yaml.safe_load(next(m.text for m in plan.manifests if "counters" in m.path))
    assert dcgm["extraConfigMapVolumes"][0]["configMap"]["name"] == configmap["metadata"]["name"]
    assert configmap["metadata"]["namespace"] == "dcgm-exporter"
    listed = {line.split(",")[0] for line in configmap["data"]["counters.csv"].splitlines()}
    assert {c.field for c in alerts.COUNTERS if not c.default} <= listed


def test_gpu_operator_leaves_the_hosts_driver_and_toolkit_alone() -> None:
    plan = addons.addon_plan(make_settings(addons={"mode": "gpu-operator"}), runtime_class=False,
                             service_monitor=False, cdi=True)
    (release,) = plan.releases
    values = yaml.safe_load(release.values)
    assert values["driver"]["enabled"] is False and values["toolkit"]["enabled"] is False
    assert values["cdi"]["enabled"] is True
    configmap = yaml.safe_load(next(m.text for m in plan.manifests if "counters" in m.path))
    assert values["dcgmExporter"]["config"]["name"] == configmap["metadata"]["name"]
    assert "dcgm-metrics.csv" in configmap["data"]
    assert configmap["metadata"]["namespace"] == release.chart.namespace
    assert values["dcgmExporter"]["serviceMonitor"] == {"enabled": False}
    kps = make_settings(addons={"mode": "gpu-operator"}, alerts={"rule_labels": {"release": "kps"}})
    monitored = addons.addon_plan(kps, runtime_class=False, service_monitor=True)
    assert yaml.safe_load(monitored.releases[0].values)["dcgmExporter"]["serviceMonitor"] == {
        "enabled": True, "additionalLabels": {"release": "kps"}}
    driver_too = addons.addon_plan(make_settings(addons={"mode": "gpu-operator", "host_driver": False}),
                                   runtime_class=False, service_monitor=False)
    assert yaml.safe_load(driver_too.releases[0].values)["driver"]["enabled"] is True


def test_helm_commands_are_pinned_and_idempotent() -> None:
    plan = addons.addon_plan(make_settings(addons={"charts": {"dcgm-exporter": {"archive": "/srv/charts/d.tgz"}}}),
                             runtime_class=False, service_monitor=False)
    by_name = {r.chart.release: r for r in plan.releases}
    command = by_name["nvidia-device-plugin"].command()
    assert command.startswith("helm upgrade --install nvidia-device-plugin nvidia-device-plugin ")
    assert "--repo https://nvidia.github.io/k8s-device-plugin --version 0.20.0" in command
    local = by_name["dcgm-exporter"].command()
    assert "--repo" not in local and "/etc/kubernetes/clusterctl/charts/dcgm-exporter-4.8.2.tgz" in local
