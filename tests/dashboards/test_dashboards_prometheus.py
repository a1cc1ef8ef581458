"""Every panel's query, run by a real Prometheus (Debian's package) on recorded exporter output.

dcgm-exporter (both host label names), kube-state-metrics and node-exporter's infiniband collector are
served as recorded (tests/fixtures/dashboards/README.md), clusterctl's own textfile metrics as
``measured.py`` writes them; a query that returns nothing fails, and promtool checks every expression.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterctl.agent.metrics import RunFigures
from clusterctl.agent.metrics import render as agent_textfile
from clusterctl.bench.model import LinkResult
from clusterctl.bench.payload import link_record
from clusterctl.dashboards.inputs import DashboardHost, DashboardInputs, bench_from_results
from clusterctl.dashboards.measured import textfile_text
from clusterctl.dashboards.render import render
from clusterctl.findings import Finding, Severity
from tests.fixture_files import read_fixture
from tests.metrics_targets import MetricsTargets

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                                reason="needs Debian's prometheus (promtool too); .ci/run installs it")

A800 = "msxf-hpc-64-35-ai"
A30 = "dcgm-exporter-wwwjh"
#: What Grafana puts in place of its variables, for a Prometheus that has scraped for a few seconds.
VARIABLES = {"$__rate_interval": "5s", "$__range_s": "3600", "$__range": "1h", "$__interval": "1s",
             "$host": ".*", "$cluster": "lab"}


def bidirectional_link(server: str, client: str, gbps: float) -> dict[str, Any]:
    """A bench ib -b result on a 200 Gb/s link as results.json records it (both directions add up)."""
    return link_record(LinkResult(1, server, client, "mlx5_0", "mlx5_0", 18515, "ib_write_bw", gbps=gbps,
                                  bidirectional=True, expected_gbps=200.0, min_fraction=0.9, same_rack=True))


def lab_inputs() -> DashboardInputs:
    """The two recorded hosts as a survey would see them, a bench run between them, and two -b runs."""
    links, nccl = bench_from_results([
        {"test": "ib_write_bw", "links": [
            {"server": A800, "server_hca": "mlx5_0", "client": A30, "client_hca": "mlx5_0", "test": "ib_write_bw",
             "gbps": 196.8, "expected_gbps": 200.0, "slow": False, "same_rack": True},
            {"server": A800, "server_hca": "mlx5_2", "client": A30, "client_hca": "mlx5_2", "test": "ib_write_bw",
             "gbps": 7.86, "expected_gbps": 200.0, "slow": True, "same_rack": True}]},
        {"test": "ib_write_bw", "links": [bidirectional_link("gpu-b1", "gpu-b2", 392.0),
                                          bidirectional_link("gpu-b3", "gpu-b4", 220.0)]},
        {"nccl": {"op": "all_reduce", "median_busbw_gbs": 232.4,
                  "runs": [{"host": A800, "busbw_gbs": 232.44}, {"host": A30, "busbw_gbs": 20.1}]}},
    ])
    return DashboardInputs("lab", (
        DashboardHost(A800, "r1", "NVIDIA A800-SXM4-80GB", tuple(range(8)), (tuple(range(8)),),
                      {g: f"mlx5_{g // 2 * 2}" for g in range(8)}),
        DashboardHost(A30, "r1", "NVIDIA A30", (0, 1, 2), ()),
    ), tuple(links), tuple(nccl))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str, params: dict[str, str]) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            data: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        data = json.loads(exc.read())
    return data


def _wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    folder = tmp_path_factory.mktemp("prometheus")
    targets = MetricsTargets()
    ksm = read_fixture("dashboards", "kube-state-metrics-nodes-edited.prom")
    # The A30 host is cordoned on every other scrape: a host that flaps.
    cordoned = f'kube_node_spec_unschedulable{{node="{A30}"}}'
    flapping = ksm.replace(f"{cordoned} 0", f"{cordoned} 1")
    jobs = {
        "dcgm-hostname-upper": [read_fixture("dashboards", "dcgm-exporter-a800-535.129.03-Hostname-clipped.prom")],
        "dcgm-hostname-lower": [read_fixture("dashboards", "dcgm-exporter-rtx2000-a30-hostname-clipped.prom")],
        "dcgm-derived": [read_fixture("dashboards", "DERIVED-dcgm-exporter-a800-faults.prom")],
        "kube-state-metrics": [ksm, flapping],
        "node-exporter": [read_fixture("dashboards", "node-exporter-infiniband-roce-edited.prom")],
        "clusterctl-textfile": [textfile_text(lab_inputs())],
        # The node health agent's own textfile, as it writes it on the A800 host with GPU 3's Xid 79.
        "agent-textfile": [agent_textfile(
            [Finding(Severity.ERROR, "GPU_XID", "Xid 79: GPU has fallen off the bus", host=A800, subject="GPU 3")],
            RunFigures(A800, time.time(), 1.8, True)).decode()],
    }
    scrape = [{"job_name": job, "scrape_interval": "1s",
               "static_configs": [{"targets": [f"127.0.0.1:{targets.serve(texts)}"]}]} for job, texts in jobs.items()]
    config = folder / "prometheus.yml"
    config.write_text(json.dumps({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                                  "scrape_configs": scrape}))
    port = _free_port()
    log = (folder / "prometheus.log").open("wb")
    process = subprocess.Popen([str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                                f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        def all_up() -> bool:
            try:
                result = _get(port, "/api/v1/query", {"query": "count(up == 1)"})["data"]["result"]
            except OSError:
                return False
            return bool(result) and int(float(result[0]["value"][1])) == len(jobs)

        _wait(all_up, 90, f"Prometheus to scrape all {len(jobs)} targets (log: {folder / 'prometheus.log'})")
        # Rates need two samples, the flapping host a few scrapes.
        _wait(lambda: bool(_get(port, "/api/v1/query", {"query": "count_over_time(up[1m]) >= 4"})["data"]["result"]),
              60, "four scrapes")
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)
        targets.close()


def _substitute(expr: str) -> str:
    for name in sorted(VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, VARIABLES[name])
    return expr


def _panel_queries() -> list[tuple[str, str, str]]:
    rendered = render(lab_inputs())
    out = []
    for stem, board in rendered.dashboards.items():
        for panel in board["panels"]:
            for target in panel.get("targets") or []:
                out.append((stem, f"{panel['title']} [{target['refId']}]", target["expr"]))
    return out


PANEL_QUERIES = _panel_queries()


@pytest.mark.parametrize(("dashboard", "panel", "expr"), PANEL_QUERIES,
                         ids=[f"{d}: {p}" for d, p, _ in PANEL_QUERIES])
def test_every_panel_query_returns_series(prometheus: int, dashboard: str, panel: str, expr: str) -> None:
    answer = _get(prometheus, "/api/v1/query", {"query": _substitute(expr)})
    assert answer["status"] == "success", answer.get("error")
    assert answer["data"]["result"], f"{dashboard} / {panel} returned nothing: {_substitute(expr)}"


def test_promtool_accepts_every_expression(tmp_path: Path) -> None:
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"clusterctl:panel_{i}", "expr": _substitute(expr)}
        for i, (_, _, expr) in enumerate(PANEL_QUERIES)]}]}
    path = tmp_path / "panels.rules.yml"
    path.write_text(json.dumps(rules))
    done = subprocess.run([str(PROMTOOL), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def _hosts_of(prometheus: int, dashboard: str, title: str) -> set[str]:
    hosts = set()
    for expr in [e for d, p, e in PANEL_QUERIES if d == dashboard and p.startswith(title)]:
        result = _get(prometheus, "/api/v1/query", {"query": _substitute(expr)})["data"]["result"]
        hosts |= {series["metric"].get("host") or series["metric"].get("node") for series in result}
    return hosts


def test_both_dcgm_host_label_names_reach_one_host_label(prometheus: int) -> None:
    assert _hosts_of(prometheus, "fleet-health", "GPU temperature against the alert limit") == {A800, A30}


def test_the_nvlink_domain_panel_draws_only_the_survey_domain_hosts(prometheus: int) -> None:
    (expr,) = [e for d, p, e in PANEL_QUERIES
               if d == "fleet-health" and p.startswith("NVLink traffic, domain GPUs 0-7")]
    result = _get(prometheus, "/api/v1/query", {"query": _substitute(expr)})["data"]["result"]
    assert {(s["metric"]["host"], s["metric"]["gpu"]) for s in result} == {(A800, g) for g in ("0", "1", "3", "5", "7")}


def test_the_host_variable_lists_the_surveyed_hosts(prometheus: int) -> None:
    board = render(lab_inputs()).dashboards["fleet-health"]
    (variable,) = [v for v in board["templating"]["list"] if v["name"] == "host"]
    assert variable["query"] == 'label_values(clusterctl_gpu_info{cluster="$cluster"}, host)'
    match = _substitute('clusterctl_gpu_info{cluster="$cluster"}')
    values = _get(prometheus, "/api/v1/label/host/values", {"match[]": match})
    assert set(values["data"]) == {A800, A30}


def test_the_flapping_host_and_the_quarantined_host_are_named(prometheus: int) -> None:
    assert _hosts_of(prometheus, "repairs", "Flapping") == {A30}
    assert _hosts_of(prometheus, "fleet-health", "Hosts out of service") >= {A800}


def test_a_bidirectional_link_is_shown_as_a_share_of_twice_its_line_rate(prometheus: int) -> None:
    (panel,) = [p for p in render(lab_inputs()).dashboards["fabric"]["panels"]
                if p["title"].startswith("ib_write_bw between hosts: share of line rate")]
    result = _get(prometheus, "/api/v1/query", {"query": _substitute(panel["targets"][0]["expr"])})["data"]["result"]
    share = {(s["metric"]["server"], s["metric"]["client"]): float(s["value"][1]) for s in result}
    red_below, green_from = [step["value"] for step in panel["fieldConfig"]["defaults"]["thresholds"]["steps"][1:]]
    # 392 Gb/s both ways on a 200 Gb/s link is a healthy 98%, not 196%; 220 Gb/s is a slow 55% (red), not 110%.
    assert share[("gpu-b1", "gpu-b2")] == pytest.approx(0.98)
    assert share[("gpu-b1", "gpu-b2")] >= green_from
    assert share[("gpu-b3", "gpu-b4")] == pytest.approx(0.55)
    assert share[("gpu-b3", "gpu-b4")] < red_below
    assert share[(A800, A30)] == pytest.approx(196.8 / 200)
