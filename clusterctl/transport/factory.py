"""Picks the transport for a host from its inventory entry."""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.inventory.model import Host
from clusterctl.secret import Secret
from clusterctl.transport.base import Connector, Transport


@dataclass(frozen=True)
class ConnectOptions:
    #: Record unknown host keys instead of refusing them (``--accept-new-host-keys``).
    accept_new_host_keys: bool = False
    #: ssh_config file to read; ``None`` means ``~/.ssh/config`` when it exists.
    ssh_config: str | None = None
    #: known_hosts file; ``None`` means ``~/.ssh/known_hosts``.
    known_hosts: str | None = None
    #: Force every host onto this transport (``--local``), else the inventory's choice.
    force_transport: str | None = None
    #: ``--ask-sudo-pass``: fed to ``sudo -S`` on stdin when a host asks; else sudo runs with ``-n``.
    sudo_password: Secret | None = None
    #: ``--ask-key-passphrase``: opens encrypted key files the agent does not hold.
    key_passphrase: Secret | None = None
    #: ``--ask-pass``: SSH password authentication, where the ssh_config allows it.
    password: Secret | None = None


def make_connector(options: ConnectOptions) -> Connector:
    """A ``Connector`` for ``clusterctl.fanout.Runner`` honouring the options."""

    def connect(host: Host, timeout_s: float) -> Transport:
        kind = options.force_transport or host.transport
        if kind == "mock":
            from clusterctl.mock.transport import MockTransport

            return MockTransport(host)
        if kind == "local":
            from clusterctl.transport.local import LocalTransport

            local = LocalTransport(host)
            local.sudo_password = options.sudo_password
            return local
        from clusterctl.transport.ssh import SSHTransport
        from clusterctl.transport.ssh.auth import Credentials

        return SSHTransport(
            host,
            accept_new_host_keys=options.accept_new_host_keys,
            ssh_config_path=options.ssh_config,
            known_hosts_path=options.known_hosts,
            connect_timeout_s=min(timeout_s, 30.0),
            credentials=Credentials(key_passphrase=options.key_passphrase, password=options.password),
            sudo_password=options.sudo_password,
        )

    return connect
