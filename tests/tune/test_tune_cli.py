"""``clusterctl tune-nccl`` end to end on the demo inventory's mock hosts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from clirun import clusterctl

from clusterctl.nccl.lint import lint_settings
from clusterctl.nccl.sources import read_settings
from clusterctl.nccl.tune.saved_sweep import save_sweep
from clusterctl.nccl.tune.sweep_result import SweepResult

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


def test_a_namespace_kubernetes_refuses_is_refused_as_dashboards_refuses_it(demo_survey: Path) -> None:
    # Before, tune-nccl wrote a ConfigMap into namespace "Monitoring_1", which kubectl apply refuses.
    tuned = clusterctl("-i", str(DEMO), "tune-nccl", "--survey", str(demo_survey), "--format", "k8s",
                       "--namespace", "Monitoring_1")
    drawn = clusterctl("-i", str(DEMO), "dashboards", "--survey", str(demo_survey), "--namespace", "Monitoring_1")
    assert tuned.exit_code == drawn.exit_code == 2 and tuned.stdout == ""
    assert tuned.stderr == drawn.stderr and "'Monitoring_1' is not a Kubernetes namespace name" in tuned.stderr


@pytest.mark.parametrize("option", [("--budget", "300"), ("--repeats", "5"), ("--collective", "all_gather")])
def test_a_sweep_option_without_sweep_is_refused_as_dry_run_without_push_is(demo_survey: Path,
                                                                           option: tuple[str, str]) -> None:
    # Before, 'tune-nccl --budget 300' derived settings and measured nothing, without a word.
    result = clusterctl("-i", str(DEMO), "tune-nccl", "--survey", str(demo_survey), *option)
    assert result.exit_code == 2 and result.stdout == "" and "go with --sweep" in result.stderr


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


def test_push_writes_conf_with_a_backup(tmp_path: Path) -> None:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.loader import load_inventory
    from clusterctl.inventory.model import Host
    from clusterctl.mock.transport import MockTransport
    from clusterctl.nccl.tune.derive import TunedSetting, Tuning
    from clusterctl.nccl.tune.push import push_conf, pushed_records
    from clusterctl.nccl.tune.render import conf_for_host

    inventory = load_inventory(str(DEMO))
    host = inventory.host("gpu-a1")
    tuning = Tuning(hosts=("gpu-a1",), nccl_version="2.18.3", fabric="ib",
                    settings=(TunedSetting("NCCL_CROSS_NIC", "0", "rail-optimised"),))
    transports: list[MockTransport] = []

    def connect(h: Host, _t: float) -> MockTransport:
        transports.append(MockTransport(h))
        transports[-1].machine.host.fs.write("/etc/nccl.conf", b"NCCL_DEBUG=WARN\n")
        return transports[-1]

    with Runner(connect, parallel=1) as runner:
        fleet = pushed_records(push_conf(runner, inventory, [host], lambda name: conf_for_host(tuning, None, name),
                                         apply=True, state_dir=str(tmp_path)), [host])
        again = pushed_records(push_conf(runner, inventory, [host], lambda name: conf_for_host(tuning, None, name),
                                         apply=True, state_dir=str(tmp_path)), [host])
    outcome = fleet.outcomes[0].value
    assert outcome is not None and outcome.applied and outcome.changed and outcome.backup_path
    assert transports[0].get(outcome.backup_path) == b"NCCL_DEBUG=WARN\n"
    assert b"NCCL_CROSS_NIC=0" in (transports[0].get("/etc/nccl.conf") or b"")
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


def test_push_takes_the_host_lock_and_leaves_a_host_another_run_holds_untouched(
        demo_survey: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The push runs on the action engine: a host another live run has locked is named and not written
    (the others are), no lock of the push stays behind, and ``--force-unlock`` clears a dead run's lock."""
    import socket

    from clusterctl.engine.lock import DEFAULT_LOCK_PATH

    monkeypatch.chdir(tmp_path)
    base = ("-i", str(DEMO), "-l", "gpu-a1,gpu-b1")
    other = json.dumps({"owner": "ops", "control_host": "elsewhere-" + socket.gethostname(), "pid": 1,
                        "started": "2999-01-01T00:00:00+00:00", "run_id": "someone-else"})
    held = clusterctl(*base[:2], "-l", "gpu-a1", "exec", "--sudo", "--",
                      f"mkdir -p /var/lib/clusterctl && printf '%s\\n' '{other}' > {DEFAULT_LOCK_PATH}")
    assert held.exit_code == 0, held.output
    pushed = clusterctl(*base, "-o", "json", "tune-nccl", "--survey", str(demo_survey), "--push", "--yes")
    assert pushed.exit_code == 1, pushed.output
    rows = {row["host"]: row for row in pushed.json()["push"]}
    assert not rows["gpu-a1"]["ok"] and "locked by ops@elsewhere-" in rows["gpu-a1"]["error"]
    assert rows["gpu-b1"]["ok"] and rows["gpu-b1"]["applied"] and rows["gpu-b1"]["changed"]

    def read(host: str, path: str) -> str:
        done = clusterctl(*base[:2], "-l", host, "-o", "json", "exec", "--sudo", "--", f"cat {path} || true")
        assert done.exit_code == 0, done.output
        return str(done.json()["hosts"][0]["stdout"])

    assert "BEGIN clusterctl tune-nccl" not in read("gpu-a1", "/etc/nccl.conf")
    assert "BEGIN clusterctl tune-nccl" in read("gpu-b1", "/etc/nccl.conf")
    assert read("gpu-b1", DEFAULT_LOCK_PATH) == ""  # the push gave its lock back
    assert "someone-else" in read("gpu-a1", DEFAULT_LOCK_PATH)  # and never touched the other run's
    forced = clusterctl(*base, "-o", "json", "tune-nccl", "--survey", str(demo_survey), "--push", "--yes",
                        "--force-unlock")
    assert forced.exit_code == 0, forced.output
    assert "BEGIN clusterctl tune-nccl" in read("gpu-a1", "/etc/nccl.conf")
    assert read("gpu-a1", DEFAULT_LOCK_PATH) == ""


def test_a_sweep_says_how_many_nccl_tests_lines_it_could_not_read_and_where_they_are(
        demo_survey: Path, tmp_path: Path, mock_sweep: Callable[[str], tuple[SweepResult, list[str]]]) -> None:
    # profiles/sweep-row-cut: a row of every third defaults-like run cannot be read
    measured, _ = mock_sweep("sweep-row-cut")
    save_sweep(measured, str(tmp_path))
    saved = tmp_path / "sweep.json"
    result = clusterctl("-i", str(DEMO), "tune-nccl", "--survey", str(demo_survey), "--bench", str(tmp_path))
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    runs = len(measured.unread_rows)  # one cut row per such run
    assert f"{runs} nccl-tests row(s) in {runs} run(s) could not be read" in said
    assert f"'unread_rows' in {saved}" in said
    as_json = clusterctl("-i", str(DEMO), "tune-nccl", "--survey", str(demo_survey), "--bench", str(tmp_path),
                         "-o", "json")
    unread = json.loads(as_json.stdout)["sweep"]["unread_rows"]
    assert len(unread) == runs and unread[0]["line"] == 42 and unread[0]["host"] == "sweep-host"
