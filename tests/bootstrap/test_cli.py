"""``clusterctl bootstrap`` as a user runs it: the demo plan, preflight's table, options, --out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clusterctl.cli.app import main

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"


def clusterctl(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_demo_plan_works_with_no_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = clusterctl(["-i", str(DEMO), "bootstrap", "plan", "--phase", "preflight"], capsys)
    assert code == 0, err
    assert "PHASE [preflight]" in out and "PLAN RECAP" in out


def test_preflight_failure_is_one_table_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(REPO / "inventories" / "demo", demo)
    probe = demo / "profiles" / "net" / "gpu-b2" / "node-probe.txt"
    probe.write_text(probe.read_text().replace("### nvidia-driver\n535.154.05", "### nvidia-driver\n550.54.15"))
    inventory = tmp_path / "demo.yaml"
    inventory.write_text(DEMO.read_text())
    code, out, err = clusterctl(["-i", str(inventory), "bootstrap", "plan", "--phase", "preflight"], capsys)
    assert code == 1
    assert "DRIVER_PIN_MISMATCH" in out and "NVIDIA driver 550.54.15 is loaded, the stack pins 535.154.05" in out
    assert "FAILED gpu-b2: phase preflight" in err and "gpu-a1" not in err


def test_json_output_and_unknown_phase(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = clusterctl(["-i", str(DEMO), "-o", "json", "bootstrap", "plan", "--phase", "preflight",
                               "--only", "gpu-a*"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["mode"] == "plan" and data["hosts"] == ["gpu-a1", "gpu-a2", "gpu-a3"]
    assert data["recap"]["phases"][0] == {"phase": "preflight", "ok": 3, "changed": 0, "failed": 0, "skipped": 0,
                                          "duration_s": data["recap"]["phases"][0]["duration_s"]}
    code, _, err = clusterctl(["-i", str(DEMO), "bootstrap", "phase", "prefligth"], capsys)
    assert code == 2 and "Did you mean 'preflight'?" in err
    code, _, err = clusterctl(["-i", str(DEMO), "bootstrap", "--skip-phases", "kernal", "--dry-run"], capsys)
    assert code == 2 and "kernal" in err


def test_phases_are_listed_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = clusterctl(["-i", str(DEMO), "bootstrap", "phases"], capsys)
    assert code == 0 and out.splitlines()[0].startswith("preflight")
