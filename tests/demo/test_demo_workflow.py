"""The README's workflow on the demo cluster: survey --save, then tune-nccl from that survey."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import clusterctl
from fixture_files import read_settings_file

from clusterctl.nccl.lint import lint_settings

DEMO = str(Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml")


def test_survey_saves_every_hosts_interfaces(tmp_path: Path) -> None:
    saved = tmp_path / "survey.json"
    result = clusterctl("-i", DEMO, "survey", "-o", "json", "--save", str(saved))
    assert result.exit_code == 1  # gpu-a3 and gpu-b3 are broken on purpose
    hosts = {h["host"]: h for h in json.loads(saved.read_text())["hosts"]}
    a1 = {i["name"]: i["ipv4"] for i in hosts["gpu-a1"]["interfaces"]}
    assert a1["enp226s0"] == ["10.0.0.11"]
    assert "lo" not in a1
    b2 = {i["name"]: i["ipv4"] for i in hosts["gpu-b2"]["interfaces"]}
    assert b2["enp226s0"] == ["10.0.1.12"]
    # The IPoIB address also lands on the RDMA NIC that carries it.
    mlx5_0 = next(n for n in hosts["gpu-a1"]["nics"] if n["name"] == "mlx5_0")
    assert mlx5_0["netdevs"][0]["name"] == "ibp12s0" and mlx5_0["netdevs"][0]["ipv4"] == ["192.168.10.11"]


def test_tune_nccl_from_the_saved_survey_picks_the_management_interface_and_lints_clean(
    tmp_path: Path
) -> None:
    saved = tmp_path / "survey.json"
    clusterctl("-i", DEMO, "survey", "-o", "json", "--save", str(saved))
    out_dir = tmp_path / "nccl"
    result = clusterctl("-i", DEMO, "tune-nccl", "--survey", str(saved), "-o", "json", "--out", str(out_dir))
    assert result.exit_code == 0
    settings = {s["name"]: s["value"] for s in json.loads(result.stdout)["settings"]}
    assert settings["NCCL_SOCKET_IFNAME"] == "=enp226s0"
    assert settings["NCCL_IB_HCA"].startswith("=mlx5_0:1,")
    assert "mlx5_8" not in settings["NCCL_IB_HCA"]
    conf = out_dir / "nccl.conf"
    findings = lint_settings(read_settings_file(conf), nccl_version="2.18.3", fabric="ib")
    assert [f for f in findings if f.severity in ("error", "warning")] == []
