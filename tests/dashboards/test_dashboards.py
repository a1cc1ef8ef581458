"""``clusterctl dashboards`` on the demo: the files a user loads, and dashboards that follow the survey."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.clirun import DEMO, clusterctl


@pytest.fixture(scope="module")
def demo_survey(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("survey") / "survey.json"
    run = clusterctl("-i", DEMO, "-o", "json", "survey", "--save", path)
    assert run.exit_code == 1, run.output  # the demo has broken hosts on purpose
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _render(tmp_path: Path, survey: dict[str, Any], *extra: str) -> dict[str, Any]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    saved = tmp_path / "survey.json"
    saved.write_text(json.dumps(survey))
    out = tmp_path / "out"
    run = clusterctl("-i", DEMO, "-o", "json", "dashboards", "--survey", saved, "--out", out, *extra)
    assert run.exit_code == 0, run.output
    boards = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    return {"boards": boards, "textfile": (out / "clusterctl-measured.prom").read_text(), "out": out,
            "payload": run.json()}


def _panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def _host(survey: dict[str, Any], name: str) -> dict[str, Any]:
    return next(h for h in survey["hosts"] if h["host"] == name)


def test_the_demo_gets_four_dashboards_their_configmaps_and_the_textfile(tmp_path: Path) -> None:
    out = tmp_path / "dash"
    run = clusterctl("-i", DEMO, "dashboards", "--out", out)
    assert run.exit_code == 0, run.output
    assert sorted(p.name for p in out.iterdir()) == [
        "clusterctl-measured.prom", "dashboards-configmaps.yaml", "fabric.json", "fleet-health.json",
        "repairs.json", "utilisation.json"]
    configmaps = list(yaml.safe_load_all((out / "dashboards-configmaps.yaml").read_text()))
    assert [c["metadata"]["labels"]["grafana_dashboard"] for c in configmaps] == ["1"] * 4
    for configmap in configmaps:
        (name, text), = configmap["data"].items()
        assert json.loads(text) == json.loads((out / name).read_text())
    # gpu-a3 lost GPU 3's NVLinks: its own layout, its own row and panel.
    fleet = json.loads((out / "fleet-health.json").read_text())
    rows = [p["title"] for p in fleet["panels"] if p["type"] == "row"]
    assert "NVLink: 1 domain(s) per host on gpu-a3" in rows
    assert 'gpu-a3",gpu="3"' not in (out / "clusterctl-measured.prom").read_text()


def test_every_dashboard_reads_back_as_the_sdk_model(tmp_path: Path, demo_survey: dict[str, Any]) -> None:
    from grafana_foundation_sdk.models.dashboard import Dashboard

    for stem, board in _render(tmp_path, demo_survey)["boards"].items():
        model = Dashboard.from_json(board)
        assert model.title == board["title"] and model.uid == f"clusterctl-{stem}-demo"
        assert len(model.panels or []) == len(board["panels"])
        # Only Grafana's core panels: an air-gapped Grafana has no plugin to fetch.
        assert {p["type"] for p in board["panels"]} <= {"row", "timeseries", "table", "status-history", "bargauge",
                                                         "histogram", "text"}


def test_removing_a_gpu_from_the_survey_removes_it_from_the_dashboards(tmp_path: Path,
                                                                       demo_survey: dict[str, Any]) -> None:
    before = _render(tmp_path / "before", demo_survey)
    survey = json.loads(json.dumps(demo_survey))
    host = _host(survey, "gpu-b1")
    host["gpus"] = [g for g in host["gpus"] if g["index"] != 7]
    host["nvlink_domains"] = [[g for g in d if g != 7] for d in host["nvlink_domains"]]
    after = _render(tmp_path / "after", survey)
    assert 'gpu="7",host="gpu-b1"' in before["textfile"] and 'gpu="7",host="gpu-b1"' not in after["textfile"]
    titles = [p["title"] for p in _panels(after["boards"]["fleet-health"])]
    assert "NVLink traffic, domain GPUs 0-6" in titles
    (panel,) = [p for p in _panels(after["boards"]["fleet-health"]) if p["title"] == "NVLink traffic, domain GPUs 0-6"]
    assert 'Hostname=~"gpu-b1"' in panel["targets"][0]["expr"] and 'gpu=~"0|1|2|3|4|5|6"' in panel["targets"][0]["expr"]


def test_a_second_nvlink_domain_gets_its_own_panel(tmp_path: Path, demo_survey: dict[str, Any]) -> None:
    survey = json.loads(json.dumps(demo_survey))
    for name in ("gpu-b2", "gpu-b3"):
        _host(survey, name)["nvlink_domains"] = [[0, 1, 2, 3], [4, 5, 6, 7]]
    after = _render(tmp_path, survey)
    panels = {p["title"]: p for p in _panels(after["boards"]["fleet-health"])}
    assert {"NVLink traffic, domain GPUs 0-3", "NVLink traffic, domain GPUs 4-7"} <= set(panels)
    expr = panels["NVLink traffic, domain GPUs 4-7"]["targets"][0]["expr"]
    assert 'Hostname=~"gpu-b2|gpu-b3"' in expr and 'gpu=~"4|5|6|7"' in expr
    assert 'nvlink_domain="4-7"' in after["textfile"]
    layout = {"domains": [[0, 1, 2, 3], [4, 5, 6, 7]], "hosts": ["gpu-b2", "gpu-b3"]}
    assert layout in after["payload"]["nvlink_layouts"]


def test_a_renamed_host_is_selected_under_its_new_name(tmp_path: Path, demo_survey: dict[str, Any]) -> None:
    survey = json.loads(json.dumps(demo_survey))
    _host(survey, "gpu-a3")["host"] = "gpu-a3.rack-a.example"
    after = _render(tmp_path, survey)
    text = json.dumps(after["boards"]["fleet-health"])
    assert "gpu-a3\\\\\\\\.rack-a\\\\\\\\.example" in text  # dots escaped for RE2 inside a PromQL string
    assert 'host="gpu-a3.rack-a.example"' in after["textfile"]


def test_a_host_name_that_cannot_be_a_matcher_is_refused(tmp_path: Path, demo_survey: dict[str, Any]) -> None:
    survey = json.loads(json.dumps(demo_survey))
    _host(survey, "gpu-a1")["host"] = 'gpu"a1'
    saved = tmp_path / "survey.json"
    saved.write_text(json.dumps(survey))
    run = clusterctl("-i", DEMO, "dashboards", "--survey", saved)
    assert run.exit_code == 2 and "cannot go into a dashboard's host matcher" in run.stderr
    assert "Traceback" not in run.output


def test_a_folder_where_a_dashboard_goes_is_an_input_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "fleet-health.json").mkdir()
    run = clusterctl("-i", DEMO, "dashboards", "--out", tmp_path)
    assert run.exit_code == 2, run.output
    assert f"cannot write {tmp_path / 'fleet-health.json'}" in run.stderr
    assert "internal error" not in run.stderr.lower()


def test_a_bad_namespace_is_refused(tmp_path: Path) -> None:
    run = clusterctl("-i", DEMO, "dashboards", "--namespace", "Monitoring_1", "--out", tmp_path)
    assert run.exit_code == 2 and "--namespace" in run.stderr
    assert not list(tmp_path.iterdir())


def test_the_bench_matrix_is_coloured_by_the_inventory_s_fabric_thresholds(tmp_path: Path,
                                                                           demo_survey: dict[str, Any]) -> None:
    site = tmp_path / "site.yaml"  # the demo, at a site whose links must reach 80% within a rack, 50% across
    site.write_text(Path(DEMO).read_text().replace(
        "    rate_gbps: 200\n", "    rate_gbps: 200\n    within_rack_min: 0.8\n    across_racks_min: 0.5\n", 1))
    (tmp_path / "demo").symlink_to(Path(DEMO).parent / "demo")  # its profiles, named relative to the file
    (tmp_path / "survey.json").write_text(json.dumps(demo_survey))
    link = {"server": "gpu-a1", "server_hca": "mlx5_0", "client": "gpu-a2", "client_hca": "mlx5_0", "gbps": 170.0,
            "expected_gbps": 200.0, "min_fraction": 0.8, "slow": False, "same_rack": True}
    (tmp_path / "results.json").write_text(json.dumps({"test": "ib_write_bw", "links": [link]}))
    run = clusterctl("-i", site, "dashboards", "--survey", tmp_path / "survey.json", "--bench",
                     tmp_path / "results.json", "--out", tmp_path / "out")
    assert run.exit_code == 0, run.output
    board = json.loads((tmp_path / "out" / "fabric.json").read_text())
    (panel,) = [p for p in board["panels"] if p["title"].startswith("ib_write_bw between hosts: share")]
    # 85% is green, as bench judged the link: not yellow under a default 90%.
    assert [s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [None, 0.5, 0.8]
