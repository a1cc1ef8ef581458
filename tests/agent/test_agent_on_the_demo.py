"""On the demo after bootstrap: a fault injected on one mock host becomes a NodeCondition on its node
and a metric a real Prometheus scrapes from a real node-exporter's textfile collector, and fires
bootstrap's rule; nothing of clusterctl runs against the hosts from the control machine.

The mock hosts run their systemd timers when asked (``clusterctl mock timers``: the simulated
systemd starts the ExecStart= of the unit bootstrap wrote, and the agent runs on that host with
the host as its own machine). The node-exporter reads the mock host's own textfile folder.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clirun import DEMO, REPO_ROOT, clusterctl
from demo_cluster import SURVEY, node
from local_daemons import (
    ALERTMANAGER,
    NODE_EXPORTER,
    PROMETHEUS,
    alertmanager,
    free_port,
    node_exporter,
    prometheus,
    running,
)

needs_prometheus = pytest.mark.skipif(
    NODE_EXPORTER is None or PROMETHEUS is None,
    reason="needs Debian's prometheus-node-exporter and prometheus (.ci/run installs them)")
#: A bound for a loaded CI machine, not a speed goal.
WAIT_S = 120.0


def conditions(name: str) -> dict[str, dict[str, str]]:
    """The node's conditions as the (simulated) API server has them."""
    return {c["type"]: c for c in node(DEMO, name)["status"]["conditions"]}


def host_tree(host: str) -> Path:
    run = clusterctl("-i", DEMO, "-l", host, "-o", "json", "mock", "show")
    return Path(run.json()["hosts"][0]["folder"]) / "fs"


def fire_timers() -> dict[str, Any]:
    run = clusterctl("-i", DEMO, "-o", "json", "mock", "timers")
    assert run.exit_code == 0, run.output
    return {r["host"]: r for r in run.json()["runs"]}


@pytest.fixture
def bootstrapped_demo(tmp_path: Path) -> Iterator[None]:
    run = clusterctl("-i", DEMO, "bootstrap", "--survey", SURVEY, "--state-dir", str(tmp_path / "progress"))
    assert run.exit_code == 0, run.output
    yield


def test_the_agent_sets_and_clears_a_node_condition(bootstrapped_demo: None) -> None:
    runs = fire_timers()
    assert set(runs) == {"gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2", "gpu-b3"}
    assert runs["gpu-a2"]["service"] == "clusterctl-node-agent.service"
    before = conditions("gpu-a2")
    assert before["GPUProblem"]["status"] == "False" and before["GPUProblem"]["reason"] == "GPUsHealthy"
    assert before["Ready"]["status"] == "True"  # the kubelet's condition stays
    # The demo's broken hosts are named as such by their own agents.
    assert conditions("gpu-a3")["NVLinkProblem"]["reason"] == "NVLinkDown"
    assert conditions("gpu-b2")["GPUProblem"]["reason"] == "GPURowRemapPending"

    assert clusterctl("-i", DEMO, "-l", "gpu-a2", "mock", "set", "fault=xid-79").exit_code == 0
    fire_timers()
    after = conditions("gpu-a2")["GPUProblem"]
    assert after["status"] == "True" and after["reason"] == "GPUXid"
    assert "Xid 79" in after["message"] and "GPU 3" in after["message"]
    assert conditions("gpu-a1")["GPUProblem"]["status"] == "False"

    assert clusterctl("-i", DEMO, "-l", "gpu-a2", "mock", "set", "fault=").exit_code == 0
    fire_timers()
    cleared = conditions("gpu-a2")["GPUProblem"]
    assert cleared["status"] == "False" and cleared["reason"] == "GPUsHealthy"
    assert cleared["lastTransitionTime"] >= after["lastTransitionTime"]


def test_reset_takes_the_agent_away(bootstrapped_demo: None, tmp_path: Path) -> None:
    fire_timers()
    tree = host_tree("gpu-a2")
    assert (tree / "var/lib/prometheus/node-exporter/clusterctl_node_health.prom").is_file()
    run = clusterctl("-i", DEMO, "reset", "--yes", "--state-dir", str(tmp_path / "progress"))
    assert run.exit_code == 0, run.output
    for path in ("etc/systemd/system/clusterctl-node-agent.timer", "etc/systemd/system/clusterctl-node-agent.service",
                 "usr/local/lib/clusterctl/clusterctl-node.pyz", "etc/clusterctl/node-agent.kubeconfig",
                 "var/lib/prometheus/node-exporter/clusterctl_node_health.prom",
                 "usr/local/sbin/clusterctl-slurm-health", "usr/local/lib/clusterctl/clusterctl-node.pyz.sha256"):
        assert not (tree / path).exists(), path
    assert clusterctl("-i", DEMO, "-o", "json", "mock", "timers").json()["runs"] == []


def _query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as answer:
        result: list[dict[str, Any]] = json.load(answer)["data"]["result"]
        return result


def _alerts(port: int) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/alerts", timeout=10) as answer:
        found: list[dict[str, Any]] = json.load(answer)["data"]["alerts"]
        return found


@needs_prometheus
def test_a_fault_becomes_a_metric_prometheus_scrapes_and_bootstraps_rule_fires(
        bootstrapped_demo: None, tmp_path: Path) -> None:
    assert clusterctl("-i", DEMO, "-l", "gpu-a2", "mock", "set", "fault=xid-79").exit_code == 0
    fire_timers()
    textfiles = host_tree("gpu-a2") / "var/lib/prometheus/node-exporter"
    # The rules exactly as bootstrap's alert-rules phase wrote them on the first control plane.
    rules = host_tree("gpu-a1") / "etc/kubernetes/clusterctl/prometheus/dcgm-alerts.rules.yml"
    shutil.copy(rules, tmp_path / "rules.yml")
    exporter_port, prom_port = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [rules.yml]\n"
        f"scrape_configs: [{{job_name: node, static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]}}]\n")
    series: list[dict[str, Any]] = []
    firing: list[dict[str, Any]] = []
    with running(tmp_path, node_exporter=node_exporter(textfiles, exporter_port),
                 prometheus=prometheus(tmp_path, prom_port)) as alive:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not firing:
            alive()
            time.sleep(1.0)
            try:
                series = _query(prom_port, 'clusterctl_node_health_finding{severity="error"}')
                firing = [a for a in _alerts(prom_port)
                          if a["labels"]["alertname"] == "NodeHealthCheckFailed" and a["state"] == "firing"]
            except OSError:
                continue  # Prometheus is still starting
    assert [s["metric"] for s in series] == [{
        "__name__": "clusterctl_node_health_finding", "code": "GPU_XID", "gpu": "3", "hostname": "gpu-a2",
        "severity": "error", "instance": f"127.0.0.1:{exporter_port}", "job": "node"}], \
        (tmp_path / "node-exporter.log").read_text()[-2000:]
    assert [(a["labels"]["hostname"], a["labels"]["code"]) for a in firing] == [("gpu-a2", "GPU_XID")]


def test_an_agent_that_cannot_reach_the_api_server_fails_its_unit_and_says_so(bootstrapped_demo: None) -> None:
    run = clusterctl("-i", DEMO, "-l", "gpu-b1", "exec", "--sudo", "rm /etc/clusterctl/node-agent.kubeconfig")
    assert run.exit_code == 0, run.output
    runs = fire_timers_allowing_failures()
    assert runs["gpu-b1"]["exit_code"] == 1 and "node-agent.kubeconfig" in runs["gpu-b1"]["output"]
    assert runs["gpu-a1"]["exit_code"] == 0
    text = (host_tree("gpu-b1") / "var/lib/prometheus/node-exporter/clusterctl_node_health.prom").read_text()
    assert 'clusterctl_node_health_conditions_published{hostname="gpu-b1"} 0.0' in text


def fire_timers_allowing_failures() -> dict[str, Any]:
    run = clusterctl("-i", DEMO, "-o", "json", "mock", "timers")
    return {r["host"]: r for r in run.json()["runs"]}


@needs_prometheus
@pytest.mark.skipif(ALERTMANAGER is None, reason="needs Debian's prometheus-alertmanager (.ci/run installs it)")
def test_the_agents_alert_reaches_the_receiver_which_quarantines_the_host(
        bootstrapped_demo: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole loop on the demo: the fault, the agent on its host, node-exporter, Prometheus evaluating
    bootstrap's rules, Alertmanager calling 'remediate serve' with a bearer token over mutual TLS, and the
    receiver quarantining the host the agent named."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "tests" / "quarantine"))
    from receiver_start import secured_receiver

    from clusterctl.bootstrap.cluster.alerts import ReceiverAuth, render_alertmanager_receiver

    assert clusterctl("-i", DEMO, "-l", "gpu-a2", "mock", "set", "fault=xid-79").exit_code == 0
    fire_timers()
    receiver = secured_receiver(tmp_path, DEMO)
    remediator, log, token, pki = receiver.remediator, receiver.log, receiver.token, receiver.pki

    exporter_port, prom_port, am_port = free_port(), free_port(), free_port()
    auth = ReceiverAuth(credentials_file=str(token), ca_file=str(pki.ca), cert_file=str(pki.client_cert),
                        key_file=str(pki.client_key))
    (tmp_path / "alertmanager.yml").write_text(render_alertmanager_receiver(receiver.url, auth, group_wait="1s"))
    shutil.copy(host_tree("gpu-a1") / "etc/kubernetes/clusterctl/prometheus/dcgm-alerts.rules.yml",
                tmp_path / "rules.yml")
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [rules.yml]\n"
        f"scrape_configs: [{{job_name: node, static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]}}]\n"
        f"alerting: {{alertmanagers: [{{static_configs: [{{targets: ['127.0.0.1:{am_port}']}}]}}]}}\n")
    textfiles = host_tree("gpu-a2") / "var/lib/prometheus/node-exporter"
    with running(tmp_path, node_exporter=node_exporter(textfiles, exporter_port),
                 alertmanager=alertmanager(tmp_path, am_port), prometheus=prometheus(tmp_path, prom_port)) as alive:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and '"gpu-a2"' not in log.getvalue():
            alive()
            time.sleep(0.5)
        assert remediator.settle(120)
    decisions = [json.loads(line) for line in log.getvalue().splitlines() if line.startswith("{")]
    mine = [d for d in decisions if d.get("host") == "gpu-a2" and "alert" in d]
    assert mine and mine[-1]["alert"] == "NodeHealthCheckFailed", log.getvalue()
    assert mine[-1]["decision"] == "quarantine", log.getvalue()
    status = clusterctl("-i", DEMO, "-o", "json", "status")
    rows = {r["host"]: r for r in status.json()["quarantined"]}
    assert rows["gpu-a2"]["by_clusterctl"] and rows["gpu-a2"]["cordoned"], status.output
    assert "gpu-a1" not in rows


def test_a_host_gone_from_the_inventory_loses_its_agent_identity(bootstrapped_demo: None, tmp_path: Path) -> None:
    """gpu-b3 leaves the inventory: node-agent-access deletes its ServiceAccount, token, role and binding."""
    state = Path(clusterctl("-i", DEMO, "-l", "gpu-a1", "-o", "json", "mock", "show").json()["hosts"][0]["folder"])
    (tmp_path / "demo").symlink_to(REPO_ROOT / "inventories" / "demo")
    text = (REPO_ROOT / "inventories" / "demo.yaml").read_text()
    start = text.index("  gpu-b3:\n")
    block = text[start:text.index("rack: b", start) + len("rack: b\n")]
    smaller = text.replace(block, "").replace("[gpu-b1, gpu-b2, gpu-b3]", "[gpu-b1, gpu-b2]")
    smaller = smaller.replace("defaults:\n", f"defaults:\n  mock_state: {state.parent.parent}\n", 1)
    assert "gpu-b3" not in smaller.split("hosts:", 1)[1]
    inventory = tmp_path / "demo.yaml"
    inventory.write_text(smaller)

    def identities() -> set[str]:
        run = clusterctl("-i", DEMO, "-l", "gpu-a1", "-o", "json", "exec", "--sudo",
                         "kubectl --kubeconfig /etc/kubernetes/admin.conf get secrets -n kube-system "
                         "-l clusterctl.dev/node-agent -o json")
        items = json.loads(run.json()["hosts"][0]["stdout"])["items"]
        return {i["metadata"]["labels"]["clusterctl.dev/node-agent"] for i in items}

    assert "gpu-b3" in identities()
    plan = clusterctl("-i", inventory, "-o", "json", "bootstrap", "plan", "--phase", "node-agent-access")
    summaries = [c["summary"] for r in plan.json()["results"] for c in r["changes"]]
    assert plan.exit_code == 0 and "remove the node agent identity of gpu-b3 (not in the inventory)" in summaries, \
        summaries
    assert identities() >= {"gpu-b3"}  # a plan changes nothing
    run = clusterctl("-i", inventory, "bootstrap", "phase", "node-agent-access", "--yes")
    assert run.exit_code == 0, run.output
    assert identities() == {"gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1", "gpu-b2"}
