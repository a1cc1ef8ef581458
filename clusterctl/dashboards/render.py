"""Dashboards as files: Grafana JSON (import or file provisioning), and ConfigMaps that
kube-prometheus-stack's Grafana sidecar loads (it watches ConfigMaps labelled ``grafana_dashboard: "1"``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl.dashboards import fabric, fleet, repairs, utilisation
from clusterctl.dashboards.inputs import DashboardInputs
from clusterctl.dashboards.measured import textfile_text

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


def dashboard_json(builder_output: Any) -> dict[str, Any]:
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    data: dict[str, Any] = json.loads(json.dumps(builder_output.build(), cls=JSONEncoder))
    return data


def render(inputs: DashboardInputs, *, namespace: str = "monitoring", folder: str = "GPU cluster") -> Rendered:
    boards = {stem: dashboard_json(build(inputs)) for stem, build in BUILDERS.items()}
    return Rendered(boards, configmaps_yaml(boards, inputs.cluster, namespace, folder), textfile_text(inputs))


def configmaps_yaml(boards: Mapping[str, dict[str, Any]], cluster: str, namespace: str, folder: str) -> str:
    import yaml

    from clusterctl.dashboards.panels import uid

    docs = []
    for stem, board in boards.items():
        docs.append({
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
        })
    return yaml.safe_dump_all(docs, sort_keys=False)


def write(rendered: Rendered, out: Path) -> list[Path]:
    """Write every file under ``out``; each one replaced whole (a temporary file renamed over it)."""
    from clusterctl.writable import make_folder, write_files

    make_folder(out, f"--out {out}")
    files = {f"{stem}.json": json.dumps(board, indent=1, sort_keys=True) + "\n"
             for stem, board in rendered.dashboards.items()}
    files["dashboards-configmaps.yaml"] = rendered.configmaps
    files[TEXTFILE] = rendered.textfile
    return write_files(files, out)


def sketch(board: Mapping[str, Any], width: int = 72) -> str:
    """A text picture of a dashboard's grid (Grafana's 24 columns scaled to ``width``): each row title on
    its own line, each panel a box with its title, as the panels' gridPos place them. For the docs and for
    reading a layout without a Grafana."""
    scale = width / 24
    lines: list[str] = []
    bands: list[list[Mapping[str, Any]]] = []
    for panel in board.get("panels", []):
        if panel.get("type") == "row":
            lines_for_band(bands, lines, scale, width)
            bands = []
            lines.append(f"== {panel['title']} ".ljust(width, "="))
            continue
        y = panel["gridPos"]["y"]
        if not bands or bands[-1][0]["gridPos"]["y"] != y:
            bands.append([])
        bands[-1].append(panel)
    lines_for_band(bands, lines, scale, width)
    return "\n".join(lines) + "\n"


def lines_for_band(bands: list[list[Mapping[str, Any]]], lines: list[str], scale: float, width: int) -> None:
    import textwrap

    for band in bands:
        edge = [" "] * width
        boxes = []
        for panel in band:
            grid = panel["gridPos"]
            start, end = round(grid["x"] * scale), round((grid["x"] + grid["w"]) * scale) - 1
            edge[start:end + 1] = "+" + "-" * (end - start - 1) + "+"
            label = textwrap.wrap(f"{panel['title']} [{panel['type']}]", end - start - 2) or [""]
            boxes.append((start, end, label))
        height = max(len(label) for _, _, label in boxes)
        lines.append("".join(edge).rstrip())
        for i in range(height):
            middle = [" "] * width
            for start, end, label in boxes:
                text = label[i] if i < len(label) else ""
                middle[start:end + 1] = "|" + (" " + text).ljust(end - start - 1) + "|"
            lines.append("".join(middle).rstrip())
        lines.append("".join(edge).rstrip())
