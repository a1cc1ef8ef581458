from __future__ import annotations

import pytest
from fixture_files import read_fixture


@pytest.fixture
def fixture_text() -> object:
    return read_fixture
