"""Local and mock transports: commands, atomic writes with backup, profile replay."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterctl.errors import ParseError, UsageError
from clusterctl.inventory.model import Host
from clusterctl.mock.profile import load_profile
from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import CommandResult, FailureKind, TransportError, sudo_refusal, wrap_command
from clusterctl.transport.local import LocalTransport


def test_local_run_env_is_quoted_not_interpreted(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    t = LocalTransport(Host(name="local", transport="local"))
    result = t.run('printf %s "$X"', env={"X": f"$(touch {marker}); `touch {marker}`"})
    assert result.ok
    assert "$(touch" in result.stdout
    assert not marker.exists()


def test_env_names_are_checked() -> None:
    with pytest.raises(ValueError):
        wrap_command("true", env={"A;rm -rf /": "1"})


def test_sudo_never_prompts() -> None:
    assert wrap_command("id -u", sudo=True) == "export LC_ALL=C; sudo -n sh -c 'export LC_ALL=C; id -u'"


def test_sudo_refuses_in_the_words_sudo_refusal_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sudo translates its own refusal (Debian 12's sudoers.mo: "a password is required" is "需要密码" in
    zh_CN, "Ein Passwort ist notwendig" in de), so sudo runs in the C locale too, not only the command it
    starts, and the user is told to pass --ask-sudo-pass on a host in another language."""
    import subprocess

    fake_sudo = tmp_path / "sudo"
    fake_sudo.write_text('#!/bin/sh\nif [ "$LC_ALL" = C ]; then echo "sudo: a password is required" >&2; '
                         'else echo "sudo: 需要密码" >&2; fi\nexit 1\n')
    fake_sudo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    for password in (False, True):
        line = wrap_command("id -u", sudo=True, sudo_password=password)
        ran = subprocess.run(["/bin/sh", "-c", line], input="pw\n", capture_output=True, text=True, check=False)
        refusal = sudo_refusal(CommandResult(line, ran.stdout, ran.stderr, ran.returncode, 0.0),
                               had_password=password)
        assert refusal is not None and refusal.kind is FailureKind.AUTH_FAILED, ran.stderr


def test_a_host_in_another_language_answers_in_the_words_the_parsers_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host whose locale is Chinese translates df's header, sysctl's and dpkg-query's messages (recorded on
    Debian 12 with its zh_CN catalogues: "文件系统 1024的块 ...", "没有找到与 ... 相匹配的软件包"); every command
    runs with LC_ALL=C, so the probes read what they were written for."""
    import subprocess

    from clusterctl.facts.node import parse_df
    from clusterctl.facts.packages import parse_dpkg_query

    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LANGUAGE", "zh_CN")
    translated = subprocess.run(["df", "-Pk", "/"], capture_output=True, text=True, check=False).stdout
    if translated.startswith("Filesystem"):
        pytest.skip("this machine has no zh_CN message catalogue for df (coreutils' translations)")
    with pytest.raises(ParseError):
        parse_df(translated)
    local = LocalTransport(Host(name="local"))
    assert parse_df(local.run("df -Pk /").stdout).mounted_on == "/"
    assert parse_dpkg_query(local.run("dpkg-query -W nosuch-package-clusterctl 2>&1").stdout) == {}


def test_local_timeout_kills_the_command() -> None:
    t = LocalTransport(Host(name="local"))
    with pytest.raises(TransportError) as err:
        t.run("sleep 5", timeout=0.2)
    assert err.value.kind is FailureKind.TIMED_OUT


def test_local_put_is_atomic_with_backup_and_idempotent(tmp_path: Path) -> None:
    t = LocalTransport(Host(name="local"))
    target = tmp_path / "odd name; $(x).conf"
    first = t.put(str(target), b"A=1\n", mode=0o600)
    assert first.changed and first.backup_path is None
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    again = t.put(str(target), b"A=1\n")
    assert not again.changed
    changed = t.put(str(target), b"A=2\n")
    assert changed.changed and changed.backup_path
    assert Path(changed.backup_path).read_bytes() == b"A=1\n"
    assert t.get(str(target)) == b"A=2\n"
    assert t.get(str(tmp_path / "absent")) is None
    leftovers = [p for p in os.listdir(tmp_path) if "clusterctl-tmp" in p]
    assert leftovers == []


def write_profile(folder: Path, text: str, files: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profile.yaml").write_text(text)
    for name, content in (files or {}).items():
        (folder / name).write_text(content)
    return folder


def test_mock_replays_rules_files_and_inheritance(tmp_path: Path) -> None:
    base = write_profile(
        tmp_path / "base",
        """
hostname: base-host
files:
  /etc/os-release: os-release
commands:
  - match: "nvidia-smi   -L"
    stdout: gpus.txt
  - regex: "^ibv_devinfo"
    stdout_text: "hca_id: mlx5_0\\n"
""",
        {"os-release": 'NAME="Ubuntu"\n', "gpus.txt": "GPU 0: NVIDIA H100\n"},
    )
    child = write_profile(
        tmp_path / "child",
        """
extends: ../base
commands:
  - match: "nvidia-smi -L"
    stdout_text: "GPU 0: NVIDIA A100\\n"
""",
    )
    host = Host(name="n1", transport="mock", profile=str(child))
    t = MockTransport(host)
    assert t.run("nvidia-smi -L").stdout == "GPU 0: NVIDIA A100\n"
    assert t.run("ibv_devinfo -v").stdout == "hca_id: mlx5_0\n"
    assert t.run("hostname").stdout == "base-host\n"
    assert t.run("cat /etc/os-release").stdout == 'NAME="Ubuntu"\n'
    missing = t.run("ib_write_bw -d mlx5_0")
    assert missing.exit_code == 127 and "ib_write_bw: not found" in missing.stderr
    assert load_profile(str(base)).hostname == "base-host"


def test_mock_state_changes_later_answers(tmp_path: Path) -> None:
    folder = write_profile(
        tmp_path / "p",
        """
commands:
  - match: "systemctl is-active containerd"
    when_state: {containerd: started}
    stdout_text: "active\\n"
  - match: "systemctl is-active containerd"
    stdout_text: "inactive\\n"
    exit: 3
  - match: "systemctl start containerd"
    set_state: {containerd: started}
""",
    )
    t = MockTransport(Host(name="n", transport="mock", profile=str(folder)))
    assert t.run("systemctl is-active containerd").exit_code == 3
    t.run("systemctl start containerd")
    assert t.run("systemctl is-active containerd").stdout == "active\n"
    put = t.put("/etc/nccl.conf", b"NCCL_DEBUG=WARN\n")
    assert put.changed
    assert t.run("cat /etc/nccl.conf").stdout == "NCCL_DEBUG=WARN\n"
    assert t.history[0] == "systemctl is-active containerd"


def test_mock_delay_beyond_timeout_is_a_timeout(tmp_path: Path) -> None:
    folder = write_profile(tmp_path / "p", 'commands:\n  - match: "slow"\n    delay: 5\n')
    t = MockTransport(Host(name="n", transport="mock", profile=str(folder)))
    with pytest.raises(TransportError) as err:
        t.run("slow", timeout=0.1)
    assert err.value.kind is FailureKind.TIMED_OUT


def test_bad_profile_is_a_usage_error(tmp_path: Path) -> None:
    folder = write_profile(tmp_path / "p", 'commands:\n  - match: "x"\n    regex: "y"\n')
    with pytest.raises(UsageError, match="exactly one of 'match' or 'regex'"):
        MockTransport(Host(name="n", transport="mock", profile=str(folder)))
    with pytest.raises(UsageError, match="names no profile"):
        MockTransport(Host(name="n", transport="mock"))


def test_mock_rule_can_simulate_a_transport_failure(tmp_path: Path) -> None:
    folder = write_profile(tmp_path / "p", 'commands:\n  - match: "nvidia-smi -L"\n    fail: unreachable\n')
    t = MockTransport(Host(name="n", transport="mock", profile=str(folder)))
    with pytest.raises(TransportError) as err:
        t.run("nvidia-smi -L")
    assert err.value.kind is FailureKind.UNREACHABLE


def test_mock_list_of_outputs_cycles(tmp_path: Path) -> None:
    folder = write_profile(
        tmp_path / "p", 'commands:\n  - regex: "all_reduce_perf"\n    stdout: [a.txt, b.txt]\n',
        {"a.txt": "first\n", "b.txt": "second\n"},
    )
    t = MockTransport(Host(name="n", transport="mock", profile=str(folder)))
    assert [t.run("all_reduce_perf -g 8").stdout for _ in range(3)] == ["first\n", "second\n", "first\n"]
