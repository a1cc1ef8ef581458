from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``remediate serve`` without listening: it says it listens (what a user sees at start, the
    earlier run's alerts resumed); the list holds each receiver it would have run."""
    receivers: list[Any] = []

    def serve(remediator: Any, address: Any, security: Any, *, ready: Any) -> None:
        receivers.append(remediator)
        ready(9095)

    monkeypatch.setattr("clusterctl.quarantine.receiver.serve", serve)
    return receivers
