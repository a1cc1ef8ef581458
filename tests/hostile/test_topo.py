"""Hostile inputs to ``topo show``: endless, huge, binary, folders and non-UTF-8 text."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from clusterctl.errors import UsageError
from clusterctl.inputfile import LIMITS, read_text_input


def test_an_endless_device_stops_at_the_limit(cli) -> None:  # type: ignore[no-untyped-def]
    ran = cli("topo", "show", "/dev/zero")
    assert ran.code == 2
    assert "/dev/zero" in ran.err and "1 MiB limit" in ran.err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"GPU0\tX\n\0\0\0", "binary data"),
        (b"GPU0\tX\n\xff\xfe", "not UTF-8 text"),
    ],
)
def test_binary_and_non_utf8_files_are_named_usage_errors(cli, tmp_path: Path, content: bytes,  # type: ignore[no-untyped-def]
                                                          expected: str) -> None:
    path = tmp_path / "topo.txt"
    path.write_bytes(content)
    ran = cli("topo", "show", str(path))
    assert ran.code == 2
    assert f"{path}:2: {expected}" in ran.err
    assert "\\x" not in ran.err and "Traceback" not in ran.err


def test_a_folder_is_not_a_missing_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ran = cli("topo", "show", str(tmp_path))
    assert ran.code == 2 and "is a folder" in ran.err


def test_standard_input_has_the_same_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * (LIMITS["topology"] + 1))))
    with pytest.raises(UsageError, match="<stdin>: larger than the 1 MiB limit"):
        read_text_input("-", "topology")
