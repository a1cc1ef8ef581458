"""The README's test command on a machine whose tools cache is incomplete: a rule a newcomer can predict.

A cache that exists but lacks this checkout's versions (a build still running, another checkout's
tools) skips the real-tools tests outside CI and ends the run with one line naming the command
that builds them; in CI the same run fails, so the tier never quietly stops running there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clirun import REPO_ROOT

#: Three real-kubeadm tests (one per release), cheap to collect and to skip.
SELECTION = ["tests/upstream/test_contract_kubeadm.py", "-k", "version_answers_agree"]


def _partial_cache(folder: Path) -> Path:
    """A cache as another checkout left it: a kubeadm of a version this checkout does not use."""
    other = folder / "kubeadm-1.30.0"
    other.mkdir(parents=True)
    tool = other / "kubeadm"
    tool.write_text("#!/bin/sh\necho v1.30.0\n")
    tool.chmod(0o755)
    (folder / ".lock").write_text("")
    return folder


def _pytest(cache: Path, *, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS", "CLUSTERCTL_TIER_TIMES")}
    env["CLUSTERCTL_TOOLS_CACHE"] = str(cache)
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SELECTION],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_a_partial_cache_skips_outside_ci_with_one_line_naming_the_build_command(tmp_path: Path) -> None:
    run = _pytest(_partial_cache(tmp_path / "tools"), ci=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 skipped" in run.stdout
    summary = [line for line in run.stdout.splitlines() if line.startswith("real-tools tier:")]
    assert len(summary) == 1, run.stdout
    assert "3 tests skipped" in summary[0]
    assert "kubeadm 1.37.2" in summary[0] and str(tmp_path / "tools") in summary[0]
    assert "tests/upstream/build-tools" in summary[0]


def test_a_partial_cache_fails_in_ci(tmp_path: Path) -> None:
    run = _pytest(_partial_cache(tmp_path / "tools"), ci=True)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "3 errors" in run.stdout  # the tool fixture fails: each test errors
    assert "kubeadm 1.37.2 is not built" in run.stdout


def test_no_cache_at_all_skips_the_same_way_outside_ci(tmp_path: Path) -> None:
    run = _pytest(tmp_path / "never-built", ci=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "real-tools tier: 3 tests skipped" in run.stdout
