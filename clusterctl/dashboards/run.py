"""``clusterctl dashboards`` as one call: the cluster's facts in, rendered dashboards out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clusterctl.dashboards.inputs import DashboardInputs, bench_from_results, from_survey
from clusterctl.dashboards.render import Rendered, render

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.saved_survey import SavedSurvey


def render_dashboards(inventory: Inventory, survey: SavedSurvey, bench_results: Sequence[dict[str, Any]] = (), *,
                      hosts: Sequence[Host] | None = None, namespace: str = "monitoring",
                      folder: str = "GPU cluster") -> tuple[DashboardInputs, Rendered]:
    """``hosts``: the -l selection (None: the whole inventory, and every host the survey has)."""
    from clusterctl.bench.judge import fleet_limits
    from clusterctl.inventory.cluster_sections import check_alerts

    alerts = check_alerts(inventory.bootstrap.alerts, "bootstrap.alerts")
    links, nccl = bench_from_results(bench_results)
    surveyed = from_survey(survey, limit_to=None if hosts is None else [h.name for h in hosts])
    inputs = DashboardInputs(inventory.name, tuple(surveyed), tuple(links), tuple(nccl), alerts.gpu_temp_c,
                             alerts.memory_temp_c, fleet_limits(inventory.hosts if hosts is None else hosts))
    return inputs, render(inputs, namespace=namespace, folder=folder)
