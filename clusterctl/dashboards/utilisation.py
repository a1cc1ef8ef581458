"""The utilisation dashboard: GPU-hours used against available, per node pool (GPU model)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import bargauge, dashboard, table, timeseries

from clusterctl.dashboards import promql
from clusterctl.dashboards.inputs import DashboardInputs
from clusterctl.dashboards.panels import HALF, THIRD, new_dashboard, target, thresholds, uid

INFO = 'clusterctl_gpu_info{cluster="$cluster",host=~"$host"}'
POOL_OF_GPU = f"on (host, gpu) group_left (pool) max by (host, gpu, pool) ({INFO})"


def build(inputs: DashboardInputs) -> dashboard.Dashboard:
    util = promql.per_gpu("DCGM_FI_DEV_GPU_UTIL")
    board = new_dashboard(f"GPU utilisation: {inputs.cluster}", uid("utilisation", inputs.cluster),
                          inputs.cluster, "GPU-hours used against available per node pool (GPU model), and the "
                          "GPUs that sat idle.")
    pools = ", ".join(f"{name} ({sum(len(h.gpus) for h in hosts)} GPUs)" for name, hosts in inputs.pools().items())
    board = board.with_row(dashboard.Row(f"GPU-hours per pool: {pools}"))
    used = f"sum by (pool) (avg_over_time(({util} / 100 * {POOL_OF_GPU})[$__range:]) ) * $__range_s / 3600"
    available = f"count by (pool) ({INFO}) * $__range_s / 3600"
    board = board.with_panel(
        bargauge.Panel().title("GPU-hours used and available in the range").span(HALF).height(8).unit("short")
        .description("Used: each GPU's mean DCGM_FI_DEV_GPU_UTIL over the range as a share of an hour per hour; "
                     "available: every GPU the survey found, for the whole range.")
        .with_target(target(used, "{{pool}} used", ref="A", instant=True))
        .with_target(target(available, "{{pool}} available", ref="B", instant=True)))
    board = board.with_panel(
        timeseries.Panel().title("Share of GPU time used, per pool").span(HALF).height(8).unit("percentunit")
        .min(0).max(1)
        .with_target(target(f"sum by (pool) ({util} / 100 * {POOL_OF_GPU}) / count by (pool) ({INFO})",
                            "{{pool}}")))
    board = board.with_row(dashboard.Row("Per host"))
    board = board.with_panel(
        bargauge.Panel().title("Mean GPU utilisation per host in the range").span(HALF).height(10).unit("percent")
        .min(0).max(100).thresholds(thresholds([(None, "red"), (30, "yellow"), (70, "green")]))
        .with_target(target(f"avg by (host) (avg_over_time(({util})[$__range:]))", "{{host}}", instant=True)))
    return board.with_panel(
        table.Panel().title("GPUs idle for the whole range").span(THIRD).height(10)
        .with_target(target(f"max_over_time(({util})[$__range:]) == 0", instant=True)))
