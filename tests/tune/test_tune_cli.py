"""``clusterctl tune-nccl`` end to end on the demo inventory's mock hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl

from clusterctl.nccl.lint import lint_settings
from clusterctl.nccl.sources import read_settings

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"





@pytest.fixture(scope="module")
def demo_survey(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("survey") / "survey.json"
    clusterctl("-i", str(DEMO), "survey", "-o", "json", "--save", str(path))  # exit 1: the demo has broken hosts
    assert path.is_file()
    return path


def test_demo_survey_gives_settings_with_reasons_that_lint_clean(demo_survey: Path) -> None:
    result = clusterctl("-i", str(DEMO), "tune-nccl", "--survey", str(demo_survey), "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    settings = {s["name"]: s for s in data["settings"]}
    assert settings["NCCL_IB_HCA"]["value"] == "=" + ",".join(f"mlx5_{i}:1" for i in range(8))
    assert "mlx5_8" in settings["NCCL_IB_HCA"]["reason"]  # the storage card is named as left out
    # the demo inventory does not say whether the fabric is rail-optimised: NCCL's default stays
    assert "NCCL_CROSS_NIC" not in settings
    assert any("fabric.rail_optimized" in n for n in data["notes"])
    assert all(s["reason"] for s in data["settings"])
    assert data["lint"] == []
    conf = read_settings(data["files"]["nccl.conf"], "env", name="nccl.conf")
    findings = lint_settings(conf, nccl_version=data["nccl_version"], fabric="ib")
    assert [f for f in findings if f.severity != "info"] == []
    # the port that trained at 10 Gb/s is named and left out of gpu-b3's NCCL_IB_HCA
    assert any("gpu-b3" in w and "10 Gb/s" in w and "left out of NCCL_IB_HCA" in w for w in data["warnings"])


def test_table_output_shows_reasons(demo_survey: Path) -> None:
    result = clusterctl("-i", str(DEMO), "tune-nccl", "--survey", str(demo_survey))
    assert result.exit_code == 0, result.output
    assert "NCCL_IB_HCA" in result.stdout and "rail-optimised" in result.stdout


def test_out_writes_every_format(demo_survey: Path, tmp_path: Path) -> None:
    result = clusterctl("-i", str(DEMO), "tune-nccl", "--survey", str(demo_survey), "--format", "all", "--out",
                        str(tmp_path))
    assert result.exit_code == 0, result.output
    names = {p.name for p in tmp_path.rglob("*") if p.is_file()}
    assert {"nccl.conf", "nccl.sh", "nccl-configmap.yaml", "nccl-envfrom.yaml", "nccl-slurm.sh"} <= names


def test_push_dry_run_shows_a_diff_and_changes_nothing(demo_survey: Path) -> None:
    result = clusterctl("-i", str(DEMO), "-l", "gpu-a1", "tune-nccl", "--survey", str(demo_survey), "--push",
                        "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    push = json.loads(result.stdout)["push"]
    assert [p["host"] for p in push] == ["gpu-a1"]
    assert "+NCCL_IB_HCA==mlx5_0:1" in push[0]["diff"] and push[0]["backup"] is None


def test_push_goes_through_the_gate_and_names_the_journal_undo_takes(
    demo_survey: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = clusterctl("-i", str(DEMO), "-l", "gpu-a1", "tune-nccl", "--survey", str(demo_survey), "--push",
                        "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [(p["host"], p["applied"], p["changed"]) for p in payload["push"]] == [("gpu-a1", True, True)]
    journal = payload["undo_journal"]
    assert journal and (tmp_path / journal).is_file()
    undo = clusterctl("-i", str(DEMO), "undo", journal, "--dry-run", "-o", "json")
    assert undo.exit_code == 0, undo.output
    assert json.loads(undo.stdout)["hosts"] == [
        {"host": "gpu-a1", "ok": True, "done": ["would remove /etc/nccl.conf (it was new)"], "error": None}]


def test_push_writes_conf_with_a_backup() -> None:
    from clusterctl.changes import Gate
    from clusterctl.fanout import Runner
    from clusterctl.inventory.loader import load_inventory
    from clusterctl.inventory.model import Host
    from clusterctl.mock.transport import MockTransport
    from clusterctl.nccl.tune.derive import TunedSetting, Tuning
    from clusterctl.nccl.tune.push import push_conf
    from clusterctl.nccl.tune.render import conf_for_host

    host = load_inventory(str(DEMO)).host("gpu-a1")
    tuning = Tuning(hosts=("gpu-a1",), nccl_version="2.18.3", fabric="ib",
                    settings=(TunedSetting("NCCL_CROSS_NIC", "0", "rail-optimised"),))
    transports: list[MockTransport] = []

    def connect(h: Host, _t: float) -> MockTransport:
        transports.append(MockTransport(h))
        transports[-1].files["/etc/nccl.conf"] = b"NCCL_DEBUG=WARN\n"
        return transports[-1]

    with Runner(connect, parallel=1) as runner:
        fleet = push_conf(runner, [host], lambda name: conf_for_host(tuning, None, name), gate=Gate(apply=True))
        again = push_conf(runner, [host], lambda name: conf_for_host(tuning, None, name), gate=Gate(apply=True))
    outcome = fleet.outcomes[0].value
    assert outcome is not None and outcome.applied and outcome.changed and outcome.backup_path
    files = transports[0].files
    assert files[outcome.backup_path] == b"NCCL_DEBUG=WARN\n"
    assert b"NCCL_CROSS_NIC=0" in files["/etc/nccl.conf"]
    second = again.outcomes[0].value
    assert second is not None and not second.changed  # same content: nothing written


def test_dry_run_without_push_is_a_usage_error(demo_survey: Path) -> None:
    result = clusterctl("-i", str(DEMO), "tune-nccl", "--survey", str(demo_survey), "--dry-run")
    assert result.exit_code == 2 and result.stderr.startswith("error: --dry-run goes with --push")


def test_live_survey_when_no_file_is_given() -> None:
    result = clusterctl("-i", str(DEMO), "-l", "gpu-a1", "tune-nccl", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hosts"] == ["gpu-a1"]


def test_unknown_format_is_a_usage_error(demo_survey: Path) -> None:
    result = clusterctl("-i", str(DEMO), "tune-nccl", "--survey", str(demo_survey), "--format", "xml")
    assert result.exit_code == 2 and result.stderr.startswith("error:") and "Traceback" not in result.stderr
