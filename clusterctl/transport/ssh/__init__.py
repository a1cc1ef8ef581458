"""Reaching a host over SSH with paramiko, the way OpenSSH's ``ssh`` would.

What it honours, in order of precedence: the inventory entry, then the user's ssh_config,
then ssh's defaults (``config``). Host keys are checked as OpenSSH checks them: the files of
``UserKnownHostsFile``/``GlobalKnownHostsFile`` (or ``--known-hosts`` alone),
``StrictHostKeyChecking`` per host, ``@cert-authority`` host certificates, ``@revoked``; a
changed key is always refused (``hostkeys``, ``certs``). Authentication follows OpenSSH's
order: agent keys, identity files, then a password (``auth``).

Commands (``transport``): both streams are read to EOF, each capped per command; a command
past its deadline, or interrupted, is stopped on the host by signalling its process group.

Everything that does not depend on the host (ssh_config and known_hosts parsing, loaded
private keys, the agent's key list, jump-host connections) is done once per process and
shared by every host, so a fan-out over hundreds of hosts pays for it once.

Modules: ``config`` (ssh_config, SSHTarget), ``hostkeys`` (known_hosts, HostKeyPolicy),
``certs`` (OpenSSH host certificates), ``auth`` (agent, key files, password), ``connect``
(socket, handshake, host key check, auth), ``jump`` (ProxyJump pool), ``transport``
(SSHTransport). This package imports paramiko: import it only for SSH hosts
(``clusterctl.transport.factory`` does), so that ``clusterctl --help`` stays fast.
"""

from __future__ import annotations

# First, before any module here imports paramiko: paramiko's optional ``invoke`` is imported on use.
from clusterctl.transport.ssh import _deferred_imports  # noqa: F401  # isort: skip

from clusterctl.transport.ssh.transport import SSHTransport

__all__ = ["SSHTransport"]
