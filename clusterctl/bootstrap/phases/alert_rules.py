"""alert-rules: Prometheus alerting rules for DCGM exporter metrics, on the first control plane.

Writes the plain rules file (for a Prometheus outside the cluster: add it to ``rule_files``)
and the same rules as a ``PrometheusRule``, applied when kube-prometheus-stack's CRD is there;
beside them the Alertmanager receiver that sends the alerts to ``clusterctl remediate serve``
with a bearer token file over TLS (``alertmanager-receiver.yml``: merge into alertmanager.yml).
The NVLink rule covers only the hosts whose saved survey shows NVLink.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.bootstrap.cluster.alerts import (
    PROMETHEUS_RULE_PATH,
    RECEIVER_PATH,
    RULES_PATH,
    render_prometheus_rule,
    render_receiver_for,
    render_rules,
)
from clusterctl.bootstrap.phase import ClusterWidePhase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import Change
from clusterctl.findings import Finding, Severity

PROMETHEUS_RULE_CRD = "crd/prometheusrules.monitoring.coreos.com"
RULE_NAME = "prometheusrule/clusterctl-dcgm-alerts"


@dataclass
class AlertState:
    rules: bytes | None
    prometheus_rule: bytes | None
    operator: bool
    applied: bool
    nvlink_hosts: list[str]
    receiver: bytes | None = None


def _nvlink_hosts(ctx: PhaseContext) -> list[str]:
    survey = cc.survey(ctx)
    if survey is None:
        return []
    return sorted(h.name for h in survey.hosts.values() if h.nvlink_groups)


#: The alert only rendered for hosts a saved survey shows with NVLink.
NVLINK_RULE = "alert: NVLinkBandwidthZero"


def _dropped_nvlink_rule(ctx: PhaseContext, state: AlertState) -> bool:
    """The rules on the host have the NVLink rule, and this run (no survey) would write them without it."""
    return (not state.nvlink_hosts and cc.survey(ctx) is None and state.rules is not None
            and NVLINK_RULE in state.rules.decode("utf-8", errors="replace"))


class AlertRules(ClusterWidePhase[AlertState]):
    name = "alert-rules"
    description = "Prometheus rules for DCGM exporter: Xid 79, row remap, ECC, heat, power, PCIe, NVLink"

    def check(self, ctx: PhaseContext) -> AlertState:
        alerts = ctx.settings().alerts
        operator = cc.has_cluster(ctx) and cc.object_exists(ctx, PROMETHEUS_RULE_CRD)
        applied = operator and cc.object_exists(ctx, RULE_NAME, alerts.namespace)
        return AlertState(ctx.reader.get(RULES_PATH, sudo=True), ctx.reader.get(PROMETHEUS_RULE_PATH, sudo=True),
                          operator, applied, _nvlink_hosts(ctx), ctx.reader.get(RECEIVER_PATH, sudo=True))

    def findings(self, ctx: PhaseContext, state: AlertState) -> list[Finding]:
        notes = []
        if not state.operator:
            notes.append(Finding(Severity.INFO, "NO_PROMETHEUS_OPERATOR",
                                 f"no PrometheusRule CRD in the cluster: load {RULES_PATH} into your Prometheus "
                                 "(rule_files), or install kube-prometheus-stack and run this phase again",
                                 host=ctx.host.name))
        dropped = _dropped_nvlink_rule(ctx, state)
        if dropped:
            # An earlier run's survey put the NVLink rule there; a run without --survey must not
            # take it away unnoticed: the plan says so, and an apply asks for a choice.
            blocking = ctx.options.applying and not ctx.options.without_survey
            notes.append(Finding(
                Severity.ERROR if blocking else Severity.WARNING, "SURVEY_DATA_DROPPED",
                f"without --survey this run would remove the NVLink bandwidth rule an earlier run installed "
                f"(from {RULES_PATH})", host=ctx.host.name,
                fix="Pass --survey FILE (the saved survey of that run) to keep it, or --without-survey to remove it."))
        elif not state.nvlink_hosts:
            notes.append(Finding(Severity.INFO, "NO_NVLINK_RULE", "no saved survey with NVLink hosts: the NVLink "
                                 "bandwidth rule is left out (--survey FILE)", host=ctx.host.name))
        return notes

    def plan(self, ctx: PhaseContext, state: AlertState) -> list[Change]:
        alerts, host = ctx.settings().alerts, ctx.host.name
        removal = " - REMOVES the NVLink bandwidth rule (no --survey)" if _dropped_nvlink_rule(ctx, state) else ""
        rules = Change.write_file(host, RULES_PATH, render_rules(alerts, state.nvlink_hosts), current=state.rules,
                                  summary="DCGM alert rules (plain rules file)" + removal)
        wrapped = Change.write_file(host, PROMETHEUS_RULE_PATH, render_prometheus_rule(alerts, state.nvlink_hosts),
                                    current=state.prometheus_rule,
                                    summary="DCGM alert rules (PrometheusRule)" + removal)
        receiver = Change.write_file(host, RECEIVER_PATH, render_receiver_for(alerts, ctx.host.connect_address),
                                     current=state.receiver,
                                     summary="Alertmanager receiver for 'clusterctl remediate serve' (token file, TLS)")
        changes = [rules, wrapped, receiver]
        if state.operator and (not wrapped.is_noop or not state.applied):
            changes.append(cc.apply_manifest(host, PROMETHEUS_RULE_PATH, "apply the PrometheusRule"))
        return cc.with_folders(ctx, changes)
