"""Finding the tools ``tests/upstream/build-tools`` built, and the tier's one skip rule.

Where the tools folder does not exist at all (a developer's machine that never ran build-tools)
the tests skip, saying how to get the tools; in CI (``CI=true``) and wherever the folder exists,
a missing tool is a failure, so that the tier cannot quietly stop running.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from toolset import cache_folder, tool_path


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(message: str) -> None:
    """Skip (no tools folder, not CI) or fail (anything else) for a tool that is not there."""
    if not cache_folder().is_dir() and not in_ci():
        pytest.skip(f"the real-tools tier needs its tools folder {cache_folder()}: {message}")
    pytest.fail(message, pytrace=False)


def find_tool(name: str, version: str) -> Path:
    """The built tool, or the skip/failure of ``missing``."""
    path = tool_path(name, version)
    if path.is_file() and os.access(path, os.X_OK):
        return path
    missing(f"{name} {version} is not built ({path}): run tests/upstream/build-tools")
    raise AssertionError("unreachable")


def system_tool(name: str, package: str) -> Path:
    """A program from a Debian package .ci/run installs (containerd 1.6, promtool)."""
    found = shutil.which(name)
    if found:
        return Path(found)
    missing(f"{name} is not installed (Debian package {package}; .ci/run installs it)")
    raise AssertionError("unreachable")
