"""Bootstrap's node phases on a demo host answered by the simulated tools: the first process
changes the host, the next one finds it changed (state on disk) and has nothing to do."""

from __future__ import annotations

from pathlib import Path

from conftest_mock import clusterctl

DEMO = Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml"
PHASES = ("kernel", "packages", "containerd")


def test_second_process_finds_the_node_phases_done() -> None:
    for phase in PHASES:
        first = clusterctl(DEMO, "-l", "gpu-a1", "bootstrap", "phase", phase)
        assert first.returncode == 0 and "changed=1" in first.stdout, first.stdout + first.stderr
    for phase in PHASES:
        again = clusterctl(DEMO, "-l", "gpu-a1", "bootstrap", "phase", phase)
        assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout + again.stderr
    assert '"containerd": "active"' in clusterctl(DEMO, "-l", "gpu-a1", "-o", "json", "mock", "show").stdout
    clusterctl(DEMO, "mock", "reset")
    fresh = clusterctl(DEMO, "-l", "gpu-a1", "bootstrap", "phase", "kernel")
    assert "changed=1" in fresh.stdout, fresh.stdout
