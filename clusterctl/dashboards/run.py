"""``clusterctl dashboards`` as one call: the cluster's facts in, rendered dashboards out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clusterctl.dashboards.inputs import DashboardInputs, bench_from_results, from_survey
from clusterctl.dashboards.render import Rendered, render

if TYPE_CHECKING:
    from clusterctl.inventory.model import Inventory
    from clusterctl.saved_survey import SavedSurvey


def render_dashboards(inventory: Inventory, survey: SavedSurvey, bench_results: Sequence[dict[str, Any]] = (), *,
                      host_names: Sequence[str] | None = None, namespace: str = "monitoring",
                      folder: str = "GPU cluster") -> tuple[DashboardInputs, Rendered]:
    from clusterctl.bench.judge import fleet_limits
    from clusterctl.inventory.cluster_sections import check_alerts

    alerts = check_alerts(inventory.bootstrap.alerts, "bootstrap.alerts")
    links, nccl = bench_from_results(bench_results)
    hosts = [h for h in inventory.hosts if host_names is None or h.name in host_names]
    inputs = DashboardInputs(inventory.name, tuple(from_survey(survey, limit_to=host_names)),
                             tuple(links), tuple(nccl), alerts.gpu_temp_c, alerts.memory_temp_c, fleet_limits(hosts))
    return inputs, render(inputs, namespace=namespace, folder=folder)
