"""The day-2 tests drive the simulated cluster of the cluster-phase tests (``sim_cluster``)."""

from __future__ import annotations

import sys
from pathlib import Path

_CLUSTER_TESTS = str(Path(__file__).resolve().parents[1] / "bootstrap_cluster")
if _CLUSTER_TESTS not in sys.path:
    sys.path.insert(0, _CLUSTER_TESTS)


import hashlib  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "inventories" / "demo.yaml"
DEMO_SURVEY = REPO / "tests" / "bootstrap_cluster" / "fixtures" / "demo-survey.json"
_BOOTSTRAPPED: dict[str, Path] = {}


def _bootstrap_once(cache: Path) -> Path:
    """The demo cluster after 'clusterctl bootstrap', made once per session and copied for each test."""
    from clirun import clusterctl

    if "demo" not in _BOOTSTRAPPED:
        saved = os.environ.get("CLUSTERCTL_MOCK_STATE")
        os.environ["CLUSTERCTL_MOCK_STATE"] = str(cache)
        try:
            done = clusterctl("-i", DEMO, "bootstrap", "--survey", DEMO_SURVEY, "--state-dir", cache / "progress")
        finally:
            if saved is None:
                os.environ.pop("CLUSTERCTL_MOCK_STATE", None)
            else:
                os.environ["CLUSTERCTL_MOCK_STATE"] = saved
        assert done.exit_code == 0, done.output
        _BOOTSTRAPPED["demo"] = cache
    return _BOOTSTRAPPED["demo"]


@pytest.fixture
def bootstrapped_demo(_private_mock_state: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This test's mock state: the demo cluster, bootstrapped (``mock_folder(..)`` finds a host's state)."""
    if "demo" in _BOOTSTRAPPED:
        cache = _BOOTSTRAPPED["demo"]
    else:
        cache = _bootstrap_once(tmp_path_factory.mktemp("demo-bootstrapped"))
    for entry in cache.iterdir():
        if entry.name != "progress":
            shutil.copytree(entry, _private_mock_state / entry.name, symlinks=True)
    yield _private_mock_state


def mock_cluster_folder(state: Path) -> Path:
    return next(p for p in state.iterdir() if p.name.startswith("demo-"))


def set_fault(state: Path, host: str, name: str, value: str | None) -> None:
    """Make a demo mock host misbehave (``drain: hang``, ``kubelet: not-ready``); None clears it."""
    from clusterctl.mock.state import HostState

    folder = mock_cluster_folder(state) / "hosts" / host
    with HostState(folder, host).edit() as data:
        values = data.setdefault("values", {})
        if value is None:
            values.pop(name, None)
        else:
            values[name] = value


def state_digest(state: Path) -> str:
    """One hash of every file the mock cluster keeps (names and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in state.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(state)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
