"""Reaching a host over SSH with paramiko, the way OpenSSH's ``ssh`` would.

What it honours, in order of precedence: the inventory entry, then the user's ssh_config,
then ssh's defaults (``config``). Host keys are checked against known_hosts like
``StrictHostKeyChecking yes`` (or ``accept-new`` with ``--accept-new-host-keys``); a changed
key is always refused (``hostkeys``).

Everything that does not depend on the host (ssh_config and known_hosts parsing, loaded
private keys, the agent's key list, jump-host connections) is done once per process and
shared by every host, so a fan-out over hundreds of hosts pays for it once.

Modules: ``config`` (ssh_config, SSHTarget), ``hostkeys`` (known_hosts), ``auth`` (agent and
key files), ``connect`` (socket, handshake, host key check, auth), ``jump`` (ProxyJump pool),
``transport`` (SSHTransport). This package imports paramiko: import it only for SSH hosts
(``clusterctl.transport.factory`` does), so that ``clusterctl --help`` stays fast.
"""

from __future__ import annotations

from clusterctl.transport.ssh.auth import KeyAttempt, agent_keys, authenticate, keys_to_offer, load_private_key
from clusterctl.transport.ssh.config import (
    DEFAULT_KEY_NAMES,
    DEFAULT_PORT,
    JumpHop,
    SSHTarget,
    load_ssh_config,
    parse_jump_chain,
    resolve_target,
    target_for_host,
    user_home,
)
from clusterctl.transport.ssh.connect import ConnectSettings, open_socket, open_ssh
from clusterctl.transport.ssh.hostkeys import (
    KnownHostLine,
    KnownHosts,
    check_host_key,
    known_hosts_file,
    sha256_fingerprint,
)
from clusterctl.transport.ssh.transport import READ_CHUNK, SSHTransport

__all__ = [
    "DEFAULT_KEY_NAMES",
    "DEFAULT_PORT",
    "READ_CHUNK",
    "ConnectSettings",
    "JumpHop",
    "KeyAttempt",
    "KnownHostLine",
    "KnownHosts",
    "SSHTarget",
    "SSHTransport",
    "agent_keys",
    "authenticate",
    "check_host_key",
    "keys_to_offer",
    "known_hosts_file",
    "load_private_key",
    "load_ssh_config",
    "open_socket",
    "open_ssh",
    "parse_jump_chain",
    "resolve_target",
    "sha256_fingerprint",
    "target_for_host",
    "user_home",
]
