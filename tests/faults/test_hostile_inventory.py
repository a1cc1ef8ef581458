"""Inventory values that become file names, TOML/YAML keys, URLs or command arguments: refused at
load with file, line and field (exit 2); templates escape what they write by the target format."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import clusterctl, run_clusterctl
from refusals import inventory_refusal
from sshd_hosts import SSHDHosts

from clusterctl.errors import InventoryError
from clusterctl.templating import TemplateError, render

HOSTS = "cluster: c\nhosts:\n  n1: {transport: local, roles: [control-plane]}\n"


def _load_error(tmp_path: Path, section: str) -> InventoryError:
    path = tmp_path / "inv.yaml"
    path.write_text(HOSTS + section)
    return inventory_refusal(path)


@pytest.mark.parametrize(("key", "why"), [
    ('"docker.io # x\\n[host.\\"evil.example\\"]\\n  skip_verify = true\\n#"', "newline breaks out of a comment"),
    ('".."', "escapes certs.d"),
    ('"."', "is certs.d itself"),
    ('"a/../../etc"', "a path"),
    ('"reg istry"', "a space"),
    ('"registry:70000"', "a port out of range"),
    ('"registry..lan"', "an empty DNS label"),
])
def test_a_registry_mirror_key_that_is_not_a_registry_is_refused_at_load(tmp_path: Path, key: str, why: str) -> None:
    error = _load_error(tmp_path, f"bootstrap:\n  registry_mirrors:\n    {key}: [https://mirror.lan]\n")
    assert error.line == 6, why
    assert error.field is not None and error.field.startswith("bootstrap.registry_mirrors.")


@pytest.mark.parametrize(("section", "line", "field"), [
    ("bootstrap:\n  network: {version: 'v3.31.4/../../evil'}\n", 5, "bootstrap.network.version"),
    ("bootstrap:\n  network: {version: 'latest?x=1'}\n", 5, "bootstrap.network.version"),
    ("bootstrap:\n  network: {image_registry: 'registry:70000/mirror'}\n", 5, "bootstrap.network.image_registry"),
    ("bootstrap:\n  addons: {image_registry: 'fd00::1/mirror'}\n", 5, "bootstrap.addons.image_registry"),
    ("bootstrap:\n  alerts: {namespace: 'Monitoring Stuff'}\n", 5, "bootstrap.alerts.namespace"),
    ("bootstrap:\n  alerts: {namespace: {a: b}}\n", 5, "bootstrap.alerts.namespace"),
    ("bootstrap:\n  alerts: {rule_labels: {team: 'a: b'}}\n", 5, "bootstrap.alerts.rule_labels.team"),
    ("bootstrap:\n  sandbox_image: 'registry.k8s.io/pause:3.10\"\\n'\n", 5, "bootstrap.sandbox_image"),
    ("bootstrap:\n  sandbox_image: 'registry.lan:70000/pause:3.10'\n", 5, "bootstrap.sandbox_image"),
    ("bootstrap:\n  image_repository: 'registry.lan:0/k8s'\n", 5, "bootstrap.image_repository"),
    ("bootstrap:\n  containerd_package: 'containerd.io; id'\n", 5, "bootstrap.containerd_package"),
    ("bootstrap:\n  nvidia_container_toolkit: \"1.18.0'\"\n", 5, "bootstrap.nvidia_container_toolkit"),
    ("bootstrap:\n  addons: {charts: {gpu-operator: {version: 'v25 && id'}}}\n", 5,
     "bootstrap.addons.charts.gpu-operator.version"),
])
def test_loose_bootstrap_values_are_refused_at_load(tmp_path: Path, section: str, line: int, field: str) -> None:
    error = _load_error(tmp_path, section)
    assert (error.line, error.field) == (line, field)


def test_native_ssh_options_proxycommand_is_refused_not_ignored(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "defaults:\n  ssh: {options: {ProxyCommand: 'nc -x proxy:1080 %h %p'}}\n")
    assert (error.line, error.field) == (5, "defaults.ssh.options.ProxyCommand")
    assert "jump_host" in str(error)


def test_a_check_and_a_plan_both_refuse_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(HOSTS + "bootstrap:\n  registry_mirrors:\n    '..': [https://mirror.lan]\n")
    for command in (["inventory", "check"], ["bootstrap", "plan"]):
        done = clusterctl("-i", str(path), *command)
        assert done.exit_code == 2, done.stderr
        assert f"{path}:6" in done.stderr and "bootstrap.registry_mirrors.." in done.stderr


def _refused_before_any_phase(tmp_path: Path, demo_text: str, *said: str) -> Path:
    """The demo inventory as ``demo_text`` makes it: a plan and an apply both stop with exit 2, one error naming
    ``said``, and no phase run."""
    demo = Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml"
    path = tmp_path / "inv.yaml"
    path.write_text(demo_text.replace("profile: demo/", f"profile: {demo.parent}/demo/"))
    for command in (["bootstrap", "plan"], ["bootstrap", "--yes", "--state-dir", str(tmp_path / "state")]):
        done = clusterctl("-i", str(path), *command)
        assert done.exit_code == 2, done.output
        assert "PHASE" not in done.stdout and done.stderr.count("error:") == 1, done.output
        assert all(s in done.stderr for s in said), done.stderr
    return path


def test_a_rack_that_cannot_be_a_node_label_stops_bootstrap_before_any_phase(tmp_path: Path) -> None:
    """The survey takes any rack name; bootstrap puts it in a node label (kubeadm's kubelet flags): refused up
    front naming the host, not a failure of kubeadm init once the kernel and packages phases changed the hosts."""
    demo = Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml"
    text = demo.read_text().replace("address: 10.0.1.11\n    rack: b", "address: 10.0.1.11\n    rack: rack b1")
    path = _refused_before_any_phase(tmp_path, text, "hosts.gpu-b1", "'rack b1'")
    assert clusterctl("-i", str(path), "bootstrap", "plan", "--phase", "kernel").exit_code == 0


def test_a_chart_archive_that_is_not_there_stops_bootstrap_before_any_phase(tmp_path: Path) -> None:
    """An air-gapped site's chart archive not there yet: refused up front naming the field, not a failure of the
    gpu-addons phase after the cluster was made; the list of what to mirror still comes."""
    demo = Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml"
    gone = tmp_path / "charts" / "dcgm-exporter-4.8.2.tgz"
    text = demo.read_text() + f'bootstrap:\n  addons: {{charts: {{dcgm-exporter: {{archive: "{gone}"}}}}}}\n'
    path = _refused_before_any_phase(tmp_path, text, "bootstrap.addons.charts.dcgm-exporter.archive", str(gone))
    assert clusterctl("-i", str(path), "bootstrap", "artifacts").exit_code == 0


def test_templates_keep_a_hostile_registry_in_its_comment_and_refuse_raw_control_characters() -> None:
    rendered = render("bootstrap/containerd/hosts.toml.j2", registry="docker.io\n[host.\"evil\"]",
                      server="https://x", mirrors=["https://m"])
    tables = [line for line in rendered.splitlines() if line.startswith("[")]
    assert tables == ['[host."https://m"]']
    with pytest.raises(TemplateError, match="control character"):
        render("bootstrap/kernel/modules-load.conf.j2", modules=["br_netfilter\nevil"])


@pytest.mark.sshd
def test_an_ssh_config_proxycommand_fails_the_host_instead_of_connecting_directly(
    sshd_hosts: SSHDHosts, tmp_path: Path
) -> None:
    hosts = sshd_hosts(2)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(f"Host {hosts[0].name}\n  ProxyCommand nc -x proxy.invalid:1080 %h %p\n")

    run = run_clusterctl(["-i", str(inventory), "--known-hosts", str(known), "-o", "json", "exec", "--", "hostname"],
                         home=home)

    records = run.by_host()
    assert records[hosts[1].name]["stdout"] == f"{hosts[1].name}\n"
    failed = records[hosts[0].name]
    assert failed["ok"] is False and failed["stdout"] is None
    assert "ProxyCommand" in failed["failure"]["message"] and "ProxyJump" in failed["failure"]["message"]
