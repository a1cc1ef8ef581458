from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bmc_lab import HOSTS, Lab
from redfish_emulator import RedfishEmulator, available


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    if not available():
        pytest.skip("needs sushy-tools' sushy-emulator (pip install -e '.[test]')")
    with RedfishEmulator(tmp_path / "bmc", HOSTS, mock_state=tmp_path / "state") as emulator:
        yield Lab(tmp_path, emulator)
