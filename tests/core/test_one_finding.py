"""The one Finding: its JSON shape, reading it back, and how every command prints it and exits."""

from __future__ import annotations

import io

from rich.console import Console

from clusterctl.cli.findings_view import print_findings, summary_line
from clusterctl.findings import Finding, Severity, count_by_severity, fails


def test_json_shape_leaves_out_what_is_empty_and_reads_back() -> None:
    f = Finding(Severity.ERROR, "NIC_SLOW", "mlx5_2 at 100 Gb/s", host="gpu-a1", subject="mlx5_2",
                fix="reseat the cable", evidence={"rate_gbps": 100.0, "ports": (1, 2)})
    data = f.to_json()
    assert data == {"severity": "error", "code": "NIC_SLOW", "message": "mlx5_2 at 100 Gb/s", "host": "gpu-a1",
                    "subject": "mlx5_2", "fix": "reseat the cable", "evidence": {"rate_gbps": 100.0, "ports": [1, 2]}}
    assert Finding.from_json(data) == Finding(Severity.ERROR, "NIC_SLOW", "mlx5_2 at 100 Gb/s", host="gpu-a1",
                                              subject="mlx5_2", fix="reseat the cable",
                                              evidence={"rate_gbps": 100.0, "ports": [1, 2]})
    # Survey schema version 1 called the fix "hint".
    old = Finding.from_json({"severity": "warning", "code": "STACK_DRIFT", "message": "m", "host": "h", "hint": "x"})
    assert old.fix == "x" and old.severity is Severity.WARNING


def test_severity_reads_as_its_word_in_text() -> None:
    assert f"{Severity.ERROR}" == "error" and f"{Severity.INFO:>6}" == "  info"


def _printed(findings: list[Finding]) -> str:
    out = io.StringIO()
    print_findings(Console(file=out, width=200, color_system=None), findings)
    return out.getvalue()


def test_every_kind_of_finding_prints_where_it_is_and_the_fix() -> None:
    text = _printed([
        Finding(Severity.INFO, "NOT_NCCL", "read by PyTorch", subject="TORCH_NCCL_X", file="job.env", line=3,
                fix="keep it"),
        Finding(Severity.ERROR, "LINK_SLOW", "40 Gb/s", subject="a/mlx5_0 <-> b/mlx5_0"),
        Finding(Severity.WARNING, "UNKNOWN_VARIABLE", "typo", subject="NCCL_IB_HCAS", file="job.env", line=2,
                fix="did you mean NCCL_IB_HCA?"),
    ])
    lines = text.splitlines()
    assert lines[0].startswith("ERROR") and "a/mlx5_0 <-> b/mlx5_0 LINK_SLOW: 40 Gb/s" in lines[0]
    assert "job.env:2 NCCL_IB_HCAS UNKNOWN_VARIABLE: typo" in lines[1]
    assert "fix: did you mean NCCL_IB_HCA?" in lines[2]
    assert "keep it" not in text  # no fix line under info
    assert _printed([]).strip() == "No findings."


def test_exit_code_follows_the_worst_severity() -> None:
    warning = [Finding(Severity.WARNING, "X", "m")]
    assert not fails(warning)  # a warning alone is exit 0
    assert fails(warning, strict=True)
    assert fails([Finding(Severity.ERROR, "X", "m"), *warning])
    assert count_by_severity(warning) == {"error": 0, "warning": 1, "info": 0}
    assert summary_line(warning) == "0 errors, 1 warning, 0 info"
