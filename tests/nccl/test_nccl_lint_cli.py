"""``clusterctl nccl lint`` as a user runs it: exit codes, JSON for CI, the grouped table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterctl.cli.app import main

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nccl-settings"


def run(args: list[str], capsys: pytest.CaptureFixture[str], stdin: str | None = None,
        monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        import io

        assert monkeypatch is not None
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_json_for_ci_and_exit_1_on_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["nccl", "lint", str(FIXTURES / "derived-h100-64-broken.slurm"), "--nccl-version",
                        "2.21.5", "--fabric", "ib", "-o", "json"], capsys)
    assert code == 1
    data = json.loads(out)
    assert data["summary"]["error"] == 5 and data["summary"]["warning"] == 2
    first = data["findings"][0]
    assert set(first) == {"subject", "code", "severity", "file", "line", "message", "fix"}
    assert (first["subject"], first["code"], first["line"]) == ("NCCL_IB_DISABLE", "HARMFUL", 14)


def test_warnings_fail_only_with_strict(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "oci-pytorchjob-etcd.yaml")
    assert run(["nccl", "lint", path], capsys)[0] == 0
    assert run(["nccl", "lint", path, "--strict"], capsys)[0] == 1


def test_table_groups_findings_by_file_with_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["nccl", "lint", str(FIXTURES / "flagai-run_multi.sh"),
                        str(FIXTURES / "elvin-ma-run.sh")], capsys)
    assert code == 1
    assert "flagai-run_multi.sh" in out and "elvin-ma-run.sh" in out
    assert "NCCL_TIMEOUT" in out and "UNKNOWN_VARIABLE" in out
    assert "8 NCCL settings checked: 2 errors, 2 warnings, 1 info" in out


def test_stdin_with_explicit_format(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run(["nccl", "lint", "-", "--format", "env", "-o", "json"], capsys,
                       stdin="NCCL_NTHREADS=8\n", monkeypatch=monkeypatch)
    assert code == 1
    [finding] = json.loads(out)["findings"]
    assert finding["file"] == "<stdin>" and finding["message"] == (
        "NCCL_NTHREADS=8 is not a multiple of 32: NCCL replaces it with 512")


def test_unreadable_input_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(["nccl", "lint", str(tmp_path / "missing.env")], capsys)
    assert code == 2 and "no such file" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nspec: [\n")
    code, _, err = run(["nccl", "lint", str(bad)], capsys)
    assert code == 2 and "not valid YAML" in err
    code, _, err = run(["nccl", "lint", str(bad), "--nccl-version", "latest"], capsys)
    assert code == 2


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "nccl.conf")
    assert run(["nccl", "lint", path, "--fabric", "omnipath"], capsys)[0] == 2
    assert run(["nccl", "lint", path, "--format", "toml"], capsys)[0] == 2
