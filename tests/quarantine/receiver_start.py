"""Starting ``remediate serve`` from a chosen folder, for the tests of where the receiver keeps its files
(the ``started`` fixture in conftest.py keeps it from listening)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import DEMO, clusterctl


def serve_from(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(folder)
    ran = clusterctl("-i", str(DEMO), "remediate", "serve", "--yes", *args)
    return ran.exit_code, ran.stderr
