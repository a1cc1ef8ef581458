"""What clusterctl's SSH client negotiates with a real OpenSSH server: an AEAD cipher (AES-GCM), so
each packet is authenticated by the cipher itself, and the host key still checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from sshd_hosts import SSHDHosts

from clusterctl.transport.base import TransportError
from clusterctl.transport.ssh.connect import AEAD_CIPHERS, prefer_aead

pytestmark = pytest.mark.sshd


def test_aes_gcm_is_negotiated_and_the_host_key_still_checked(sshd_hosts: SSHDHosts, tmp_path: Path) -> None:
    (host,) = sshd_hosts(1)
    known = sshd_hosts.write_known_hosts(tmp_path / "known_hosts", [host])
    with sshd_hosts.transport(known, tmp_path) as transport:
        assert transport.run("hostname", timeout=30).stdout == f"{host.name}\n"
        client = transport._connection(30)
        assert client.local_cipher == client.remote_cipher == "aes128-gcm@openssh.com"
    # AES-GCM changes nothing about trust: an unknown host key is refused as before.
    empty = sshd_hosts.write_known_hosts(tmp_path / "empty", [])
    with sshd_hosts.transport(empty, tmp_path) as transport, pytest.raises(TransportError, match="accept-new"):
        transport.run("hostname", timeout=30)


def test_the_preference_only_reorders_what_paramiko_offers() -> None:
    offered = ("aes128-ctr", "aes256-ctr", "aes256-gcm@openssh.com", "aes128-gcm@openssh.com")
    assert prefer_aead(offered) == (*AEAD_CIPHERS, "aes128-ctr", "aes256-ctr")
    assert prefer_aead(("aes128-ctr",)) == ("aes128-ctr",)  # a paramiko without GCM keeps its list
