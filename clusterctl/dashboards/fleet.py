"""The fleet health dashboard: utilisation by host and GPU, NVLink traffic per NVLink domain the survey
found, temperature and power against their limits, Xid and row-remap events, and the hosts out of service."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard, statushistory, table, timeseries

from clusterctl.agent.conditions import TYPES
from clusterctl.dashboards import promql
from clusterctl.dashboards.inputs import DashboardInputs
from clusterctl.dashboards.measured import domain_name
from clusterctl.dashboards.panels import FULL, HALF, THIRD, new_dashboard, target, thresholds, uid
from clusterctl.promql_text import host_alternation
from clusterctl.quarantine.node_ops import TAINT_KEY
from clusterctl.wording import first_few

#: The agent's finding gauge (node-exporter textfile), labelled with its node as ``hostname``.
AGENT_FINDINGS = "clusterctl_node_health_finding"
#: Nodes carrying clusterctl's quarantine taint, as kube-state-metrics exports them.
TAINTED = f'kube_node_spec_taint{{key="{TAINT_KEY}",node=~"$host"}}'


def agent_conditions_true() -> str:
    """The node health agent's NodeConditions that are True (the problem is present), as kube-state-metrics
    exports them."""
    types = "|".join(kind.type for kind in TYPES)
    return (f'max by (node, condition) (kube_node_status_condition{{condition=~"{types}",'
            'status="true",node=~"$host"} == 1)')


def build(inputs: DashboardInputs) -> dashboard.Dashboard:
    board = new_dashboard(f"GPU fleet health: {inputs.cluster}", uid("fleet-health", inputs.cluster),
                          inputs.cluster,
                          "GPU utilisation, NVLink per domain, thermals and power, GPU errors and hosts out of "
                          "service, rendered by clusterctl dashboards from its survey.")
    board = board.with_row(dashboard.Row("Utilisation"))
    for metric, title in (("DCGM_FI_DEV_GPU_UTIL", "GPU utilisation by host and GPU"),
                          ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory-copy utilisation by host and GPU")):
        board = board.with_panel(
            statushistory.Panel().title(title).span(HALF).height(10).unit("percent").min(0).max(100)
            .description(f"{metric} from dcgm-exporter: one row per GPU, coloured by its utilisation.")
            .thresholds(thresholds([(None, "blue"), (30, "green"), (70, "yellow"), (95, "orange")]))
            .with_target(target(promql.per_gpu(metric), "{{host}} GPU {{gpu}}")))
    board = _nvlink_rows(board, inputs)
    board = board.with_row(dashboard.Row("Temperature and power"))
    board = board.with_panel(
        timeseries.Panel().title("GPU temperature against the alert limit").span(THIRD).height(8).unit("celsius")
        .description(f"Bootstrap's GPUTemperatureHigh fires above {inputs.gpu_temp_c} °C (inventory "
                     "bootstrap.alerts.gpu_temp_c).")
        .thresholds(thresholds([(None, "green"), (inputs.gpu_temp_c, "red")]))
        .with_target(target(promql.per_gpu("DCGM_FI_DEV_GPU_TEMP"), "{{host}} GPU {{gpu}}")))
    board = board.with_panel(
        timeseries.Panel().title("HBM temperature against the alert limit").span(THIRD).height(8).unit("celsius")
        .thresholds(thresholds([(None, "green"), (inputs.memory_temp_c, "red")]))
        .with_target(target(promql.per_gpu("DCGM_FI_DEV_MEMORY_TEMP"), "{{host}} GPU {{gpu}}")))
    board = board.with_panel(
        timeseries.Panel().title("Power draw as a share of the enforced limit").span(THIRD).height(8)
        .unit("percentunit").min(0)
        .description("DCGM_FI_DEV_POWER_USAGE / DCGM_FI_DEV_ENFORCED_POWER_LIMIT (clusterctl enables the "
                     "limit field); GPUPowerAtLimit fires at 98%.")
        .thresholds(thresholds([(None, "green"), (0.98, "red")]))
        .with_target(target(f'{promql.per_gpu("DCGM_FI_DEV_POWER_USAGE")} / '
                            f'{promql.per_gpu("DCGM_FI_DEV_ENFORCED_POWER_LIMIT")}', "{{host}} GPU {{gpu}}")))
    board = board.with_row(dashboard.Row("GPU errors"))
    board = board.with_panel(
        table.Panel().title("Last Xid per GPU (non-zero)").span(THIRD).height(8)
        .description("DCGM_FI_DEV_XID_ERRORS holds the last Xid a GPU raised; 79 (fell off the bus) quarantines.")
        .with_target(target(f'{promql.per_gpu("DCGM_FI_DEV_XID_ERRORS")} > 0', instant=True)))
    board = board.with_panel(
        table.Panel().title("Row remapping: failures and uncorrectable remapped rows").span(THIRD).height(8)
        .with_target(target(f'{promql.per_gpu("DCGM_FI_DEV_ROW_REMAP_FAILURE")} > 0', ref="A", instant=True))
        .with_target(target(f'{promql.per_gpu("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")} > 0', ref="B",
                            instant=True)))
    board = board.with_panel(
        timeseries.Panel().title("NVLink CRC errors (per second)").span(THIRD).height(8).unit("short")
        .with_target(target(promql.per_gpu("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                                           rate="$__rate_interval"), "{{host}} GPU {{gpu}}")))
    board = board.with_row(dashboard.Row("Out of service"))
    board = board.with_panel(
        table.Panel().title("Hosts out of service, and why").span(HALF).height(8)
        .description(f"Nodes carrying clusterctl's quarantine taint ({TAINT_KEY}, from kube-state-metrics) "
                     "and the health agent's NodeConditions that are True.")
        .with_target(target(f"max by (node) ({TAINTED})",
                            ref="A", instant=True))
        .with_target(target(agent_conditions_true(), ref="B", instant=True)))
    return board.with_panel(
        timeseries.Panel().title("Health agent findings by code").span(HALF).height(8).unit("short")
        .description(f"{AGENT_FINDINGS} from each node's health agent (node-exporter textfile collector).")
        .with_target(target(f'sum by (code, severity) ({AGENT_FINDINGS}{{hostname=~"$host"}})',
                            "{{code}} ({{severity}})")))


def _nvlink_rows(board: dashboard.Dashboard, inputs: DashboardInputs) -> dashboard.Dashboard:
    """One row per NVLink layout the survey found (hosts whose GPUs form the same domains), one panel per
    domain: a GPU whose traffic drops while its domain's peers carry on stands out against them."""
    for domains, hosts in inputs.layouts():
        shown = first_few(hosts, 4, ", ")
        board = board.with_row(dashboard.Row(f"NVLink: {len(domains)} domain(s) per host on {shown}"))
        width = FULL if len(domains) == 1 else HALF
        for domain in domains:
            gpus = "|".join(str(g) for g in domain)
            matcher = host_alternation(hosts, "a dashboard's host matcher")
            expr = promql.per_gpu("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", hosts=(matcher, promql.HOST_VAR), gpus=gpus,
                                  rate="$__rate_interval")
            board = board.with_panel(
                timeseries.Panel().title(f"NVLink traffic, domain GPUs {domain_name(domain)}").span(width).height(8)
                .unit("short")
                .description("Rate of DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL (all links of a GPU) on the GPUs the "
                             f"survey found joined by NVLink: {', '.join(str(g) for g in domain)}.")
                .with_target(target(expr, "{{host}} GPU {{gpu}}")))
    return board

