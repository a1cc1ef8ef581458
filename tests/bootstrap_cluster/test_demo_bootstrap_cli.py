"""The README's bootstrap lines on the demo inventory: plan with a survey, --dry-run, reset --dry-run, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl as run_cli
from cluster_builders import FIXTURES

DEMO = str(Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml")
SURVEY = str(FIXTURES / "demo-survey.json")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    done = run_cli(*argv)
    return done.exit_code, done.stdout, done.stderr


def test_bootstrap_plan_on_the_demo_plans_every_cluster_phase(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    code, out, err = run(capsys, "-i", DEMO, "-o", "json", "bootstrap", "plan", "--survey", SURVEY,
                         "--out", str(tmp_path / "review"))
    assert code == 0, err
    report = json.loads(out)
    planned = {(r["host"], r["phase"]) for r in report["results"] if r["changes"]}
    assert ("gpu-a1", "control-plane") in planned and ("gpu-b3", "join") in planned
    assert ("gpu-a1", "gpu-addons") in planned and ("gpu-a3", "topology-labels") in planned
    features = tmp_path / "review" / "gpu-a3" / "etc/kubernetes/clusterctl/nfd/clusterctl-topology"
    assert "clusterctl.dev/nvlink.degraded=true" in features.read_text()
    config = (tmp_path / "review" / "gpu-a1" / "etc/kubernetes/clusterctl/kubeadm-config.yaml").read_text()
    assert "apiVersion: kubeadm.k8s.io/v1beta4" in config and "cgroupDriver: systemd" in config
    commands = (tmp_path / "review" / "gpu-a1" / "COMMANDS.sh").read_text()
    assert "kubeadm init --config /dev/stdin --upload-certs" in commands


def test_dry_run_and_reset_dry_run_touch_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "-i", DEMO, "bootstrap", "--dry-run")
    assert code == 0, err
    assert "PLAN RECAP (nothing was changed)" in out and "verify" in out
    code, out, err = run(capsys, "-i", DEMO, "reset", "--dry-run")
    assert code == 0, err
    assert "nothing to do" in out


def test_reset_refuses_without_a_terminal_or_yes(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTERCTL_YES")  # tests confirm by default (tests/conftest.py)
    code, _, err = run(capsys, "-i", DEMO, "reset")
    assert code == 2 and "--yes" in err


def test_a_kubernetes_pin_before_v1beta4_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    inventory = tmp_path / "old.yaml"
    text = Path(DEMO).read_text().replace('kubernetes: "1.36.2"', 'kubernetes: "1.30.5"')
    text = text.replace("profile: demo/", f"profile: {Path(DEMO).parent}/demo/")
    inventory.write_text(text)
    code, _, err = run(capsys, "-i", str(inventory), "bootstrap", "plan", "--phase", "control-plane")
    assert code == 2
    assert "v1beta3" in err and "1.31" in err


def test_the_demo_bootstraps_through_verify_then_changes_nothing_then_resets(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    progress = ["--state-dir", str(tmp_path / "progress")]
    code, out, err = run(capsys, "-i", DEMO, "bootstrap", "--survey", SURVEY, *progress)
    assert code == 0, err
    assert "works: 6 node(s) Ready, 48 GPU(s) allocatable" in out
    code, out, err = run(capsys, "-i", DEMO, "bootstrap", "--survey", SURVEY, *progress)
    assert code == 0 and "nothing changed" in out, err
    code, out, err = run(capsys, "-i", DEMO, "reset", "--yes", *progress)
    assert code == 0, err
    code, out, err = run(capsys, "-i", DEMO, "reset", "--yes", *progress)
    assert code == 0 and "nothing changed" in out, err
