"""sudo with a password, and secrets that never show: in output, --debug logs, history, files, or ps."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from clirun import REPO_ROOT
from sshd_hosts import SSHDHost, SSHDHosts

from clusterctl.changes import Change, Gate
from clusterctl.inventory.model import Host, SSHOptions
from clusterctl.mock.profile import Profile, Rule
from clusterctl.mock.transport import MockTransport
from clusterctl.secret import Secret
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh import SSHTransport

pytestmark = pytest.mark.sshd

SUDO_PASSWORD = "Sudo-Pa55-7f3a91c2"


def _clusterctl(args: list[str], home: Path, *, stdin: str = "", env: dict[str, str] | None = None,
                watch: object = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "CLUSTERCTL_INVENTORY")}
    full_env.update(HOME=str(home), NO_COLOR="1", PYTHONPATH=str(REPO_ROOT), **(env or {}))
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "clusterctl", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=str(home))
    if watch is not None:
        threading.Thread(target=watch, daemon=True).start()  # type: ignore[arg-type]
    out, err = proc.communicate(stdin, timeout=90)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _files(farm: SSHDHosts, hosts: list[SSHDHost], tmp_path: Path) -> tuple[Path, Path, Path]:
    inventory, known = farm.write_client_files(tmp_path, hosts)
    config = tmp_path / "ssh_config"
    config.write_text("")
    return inventory, known, config


def _process_list() -> str:
    """What ``ps -eo args`` shows: every process's command line."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return "\n".join(lines)


def test_sudo_password_is_asked_once_fed_on_stdin_and_never_shown(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    hosts = sshd_hosts(2)
    for h in hosts:
        h.require_sudo_password(SUDO_PASSWORD)
    inventory, known, config = _files(sshd_hosts, hosts, tmp_path)
    base = ["-i", str(inventory), "--known-hosts", str(known), "--ssh-config", str(config)]

    # Without it: sudo -n, and the error names the fix.
    plain = _clusterctl([*base, "exec", "--sudo", "--", "id -u"], tmp_path / "home")
    assert plain.returncode == 1
    assert "--ask-sudo-pass" in plain.stderr and "needs a password" in plain.stderr

    snapshots: list[str] = []

    def watch() -> None:
        end = time.monotonic() + 20
        while time.monotonic() < end:
            snapshots.append(_process_list())
            time.sleep(0.05)

    # The password piped in (as from a password manager), with --debug logs on.
    run = _clusterctl([*base, "--debug", "-K", "-o", "json", "exec", "--sudo", "--", "sleep 1; echo as-root"],
                      tmp_path / "home", stdin=SUDO_PASSWORD + "\n", watch=watch)
    assert run.returncode == 0, run.stderr
    assert [rec["stdout"] for rec in run_json(run)["hosts"]] == ["as-root\n", "as-root\n"]
    assert any("sleep 1; echo as-root" in snap for snap in snapshots), "the process list was not watched in time"
    seen = {
        "stdout": run.stdout,
        "stderr (--debug log)": run.stderr,
        "process list": "\n".join(snapshots),
        **{str(p): p.read_text(errors="replace") for p in _all_files(tmp_path)},
    }
    leaks = [where for where, text in seen.items() if SUDO_PASSWORD in text]
    assert leaks == []
    # sudo was really asked with -S (validate) and the command then ran with -n.
    log = hosts[0].sudo_log.read_text()
    assert "-S -v -p" in log and "-n sh -c" in log

    # From a file: only when its mode keeps others out.
    secret_file = tmp_path / "sudo_pass"
    secret_file.write_text(SUDO_PASSWORD + "\n")
    secret_file.chmod(0o644)
    loose = _clusterctl([*base, "exec", "--sudo", "--", "true"], tmp_path / "home2",
                        env={"CLUSTERCTL_SUDO_PASS_FILE": str(secret_file)})
    assert loose.returncode == 2 and "0600" in loose.stderr
    secret_file.chmod(0o600)
    for h in hosts:
        (h.folder / "sudo.ts").unlink(missing_ok=True)
    tight = _clusterctl([*base, "exec", "--sudo", "--", "true"], tmp_path / "home3",
                        env={"CLUSTERCTL_SUDO_PASS_FILE": str(secret_file)})
    assert tight.returncode == 0, tight.stderr

    # A wrong password is reported as such.
    for h in hosts:
        (h.folder / "sudo.ts").unlink(missing_ok=True)
    wrong = _clusterctl([*base, "exec", "--sudo", "--", "true"], tmp_path / "home4",
                        env={"CLUSTERCTL_SUDO_PASS": "not-it"})
    assert wrong.returncode == 1 and "did not accept the sudo password" in wrong.stderr


def run_json(run: subprocess.CompletedProcess[str]) -> dict[str, object]:
    import json

    return json.loads(run.stdout)  # type: ignore[no-any-return]


def _all_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_size < 5_000_000]


def test_sudo_put_with_a_password_keeps_stdin_for_the_command(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    (h,) = sshd_hosts(1)
    h.require_sudo_password(SUDO_PASSWORD)
    known = sshd_hosts.write_known_hosts(tmp_path / "known_hosts", [h])
    config = tmp_path / "ssh_config"
    config.write_text("")
    host = Host(name=h.name, address=h.address, port=h.port, user=sshd_hosts.user,
                ssh=SSHOptions(key_file=str(sshd_hosts.client_key)))
    target = h.home / "etc.conf"
    with SSHTransport(host, known_hosts_path=str(known), ssh_config_path=str(config),
                      sudo_password=Secret(SUDO_PASSWORD, "sudo password")) as t:
        result = t.put(str(target), b"line one\nline two\n", sudo=True)
        assert result.changed
        assert target.read_bytes() == b"line one\nline two\n"
        echoed = t.run("cat", sudo=True, stdin=b"through sudo\n", timeout=15)
        assert echoed.stdout == "through sudo\n"
    with SSHTransport(host, known_hosts_path=str(known), ssh_config_path=str(config),
                      sudo_password=Secret("wrong-one", "sudo password")) as t:
        (h.folder / "sudo.ts").unlink()
        with pytest.raises(TransportError) as err:
            t.run("true", sudo=True, timeout=15)
        assert err.value.kind is FailureKind.AUTH_FAILED
    assert SUDO_PASSWORD not in h.sudo_log.read_text()


def test_secrets_are_masked_in_history_plans_results_and_inventory_output(tmp_path: Path) -> None:
    token = Secret("abcdef.0123456789abcdef", "join token")
    host = Host(name="cp1", transport="mock")
    import re

    joined = Rule(None, re.compile("kubeadm join"), ("joined\n",), "", 0, 0.0, (), (), None)
    mock = MockTransport(host, Profile(root=tmp_path, hostname=None, rules=(joined,), files={}))
    gate = Gate(apply=True)
    # By mistake, the token also went into the command line: it must still never show.
    change = Change.run("cp1", f"kubeadm join --token {token.reveal()} 10.0.0.1:6443", stdin_secret=token)
    record = gate.submit(mock, change)
    shown = "\n".join([*mock.history, str(change.to_json()), change.describe(), record.result.command if record.result
                       else "", repr(token), f"{token}"])
    assert token.reveal() not in shown
    # Inventory variables that look secret are masked where shown, usable where needed.
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "cluster: t\nhosts:\n  cp1:\n    address: 10.0.0.1\n"
        "    vars: {registry_password: Hunter2-pw-77, bootstrap_token: tok-99887766, rack_row: B}\n"
    )
    home = tmp_path / "home"
    shown_inv = _clusterctl(["-i", str(inventory), "-o", "json", "inventory", "show"], home)
    assert "Hunter2-pw-77" not in shown_inv.stdout + shown_inv.stderr
    assert "tok-99887766" not in shown_inv.stdout + shown_inv.stderr
    assert shown_inv.returncode == 0, shown_inv.stderr
    from clusterctl.inventory.loader import load_inventory

    loaded = load_inventory(inventory)
    variables = dict(loaded.hosts[0].vars)
    assert isinstance(variables["registry_password"], Secret)
    assert variables["registry_password"].reveal() == "Hunter2-pw-77"
    assert variables["rack_row"] == "B"
