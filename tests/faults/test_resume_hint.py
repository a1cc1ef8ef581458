"""--resume treats the progress record as a hint: it is keyed by the fleet (two checkouts of one
cluster name never share it), and a phase is skipped only when the host confirms nothing is to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from clirun import clusterctl

REPO = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path, name: str) -> Path:
    """A copy of the demo inventory (and its profiles) in its own folder, with its own mock state."""
    folder = tmp_path / name
    shutil.copytree(REPO / "inventories", folder / "inventories")
    inventory = folder / "inventories" / "demo.yaml"
    text = inventory.read_text().replace("defaults:\n", f"defaults:\n  mock_state: {folder / 'mock'}\n", 1)
    inventory.write_text(text)
    return inventory


def test_two_checkouts_of_one_cluster_name_keep_separate_progress(tmp_path: Path) -> None:
    state = tmp_path / "progress"
    first, second = _checkout(tmp_path, "a"), _checkout(tmp_path, "b")
    ran = clusterctl("-i", first, "-l", "gpu-a1", "-o", "json", "bootstrap", "phase", "kernel", "--state-dir", state)
    assert ran.exit_code == 0, ran.stderr
    resumed = clusterctl("-i", second, "-l", "gpu-a1", "-o", "json", "bootstrap", "phase", "kernel", "--resume",
                         "--state-dir", state)
    # The second checkout has no progress of its own: nothing of the first one's is taken for done.
    assert resumed.exit_code == 2 and "no progress file" in resumed.stderr


def test_resume_runs_a_phase_the_host_no_longer_confirms(tmp_path: Path) -> None:
    inventory = _checkout(tmp_path, "a")
    state = tmp_path / "progress"
    args = ["-i", inventory, "-l", "gpu-a1", "-o", "json", "bootstrap", "phase", "kernel", "--state-dir", state]
    assert clusterctl(*args).exit_code == 0
    assert clusterctl("-i", inventory, "-l", "gpu-a1", "mock", "reset").exit_code == 0  # a fresh host again
    resumed = clusterctl(*args, "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    (result,) = json.loads(resumed.stdout)["results"]
    assert result["status"] == "changed" and result["changes"]
