"""A real Prometheus and Alertmanager (Debian's packages) on loopback: bootstrap's DCGM rule fires on an
Xid 79 metric, Alertmanager calls the receiver as the receiver snippet bootstrap writes beside its rules
configures it (a bearer token from its credentials_file, over TLS with a client certificate: certificates
made in the test), and the receiver, which requires both, quarantines and drains the named mock host."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_sim import KubeSim
from local_daemons import ALERTMANAGER, PROMETHEUS, alertmanager, free_port, prometheus, running
from receiver_start import secured_receiver

from clusterctl.bootstrap.cluster import alerts
from clusterctl.bootstrap.cluster.settings import AlertSettings
from clusterctl.inventory.cluster_sections import check_alerts
from tests.metrics_targets import MetricsTargets

pytestmark = pytest.mark.skipif(ALERTMANAGER is None or PROMETHEUS is None,
                                reason="needs Debian's prometheus-alertmanager and prometheus (.ci/run installs them)")
#: What dcgm-exporter would publish for a GPU that fell off the bus.
METRICS = b'# TYPE DCGM_FI_DEV_XID_ERRORS gauge\nDCGM_FI_DEV_XID_ERRORS{gpu="3",Hostname="gpu-02"} 79\n'


@pytest.fixture
def exporter() -> Iterator[int]:
    targets = MetricsTargets()
    try:
        yield targets.serve([METRICS])
    finally:
        targets.close()


def test_a_firing_dcgm_rule_quarantines_the_host_through_alertmanager(tmp_path: Path, exporter: int) -> None:
    sim = KubeSim(tmp_path / "cluster", names=("gpu-01", "gpu-02", "gpu-03"))
    sim.deploy("trainer", 3)
    receiver = secured_receiver(tmp_path, sim.inventory)
    remediator, log, token, pki = receiver.remediator, receiver.log, receiver.token, receiver.pki

    am_port, prom_port = free_port(), free_port()
    # The receiver snippet bootstrap's alert-rules phase writes, with this test's paths in the inventory's settings.
    settings = check_alerts({"receiver_url": receiver.url, "receiver_token_file": str(token),
                             "receiver_ca_file": str(pki.ca), "receiver_cert_file": str(pki.client_cert),
                             "receiver_key_file": str(pki.client_key)}, "bootstrap.alerts")
    am_config = alerts.render_receiver_for(settings, "10.0.0.1").replace("group_wait: 10s", "group_wait: 1s")
    (tmp_path / "alertmanager.yml").write_text(am_config)
    (tmp_path / "dcgm-rules.yml").write_text(alerts.render_rules(AlertSettings(), ("gpu-01", "gpu-02")))
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [dcgm-rules.yml]\n"
        f"scrape_configs: [{{job_name: dcgm, static_configs: [{{targets: ['127.0.0.1:{exporter}']}}]}}]\n"
        f"alerting: {{alertmanagers: [{{static_configs: [{{targets: ['127.0.0.1:{am_port}']}}]}}]}}\n")
    with running(tmp_path, alertmanager=alertmanager(tmp_path, am_port), prometheus=prometheus(tmp_path, prom_port)
                 ) as alive:
        deadline = time.monotonic() + 120  # a bound for a loaded CI machine, not a speed goal
        while time.monotonic() < deadline and not sim.node("gpu-02")["spec"].get("unschedulable"):
            alive()
            time.sleep(0.5)
    assert remediator.settle(120)  # the drain after the cordon
    node = sim.node("gpu-02")
    assert node["spec"].get("unschedulable") is True, log.getvalue() + (tmp_path / "prometheus.log").read_text()[-2000:]
    assert {"key": "clusterctl.dev/unhealthy", "value": "GPUFellOffTheBus", "effect": "NoSchedule"} in \
        node["spec"]["taints"]
    assert not any(p.startswith("default/trainer-") for p in sim.pods_on("gpu-02"))
    assert '"decision": "drain"' in log.getvalue() and "gpu-02" in log.getvalue()
    assert "CN=alertmanager" in log.getvalue()  # the caller, as its client certificate names it
    assert '"unauthorized"' not in log.getvalue() and token.read_text().strip() not in log.getvalue()
    assert not sim.node("gpu-01")["spec"].get("unschedulable")
