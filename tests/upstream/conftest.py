"""The real-tools tier: the upstream programs themselves, built by ``tests/upstream/build-tools``.

``upstream_tool("kubeadm", "1.37.2")`` is the path of that build (skip and failure rules:
``real_tools``); ``demo_recordings`` bootstraps each demo variant once per session on mock hosts
and keeps what clusterctl handed the tools (``demo_calls``); ``control_plane`` is the one real
control plane of the session (``real_cluster``), shared by every module that needs it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_calls import DemoRecordings
from real_cluster import Cluster, start_cluster
from real_tools import find_tool, skipped_summary


@pytest.fixture
def upstream_tool() -> Callable[[str, str], Path]:
    return find_tool


@pytest.fixture(scope="session")
def demo_recordings(tmp_path_factory: pytest.TempPathFactory) -> DemoRecordings:
    return DemoRecordings(tmp_path_factory.mktemp("demo-recordings"))


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with start_cluster(tmp_path_factory.mktemp("control-plane")) as cluster:
        yield cluster


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Outside CI, missing tools skip their tests: one line says so and how to build them."""
    line = skipped_summary()
    if line:
        terminalreporter.write_line(line, yellow=True)
