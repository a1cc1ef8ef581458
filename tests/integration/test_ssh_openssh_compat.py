"""Host keys and authentication as OpenSSH users set them up, against real sshd hosts."""

from __future__ import annotations

from pathlib import Path

import pytest
from sshd_hosts import SSHDHost, SSHDHosts

from clusterctl.inventory.model import Host, SSHOptions
from clusterctl.secret import Secret
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh import SSHTransport
from clusterctl.transport.ssh import hostkeys as hostkeys_module
from clusterctl.transport.ssh.auth import Credentials

pytestmark = pytest.mark.sshd


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own with an empty ~/.ssh, no agent, and no global known_hosts."""
    folder = tmp_path / "home"
    (folder / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setattr(hostkeys_module, "DEFAULT_GLOBAL_KNOWN_HOSTS", (str(tmp_path / "etc_ssh_known_hosts"),))
    return folder


def _host(farm: SSHDHosts, h: SSHDHost, key_file: Path | None = None) -> Host:
    return Host(name=h.name, address=h.address, port=h.port, user=farm.user,
                ssh=SSHOptions(key_file=str(key_file or farm.client_key)))


def _run(farm: SSHDHosts, h: SSHDHost, config: Path, *, known_hosts: Path | None = None,
         key_file: Path | None = None, credentials: Credentials | None = None) -> str:
    with SSHTransport(_host(farm, h, key_file), ssh_config_path=str(config),
                      known_hosts_path=str(known_hosts) if known_hosts else None, credentials=credentials) as t:
        return t.run("hostname", timeout=15).stdout.strip()


def _refused(farm: SSHDHosts, h: SSHDHost, config: Path, **kwargs: object) -> TransportError:
    with pytest.raises(TransportError) as err:
        _run(farm, h, config, **kwargs)  # type: ignore[arg-type]
    return err.value


def test_known_hosts_named_only_in_ssh_config_is_used(sshd_hosts: SSHDHosts, home: Path, tmp_path: Path) -> None:
    h1, h2 = sshd_hosts(2)
    # A per-cluster file, named with ~ and a %-token, one of several (the first is missing).
    cluster = home / ".ssh" / "known_hosts.sshd-mock"
    sshd_hosts.write_known_hosts(cluster, [h1, h2])
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host h*\n    UserKnownHostsFile ~/.ssh/absent ~/.ssh/known_hosts.%n-never %d/.ssh/known_hosts.sshd-mock\n"
    )
    assert _run(sshd_hosts, h1, config) == "h1"
    assert _run(sshd_hosts, h2, config) == "h2"
    # Without that line the same hosts are unknown.
    bare = tmp_path / "bare_config"
    bare.write_text("")
    err = _refused(sshd_hosts, h1, bare)
    assert err.kind is FailureKind.HOST_KEY_REFUSED and "unknown host key" in err.message
    # --known-hosts wins over what ssh_config names.
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    err = _refused(sshd_hosts, h1, config, known_hosts=empty)
    assert err.kind is FailureKind.HOST_KEY_REFUSED and str(empty) in err.message


def test_global_known_hosts_is_used(sshd_hosts: SSHDHosts, home: Path, tmp_path: Path) -> None:
    h1, h2 = sshd_hosts(2)
    config = tmp_path / "ssh_config"
    central = sshd_hosts.write_known_hosts(tmp_path / "ssh_known_hosts", [h1])
    config.write_text(f"GlobalKnownHostsFile {central}\n")
    assert _run(sshd_hosts, h1, config) == "h1"
    # The default global file (/etc/ssh/ssh_known_hosts; here a stand-in) is read when none is named.
    sshd_hosts.write_known_hosts(tmp_path / "etc_ssh_known_hosts", [h2])
    bare = tmp_path / "bare_config"
    bare.write_text("")
    assert _run(sshd_hosts, h2, bare) == "h2"


def test_host_certificates_signed_by_a_trusted_ca_are_accepted_others_refused(
    sshd_hosts: SSHDHosts, home: Path, tmp_path: Path
) -> None:
    h1, h2 = sshd_hosts(2)
    site_ca = sshd_hosts.make_key("site_ca")
    rogue_ca = sshd_hosts.make_key("rogue_ca")
    h1.certify_host_key(site_ca, [h1.address])
    h2.certify_host_key(rogue_ca, [h2.address])
    ca_type, ca_b64 = (site_ca.with_name("site_ca.pub")).read_text().split()[:2]
    (home / ".ssh" / "known_hosts").write_text(f"@cert-authority [127.0.0.1]:* {ca_type} {ca_b64}\n")
    config = tmp_path / "ssh_config"
    config.write_text("")
    assert _run(sshd_hosts, h1, config) == "h1"
    err = _refused(sshd_hosts, h2, config)
    assert err.kind is FailureKind.HOST_KEY_REFUSED
    assert "certificate" in err.message and "@cert-authority" in err.message
    # A certificate issued for another name is refused even from the trusted CA.
    h2.certify_host_key(site_ca, ["some-other-host"])
    err = _refused(sshd_hosts, h2, config)
    assert err.kind is FailureKind.HOST_KEY_REFUSED and "issued for some-other-host" in err.message
    # A revoked CA is refused.
    with open(home / ".ssh" / "known_hosts", "a") as fh:
        fh.write(f"@revoked * {ca_type} {ca_b64}\n")
    hostkeys_module._known_hosts_cache.clear()
    err = _refused(sshd_hosts, h1, config)
    assert err.kind is FailureKind.HOST_KEY_REFUSED and "@revoked" in err.message


def test_strict_host_key_checking_accept_new_for_one_host_pattern(
    sshd_hosts: SSHDHosts, home: Path, tmp_path: Path
) -> None:
    h1, h2 = sshd_hosts(2)
    config = tmp_path / "ssh_config"
    config.write_text("Host h1\n    StrictHostKeyChecking accept-new\nHost *\n    StrictHostKeyChecking yes\n")
    assert _run(sshd_hosts, h1, config) == "h1"
    # Recorded where ssh would write it: the first UserKnownHostsFile (~/.ssh/known_hosts).
    recorded = (home / ".ssh" / "known_hosts").read_text()
    assert h1.known_hosts_line().split()[2] in recorded
    err = _refused(sshd_hosts, h2, config)
    assert err.kind is FailureKind.HOST_KEY_REFUSED and "unknown host key" in err.message
    # Once recorded, a changed key is refused even for the accept-new host.
    h1.change_host_key()
    err = _refused(sshd_hosts, h1, config)
    assert "HOST KEY CHANGED" in err.message


def test_encrypted_key_held_by_a_real_agent_or_opened_with_its_passphrase(
    sshd_hosts: SSHDHosts, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (h,) = sshd_hosts(1)
    known = sshd_hosts.write_known_hosts(tmp_path / "known_hosts", [h])
    config = tmp_path / "ssh_config"
    config.write_text("")
    passphrase = "correct horse battery"
    key = sshd_hosts.make_key("encrypted_key", passphrase)
    sshd_hosts.authorize(key.with_name("encrypted_key.pub").read_text())

    # Neither an agent nor the passphrase: a clear failure naming the key and the fixes.
    err = _refused(sshd_hosts, h, config, known_hosts=known, key_file=key)
    assert err.kind is FailureKind.AUTH_FAILED
    assert str(key) in err.message and "encrypted" in err.message
    assert "ssh-agent" in err.message and "--ask-key-passphrase" in err.message
    assert "TypeError" not in err.message

    # The passphrase given on request opens the file.
    opened = Credentials(key_passphrase=Secret(passphrase, "key passphrase"))
    assert _run(sshd_hosts, h, config, known_hosts=known, key_file=key, credentials=opened) == "h1"

    # A real ssh-agent holding the key: used first, the file is never decrypted.
    sock = sshd_hosts.start_agent([(key, passphrase)])
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
    assert _run(sshd_hosts, h, config, known_hosts=known, key_file=key) == "h1"
    # IdentitiesOnly still takes the agent's copy of the named key.
    only = tmp_path / "only_config"
    only.write_text(f"Host h1\n    IdentitiesOnly yes\n    IdentityFile {key}\n")
    with SSHTransport(Host(name=h.name, address=h.address, port=h.port, user=sshd_hosts.user),
                      ssh_config_path=str(only), known_hosts_path=str(known)) as t:
        assert t.run("hostname", timeout=15).stdout.strip() == "h1"


def test_a_password_is_tried_last_and_its_refusal_is_explained(
    sshd_hosts: SSHDHosts, home: Path, tmp_path: Path
) -> None:
    from sshd_hosts import generate_ed25519

    (h,) = sshd_hosts(1)
    known = sshd_hosts.write_known_hosts(tmp_path / "known_hosts", [h])
    config = tmp_path / "ssh_config"
    config.write_text("")
    stranger = tmp_path / "stranger"
    generate_ed25519(stranger, "not-authorized")
    password = Credentials(password=Secret("pw-never-shown-123", "SSH password"))
    err = _refused(sshd_hosts, h, config, known_hosts=known, key_file=stranger, credentials=password)
    assert err.kind is FailureKind.AUTH_FAILED
    assert str(stranger) in err.message and "password" in err.message
    assert err.message.index(str(stranger)) < err.message.index("password")  # keys first, as ssh
    assert "the server allows: publickey" in err.message
    assert "pw-never-shown-123" not in err.message
    # PasswordAuthentication no in ssh_config: the password is not even offered.
    no_passwords = tmp_path / "no_passwords_config"
    no_passwords.write_text("Host *\n    PasswordAuthentication no\n")
    err = _refused(sshd_hosts, h, no_passwords, known_hosts=known, key_file=stranger, credentials=password)
    assert "; password (" not in err.message
