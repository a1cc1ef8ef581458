"""The day-2 tests drive the simulated cluster of the cluster-phase tests (``sim_cluster``)."""

from __future__ import annotations

import sys
from pathlib import Path

_CLUSTER_TESTS = str(Path(__file__).resolve().parents[1] / "bootstrap_cluster")
if _CLUSTER_TESTS not in sys.path:
    sys.path.insert(0, _CLUSTER_TESTS)
