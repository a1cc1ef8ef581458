"""The fabric dashboard: what bench measured between host pairs (a matrix against line rate, the slow
links named) and per host (nccl-tests), beside live InfiniBand and NVLink counters from the exporters."""

from __future__ import annotations

from grafana_foundation_sdk.builders import bargauge, dashboard, table, text, timeseries
from grafana_foundation_sdk.models import dashboard as model

from clusterctl.dashboards import promql
from clusterctl.dashboards.inputs import DashboardInputs
from clusterctl.dashboards.panels import FULL, HALF, new_dashboard, target, thresholds, uid

BENCH = 'cluster="$cluster"'
#: node-exporter's infiniband collector labels ports by device and port; its host is the scrape target,
#: named by node_uname_info's nodename (the Kubernetes node name on kubeadm hosts).
BY_NODENAME = 'on (instance) group_left (nodename) node_uname_info{nodename=~"$host"}'


def build(inputs: DashboardInputs) -> dashboard.Dashboard:
    board = new_dashboard(f"GPU fabric: {inputs.cluster}", uid("fabric", inputs.cluster), inputs.cluster,
                          "Pairwise bandwidth clusterctl bench measured against line rate, nccl-tests per host, "
                          "and live InfiniBand and NVLink counters.")
    board = board.with_row(dashboard.Row("Measured by clusterctl bench"))
    if inputs.links:
        bar = inputs.limits  # bench's thresholds: yellow from what a link across racks must reach, green within one
        board = board.with_panel(
            table.Panel().title("ib_write_bw between hosts: share of line rate (server rows, client columns)")
            .span(FULL).height(10).unit("percentunit").decimals(0)
            .description("clusterctl_bench_link_gbps / clusterctl_bench_link_judged_gbps (the line rate, twice it "
                         "for a bidirectional run) from the last clusterctl bench ib; red is under the share bench "
                         "judges slow across racks.")
            .thresholds(thresholds([(None, "red"), (bar.across_racks_min, "yellow"), (bar.within_rack_min, "green")]))
            .with_transformation(model.DataTransformerConfig(
                id_val="groupingToMatrix",
                options={"columnField": "client", "rowField": "server", "valueField": "Value",
                         "emptyValue": "null"}))
            .with_target(target(f"max by (server, client) (clusterctl_bench_link_gbps{{{BENCH}}} / "
                                f"clusterctl_bench_link_judged_gbps{{{BENCH}}})", instant=True)))
        board = board.with_panel(
            table.Panel().title("Slow links (Gb/s)").span(HALF).height(8).unit("Gbits")
            .with_target(target(f"clusterctl_bench_link_gbps{{{BENCH}}} and on (pair, test) "
                                f"(clusterctl_bench_link_slow{{{BENCH}}} == 1)", instant=True)))
    else:
        board = board.with_panel(
            text.Panel().title("No bench results").span(HALF).height(4)
            .content("Run `clusterctl bench ib`, then `clusterctl dashboards --bench clusterctl-results/bench-...` "
                     "to draw the pairwise matrix here."))
    if inputs.nccl:
        board = board.with_panel(
            bargauge.Panel().title("nccl-tests bus bandwidth per host (GB/s)").span(HALF).height(8).unit("GBs")
            .with_target(target(f'clusterctl_bench_nccl_busbw_gbytes{{{BENCH},host=~"$host"}}', "{{host}} {{op}}",
                                instant=True)))
    board = board.with_row(dashboard.Row("Live counters"))
    for direction, metric in (("received", "node_infiniband_port_data_received_bytes_total"),
                              ("transmitted", "node_infiniband_port_data_transmitted_bytes_total")):
        board = board.with_panel(
            timeseries.Panel().title(f"InfiniBand data {direction} per port").span(HALF).height(8).unit("bps")
            .description(f"{metric} from node-exporter's infiniband collector, in bits per second.")
            .with_target(target(f"rate({metric}[$__rate_interval]) * 8 * {BY_NODENAME}",
                                "{{nodename}} {{device}} port {{port}}")))
    board = board.with_panel(
        timeseries.Panel().title("InfiniBand receive errors, and ports not up").span(HALF).height(8).unit("short")
        .with_target(target(f"increase(node_infiniband_port_errors_received_total[$__rate_interval]) * {BY_NODENAME}",
                            "{{nodename}} {{device}} port {{port}} receive errors", ref="A"))
        .with_target(target(f"(node_infiniband_physical_state_id != 5) * {BY_NODENAME}",
                            "{{nodename}} {{device}} port {{port}} physical state (5 is LinkUp)", ref="B")))
    return board.with_panel(
        timeseries.Panel().title("NVLink traffic per GPU").span(HALF).height(8).unit("short")
        .with_target(target(promql.per_gpu("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", rate="$__rate_interval"),
                            "{{host}} GPU {{gpu}}")))
