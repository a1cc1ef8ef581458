"""The repairs dashboard: quarantines and returns to service over time, time out of service per host and
its spread, and the hosts that flap, from the node state kube-state-metrics already exports."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard, histogram, statushistory, table, timeseries

from clusterctl.dashboards.fleet import AGENT_FINDINGS, TAINTED, agent_conditions_true
from clusterctl.dashboards.inputs import DashboardInputs
from clusterctl.dashboards.panels import HALF, THIRD, new_dashboard, target, thresholds, uid
from clusterctl.quarantine.node_ops import TAINT_KEY

CORDONED = 'kube_node_spec_unschedulable{node=~"$host"}'


def build(inputs: DashboardInputs) -> dashboard.Dashboard:
    board = new_dashboard(f"GPU repairs: {inputs.cluster}", uid("repairs", inputs.cluster), inputs.cluster,
                          "Quarantines, returns to service, time out of service and flapping hosts, from the "
                          f"taint clusterctl sets ({TAINT_KEY}) as kube-state-metrics exports it.")
    board = board.with_row(dashboard.Row("Out of service"))
    board = board.with_panel(
        timeseries.Panel().title("Hosts quarantined").span(THIRD).height(8).unit("short").min(0)
        .with_target(target(f"count({TAINTED}) or vector(0)", "quarantined")))
    board = board.with_panel(
        timeseries.Panel().title("Quarantines started and hosts returned (per 10 minutes)").span(THIRD).height(8)
        .unit("short").min(0)
        .with_target(target(f"count(max by (node) ({TAINTED}) unless max by (node) ({TAINTED} offset 10m)) "
                            "or vector(0)", "quarantined", ref="A"))
        .with_target(target(f"count(max by (node) ({TAINTED} offset 10m) unless max by (node) ({TAINTED})) "
                            "or vector(0)", "returned", ref="B")))
    board = board.with_panel(
        statushistory.Panel().title("Cordoned, per host").span(THIRD).height(8).min(0).max(1)
        .thresholds(thresholds([(None, "green"), (1, "red")]))
        .with_target(target(f"max by (node) ({CORDONED})", "{{node}}")))
    board = board.with_row(dashboard.Row("Time to repair"))
    out_seconds = f"avg_over_time((max by (node) ({CORDONED}))[$__range:]) * $__range_s"
    board = board.with_panel(
        table.Panel().title("Time out of service per host in the range").span(THIRD).height(8).unit("s")
        .description("Share of the range a host was cordoned (quarantine cordons it), times the range.")
        .with_target(target(f"sort_desc({out_seconds} > 0)", instant=True)))
    board = board.with_panel(
        histogram.Panel().title("Spread of time out of service").span(THIRD).height(8).unit("s")
        .with_target(target(f"{out_seconds} > 0", "{{node}}", instant=True)))
    board = board.with_panel(
        table.Panel().title("Flapping: quarantine cycles per host in the last day").span(THIRD).height(8)
        .description("Each cordon and uncordon is a change; two changes are one cycle. clusterctl keeps a host "
                     "that flaps out for a person.")
        .thresholds(thresholds([(None, "green"), (2, "orange"), (3, "red")]))
        .with_target(target(f"sort_desc(changes((max by (node) ({CORDONED}))[1d:]) / 2 > 0)", instant=True)))
    board = board.with_row(dashboard.Row("Why"))
    board = board.with_panel(
        timeseries.Panel().title("Health agent findings by code").span(HALF).height(8).unit("short")
        .with_target(target(f'sum by (code) ({AGENT_FINDINGS}{{hostname=~"$host"}})', "{{code}}")))
    return board.with_panel(
        table.Panel().title("NodeConditions set by the health agent").span(HALF).height(8)
        .with_target(target(agent_conditions_true(), instant=True)))
