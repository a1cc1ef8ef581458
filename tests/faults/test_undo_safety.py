"""``undo`` over real sshd hosts: it checks each file still holds what the journal wrote (a hash),
refuses on a mismatch without --force, and marks a journal as used so an old one is never replayed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import CliRun, run_clusterctl
from sshd_hosts import SSHDHosts

pytestmark = pytest.mark.sshd


class Run:
    def __init__(self, sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
        self.hosts = sshd_hosts(1)
        inventory, known = sshd_hosts.write_client_files(tmp_path, self.hosts)
        self.common = ["-i", str(inventory), "--known-hosts", str(known)]
        self.home = tmp_path / "home"

    def __call__(self, *args: str) -> CliRun:
        return run_clusterctl([*self.common, *args], home=self.home)


def _journal(run: CliRun) -> str:
    line = next(line for line in run.stderr.splitlines() if line.startswith("undo with: clusterctl undo "))
    return line.removeprefix("undo with: clusterctl undo ").strip()


def test_undo_refuses_a_file_edited_since_and_force_restores_it(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    run = Run(sshd_hosts, tmp_path)
    target = tmp_path / "remote" / "app.conf"
    target.parent.mkdir()
    target.write_text("original\n")
    source = tmp_path / "app.conf"
    source.write_text("from clusterctl\n")
    copied = run("copy", str(source), str(target), "--yes")
    assert copied.exit_code == 0, copied.output
    journal = _journal(copied)
    assert "sha256" in json.loads((run.home / journal).read_text())["changes"][0]  # relative to the cwd
    target.write_text("edited by hand after the push\n")

    refused = run("undo", journal, "--yes")
    assert refused.exit_code == 1
    assert "refused:" in refused.stdout and str(target) in refused.stdout
    assert target.read_text() == "edited by hand after the push\n"

    forced = run("undo", journal, "--yes", "--force")
    assert forced.exit_code == 0, forced.output
    assert target.read_text() == "original\n"


def test_a_used_journal_is_not_replayed_over_a_recreated_file(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    run = Run(sshd_hosts, tmp_path)
    target = tmp_path / "new.conf"
    source = tmp_path / "src.conf"
    source.write_text("made by clusterctl\n")
    copied = run("copy", str(source), str(target), "--yes")
    assert copied.exit_code == 0, copied.output
    journal = _journal(copied)

    first = run("undo", journal, "--yes")
    assert first.exit_code == 0, first.output
    assert not target.exists()
    target.write_text("made by clusterctl\n")  # re-created later, even with the same content

    again = run("undo", journal, "--yes")
    assert again.exit_code == 2
    assert "already used" in again.stderr and "--force" in again.stderr
    assert target.exists()
