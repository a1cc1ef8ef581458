"""Fixtures of the mock-host tests (helpers in conftest_mock.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest_mock import write_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    return write_cluster(tmp_path)
