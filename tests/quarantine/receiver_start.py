"""Starting ``remediate serve``: from a chosen folder, for the tests of where the receiver keeps its files
(the ``started`` fixture in conftest.py keeps it from listening); or listening on loopback as Alertmanager
calls it in production, for the end-to-end tests."""

from __future__ import annotations

import io
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from certs import Pki, make_pki
from clirun import DEMO, clusterctl

from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.quarantine.receiver import Remediator, serve
from clusterctl.quarantine.webhook_server import Limits, ListenAddress, Security, TokenFile, tls_context
from clusterctl.transport.factory import ConnectOptions, make_connector


def serve_from(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(folder)
    ran = clusterctl("-i", str(DEMO), "remediate", "serve", "--yes", *args)
    return ran.exit_code, ran.stderr


@dataclass(frozen=True)
class SecuredReceiver:
    remediator: Remediator
    #: The decision log: one JSON line per decision.
    log: io.StringIO
    url: str
    #: The bearer token's file (0600) and the certificates: what Alertmanager's receiver settings name.
    token: Path
    pki: Pki


def token_file(path: Path) -> Path:
    """A fresh bearer token in ``path``, mode 0600 (as ``remediate serve --token-file`` wants it)."""
    path.write_text(secrets.token_hex(32) + "\n")
    path.chmod(0o600)
    return path


def token_and_mutual_tls(pki: Pki, token: Path) -> Security:
    return Security(TokenFile(str(token)), tls_context(str(pki.server_cert), str(pki.server_key), str(pki.ca)),
                    mutual=True)


def secured_receiver(folder: Path, inventory: str | Path,
                     security_for: Callable[[Pki, Path], Security] = token_and_mutual_tls, *,
                     host: str = "127.0.0.1", limits: Limits | None = None) -> SecuredReceiver:
    """The receiver on ``inventory``'s hosts listening on a free port of ``host`` in this process, as
    ``remediate serve`` runs it (by default with a bearer token and mutual TLS; certificates and the
    token made in ``folder``)."""
    log = io.StringIO()
    pki = make_pki(folder / "pki")
    token = token_file(folder / "remediate.token")
    security = security_for(pki, token)
    connect = make_connector(ConnectOptions())
    remediator = Remediator(load_inventory(str(inventory)), lambda: Runner(connect, parallel=8, timeout_s=60), log,
                            state_dir=str(folder))
    bound: list[int] = []
    started = threading.Event()
    address = ListenAddress(host, 0)
    threading.Thread(target=serve, args=(remediator, address, security),
                     kwargs={"ready": lambda p: (bound.append(p), started.set()), "limits": limits},
                     daemon=True).start()
    assert started.wait(30)
    return SecuredReceiver(remediator, log, address.url(bound[0], tls=security.tls is not None), token, pki)
