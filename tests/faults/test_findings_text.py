"""Findings carry what hosts answered (file names reset found, package names): bootstrap's and
reset's findings show them as text, brackets kept and control characters visible, never as Rich
markup or terminal control; each with its fix, printed as every report prints findings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clirun import clusterctl

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "inventories" / "demo.yaml")


def test_a_hostile_file_name_in_a_reset_finding_prints_as_itself(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one table row per finding: names are not wrapped
    assert clusterctl("-i", DEMO, "-l", "gpu-b1", "exec", "true").exit_code == 0  # the mock host exists now
    (tree,) = Path(os.environ["CLUSTERCTL_MOCK_STATE"]).glob("demo-*/hosts/gpu-b1/fs")
    net = tree / "etc" / "cni" / "net.d"
    net.mkdir(parents=True)
    (net / "[bold red]mine[reverse].conflist").write_text("{}\n")
    (net / "\x1b]0;owned\x07x.conflist").write_text("{}\n")
    done = clusterctl("-i", DEMO, "-l", "gpu-b1", "reset", "--dry-run", "--state-dir", tmp_path / "state")
    assert done.exit_code == 0, done.output
    assert "[bold red]mine[reverse].conflist" in done.stdout
    assert "\x1b" not in done.stdout and "\\x1b]0;owned\\x07x.conflist" in done.stdout


def test_a_bootstrap_plans_findings_are_printed_with_their_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one line per finding and per fix
    done = clusterctl("-i", DEMO, "-l", "gpu-b1", "bootstrap", "plan")
    assert done.exit_code == 1, done.output  # a worker alone cannot join: an error finding
    lines = done.stdout.splitlines()
    at = lines.index("ERROR   gpu-b1 JOIN_MATERIAL_MISSING: cannot join: a join token must be made on gpu-a1 in the "
                     "same run")
    assert lines[at + 1] == "        fix: Run with gpu-a1 included (phase control-plane runs there first).", done.output


def test_a_registered_secret_in_a_finding_is_masked_where_every_report_prints_findings() -> None:
    """bootstrap, reset and certs print findings too, not only upgrade: the one printer masks, as ``say`` does."""
    import io

    from rich.console import Console

    from clusterctl.cli.findings_view import print_findings
    from clusterctl.findings import Finding, Severity
    from clusterctl.secret import MASK, register_secret

    secret = "abcdef.0123456789abcdef-findings-view"
    register_secret(secret)
    out = io.StringIO()
    print_findings(Console(file=out, width=400), [
        Finding(Severity.ERROR, "JOIN_FAILED", f"kubeadm join --token {secret} failed", host="gpu-b1",
                fix=f"Rerun 'kubeadm join --token {secret}' by hand.")])
    assert secret not in out.getvalue() and out.getvalue().count(MASK) == 2, out.getvalue()
