"""Cluster settings from the inventory: version range, subnets, endpoint, CNI and chart choices."""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_builders import make_inventory, make_settings

from clusterctl.bootstrap.cluster.settings import (
    cluster_settings,
    kubelet_node_labels,
    kubernetes_version,
    settings_from_mapping,
)
from clusterctl.errors import UsageError
from clusterctl.inventory.pins import CHART_PINS


def test_a_pin_that_needs_kubeadm_v1beta3_is_refused_with_the_supported_range() -> None:
    with pytest.raises(UsageError) as err:
        kubernetes_version("1.30.5")
    message = str(err.value)
    assert "v1beta3" in message and "1.31" in message and "stack.kubernetes" in message


def test_the_first_minor_with_v1beta4_is_accepted() -> None:
    assert kubernetes_version("1.31.0").tag == "v1.31.0"
    assert kubernetes_version("v1.37.1").tag == "v1.37.1"


def test_a_version_that_is_not_major_minor_patch_is_refused() -> None:
    with pytest.raises(UsageError, match=r"MAJOR\.MINOR\.PATCH"):
        kubernetes_version("1.36")


def test_defaults_are_the_inventorys_whatever_the_cni_and_follow_the_first_control_plane() -> None:
    settings = make_settings()
    assert settings.network.cni == "calico"
    assert settings.pod_subnet == "10.244.0.0/16" and settings.service_subnet == "10.96.0.0/12"
    assert settings.control_plane_endpoint == "10.0.0.1:6443"
    flannel = make_settings(network={"cni": "flannel"})
    assert flannel.pod_subnet == "10.244.0.0/16"
    assert flannel.network.manifest_base.endswith("v0.28.10")


def test_an_unknown_field_gets_a_did_you_mean() -> None:
    with pytest.raises(UsageError) as err:
        make_settings(network={"cnii": "flannel"})
    assert "bootstrap.network.cnii" in str(err.value) and "cni" in str(err.value)


def test_an_unknown_cni_names_the_choices() -> None:
    with pytest.raises(UsageError, match="calico"):
        make_settings(network={"cni": "weave"})


def test_a_chart_can_be_repinned_or_taken_from_a_local_archive() -> None:
    settings = make_settings(addons={"charts": {"dcgm-exporter": {"version": "4.6.1"},
                                                "nvidia-device-plugin": {"archive": "charts/ndp-0.20.0.tgz"}}})
    assert settings.addons.chart("dcgm-exporter").version == "4.6.1"
    assert settings.addons.chart("nvidia-device-plugin").archive == "charts/ndp-0.20.0.tgz"
    assert settings.addons.chart("node-feature-discovery").version == CHART_PINS["node-feature-discovery"].version
    with pytest.raises(UsageError, match="no chart named"):
        make_settings(addons={"charts": {"prometheus": {"version": "1"}}})


def test_an_air_gapped_mirror_replaces_the_manifest_base() -> None:
    settings = make_settings(network={"manifest_mirror": "https://mirror.site/calico/v3.31.4/",
                                      "image_registry": "registry.site:5000/mirror"})
    assert settings.network.manifest_base == "https://mirror.site/calico/v3.31.4"
    assert settings.network.image_registry == "registry.site:5000/mirror"
    ipv6 = make_settings(network={"image_registry": "[fd00::1]:5000/mirror/"}, addons={"image_registry": "reg.site"})
    assert (ipv6.network.image_registry, ipv6.addons.image_registry) == ("[fd00::1]:5000/mirror", "reg.site")


def test_hosts_pinning_two_kubernetes_versions_are_refused() -> None:
    from dataclasses import replace

    from clusterctl.inventory.model import StackPin

    inv = make_inventory()
    hosts = (replace(inv.hosts[0], stack=StackPin(kubernetes="1.36.2")),
             replace(inv.hosts[1], stack=StackPin(kubernetes="1.35.0")))
    with pytest.raises(UsageError, match="different Kubernetes versions"):
        cluster_settings(replace(inv, hosts=hosts))


def test_zone_and_rack_become_kubelet_labels_and_bad_values_are_refused() -> None:
    from dataclasses import replace

    inv = make_inventory()
    assert kubelet_node_labels(inv.hosts[0]) == {"topology.kubernetes.io/zone": "zone-1", "clusterctl.dev/rack": "a"}
    with pytest.raises(UsageError, match="label value"):
        kubelet_node_labels(replace(inv.hosts[0], rack="rack a,evil=1"))


INVENTORY = """\
cluster: t
defaults:
  stack: {kubernetes: "1.36.2"}
bootstrap:
  pod_subnet: 10.32.0.0/12
  network:
    cni: flannel
    manifest_mirror: https://mirror.site/flannel
  addons:
    mode: gpu-operator
    charts:
      gpu-operator: {archive: charts/gpu-operator-v26.7.0.tgz}
  alerts: {namespace: observability}
hosts:
  cp1: {roles: [control-plane], address: 10.0.0.1}
  w1: {address: 10.0.0.2}
"""


def test_the_inventory_bootstrap_section_feeds_the_cluster_settings(tmp_path: Path) -> None:
    from clusterctl.inventory.loader import load_inventory

    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    settings = cluster_settings(load_inventory(path))
    assert settings.network.cni == "flannel" and settings.network.manifest_base == "https://mirror.site/flannel"
    assert settings.pod_subnet == "10.32.0.0/12"
    assert settings.addons.mode == "gpu-operator"
    assert settings.addons.chart("gpu-operator").archive == str(tmp_path / "charts" / "gpu-operator-v26.7.0.tgz")
    assert settings.alerts.namespace == "observability"
    assert settings.control_plane_endpoint == "10.0.0.1:6443"


def test_a_typo_in_the_cluster_sections_names_file_line_and_field(tmp_path: Path) -> None:
    from clusterctl.errors import InventoryError
    from clusterctl.inventory.loader import load_inventory

    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY.replace("    cni: flannel", "    cnii: flannel"))
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    assert str(err.value).startswith(f"{path}:7: field 'bootstrap.network.cnii': unknown field 'cnii'.")


@pytest.mark.parametrize("endpoint", ["k8s-api.example:0", "k8s-api.example:70000", "-k8s-api.example", "[::::]:6443"])
def test_an_endpoint_with_no_usable_port_or_address_names_file_line_and_field(tmp_path: Path, endpoint: str) -> None:
    from clusterctl.errors import InventoryError
    from clusterctl.inventory.loader import load_inventory

    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY.replace("  pod_subnet:", f"  control_plane_endpoint: \"{endpoint}\"\n  pod_subnet:"))
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    assert str(err.value).startswith(f"{path}:5: field 'bootstrap.control_plane_endpoint': ")


def test_an_ipv6_first_control_plane_is_the_endpoint_in_brackets() -> None:
    settings = settings_from_mapping({}, kubernetes_pin="1.36.2", first_control_plane="fd00::1")
    assert settings.control_plane_endpoint == "[fd00::1]:6443"
    assert make_settings(control_plane_endpoint="[fd00::1]:8443").control_plane_endpoint == "[fd00::1]:8443"


def test_the_inventory_can_name_the_saved_survey(tmp_path: Path) -> None:
    from clusterctl.bootstrap.registry import all_phases
    from clusterctl.bootstrap.run import BootstrapRequest, run_options
    from clusterctl.inventory.loader import load_inventory

    (tmp_path / "charts").mkdir()  # the chart archive the inventory names, next to it: a run reads it up front
    (tmp_path / "charts" / "gpu-operator-v26.7.0.tgz").write_bytes(b"\x1f\x8b")
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY.replace("  pod_subnet: 10.32.0.0/12", "  pod_subnet: 10.32.0.0/12\n  survey: s.json"))
    (tmp_path / "s.json").write_text((Path(__file__).parent / "fixtures" / "demo-survey.json").read_text())
    inventory = load_inventory(path)
    options = run_options(inventory, inventory.hosts, all_phases(), BootstrapRequest(apply=False))
    assert options.survey == str(tmp_path / "s.json")
    other = str(Path(__file__).parent / "fixtures" / "demo-survey.json")
    given = run_options(inventory, inventory.hosts, all_phases(), BootstrapRequest(apply=False, survey=other))
    assert given.survey == other  # --survey wins over the inventory's
