"""SSHTransport against real sshd mock hosts: commands, timeouts, jump hosts, error kinds."""

from __future__ import annotations

import functools
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sshd_hosts import SSHDHost, SSHDHosts

from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host, SSHOptions
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.factory import ConnectOptions, make_connector
from clusterctl.transport.ssh import SSHTransport

pytestmark = pytest.mark.sshd
Connect = Callable[..., SSHTransport]


def _host(farm: SSHDHosts, h: SSHDHost, **ssh: str) -> Host:
    return Host(
        name=h.name, address=h.address, port=h.port, user=farm.user,
        ssh=SSHOptions(key_file=ssh.pop("key_file", str(farm.client_key)), **ssh),  # type: ignore[arg-type]
    )


@pytest.fixture
def no_ssh_config(tmp_path: Path) -> str:
    path = tmp_path / "ssh_config"
    path.write_text("")
    return str(path)


def _transport(farm: SSHDHosts, h: SSHDHost, known: Path, config: str, **ssh: str) -> SSHTransport:
    return SSHTransport(_host(farm, h, **ssh), known_hosts_path=str(known), ssh_config_path=config)


@pytest.fixture
def one_host(sshd_hosts: SSHDHosts, tmp_path: Path, no_ssh_config: str) -> tuple[SSHDHost, Connect]:
    """One sshd host whose key is known, and ``connect(**ssh)``: clusterctl's transport to it."""
    (h,) = sshd_hosts(1)
    known = sshd_hosts.write_known_hosts(tmp_path / "kh", [h])
    return h, functools.partial(_transport, sshd_hosts, h, known, no_ssh_config)


def test_one_connection_serves_many_commands_and_large_outputs(one_host: tuple[SSHDHost, Connect]) -> None:
    _h, connect = one_host
    with connect() as t:
        # 4 MB on each stream at once: reading one stream only would stall the other.
        big = t.run("head -c 4000000 /dev/zero | tr '\\0' a; head -c 4000000 /dev/zero | tr '\\0' b >&2", timeout=30)
        assert big.ok
        assert len(big.stdout) == 4_000_000 and set(big.stdout) == {"a"}
        assert len(big.stderr) == 4_000_000 and set(big.stderr) == {"b"}
        # Every command's shell is started by the same sshd session process: one login, reused.
        parents = {t.run("echo $PPID", timeout=10).stdout for _ in range(3)}
        assert len(parents) == 1
        echoed = t.run("cat", stdin=b"through stdin\n", timeout=10)
        assert echoed.stdout == "through stdin\n"


def test_env_and_put_get_round_trip(one_host: tuple[SSHDHost, Connect]) -> None:
    h, connect = one_host
    target = str(h.home / "conf file.txt")
    with connect() as t:
        env = t.run('printf %s "$NCCL_DEBUG"', env={"NCCL_DEBUG": "INFO; touch /tmp/x"}, timeout=10)
        assert env.stdout == "INFO; touch /tmp/x"
        first = t.put(target, b"one\n")
        second = t.put(target, b"two\n")
        third = t.put(target, b"two\n")
        assert first.changed and second.changed and not third.changed
        assert second.backup_path is not None
        assert Path(second.backup_path).read_bytes() == b"one\n"
        assert t.get(target) == b"two\n"
        assert t.get(str(h.home / "missing")) is None


def test_command_timeout_closes_the_channel_but_keeps_the_connection(one_host: tuple[SSHDHost, Connect]) -> None:
    _h, connect = one_host
    with connect() as t:
        with pytest.raises(TransportError) as err:
            t.run("sleep 30", timeout=0.5)
        assert err.value.kind is FailureKind.TIMED_OUT
        assert t.run("echo still-here", timeout=10).stdout == "still-here\n"


def test_close_from_another_thread_ends_a_hung_command(one_host: tuple[SSHDHost, Connect]) -> None:
    _h, connect = one_host
    t = connect()
    assert t.run("true", timeout=10).ok
    errors: list[TransportError] = []

    def hang() -> None:
        try:
            t.run("sleep 60")
        except TransportError as exc:
            errors.append(exc)

    worker = threading.Thread(target=hang)
    worker.start()
    time.sleep(0.3)
    t.close()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert errors and errors[0].kind is FailureKind.TIMED_OUT


def test_wrong_client_key_is_an_authentication_failure_naming_user_and_key(
    sshd_hosts: SSHDHosts, tmp_path: Path, one_host: tuple[SSHDHost, Connect]
) -> None:
    from sshd_hosts import generate_ed25519

    _h, connect = one_host
    stranger = tmp_path / "stranger_key"
    generate_ed25519(stranger, "not-authorized")
    with connect(key_file=str(stranger)) as t, pytest.raises(
        TransportError
    ) as err:
        t.run("true", timeout=10)
    assert err.value.kind is FailureKind.AUTH_FAILED
    assert sshd_hosts.user in err.value.message
    assert str(stranger) in err.value.message


def test_stopped_sshd_is_a_handshake_timeout(one_host: tuple[SSHDHost, Connect]) -> None:
    h, connect = one_host
    h.pause()
    try:
        with connect() as t, pytest.raises(TransportError) as err:
            t.run("true", timeout=1.0)
    finally:
        h.resume()
    assert err.value.kind is FailureKind.TIMED_OUT
    assert "banner" in err.value.message or "handshake" in err.value.message


def test_proxyjump_through_a_verified_jump_host(sshd_hosts: SSHDHosts, tmp_path: Path, no_ssh_config: str) -> None:
    (jump,) = sshd_hosts(1, extra_config=["LogLevel DEBUG1"])
    inner = sshd_hosts(2)
    jump_spec = f"{sshd_hosts.user}@{jump.address}:{jump.port}"
    config = tmp_path / "ssh_config"
    # The jump host's key comes from ssh_config, as a user would set it up.
    config.write_text(f"Host {jump.address}\n    IdentityFile {sshd_hosts.client_key}\n")
    known = sshd_hosts.write_known_hosts(tmp_path / "kh", [jump, *inner])
    hosts = [_host(sshd_hosts, h, jump_host=jump_spec) for h in inner]
    options = ConnectOptions(ssh_config=str(config), known_hosts=str(known))
    with Runner(make_connector(options), timeout_s=20) as runner:
        fleet = runner.run_command(hosts, "hostname")
    assert fleet.ok, [o.failure for o in fleet.failed]
    assert {n: r.stdout for n, r in fleet.values.items()} == {"h2": "h2\n", "h3": "h3\n"}
    log = jump.log_file.read_text()
    for h in inner:
        assert f"target {h.address} port {h.port}" in log or f"to {h.address} port {h.port}" in log

    # The jump host's own key is checked too: unknown there means refused for every host behind it.
    strict = sshd_hosts.write_known_hosts(tmp_path / "kh-inner-only", inner)
    with Runner(make_connector(ConnectOptions(ssh_config=str(config), known_hosts=str(strict))), timeout_s=20) as r:
        refused = r.run_command(hosts, "hostname")
    assert {o.failure.kind for o in refused.outcomes if o.failure} == {FailureKind.HOST_KEY_REFUSED}
    assert all(f"[{jump.address}]:{jump.port}" in (o.failure.message if o.failure else "") for o in refused.outcomes)


def test_profile_tools_replay_recorded_outputs_and_state(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "topo.txt").write_text("\tGPU0\tGPU1\nGPU0\t X \tNV12\nGPU1\tNV12\t X \n")
    (profile / "profile.yaml").write_text(
        "commands:\n"
        "  - match: \"nvidia-smi topo -m\"\n"
        "    stdout: topo.txt\n"
        "  - regex: \"^ib_write_bw .*--report_gbits.* 10\\\\.0\\\\.0\\\\.3$\"\n"
        "    stdout_text: \"slow\\n\"\n"
        "    exit: 3\n"
        "  - match: \"systemctl is-active containerd\"\n"
        "    when_state: {containerd: restarted}\n"
        "    stdout_text: \"active\\n\"\n"
        "  - match: \"systemctl is-active containerd\"\n"
        "    stdout_text: \"inactive\\n\"\n"
        "    exit: 3\n"
        "  - match: \"systemctl restart containerd\"\n"
        "    set_state: {containerd: restarted}\n"
    )
    (h,) = sshd_hosts(1, profile=profile)
    known = sshd_hosts.write_known_hosts(tmp_path / "kh", [h])
    config = tmp_path / "ssh_config"
    config.write_text("")
    with _transport(sshd_hosts, h, known, str(config)) as t:
        assert t.run("nvidia-smi topo -m", timeout=20).stdout == (profile / "topo.txt").read_text()
        bw = t.run("ib_write_bw -d mlx5_0 --report_gbits -F 10.0.0.3", timeout=20)
        assert (bw.stdout, bw.exit_code) == ("slow\n", 3)
        assert t.run("systemctl is-active containerd", timeout=20).exit_code == 3
        assert t.run("systemctl restart containerd", timeout=20).ok
        assert t.run("systemctl is-active containerd", timeout=20).stdout == "active\n"
        missing = t.run("nvidia-smi -L", timeout=20)
        assert missing.exit_code == 127 and "not found" in missing.stderr


def test_connection_refused_and_unresolvable_names_are_unreachable(tmp_path: Path, no_ssh_config: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    known = tmp_path / "kh"
    for host, what in (
        (Host(name="gone", address="127.0.0.1", port=closed_port), "connection refused"),
        (Host(name="typo", address="no-such-host.invalid"), "cannot resolve"),
    ):
        transport = SSHTransport(host, known_hosts_path=str(known), ssh_config_path=no_ssh_config)
        with transport, pytest.raises(TransportError) as err:
            transport.run("true", timeout=5)
        assert err.value.kind is FailureKind.UNREACHABLE
        assert what in err.value.message


def test_silent_listener_is_a_banner_timeout(tmp_path: Path, no_ssh_config: str) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)  # the kernel completes the TCP handshake; nobody ever answers
        port = listener.getsockname()[1]
        host = Host(name="mute", address="127.0.0.1", port=port)
        start = time.monotonic()
        transport = SSHTransport(host, known_hosts_path=str(tmp_path / "kh"), ssh_config_path=no_ssh_config)
        with transport, pytest.raises(TransportError) as err:
            transport.run("true", timeout=0.8)
        assert err.value.kind is FailureKind.TIMED_OUT
        assert "banner" in err.value.message
        assert time.monotonic() - start < 10
