"""A real Prometheus and Alertmanager (Debian's packages) on loopback: bootstrap's DCGM rule fires on an
Xid 79 metric, Alertmanager calls the receiver as the receiver snippet bootstrap writes beside its rules
configures it (a bearer token from its credentials_file, over TLS with a client certificate: certificates
made in the test), and the receiver, which requires both, quarantines and drains the named mock host."""

from __future__ import annotations

import io
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import make_pki
from kube_sim import KubeSim

from clusterctl.bootstrap.cluster import alerts
from clusterctl.bootstrap.cluster.settings import AlertSettings
from clusterctl.fanout import Runner
from clusterctl.inventory.cluster_sections import check_alerts
from clusterctl.inventory.loader import load_inventory
from clusterctl.quarantine.receiver import Remediator, serve
from clusterctl.quarantine.webhook_server import ListenAddress, Security, TokenFile, tls_context
from clusterctl.transport.factory import ConnectOptions, make_connector
from tests.metrics_targets import MetricsTargets

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(ALERTMANAGER is None or PROMETHEUS is None,
                                reason="needs Debian's prometheus-alertmanager and prometheus (.ci/run installs them)")
#: What dcgm-exporter would publish for a GPU that fell off the bus.
METRICS = b'# TYPE DCGM_FI_DEV_XID_ERRORS gauge\nDCGM_FI_DEV_XID_ERRORS{gpu="3",Hostname="gpu-02"} 79\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def exporter() -> Iterator[int]:
    targets = MetricsTargets()
    try:
        yield targets.serve([METRICS])
    finally:
        targets.close()


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def test_a_firing_dcgm_rule_quarantines_the_host_through_alertmanager(tmp_path: Path, exporter: int) -> None:
    sim = KubeSim(tmp_path / "cluster", names=("gpu-01", "gpu-02", "gpu-03"))
    sim.deploy("trainer", 3)
    log = io.StringIO()
    pki = make_pki(tmp_path / "pki")
    token = tmp_path / "remediate.token"
    token.write_text(secrets.token_hex(32) + "\n")
    token.chmod(0o600)
    security = Security(TokenFile(str(token)), tls_context(str(pki.server_cert), str(pki.server_key), str(pki.ca)),
                        mutual=True)
    connect = make_connector(ConnectOptions())
    remediator = Remediator(load_inventory(str(sim.inventory)), lambda: Runner(connect, parallel=8, timeout_s=60),
                            log, journal_folder=str(tmp_path / "undo"))
    bound: list[int] = []
    started = threading.Event()
    receiver = threading.Thread(target=serve, args=(remediator, ListenAddress("127.0.0.1", 0), security),
                                kwargs={"ready": lambda p: (bound.append(p), started.set())}, daemon=True)
    receiver.start()
    assert started.wait(30)

    am_port, prom_port = free_port(), free_port()
    # The receiver snippet bootstrap's alert-rules phase writes, with this test's paths in the inventory's settings.
    settings = check_alerts({"receiver_url": f"https://127.0.0.1:{bound[0]}/webhook", "receiver_token_file": str(token),
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
    processes = [
        start([str(ALERTMANAGER), f"--config.file={tmp_path / 'alertmanager.yml'}",
               f"--storage.path={tmp_path / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
               "--cluster.listen-address="], tmp_path / "alertmanager.log"),
        start([str(PROMETHEUS), f"--config.file={tmp_path / 'prometheus.yml'}",
               f"--storage.tsdb.path={tmp_path / 'prom-data'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
              tmp_path / "prometheus.log"),
    ]
    try:
        deadline = time.monotonic() + 120  # a bound for a loaded CI machine, not a speed goal
        while time.monotonic() < deadline and not sim.node("gpu-02")["spec"].get("unschedulable"):
            assert all(p.poll() is None for p in processes), (tmp_path / "alertmanager.log").read_text()[-2000:]
            time.sleep(0.5)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
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
