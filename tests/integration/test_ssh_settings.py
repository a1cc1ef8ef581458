"""How SSHTransport merges inventory values, ssh_config and defaults, and checks host keys.

No network: a temporary ssh_config and known_hosts file, never the user's own.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import hmac
import io
from pathlib import Path

import paramiko
import pytest

from clusterctl.inventory.model import Host, SSHOptions
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh.config import (
    JumpHop,
    SSHTarget,
    load_ssh_config,
    parse_jump_chain,
    resolve_target,
    target_for_host,
)
from clusterctl.transport.ssh.hostkeys import HostKeyPolicy, KnownHosts, check_host_key

SSH_CONFIG = """\
Host gpu-*
    User ops
    Port 2222
    IdentityFile ~/.ssh/fleet_ed25519
    ProxyJump bastion.example.com
    ConnectTimeout 7

Host gpu-a1
    HostName 10.0.0.11

Host 10.9.*
    User by-address

Host *
    User fallback
"""


@pytest.fixture
def config(tmp_path: Path) -> paramiko.SSHConfig:
    path = tmp_path / "ssh_config"
    path.write_text(SSH_CONFIG)
    loaded = load_ssh_config(str(path))
    assert loaded is not None
    return loaded


def test_ssh_config_fills_what_the_inventory_leaves_open(config: paramiko.SSHConfig) -> None:
    target = resolve_target(name="gpu-a1", config=config, default_connect_timeout_s=30)
    assert target.hostname == "10.0.0.11"
    assert target.user == "ops"
    assert target.port == 2222
    assert target.key_files == (str(Path("~/.ssh/fleet_ed25519").expanduser()),)
    assert target.jump == (JumpHop("bastion.example.com"),)
    assert target.connect_timeout_s == 7
    assert target.known_hosts_name() == "[10.0.0.11]:2222"


def test_inventory_values_win_over_ssh_config(config: paramiko.SSHConfig, tmp_path: Path) -> None:
    host = Host(
        name="gpu-a1",
        address="192.168.1.5",
        port=22,
        user="admin",
        ssh=SSHOptions(key_file=str(tmp_path / "k"), jump_host="none"),
    )
    target = target_for_host(host, config, 30)
    assert (target.hostname, target.port, target.user) == ("192.168.1.5", 22, "admin")
    assert target.key_files == (str(tmp_path / "k"),)
    assert target.jump == ()
    assert target.known_hosts_name() == "192.168.1.5"


def test_inventory_ssh_options_override_the_file(config: paramiko.SSHConfig) -> None:
    host = Host(name="gpu-b2", ssh=SSHOptions(options=(("ConnectTimeout", "3"), ("ProxyJump", "none"))))
    target = target_for_host(host, config, 30)
    assert target.connect_timeout_s == 3
    assert target.jump == ()


def test_address_patterns_apply_when_the_name_sets_nothing(config: paramiko.SSHConfig) -> None:
    target = resolve_target(name="node7", address="10.9.0.7", config=config)
    # "Host *" matched the name first (User fallback): the first value obtained wins, as in ssh.
    assert target.user == "fallback"
    assert target.hostname == "10.9.0.7"


def test_a_match_exec_command_runs_once_per_host_not_once_per_lookup(tmp_path: Path) -> None:
    """paramiko runs a ``Match exec`` command in both passes of a lookup, and a host is looked up by its name and
    by its address: a slow command (a VPN or port check) ran four times on each host of a fan-out; ssh runs it
    once. Its answer still decides (``User matched``), and a command of its own for each host still runs."""
    runs = tmp_path / "runs"
    config = paramiko.SSHConfig.from_text(f'Match exec "echo %n >> {runs}; case %n in *1) ;; *) false;; esac"\n'
                                          f'  User matched\nMatch exec "echo ran >> {runs}"\n  Port 2200\n')
    targets = [target_for_host(Host(name=f"gpu-0{n}", address=f"10.0.0.1{n}"), config, 30) for n in (1, 2)]
    assert [(t.user, t.port) for t in targets] == [("matched", 2200), (getpass.getuser(), 2200)]
    assert runs.read_text().split() == ["gpu-01", "ran", "10.0.0.11", "gpu-02", "ran", "10.0.0.12"]


def test_a_match_exec_command_reads_nothing_of_clusterctls_input(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """ssh runs a ``Match exec`` command with an empty stdin; under clusterctl it was handed clusterctl's own: what
    was piped to clusterctl, or the terminal's keys."""
    monkeypatch.setattr("sys.stdin", io.StringIO("piped to clusterctl\n"))
    read = tmp_path / "read"
    config = paramiko.SSHConfig.from_text(f'Match exec "cat > {read}"\n  User matched\n')
    assert target_for_host(Host(name="gpu-01"), config, 30).user == "matched"
    assert read.read_text() == ""


def test_a_proxycommand_through_ssh_w_is_a_jump_as_in_an_ansible_inventory(tmp_path: Path) -> None:
    # The way before ProxyJump, still in many ~/.ssh/config files: it was refused ("clusterctl does not run").
    path = tmp_path / "ssh_config"
    path.write_text("Host gpu-*\n    ProxyCommand ssh -q -p 2200 -W %h:%p admin@bastion.example.com\n")
    target = resolve_target(name="gpu-a1", config=load_ssh_config(str(path)))
    assert target.jump == (JumpHop("bastion.example.com", "admin", 2200),)


def test_defaults_without_any_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    target = resolve_target(name="plain", config=None)
    assert (target.hostname, target.port, target.user) == ("plain", 22, getpass.getuser())
    assert [Path(k).name for k in target.key_files] == ["id_ed25519", "id_ecdsa", "id_rsa"]
    assert not target.explicit_keys


def test_missing_explicit_ssh_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TransportError) as err:
        load_ssh_config(str(tmp_path / "nope"))
    assert "does not exist" in err.value.message


def test_proxyjump_chains_parse_user_host_and_port() -> None:
    assert parse_jump_chain("a@bastion:2200,inner, [fe80::1]:22") == (
        JumpHop("bastion", "a", 2200),
        JumpHop("inner"),
        JumpHop("fe80::1", None, 22),
    )
    assert parse_jump_chain("none") == ()
    with pytest.raises(TransportError):
        parse_jump_chain("host:notaport")


@pytest.mark.parametrize("spec", ["[::1]x", "@bastion", "bas tion"])
def test_a_jump_hop_ssh_could_not_read_is_refused_not_half_read(spec: str) -> None:
    # '[::1]x' was taken as '::1' and '@bastion' as 'bastion' with ssh's default user.
    with pytest.raises(TransportError) as err:
        parse_jump_chain(spec)
    assert f"bad jump host {spec!r}" in err.value.message


def _key() -> paramiko.PKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    import io

    return paramiko.Ed25519Key.from_private_key(io.StringIO(pem.decode()))


def _hashed(name: str) -> str:
    salt = b"0123456789abcdefghij"
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def _check_in(known: KnownHosts, target: SSHTarget, key: paramiko.PKey, *, accept_new: bool) -> None:
    """``check_host_key`` with ``known`` the only file, ``accept-new`` when ``accept_new``."""
    check_host_key(HostKeyPolicy((known,), strict="accept-new" if accept_new else "yes"), target, key)


def test_host_key_known_unknown_changed_and_hashed(tmp_path: Path) -> None:
    good, other, stranger = _key(), _key(), _key()
    path = tmp_path / "known_hosts"
    path.write_text(
        "# comment\n"
        f"[10.0.0.5]:2222 {good.get_name()} {good.get_base64()}\n"
        f"{_hashed('gpu-h')} {other.get_name()} {other.get_base64()}\n"
    )
    known = KnownHosts(path)
    ported = resolve_target(name="a", address="10.0.0.5", port=2222, config=None)
    _check_in(known, ported, good, accept_new=False)  # recorded: accepted silently

    hashed = resolve_target(name="gpu-h", config=None)
    _check_in(known, hashed, other, accept_new=False)

    with pytest.raises(TransportError) as changed:
        _check_in(known, ported, stranger, accept_new=True)
    assert changed.value.kind is FailureKind.HOST_KEY_REFUSED
    assert "man-in-the-middle" in changed.value.message and f"{path}:2" in changed.value.message

    fresh = resolve_target(name="new", address="10.0.0.6", config=None)
    with pytest.raises(TransportError) as unknown:
        _check_in(known, fresh, stranger, accept_new=False)
    assert "--accept-new-host-keys" in unknown.value.message
    assert "SHA256:" in unknown.value.message
    _check_in(known, fresh, stranger, accept_new=True)
    assert path.read_text().endswith(f"10.0.0.6 {stranger.get_name()} {stranger.get_base64()}\n")
    # A second reader of the file (another run) trusts it now.
    _check_in(KnownHosts(path), fresh, stranger, accept_new=False)


def test_a_recorded_key_goes_on_a_line_of_its_own_and_is_named_by_it(tmp_path: Path) -> None:
    old, new = _key(), _key()
    path = tmp_path / "known_hosts"
    path.write_text(f"# comment\nold {old.get_name()} {old.get_base64()}")  # no newline at the end (hand-edited)
    assert KnownHosts(path).add("new", new.get_name(), new.get_base64()) == 3
    assert path.read_text().splitlines()[2] == f"new {new.get_name()} {new.get_base64()}"


def test_host_key_policy_follows_ssh_config_per_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    from clusterctl.transport.ssh import hostkeys
    from clusterctl.transport.ssh.hostkeys import host_key_policy

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(hostkeys, "DEFAULT_GLOBAL_KNOWN_HOSTS", (str(tmp_path / "global"),))
    config_file = tmp_path / "config"
    config_file.write_text(
        "Host hashed\n    StrictHostKeyChecking accept-new\n    HashKnownHosts yes\n"
        "    UserKnownHostsFile ~/kh-%n-%p\n"
        "Host lax\n    StrictHostKeyChecking no\n    UserKnownHostsFile ~/kh-lax\n"
        "Host strict\n    StrictHostKeyChecking yes\n    UserKnownHostsFile none\n"
    )
    config = load_ssh_config(str(config_file))
    key = _key()

    hashed = resolve_target(name="hashed", address="10.1.1.1", config=config)
    assert hashed.user_known_hosts == (str(tmp_path / "kh-hashed-22"),)
    check_host_key(host_key_policy(hashed, override=None, accept_new=False), hashed, key)
    written = (tmp_path / "kh-hashed-22").read_text()
    assert written.startswith("|1|") and "10.1.1.1" not in written
    # The hashed entry is found again by a fresh reader.
    _check_in(KnownHosts(tmp_path / "kh-hashed-22"), hashed, key, accept_new=False)

    lax = resolve_target(name="lax", address="10.1.1.2", config=config)
    with caplog.at_level("WARNING", logger="clusterctl.transport.ssh"):
        check_host_key(host_key_policy(lax, override=None, accept_new=False), lax, key)
    assert "UNVERIFIED" in caplog.text
    # Even "no" refuses a key that changed.
    with pytest.raises(TransportError) as changed:
        check_host_key(host_key_policy(lax, override=None, accept_new=False), lax, _key())
    assert "HOST KEY CHANGED" in changed.value.message

    strict = resolve_target(name="strict", address="10.1.1.3", config=config)
    policy = host_key_policy(strict, override=None, accept_new=True)
    assert policy.user_files == () and policy.strict == "accept-new"
    with pytest.raises(TransportError) as nowhere:
        check_host_key(policy, strict, key)
    assert "no known_hosts file to record it in" in nowhere.value.message
    # --known-hosts wins over all of it.
    override = host_key_policy(strict, override=str(tmp_path / "given"), accept_new=False)
    assert [str(f.path) for f in override.files] == [str(tmp_path / "given")]


def test_a_host_certificate_of_a_key_type_clusterctl_cannot_read_is_a_host_key_refusal(tmp_path: Path) -> None:
    # A server may present a certificate for a key type the certificate reader does not know (DSA here).
    cert_type = "ssh-dss-cert-v01@openssh.com"
    blob = paramiko.Message()
    blob.add_string(cert_type)
    blob.add_string(b"nonce")
    key = _key()
    key.public_blob = paramiko.PublicBlob(cert_type, blob.asbytes())
    target = resolve_target(name="gpu-c", address="10.0.0.7", config=None)
    with pytest.raises(TransportError) as refused:
        _check_in(KnownHosts(tmp_path / "known_hosts"), target, key, accept_new=True)
    assert refused.value.kind is FailureKind.HOST_KEY_REFUSED
    assert cert_type in refused.value.message and "cannot check" in refused.value.message
    assert not (tmp_path / "known_hosts").exists()  # nothing recorded for it


def test_known_hosts_found_by_name_in_the_files_order_with_patterns_still_matched(tmp_path: Path) -> None:
    # Plain names are found without matching every line (a fleet's file of N hosts costs N look-ups);
    # what a host gets is still every line that names it, in the file's order, patterns included.
    first, second, third, fourth = _key(), _key(), _key(), _key()
    path = tmp_path / "known_hosts"
    path.write_text(
        f"gpu-*,!gpu-b9 {first.get_name()} {first.get_base64()}\n"
        f"gpu-a1,10.0.0.11,gpu-a1 {second.get_name()} {second.get_base64()}\n"
        f"{_hashed('gpu-a1')} {third.get_name()} {third.get_base64()}\n"
        f"@cert-authority gpu-a1 {fourth.get_name()} {fourth.get_base64()}\n"
        f"GPU-A1 {fourth.get_name()} {fourth.get_base64()}\n"
    )
    known = KnownHosts(path)
    assert [e.line_no for e in known.entries_for("gpu-a1")] == [1, 2, 3]
    assert [e.line_no for e in known.entries_for("gpu-a1", authorities=True)] == [4]
    assert [e.line_no for e in known.entries_for("10.0.0.11")] == [2]
    assert [e.line_no for e in known.entries_for("gpu-b9")] == []  # negated
    assert [e.line_no for e in known.entries_for("gpu-a2")] == [1]
    assert [e.line_no for e in known.entries_for("GPU-A1")] == [1, 5]  # ssh's patterns ignore case, names do not
    number = known.add("gpu-a1", second.get_name(), second.get_base64())
    assert [e.line_no for e in known.entries_for("gpu-a1")] == [1, 2, 3, number]


@pytest.mark.parametrize("command", ["ssh -W 10.9.9.9:22 bastion", "ssh -i ~/.ssh/bastion.pem -W %h:%p bastion"])
def test_a_proxycommand_that_a_jump_would_not_follow_is_refused_for_the_host(tmp_path: Path, command: str) -> None:
    # A fixed -W target or the bastion's own key: a jump through 'bastion' would reach another address or log in
    # with other keys, so the host fails with the way to write it instead.
    path = tmp_path / "ssh_config"
    path.write_text(f"Host gpu-*\n    ProxyCommand {command}\n")
    with pytest.raises(TransportError, match="does not run: write ProxyJump"):
        resolve_target(name="gpu-a1", config=load_ssh_config(str(path)))
