"""Remote output reaches the terminal as text: control sequences shown, never obeyed; brackets kept.

Over real sshd hosts, a remote command that prints an OSC title sequence, a clear-screen and Rich
markup must come back visible and literal, in ``exec``'s output and in the FAILED summary.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import run_clusterctl
from sshd_hosts import SSHDHosts

from clusterctl.terminal_text import markup_safe, one_line, visible

HOSTILE = r"printf '\033]0;owned\007\033[2Jtitle\n'; printf '[bold red]boom[/] grep \"[y]es$\"\n' >&2; exit 3"


def test_visible_shows_every_control_character_and_keeps_lines() -> None:
    assert visible("a\x1b[2Jb\r\n\tc\x07\x9b") == "a\\x1b[2Jb\\r\n\tc\\x07\\x9b"
    assert one_line("one\ntwo") == "one\\ntwo"
    assert markup_safe("[bold red]x[/]") == "\\[bold red]x\\[/]"
    assert one_line("a\u202eb\u2028c") == "a\\u202eb\\u2028c"


@pytest.mark.sshd
def test_exec_and_its_failed_summary_show_remote_text_as_text(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(1)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)

    run = run_clusterctl(["-i", str(inventory), "--known-hosts", str(known), "exec", "--", HOSTILE],
                         home=tmp_path / "home")

    assert run.exit_code == 1
    assert "\x1b" not in run.stdout and "\x07" not in run.stdout
    assert "\\x1b]0;owned\\x07\\x1b[2Jtitle" in run.stdout
    # The FAILED line keeps remote stderr literally: no markup eaten, no brackets lost.
    failed = next(line for line in run.stderr.splitlines() if line.startswith("FAILED"))
    assert '[bold red]boom[/] grep "[y]es$"' in failed


@pytest.mark.sshd
def test_streamed_exec_lines_are_shown_as_text(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(1)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)

    run = run_clusterctl(["-i", str(inventory), "--known-hosts", str(known), "exec", "--stream", "--", HOSTILE],
                         home=tmp_path / "home")

    assert "\x1b" not in run.stdout + run.stderr
    assert f"{hosts[0].name}: \\x1b]0;owned" in run.stdout


def test_bootstrap_failure_lines_show_apt_escapes_as_text(tmp_path: Path) -> None:
    import shutil

    from clirun import clusterctl

    repo = Path(__file__).resolve().parents[2]
    inventories = tmp_path / "inventories"
    shutil.copytree(repo / "inventories", inventories)
    profile = inventories / "demo" / "profiles" / "dgx-a100" / "profile.yaml"
    profile.write_text(profile.read_text().replace("commands:\n", "commands:\n  - regex: '^apt-get install '\n"
                                                   "    exit: 100\n    stderr_text: \"\\e[31mE: [bold]broken"
                                                   "[/bold]\\e]0;owned\\a\\n\"\n", 1))
    done = clusterctl("-i", inventories / "demo.yaml", "-l", "gpu-a1", "bootstrap", "phase", "packages",
                      "--state-dir", tmp_path / "progress")
    assert done.exit_code == 1
    shown = done.stdout + done.stderr
    assert "\x1b" not in shown and "\x07" not in shown
    assert "\\x1b[31mE: [bold]broken[/bold]\\x1b]0;owned\\x07" in shown
