"""Pieces every dashboard shares: the datasource and the cluster/host variables, Prometheus targets,
thresholds, and the panel sizes of Grafana's 24-column grid."""

from __future__ import annotations

import re
from collections.abc import Sequence

from grafana_foundation_sdk.builders import dashboard, prometheus
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
#: Tag every clusterctl dashboard carries (Grafana's dashboard list filters on it).
TAG = "clusterctl"
FULL, HALF, THIRD = 24, 12, 8


def new_dashboard(title: str, uid: str, cluster: str, description: str) -> dashboard.Dashboard:
    """A dashboard with the three variables every panel's queries use: the Prometheus datasource, the
    cluster (a constant: each cluster gets its own set) and its hosts (from clusterctl's textfile metric,
    so a host added to the survey appears without re-rendering)."""
    return (
        dashboard.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags([TAG])
        .editable()
        .refresh("1m")
        .time("now-6h", "now")
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
        .with_variable(dashboard.ConstantVariable("cluster").value(cluster))
        .with_variable(
            dashboard.QueryVariable("host")
            .label("Host")
            .datasource(DATASOURCE)
            .query('label_values(clusterctl_gpu_info{cluster="$cluster"}, host)')
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )
    )


def target(expr: str, legend: str = "", *, ref: str = "A", instant: bool = False) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE)
    if legend:
        query = query.legend_format(legend)
    if instant:
        query = query.instant().format(PromQueryFormat.TABLE)
    return query


def thresholds(steps: Sequence[tuple[float | None, str]]) -> dashboard.ThresholdsConfig:
    """Colour steps, the first from minus infinity (``None``)."""
    # The SDK's enums are enum.StrEnum (Python 3.11), which mypy's 3.10 target does not know.
    return (dashboard.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE)  # type: ignore[arg-type]
            .steps([model.Threshold(value=v, color=c) for v, c in steps]))


def uid(kind: str, cluster: str) -> str:
    """A dashboard's uid: stable per cluster and kind, so re-rendering updates it in Grafana rather than
    adding a copy (uids are at most 40 characters of letters, digits, '-' and '_')."""
    return f"clusterctl-{kind}-" + re.sub(r"[^A-Za-z0-9_-]", "-", cluster)[: 28 - len(kind)]
