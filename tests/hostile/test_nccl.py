"""Hostile inputs to ``nccl lint`` (and the NCCL options of ``tune-nccl``)."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "nccl-settings"


def test_an_unreadable_file_is_exit_2_and_the_other_files_are_still_checked(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = FIXTURES / "elvin-ma-run.sh"
    ran = cli("nccl", "lint", str(tmp_path / "missing.conf"), str(tmp_path), str(good), "-o", "json")
    assert ran.code == 2
    doc = json.loads(ran.out)
    assert {f["file"] for f in doc["findings"]} == {str(good)}
    assert "missing.conf: no such file" in ran.err
    assert f"{tmp_path}: is a folder" in ran.err


def test_binary_input_is_named_not_printed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blob = tmp_path / "nccl.conf"
    blob.write_bytes(b"NCCL_DEBUG=INFO\n\x00\x1b[2J\x00")
    ran = cli("nccl", "lint", str(blob))
    assert ran.code == 2
    assert "binary data" in ran.err and "\x1b[2J" not in ran.err + ran.out


def test_an_unclosed_quote_on_an_nccl_line_is_reported_with_its_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "job.sh"
    script.write_text('export NCCL_DEBUG=INFO\nexport NCCL_IB_HCA="mlx5_0\nexport NCCL_ALGO=Ring\n')
    ran = cli("nccl", "lint", str(script))
    assert ran.code == 2
    assert f"{script}:2:" in ran.err and "unclosed quote" in ran.err


def test_a_huge_file_is_refused_before_it_is_read(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    big = tmp_path / "big.conf"
    with big.open("wb") as handle:
        handle.truncate(17 * 1024 * 1024)  # sparse: costs no disk
    ran = cli("nccl", "lint", str(big))
    assert ran.code == 2 and "16 MiB limit" in ran.err


def test_the_table_is_one_line_per_finding_with_natural_counts(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=debug\n" * 3000)
    ran = cli("nccl", "lint", str(conf))
    assert ran.code == 1
    lines = ran.out.splitlines()
    # One line per finding, never folded mid-word, then its fix.
    assert lines[0].startswith(f"ERROR   {conf}:1 NCCL_DEBUG INVALID_VALUE: NCCL_DEBUG=debug is not one of")
    assert lines[1].strip().startswith("fix: ")
    assert all(line.startswith(("ERROR ", "WARNING ", "INFO ")) or line.strip().startswith("fix: ")
               for line in lines[:-1])
    assert lines[-1].startswith("3000 NCCL settings checked: ")
    single = tmp_path / "one.conf"
    single.write_text("NCCL_DEBUG=debug\n")
    assert "1 NCCL setting checked: 1 error, 0 warnings" in cli("nccl", "lint", str(single)).out
