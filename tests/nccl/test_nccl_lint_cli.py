"""``clusterctl nccl lint`` as a user runs it: exit codes, JSON for CI, the grouped table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nccl-settings"


def test_json_for_ci_and_exit_1_on_errors() -> None:
    result = clusterctl("nccl", "lint", str(FIXTURES / "derived-h100-64-broken.slurm"), "--nccl-version", "2.21.5",
                        "--fabric", "ib", "-o", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["summary"]["error"] == 5 and data["summary"]["warning"] == 2
    first = data["findings"][0]
    assert set(first) == {"subject", "code", "severity", "file", "line", "message", "fix"}
    assert (first["subject"], first["code"], first["line"]) == ("NCCL_IB_DISABLE", "HARMFUL", 14)


def test_warnings_fail_only_with_strict() -> None:
    path = str(FIXTURES / "oci-pytorchjob-etcd.yaml")
    assert clusterctl("nccl", "lint", path).exit_code == 0
    assert clusterctl("nccl", "lint", path, "--strict").exit_code == 1


def test_the_help_names_every_exit_1_a_run_gives(tmp_path: Path) -> None:
    # A file with no setting in it is a warning that exits 1 without --strict: the help said only errors did.
    (tmp_path / "empty.env").write_text("# nothing here\n")
    assert clusterctl("nccl", "lint", str(tmp_path / "empty.env")).exit_code == 1
    help_text = " ".join(clusterctl("nccl", "lint", "--help").stdout.split())
    assert "or a file no setting was read from" in help_text


def test_table_groups_findings_by_file_with_lines() -> None:
    result = clusterctl("nccl", "lint", str(FIXTURES / "flagai-run_multi.sh"), str(FIXTURES / "elvin-ma-run.sh"))
    assert result.exit_code == 1
    assert "flagai-run_multi.sh" in result.stdout and "elvin-ma-run.sh" in result.stdout
    assert "NCCL_TIMEOUT" in result.stdout and "UNKNOWN_VARIABLE" in result.stdout
    assert "8 NCCL settings checked: 2 errors, 2 warnings, 1 info" in result.stdout


def test_stdin_with_explicit_format() -> None:
    result = clusterctl("nccl", "lint", "-", "--format", "env", "-o", "json", stdin="NCCL_NTHREADS=8\n")
    assert result.exit_code == 1
    [finding] = json.loads(result.stdout)["findings"]
    assert finding["file"] == "<stdin>" and finding["message"] == (
        "NCCL_NTHREADS=8 is not a multiple of 32: NCCL replaces it with 512")


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    result = clusterctl("nccl", "lint", str(tmp_path / "missing.env"))
    assert result.exit_code == 2 and "no such file" in result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nspec: [\n")
    result = clusterctl("nccl", "lint", str(bad))
    assert result.exit_code == 2 and "not valid YAML" in result.stderr
    result = clusterctl("nccl", "lint", str(bad), "--nccl-version", "latest")
    assert result.exit_code == 2


@pytest.mark.parametrize("output", ["table", "json"])
@pytest.mark.parametrize(("command", "readable"), [
    (("nccl", "lint"), FIXTURES / "nccl.conf"),
    (("bench", "report"), FIXTURES.parent / "nccl-tests" / "all_reduce-2.20.0-gb10-spark-2node-excerpt.txt")])
def test_no_input_read_prints_the_error_alone_and_a_partial_read_its_result(
        command: tuple[str, ...], readable: Path, output: str, tmp_path: Path) -> None:
    """With no file read there is no result: stdout stays empty (the table said "No problems found"
    over nothing read, JSON an empty report); with one read, its result and the other's error."""
    missing = str(tmp_path / "missing.txt")
    result = clusterctl("-o", output, *command, missing)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"error: {missing}: no such file.\n")
    result = clusterctl("-o", output, *command, missing, str(readable))
    assert result.exit_code == 2 and result.stdout.strip() and "no such file" in result.stderr


def test_bad_options_exit_2() -> None:
    path = str(FIXTURES / "nccl.conf")
    assert clusterctl("nccl", "lint", path, "--fabric", "omnipath").exit_code == 2
    assert clusterctl("nccl", "lint", path, "--format", "toml").exit_code == 2
