from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def fixture_text() -> object:
    def read(tool: str, name: str) -> str:
        return (FIXTURES / tool / name).read_text()

    return read
