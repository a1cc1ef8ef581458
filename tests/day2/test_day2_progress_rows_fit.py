"""The engine's live progress rows (``upgrade apply``, bootstrap) fit an 80-column terminal.

A row longer than the terminal wraps with a hanging indent under its message column, never
inside a host name, a path or a command a user copies; off a terminal (a pipe, a log: no
``COLUMNS``) each row stays on one line, so that grep finds it.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from clirun import clusterctl
from test_day2_upgrade_left_to_site import OWN_CNI, _swap_in_the_sites_own_cni, _variant

ROW = f"gpu-a1           network          skipped  {OWN_CNI}"
MESSAGE_COLUMN = " " * ROW.index(OWN_CNI)


def _live(stdout: str) -> list[str]:
    """What apply's live progress printed (the lines before the final report)."""
    return stdout.split("\ncluster demo: Kubernetes ", 1)[0].splitlines()


@pytest.mark.parametrize("columns", ["80", None])
def test_upgrade_apply_progress_rows_fit_80_columns_and_stay_whole_off_a_terminal(
        bootstrapped_demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: str | None) -> None:
    _swap_in_the_sites_own_cni(bootstrapped_demo)
    site = _variant(bootstrapped_demo, tmp_path, bootstrap="  network: {cni: none}\n")
    if columns:
        monkeypatch.setenv("COLUMNS", columns)
    done = clusterctl("-i", site, "upgrade", "apply", "--to", "1.36.3", "--yes", "--state-dir",
                      bootstrapped_demo / "progress", "--ready-timeout", "2")
    assert done.exit_code == 0, done.output
    live = _live(done.stdout)
    (start,) = [i for i, line in enumerate(live) if line.startswith("gpu-a1 ") and line.split()[1:2] == ["network"]]
    rest = [line for line in live[start + 1:] if line.startswith(MESSAGE_COLUMN)]
    if columns is None:
        assert live[start] == ROW and not rest  # one line, as before
        assert any(len(line) > 80 for line in live)
        return
    assert all(len(line) <= 80 for line in live), "\n".join(line for line in live if len(line) > 80)
    assert rest, live  # wrapped, under the message column
    assert " ".join([live[start]] + [line.strip() for line in rest]) == ROW  # nothing lost, no word cut
    assert live[start].startswith("gpu-a1           network          skipped  nothing to do:")


def test_a_progress_row_keeps_hosts_paths_and_commands_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from clusterctl.terminal_layout import print_wrapped

    journal = "/var/lib/clusterctl/state/undo/upgrade-demo-20260101-120000.json"
    message = (f"kubeadm upgrade apply failed on the control plane; to take back what upgrade changed: "
               f"clusterctl undo {journal}, or rerun 'clusterctl upgrade apply --to 1.36.3 --resume'")
    prefix = f"{'gpu-a1':<16} {'upgrade-node':<16} {'failed':<8} "
    for columns in ("80", "60"):
        monkeypatch.setenv("COLUMNS", columns)
        out = io.StringIO()
        print_wrapped(Console(file=out, width=int(columns), no_color=True), message, first_indent=prefix)
        lines = out.getvalue().splitlines()
        assert len(lines) > 1 and lines[0].startswith(prefix)
        assert all(line.startswith(" " * 2) for line in lines[1:])
        assert any(f"clusterctl undo {journal}" in line for line in lines)
        assert any("'clusterctl upgrade apply --to 1.36.3 --resume'" in line for line in lines)
        assert " ".join([lines[0].rstrip()] + [line.strip() for line in lines[1:]]) == prefix + message
        assert all(len(line) <= int(columns) for line in lines if "clusterctl undo" not in line)
    monkeypatch.delenv("COLUMNS")
    out = io.StringIO()
    print_wrapped(Console(file=out, width=80, no_color=True), message, first_indent=prefix)
    assert out.getvalue() == prefix + message + "\n"  # off a terminal: one line
