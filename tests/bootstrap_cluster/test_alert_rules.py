"""DCGM alert rules: promtool accepts them, their unit tests pass, and every counter they read is collected."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from clirun import clusterctl
from cluster_builders import FIXTURES

from clusterctl.bootstrap.cluster import alerts
from clusterctl.inventory.cluster_sections import AlertSettings

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package 'prometheus')")


def _rules_dir(tmp_path: Path, hosts: tuple[str, ...] = ("gpu-a1", "gpu-a2")) -> Path:
    (tmp_path / "dcgm-rules.yml").write_text(alerts.render_rules(AlertSettings(), hosts))
    shutil.copy(FIXTURES / "dcgm-rules.test.yml", tmp_path / "dcgm-rules.test.yml")
    return tmp_path


@needs_promtool
def test_promtool_accepts_the_rules_file(tmp_path: Path) -> None:
    path = _rules_dir(tmp_path) / "dcgm-rules.yml"
    result = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 14 rules found" in result.stdout


@needs_promtool
def test_promtool_unit_tests_pass(tmp_path: Path) -> None:
    folder = _rules_dir(tmp_path)
    result = subprocess.run([PROMTOOL, "test", "rules", "dcgm-rules.test.yml"], cwd=folder, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_fail_when_a_host_loses_its_nvlink_rule(tmp_path: Path) -> None:
    """The unit tests can fail: without gpu-a1 in the NVLink hosts, its silent GPU raises nothing."""
    folder = _rules_dir(tmp_path, hosts=("gpu-a2",))
    result = subprocess.run([PROMTOOL, "test", "rules", "dcgm-rules.test.yml"], cwd=folder, capture_output=True,
                            text=True)
    assert result.returncode != 0 and "NVLinkBandwidthZero" in result.stdout + result.stderr


def test_without_nvlink_hosts_there_is_no_nvlink_bandwidth_rule() -> None:
    names = [r["alert"] for r in yaml.safe_load(alerts.render_rules(AlertSettings()))["groups"][0]["rules"]]
    assert "NVLinkBandwidthZero" not in names and "GPUFellOffTheBus" in names


def test_every_metric_the_rules_read_is_in_clusterctls_counter_list() -> None:
    text = alerts.render_rules(AlertSettings(), ["gpu-a1"])
    used = set(re.findall(r"\bDCGM_FI_[A-Z0-9_]+", text))
    collected = {c.field for c in alerts.COUNTERS}
    assert used <= collected
    extra = {c.field for c in alerts.COUNTERS if not c.default}
    assert {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"} <= extra
    for counter in alerts.COUNTERS:
        for rule in counter.needed_by:
            assert f"alert: {rule}" in text, f"{counter.field} claims rule {rule}, which does not exist"


def test_the_prometheus_rule_carries_the_same_groups_as_the_plain_file() -> None:
    settings = AlertSettings(namespace="observability", rule_labels={"release": "kps"})
    plain = yaml.safe_load(alerts.render_rules(settings, ["gpu-a1"]))
    wrapped = yaml.safe_load(alerts.render_prometheus_rule(settings, ["gpu-a1"]))
    assert wrapped["apiVersion"] == "monitoring.coreos.com/v1" and wrapped["kind"] == "PrometheusRule"
    assert wrapped["metadata"]["namespace"] == "observability"
    assert wrapped["metadata"]["labels"]["release"] == "kps"
    assert wrapped["spec"] == plain


def test_host_names_are_escaped_for_promql_and_odd_ones_refused() -> None:
    text = alerts.render_rules(AlertSettings(), ["gpu-a1.dc1"])
    assert 'Hostname=~"gpu-a1\\\\.dc1"' in text
    from clusterctl.errors import UsageError

    with pytest.raises(UsageError):
        alerts.render_rules(AlertSettings(), ['gpu"} or vector(1) #'])


def test_the_receiver_snippet_is_what_alertmanager_accepts(tmp_path: Path) -> None:
    from clusterctl.inventory.cluster_sections import check_alerts

    settings = check_alerts({"receiver_url": "https://[fd00::5]:9443/webhook",
                             "receiver_token_file": "/run/secrets/remediate.token"}, "bootstrap.alerts")
    text = alerts.render_receiver_for(settings, "10.0.0.1")
    webhook = yaml.safe_load(text)["receivers"][0]["webhook_configs"][0]
    assert webhook["url"] == "https://[fd00::5]:9443/webhook"
    assert webhook["http_config"] == {"authorization": {"type": "Bearer",
                                                        "credentials_file": "/run/secrets/remediate.token"},
                                      "tls_config": {"ca_file": "/etc/alertmanager/clusterctl-remediate-ca.crt"}}
    default = yaml.safe_load(alerts.render_receiver_for(AlertSettings(), "fd00::1"))
    assert default["receivers"][0]["webhook_configs"][0]["url"] == "https://[fd00::1]:9095/webhook"
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("needs Debian's prometheus-alertmanager (amtool)")
    (tmp_path / "alertmanager.yml").write_text(text)
    checked = subprocess.run([amtool, "check-config", str(tmp_path / "alertmanager.yml")], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_receiver_settings_are_checked() -> None:
    from clusterctl.errors import UsageError
    from clusterctl.inventory.cluster_sections import check_alerts

    for bad, field in (({"receiver_url": "ftp://x"}, "receiver_url"), ({"receiver_token_file": "token"},
                                                                       "receiver_token_file")):
        with pytest.raises(UsageError) as caught:
            check_alerts(bad, "bootstrap.alerts")
        assert f"bootstrap.alerts.{field}" in str(caught.value)


def test_the_receiver_url_is_read_by_the_rule_alertmanager_config_reads_it_by() -> None:
    """The URL Alertmanager posts to, in the inventory or on alertmanager-config's command line: one rule, one
    sentence (``inventory.values.url``, web schemes only)."""
    from clusterctl.errors import UsageError
    from clusterctl.inventory.cluster_sections import check_alerts

    for bad, said in (("file:/srv/hook", "must be an http(s):// URL, not 'file:/srv/hook'."),
                      ("http://10.0.0.5:9095/\x01", "must not contain spaces or control characters, not "
                                                    "'http://10.0.0.5:9095/\\x01'.")):
        with pytest.raises(UsageError) as caught:
            check_alerts({"receiver_url": bad}, "bootstrap.alerts")
        assert str(caught.value) == f"field 'bootstrap.alerts.receiver_url': receiver_url {said}"
        run = clusterctl("remediate", "alertmanager-config", "--url", bad)
        assert run.exit_code == 2 and run.stderr == f"error: --url {said}\n"  # the option named once
