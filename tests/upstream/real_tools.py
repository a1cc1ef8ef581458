"""Finding the tools ``tests/upstream/build-tools`` built, and the tier's one skip rule.

Outside CI a tool that is not there (no tools folder at all, or one that holds only part of
the tools: a build still running, another checkout's versions) skips its tests, and the run
ends with ONE line saying how many were skipped, what was missing and the command that builds
them (``skipped_summary``, printed by ``tests/upstream/conftest.py``). In CI (``CI=true``) a
missing tool is a failure, so that the tier can never quietly stop running there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from toolset import cache_folder, tool_path

#: The command that fills the cache, named by every skip and by the summary line.
BUILD_COMMAND = "tests/upstream/build-tools && tests/upstream/fetch-manifests"

#: What was missing in this run (tool or file -> how many tests skipped for it), for the summary.
_skipped: dict[str, int] = {}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(message: str, *, what: str | None = None) -> None:
    """Skip (outside CI) or fail (in CI) for a tool or file that is not there."""
    if in_ci():
        pytest.fail(message, pytrace=False)
    key = what or message
    _skipped[key] = _skipped.get(key, 0) + 1
    pytest.skip(f"the real-tools tier needs what {BUILD_COMMAND} puts in {cache_folder()}: {message}")


def skipped_summary() -> str | None:
    """The one line that ends a run where tools were missing (``None`` when nothing was)."""
    if not _skipped:
        return None
    count = sum(_skipped.values())
    names = sorted(_skipped)
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    tests = "test" if count == 1 else "tests"
    return (f"real-tools tier: {count} {tests} skipped, missing from {cache_folder()}: {shown}; "
            f"build them with: {BUILD_COMMAND}")


def find_tool(name: str, version: str) -> Path:
    """The built tool, or the skip/failure of ``missing``."""
    path = tool_path(name, version)
    if path.is_file() and os.access(path, os.X_OK):
        return path
    missing(f"{name} {version} is not built ({path}): run tests/upstream/build-tools", what=f"{name} {version}")
    raise AssertionError("unreachable")


def system_tool(name: str, package: str) -> Path:
    """A program from a Debian package .ci/run installs (containerd 1.6, promtool)."""
    found = shutil.which(name)
    if found:
        return Path(found)
    missing(f"{name} is not installed (Debian package {package}; .ci/run installs it)", what=name)
    raise AssertionError("unreachable")
