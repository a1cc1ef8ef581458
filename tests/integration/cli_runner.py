"""Kept for imports written before ``tests/clirun.py``, the one CLI runner of the tests."""

from clirun import REPO_ROOT, CliRun, run_clusterctl

__all__ = ["REPO_ROOT", "CliRun", "run_clusterctl"]
