"""``clusterctl exec`` against real sshd mock hosts: outputs, failures, host keys, quoting."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from clirun import run_clusterctl, start_clusterctl
from sshd_hosts import SSHDHosts

pytestmark = pytest.mark.sshd


def _base_args(inventory: Path, known_hosts: Path) -> list[str]:
    return ["-i", str(inventory), "--known-hosts", str(known_hosts)]


def test_exec_json_reports_every_hosts_output_and_exit_code(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(3)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)

    run = run_clusterctl(
        [*_base_args(inventory, known), "-o", "json", "exec", "--",
         'echo "out-$(hostname)"; echo "err-$(hostname)" >&2; test "$(hostname)" != h2'],
        home=tmp_path / "home",
    )

    assert run.exit_code == 1, run.stderr
    records = run.by_host()
    assert sorted(records) == ["h1", "h2", "h3"]
    for name in ("h1", "h3"):
        assert records[name]["ok"] is True
        assert records[name]["stdout"] == f"out-{name}\n"
        assert records[name]["stderr"] == f"err-{name}\n"
        assert records[name]["exit_code"] == 0
    assert records["h2"]["ok"] is False
    assert records["h2"]["exit_code"] == 1
    assert records["h2"]["stdout"] == "out-h2\n"
    assert records["h2"]["failure"] == {"kind": "command failed", "message": records["h2"]["failure"]["message"],
                                        "exit_code": 1, "stderr_tail": "err-h2"}
    assert records["h1"]["failure"] is None


def test_down_and_hung_hosts_are_reported_while_the_others_finish(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(4)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)
    down, hung = hosts[1], hosts[2]
    down.stop()
    hung.pause()  # accepts TCP (the kernel does) but never says a word

    run = run_clusterctl(
        [*_base_args(inventory, known), "--timeout", "2", "-o", "json", "exec", "--", "hostname"],
        home=tmp_path / "home",
    )

    assert run.exit_code == 1
    records = run.by_host()
    assert records["h1"]["stdout"] == "h1\n"
    assert records["h4"]["stdout"] == "h4\n"
    assert records[down.name]["failure"]["kind"] == "unreachable"
    assert "connection refused" in records[down.name]["failure"]["message"]
    assert records[hung.name]["failure"]["kind"] == "timed out"
    # Bounded by the 2 s limit (plus start-up), never waiting on the stopped daemon.
    assert run.elapsed_s < 20
    assert f"FAILED {hung.name}" in run.stderr and f"FAILED {down.name}" in run.stderr


def test_changed_host_key_is_refused_even_with_accept_new(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    (host,) = sshd_hosts(1)
    inventory, known = sshd_hosts.write_client_files(tmp_path, [host])
    recorded = known.read_text()
    host.change_host_key()

    run = run_clusterctl(
        [*_base_args(inventory, known), "--accept-new-host-keys", "exec", "--", "hostname"], home=tmp_path / "home"
    )

    assert run.exit_code == 1
    assert "h1\n" not in run.stdout
    assert "host key refused" in run.stderr
    assert "man-in-the-middle" in run.stderr
    assert f"{known}:1" in run.stderr
    assert known.read_text() == recorded


def _fingerprint(pubkey_line: str, tmp_path: Path) -> str:
    """The SHA256 fingerprint as OpenSSH's own ssh-keygen prints it."""
    pub = tmp_path / "key.pub"
    pub.write_text(pubkey_line + "\n")
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)], capture_output=True, text=True)
    return out.stdout.split()[1]


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is not installed")
def test_unknown_host_key_is_refused_then_accepted_and_remembered(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(2)
    inventory = sshd_hosts.write_inventory(tmp_path / "inv.yaml", hosts)
    known = sshd_hosts.write_known_hosts(tmp_path / "known_hosts", [])
    home = tmp_path / "home"

    refused = run_clusterctl([*_base_args(inventory, known), "exec", "--", "hostname"], home=home)
    assert refused.exit_code == 1
    assert "--accept-new-host-keys" in refused.stderr
    for h in hosts:
        assert _fingerprint(h.host_pubkey, tmp_path) in refused.stderr
    assert known.read_text() == ""

    accepted = run_clusterctl(
        [*_base_args(inventory, known), "--accept-new-host-keys", "-o", "json", "exec", "--", "hostname"], home=home
    )
    assert accepted.exit_code == 0, accepted.stderr
    assert {n: r["stdout"] for n, r in accepted.by_host().items()} == {"h1": "h1\n", "h2": "h2\n"}
    # OpenSSH itself finds the recorded keys under the [host]:port names it would use.
    for h in hosts:
        found = subprocess.run(["ssh-keygen", "-F", h.known_hosts_name, "-f", str(known)], capture_output=True)
        assert found.returncode == 0, known.read_text()
        assert h.host_pubkey.split()[1].encode() in found.stdout

    again = run_clusterctl([*_base_args(inventory, known), "exec", "--", "hostname"], home=home)
    assert again.exit_code == 0, again.stderr


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is not installed")
def test_hashed_known_hosts_entries_are_recognised(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(2)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    assert "127.0.0.1" not in known.read_text()

    run = run_clusterctl([*_base_args(inventory, known), "exec", "--", "hostname"], home=tmp_path / "home")

    assert run.exit_code == 0, run.stderr


def test_shell_metacharacters_in_inventory_values_are_never_run(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    marker_name = tmp_path / "pwned-by-name"
    marker_label = tmp_path / "pwned-by-label"
    hosts = sshd_hosts(2, names=["odd-host", "ok-host"])
    inventory = sshd_hosts.write_inventory(
        tmp_path / "inv.yaml",
        hosts,
        extra={"odd-host": {"rack": f"$(touch {marker_label})", "labels": {"note": f"`touch {marker_label}`"}}},
    )
    known = sshd_hosts.write_known_hosts(tmp_path / "known_hosts", hosts)

    run = run_clusterctl(
        [*_base_args(inventory, known), "-o", "json", "exec", "--", "hostname"], home=tmp_path / "home"
    )

    assert run.exit_code == 0, run.stderr
    assert run.by_host()["odd-host"]["stdout"] == "odd-host\n"
    assert not marker_label.exists()
    # A host name that is a shell command is refused when the inventory loads, before any connection.
    text = inventory.read_text().replace("odd-host:", f'"x;touch {marker_name}":', 1)
    evil = tmp_path / "evil.yaml"
    evil.write_text(text)
    refused = run_clusterctl([*_base_args(evil, known), "exec", "--", "hostname"], home=tmp_path / "home")
    assert refused.exit_code == 2 and str(evil) in refused.stderr and "host name" in refused.stderr
    assert not marker_name.exists()


def test_exec_sudo_runs_the_line_under_sudo_n(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(2)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)

    run = run_clusterctl(
        [*_base_args(inventory, known), "-o", "json", "exec", "--sudo", "--", "echo", "as-root"],
        home=tmp_path / "home",
    )

    assert run.exit_code == 0, run.stderr
    for h in hosts:
        assert run.by_host()[h.name]["stdout"] == "as-root\n"
        # -n: never prompts for a password; the whole line runs in one sh -c; sudo itself in the C locale,
        # the user's own command in the host's (an empty LC_ALL is none).
        assert h.sudo_log.read_text() == "-n sh -c export LC_ALL=''; echo as-root\n"


def test_exec_runs_the_users_command_in_the_hosts_locale(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    """clusterctl's own probes run with LC_ALL=C (their output is parsed); a user's command is not forced
    into it: LANG and LC_* of the host's session apply, as with plain ssh."""
    hosts = sshd_hosts(1)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)
    run = run_clusterctl([*_base_args(inventory, known), "-o", "json", "exec", "--", 'echo "LC_ALL=[$LC_ALL]"'],
                         home=tmp_path / "home")
    assert run.exit_code == 0, run.stderr
    assert run.by_host()[hosts[0].name]["stdout"] == "LC_ALL=[]\n"


def test_identical_outputs_are_printed_once_with_their_hosts(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(4)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)

    run = run_clusterctl(
        [*_base_args(inventory, known), "exec", "--", 'if [ "$(hostname)" = h4 ]; then echo odd; else echo same; fi'],
        home=tmp_path / "home",
    )

    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines.count("same") == 1
    assert lines.count("odd") == 1
    assert "h[1-3]" in lines
    assert "h4" in lines
    assert lines.index("same") > lines.index("h[1-3]")


def test_stream_prints_lines_of_hosts_still_running(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(2)
    inventory, known = sshd_hosts.write_client_files(tmp_path, hosts)
    flag = tmp_path / "first-lines-read"
    # Each host waits (10 s at most) for the flag the test makes once it read both first lines.
    wait = f"i=0; while [ ! -e {flag} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; [ -e {flag} ] || exit 9"
    proc = start_clusterctl([*_base_args(inventory, known), "exec", "--stream", "--",
                             f'echo "first $(hostname)"; {wait}; echo "oops $(hostname)" >&2; echo done'],
                            home=tmp_path / "home")
    assert proc.stdout is not None
    first = sorted(proc.stdout.readline() for _ in hosts)
    assert first == ["h1: first h1\n", "h2: first h2\n"]
    flag.touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert sorted(out.splitlines()) == ["h1: [stderr] oops h1", "h1: done", "h2: [stderr] oops h2", "h2: done"]
