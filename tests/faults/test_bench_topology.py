"""``bench nccl`` judges a figure against the host's own topology: gpu-a3's GPU3 has no NVLink, so
a full NVSwitch bus bandwidth from it is not a measurement of the host as it is."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import clusterctl

from clusterctl.bench.plausible import PCIE_GBS_PER_GPU, topology_limit
from clusterctl.facts.nvlink import parse_nvlink

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"
PROFILES = REPO / "inventories" / "demo" / "profiles"


def test_a_gpu_without_active_nvlinks_bounds_the_host_at_pcie() -> None:
    statuses = parse_nvlink((PROFILES / "gpu-a3" / "nvidia-smi-nvlink-s.txt").read_text())
    limit = topology_limit(statuses)
    assert limit is not None and limit[0] == PCIE_GBS_PER_GPU and limit[1].startswith("GPU3 has no active NVLink")


def test_bench_nccl_calls_gpu_a3_impossible_and_the_healthy_hosts_ok(tmp_path: Path) -> None:
    done = clusterctl("-i", DEMO, "-o", "json", "bench", "nccl", "--results-dir", tmp_path / "res")
    assert done.exit_code == 1
    findings = json.loads(done.stdout)["findings"]
    impossible = [f for f in findings if f["code"] == "FIGURE_IMPOSSIBLE"]
    assert [f["host"] for f in impossible] == ["gpu-a3"]
    assert "GPU3 has no active NVLink" in impossible[0]["message"]


def test_the_table_status_shows_the_finding_not_ok(tmp_path: Path) -> None:
    done = clusterctl("-i", DEMO, "bench", "nccl", "--results-dir", tmp_path / "res")
    row = next(line for line in done.stdout.splitlines() if "gpu-a3" in line and "│" in line)
    assert "FIGURE_IMPOSSIBLE" in row and " ok " not in row
