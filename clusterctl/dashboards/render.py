"""Dashboards as files: Grafana JSON (import or file provisioning), and ConfigMaps that
kube-prometheus-stack's Grafana sidecar loads (it watches ConfigMaps labelled ``grafana_dashboard: "1"``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from clusterctl.bench.judge import fleet_limits
from clusterctl.dashboards import fabric, fleet, repairs, utilisation
from clusterctl.dashboards.inputs import DashboardInputs, bench_from_results, from_survey
from clusterctl.dashboards.measured import textfile_text
from clusterctl.dashboards.panels import uid
from clusterctl.inventory.cluster_sections import check_alerts
from clusterctl.inventory.model import Host, Inventory
from clusterctl.saved_survey import SavedSurvey
from clusterctl.writable import write_files

#: File stem -> builder; the order the docs and ``clusterctl dashboards`` list them in.
BUILDERS = {"fleet-health": fleet.build, "fabric": fabric.build, "repairs": repairs.build,
            "utilisation": utilisation.build}
#: The label and value kube-prometheus-stack's sidecar looks for (its ``sidecar.dashboards.label`` default).
SIDECAR_LABEL = ("grafana_dashboard", "1")
TEXTFILE = "clusterctl-measured.prom"


@dataclass(frozen=True)
class Rendered:
    #: File stem -> the dashboard as Grafana's JSON model.
    dashboards: dict[str, dict[str, Any]]
    configmaps: str
    textfile: str


def render(inputs: DashboardInputs, *, namespace: str = "monitoring", folder: str = "GPU cluster") -> Rendered:
    boards = {stem: json.loads(json.dumps(build(inputs).build(), cls=JSONEncoder)) for stem, build in BUILDERS.items()}
    return Rendered(boards, configmaps_yaml(boards, inputs.cluster, namespace, folder), textfile_text(inputs))


def render_dashboards(inventory: Inventory, survey: SavedSurvey, bench_results: Sequence[dict[str, Any]], *,
                      hosts: Sequence[Host] | None, namespace: str, folder: str) -> tuple[DashboardInputs, Rendered]:
    """``clusterctl dashboards`` as one call: the cluster's facts in, rendered dashboards out. ``hosts``: the
    -l selection (None: the whole inventory, and every host the survey has)."""
    alerts = check_alerts(inventory.bootstrap.alerts, "bootstrap.alerts")
    links, nccl = bench_from_results(bench_results)
    surveyed = from_survey(survey, limit_to=None if hosts is None else [h.name for h in hosts])
    inputs = DashboardInputs(inventory.name, tuple(surveyed), tuple(links), tuple(nccl), alerts.gpu_temp_c,
                             alerts.memory_temp_c, fleet_limits(inventory.hosts if hosts is None else hosts))
    return inputs, render(inputs, namespace=namespace, folder=folder)


def configmaps_yaml(boards: Mapping[str, dict[str, Any]], cluster: str, namespace: str, folder: str) -> str:
    docs = [{
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": uid(stem, cluster).lower().replace("_", "-")[:63],
            "namespace": namespace,
            "labels": {SIDECAR_LABEL[0]: SIDECAR_LABEL[1], "app.kubernetes.io/managed-by": "clusterctl"},
            # The sidecar's folderAnnotation (grafana_folder by default) puts them in one folder.
            "annotations": {"grafana_folder": folder},
        },
        "data": {f"{stem}.json": json.dumps(board, indent=1, sort_keys=True)},
    } for stem, board in boards.items()]
    return yaml.safe_dump_all(docs, sort_keys=False)


def write(rendered: Rendered, out: Path) -> list[Path]:
    """Write every file under ``out``; each one replaced whole (a temporary file renamed over it)."""
    files = {f"{stem}.json": json.dumps(board, indent=1, sort_keys=True) + "\n"
             for stem, board in rendered.dashboards.items()}
    files["dashboards-configmaps.yaml"] = rendered.configmaps
    files[TEXTFILE] = rendered.textfile
    return write_files(files, out)
