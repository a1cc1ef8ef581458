"""What clusterctl measured once, as Prometheus metrics for node-exporter's textfile collector.

A survey's topology and bench's pairwise figures change when someone re-runs them, not every scrape;
node-exporter's textfile collector (``--collector.textfile.directory``) publishes such files as they are.
The dashboards join live DCGM series to ``clusterctl_gpu_info`` (NVLink domain, pool, nearest NIC) and
draw bench's matrix from ``clusterctl_bench_link_gbps``. The text is written by ``prometheus-client``.
"""

from __future__ import annotations

from clusterctl.dashboards.inputs import DashboardInputs

#: Metric name -> help text; the dashboards and docs/dashboards.md name these.
METRICS = {
    "clusterctl_gpu_info": "A GPU as clusterctl's survey saw it (value 1): its NVLink domain, pool and nearest NIC.",
    "clusterctl_bench_link_gbps": "Bandwidth bench measured between two HCAs (Gb/s).",
    "clusterctl_bench_link_expected_gbps": "Line rate of the link bench measured (Gb/s).",
    "clusterctl_bench_link_judged_gbps": "Rate bench judged the link against (Gb/s): its line rate, twice that for "
                                         "a bidirectional (-b) run.",
    "clusterctl_bench_link_slow": "1 when bench judged the link slow against its line rate.",
    "clusterctl_bench_nccl_busbw_gbytes": "nccl-tests bus bandwidth bench measured on one host (GB/s).",
}


def domain_name(domain: tuple[int, ...]) -> str:
    """A label value for one NVLink domain: its GPUs, ``0-3`` for a run, ``0,2,5`` otherwise."""
    ordered = sorted(domain)
    if ordered and ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(str(g) for g in ordered)


def textfile_text(inputs: DashboardInputs) -> str:
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry()

    def gauge(name: str, labels: list[str]) -> Gauge:
        return Gauge(name, METRICS[name], labels, registry=registry)

    info = gauge("clusterctl_gpu_info", ["cluster", "host", "gpu", "nvlink_domain", "pool", "rack", "nic"])
    for host in inputs.hosts:
        domain_of = {g: domain_name(d) for d in host.nvlink_domains for g in d}
        for gpu in host.gpus:
            info.labels(inputs.cluster, host.name, str(gpu), domain_of.get(gpu, ""), host.pool, host.rack or "",
                        host.nearest_nic.get(gpu, "")).set(1)
    link_labels = ["cluster", "test", "server", "server_hca", "client", "client_hca", "pair"]
    link_gauges = [gauge(f"clusterctl_bench_link_{name}", link_labels)
                   for name in ("gbps", "expected_gbps", "judged_gbps", "slow")]
    for link in inputs.links:
        labels = (inputs.cluster, link.test, link.server, link.server_hca, link.client, link.client_hca,
                  f"{link.server}/{link.server_hca} - {link.client}/{link.client_hca}")
        values = (link.gbps, link.expected_gbps, link.judged_gbps, 1 if link.slow else 0)
        for figure, value in zip(link_gauges, values, strict=True):
            if value is not None:  # a link without a known line rate has no expected or judged figure
                figure.labels(*labels).set(value)
    busbw = gauge("clusterctl_bench_nccl_busbw_gbytes", ["cluster", "host", "op"])
    for run in inputs.nccl:
        busbw.labels(inputs.cluster, run.host, run.op).set(run.busbw_gbs)
    return generate_latest(registry).decode()
