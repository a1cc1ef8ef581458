"""The one reader of recorded tool outputs under ``tests/fixtures/<tool>/`` (each folder's README
names where every recording came from)."""

from __future__ import annotations

from pathlib import Path

from clusterctl.nccl.sources import SettingsRead, read_settings

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture_dir(tool: str) -> Path:
    """``tests/fixtures/<tool>``; a missing folder fails the test loudly rather than skipping it."""
    folder = FIXTURES / tool
    assert folder.is_dir(), f"no fixture folder {folder}"
    return folder


def read_fixture(tool: str, name: str) -> str:
    """The text of one recording, ``tests/fixtures/<tool>/<name>``."""
    return (fixture_dir(tool) / name).read_text(encoding="utf-8")


def read_settings_file(path: Path, format: str | None = None) -> SettingsRead:
    """``read_settings`` of a settings file, named by its path (as ``nccl lint FILE`` names it)."""
    return read_settings(path.read_text(encoding="utf-8"), format, name=str(path))
