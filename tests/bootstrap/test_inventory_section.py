"""The inventory's ``bootstrap:`` section: values read, mistakes named by file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.errors import InventoryError
from clusterctl.inventory.loader import load_inventory

HOSTS = "hosts:\n  n1: {transport: local}\n"


def load(tmp_path: Path, section: str) -> object:
    path = tmp_path / "inv.yaml"
    path.write_text(HOSTS + section)
    return load_inventory(path)


def test_settings_are_read(tmp_path: Path) -> None:
    (tmp_path / "k8s.asc").write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n")
    inventory = load(tmp_path, "bootstrap:\n  mirror: https://mirror.lan/apt/\n  runtime: runtimeclass\n  cdi: true\n"
                               "  apt_repos:\n    - {name: kubernetes, url: 'https://repo.lan/k8s', suites: ['/'],"
                               " key_file: k8s.asc}\n  registry_mirrors: {docker.io: ['https://registry.lan']}\n")
    settings = inventory.bootstrap  # type: ignore[attr-defined]
    assert settings.mirror == "https://mirror.lan/apt" and settings.runtime == "runtimeclass" and settings.cdi
    assert settings.apt_repos[0].key_file == str(tmp_path / "k8s.asc")
    assert settings.registry_mirrors == (("docker.io", ("https://registry.lan",)),)


@pytest.mark.parametrize("section, line, field, words", [
    ("bootstrap:\n  runtim: default\n", 4, "bootstrap.runtim", "Did you mean 'runtime'?"),
    ("bootstrap:\n  runtime: kata\n", 4, "bootstrap.runtime", "unknown runtime mode 'kata'"),
    ("bootstrap:\n  pod_subnet: 10.244.0.0/33\n", 4, "bootstrap.pod_subnet", "not a network in CIDR form"),
    ("bootstrap:\n  pod_subnet: 10.96.0.0/16\n", 4, "bootstrap", "overlaps service_subnet"),
    ("bootstrap:\n  apt_repos:\n    - {name: k8s, url: 'https://x', key_file: nope.asc}\n", 5,
     "bootstrap.apt_repos[0].key_file", "key_file nope.asc does not exist"),
    ("bootstrap:\n  apt_repos:\n    - {name: 'a b', url: 'https://x'}\n", 5, "bootstrap.apt_repos[0].name",
     "may only use ASCII letters"),
    ("bootstrap:\n  mirror: 'https://m.lan/a b'\n", 4, "bootstrap.mirror", "must not contain spaces"),
    ("bootstrap:\n  cdi: yes-please\n", 4, "bootstrap.cdi", "must be true or false"),
    ("bootstrap:\n  allow_cgroup_v1: 1\n", 4, "bootstrap.allow_cgroup_v1", "must be true or false"),
    # The YAML's own spelling, not Python's ("not True.").
    ("bootstrap:\n  alerts: {gpu_temp_c: true}\n", 4, "bootstrap.alerts.gpu_temp_c", "not 'true' (a yes/no value)."),
])
def test_mistakes_name_file_line_and_field(tmp_path: Path, section: str, line: int, field: str, words: str) -> None:
    with pytest.raises(InventoryError) as caught:
        load(tmp_path, section)
    error = caught.value
    assert (error.line, error.field) == (line, field) and error.file and error.file.endswith("inv.yaml")
    assert words in str(error)


def test_cgroup_v1_hosts_are_allowed_only_when_asked(tmp_path: Path) -> None:
    """kubelet 1.35+ refuses cgroup v1 unless failCgroupV1 is false, and kubeadm's preflight must be
    told to skip its check (what the real nodes of tests/realnodes need): both, only when asked."""
    from clusterctl.bootstrap.cluster.kubeadm import render_init_config, render_join_config
    from clusterctl.bootstrap.cluster.settings import cluster_settings
    from clusterctl.secret import Secret

    pinned = "hosts:\n  n1: {transport: local, roles: [control-plane], stack: {kubernetes: '1.37.2'}}\n"
    for asked in (False, True):
        path = tmp_path / f"inv-{asked}.yaml"
        path.write_text(pinned + f"bootstrap:\n  allow_cgroup_v1: {str(asked).lower()}\n")
        inventory = load_inventory(path)
        settings = cluster_settings(inventory)
        host = inventory.hosts[0]
        init = render_init_config(settings, host, inventory)
        join = render_join_config(settings, host, token=Secret("abcdef.0123456789abcdef", "token"),
                                  ca_hash="sha256:" + "0" * 64, certificate_key=Secret("k" * 64, "key")).reveal()
        assert ("failCgroupV1: false" in init) is asked
        assert ('ignorePreflightErrors: ["SystemVerification"]' in init) is asked
        assert ('ignorePreflightErrors: ["SystemVerification"]' in join) is asked


@pytest.mark.parametrize("section, field, said", [
    ("  cdi: yes-please\n", "bootstrap.cdi", "cdi must be true or false, not 'yes-please'."),
    ("  addons: {host_driver: yes-please}\n", "bootstrap.addons.host_driver",
     "host_driver must be true or false, not 'yes-please'."),
    ("  mirror: 'ftp://m.lan'\n", "bootstrap.mirror", "mirror must be an http(s):// or file:/ URL, not 'ftp://m.lan'."),
    ("  network: {manifest_mirror: 'ftp://m.lan'}\n", "bootstrap.network.manifest_mirror",
     "manifest_mirror must be an http(s):// or file:/ URL, not 'ftp://m.lan'."),
    ("  mirror: 'https://m.lan/a b'\n", "bootstrap.mirror",
     "mirror must not contain spaces or control characters, not 'https://m.lan/a b'."),
    ("  addons: {charts: {nvidia-device-plugin: {repository: 'https://m.lan/a b'}}}\n",
     "bootstrap.addons.charts.nvidia-device-plugin.repository",
     "repository must not contain spaces or control characters, not 'https://m.lan/a b'."),
])
def test_the_same_mistake_is_the_same_sentence_in_every_section(
        tmp_path: Path, section: str, field: str, said: str) -> None:
    """A true/false or URL setting reads by one rule, in bootstrap's own fields and in network/addons/alerts."""
    with pytest.raises(InventoryError) as caught:
        load(tmp_path, "bootstrap:\n" + section)
    assert (caught.value.field, caught.value.message) == (field, said)


def test_a_subnet_is_refused_in_the_same_words_where_the_cluster_phases_check_it_again(tmp_path: Path) -> None:
    from clusterctl.errors import UsageError
    from clusterctl.inventory import values
    from clusterctl.inventory.cluster_sections import by_rule

    with pytest.raises(InventoryError) as read:
        load(tmp_path, "bootstrap:\n  pod_subnet: 10.244.0.0/33\n")
    with pytest.raises(UsageError) as rechecked:
        by_rule(values.subnet, "10.244.0.0/33", "bootstrap.pod_subnet")
    assert read.value.message == rechecked.value.message == \
        "pod_subnet is not a network in CIDR form: '10.244.0.0/33' does not appear to be an IPv4 or IPv6 network."
    assert read.value.hint == rechecked.value.hint == "Write it like 10.244.0.0/16."
