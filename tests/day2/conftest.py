"""The day-2 tests drive the simulated cluster of the cluster-phase tests (``sim_cluster``)."""

from __future__ import annotations

import sys
from pathlib import Path

_CLUSTER_TESTS = str(Path(__file__).resolve().parents[1] / "bootstrap_cluster")
if _CLUSTER_TESTS not in sys.path:
    sys.path.insert(0, _CLUSTER_TESTS)
_QUARANTINE_TESTS = str(Path(__file__).resolve().parents[1] / "quarantine")  # kube_sim: the small simulated cluster
if _QUARANTINE_TESTS not in sys.path:
    sys.path.append(_QUARANTINE_TESTS)



import shutil  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402
from day2_helpers import _BOOTSTRAPPED, bootstrap_once, bootstrap_three_once  # noqa: E402


@pytest.fixture
def bootstrapped_demo(_private_mock_state: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This test's mock state: the demo cluster, bootstrapped once per session and copied for each test."""
    cache = _BOOTSTRAPPED.get("demo") or bootstrap_once(tmp_path_factory.mktemp("demo-bootstrapped"))
    for entry in cache.iterdir():
        if entry.name != "progress":
            shutil.copytree(entry, _private_mock_state / entry.name, symlinks=True)
    yield _private_mock_state


@pytest.fixture
def bootstrapped_3cp(_private_mock_state: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The three-control-plane demo (gpu-a1..a3), bootstrapped once per session and copied for each test;
    its inventory's path (the mock state is this test's own)."""
    inventory, cache = bootstrap_three_once(tmp_path_factory.mktemp("demo-3cp-bootstrapped"))
    for entry in cache.iterdir():
        shutil.copytree(entry, _private_mock_state / entry.name, symlinks=True)
    yield inventory


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own state folder (``CLUSTERCTL_STATE_DIR``): the undo journals of its runs."""
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"
