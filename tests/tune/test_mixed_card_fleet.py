"""tune-nccl on a fleet of two card models: a port is slow by the rule survey and health use."""

from __future__ import annotations

from pathlib import Path

from clirun import clusterctl
from mixed_fleet import CX6, CX7, DGX_A100, HDR, NDR, SDR, compute_cards, host_profile, inventory


def test_hosts_with_200g_cards_beside_more_hosts_with_400g_cards_are_not_slow(tmp_path: Path) -> None:
    """Four hosts with ConnectX-7 at 400 Gb/s, three with ConnectX-6 at 200 and no fabric.rate_gbps: the
    200G hosts' ports run at their card's rate (no "every fabric port trained below" warning, every port
    kept), while a port below its own card's rate is still left out, on either card."""
    cx7 = host_profile(tmp_path, "cx7", compute_cards(CX7, NDR))
    hosts = {**{f"n{i}": cx7 for i in range(3)},
             "n-slow": host_profile(tmp_path, "cx7-slow", compute_cards(CX7, NDR, mlx5_5=HDR)),
             "a0": DGX_A100, "a1": DGX_A100,
             "a-slow": host_profile(tmp_path, "cx6-slow", compute_cards(CX6, HDR, mlx5_2=SDR))}
    run = clusterctl("-i", inventory(tmp_path, hosts), "-o", "json", "tune-nccl")
    assert run.exit_code == 0, run.output
    data = run.json()
    assert not any("every fabric port" in w for w in data["warnings"]), data["warnings"]
    slow = sorted(w.split(":", 1)[0] + " " + w.split(" trained below ")[1].split(":")[0]
                  for w in data["warnings"] if "trained below" in w)
    assert slow == ["a-slow the fleet's 200 Gb/s", "n-slow the fleet's 400 Gb/s"]
    every_port = "=" + ",".join(f"mlx5_{i}:1" for i in range(8))
    common = {s["name"]: s["value"] for s in data["settings"]}
    overrides = {host: {s["name"]: s["value"] for s in settings} for host, settings in data["host_overrides"].items()}
    assert common["NCCL_IB_HCA"] == every_port  # the 200G hosts' included
    assert set(overrides) == {"n-slow", "a-slow"}
    assert overrides["n-slow"]["NCCL_IB_HCA"] == every_port.replace("mlx5_5:1,", "")
    assert overrides["a-slow"]["NCCL_IB_HCA"] == every_port.replace("mlx5_2:1,", "")
