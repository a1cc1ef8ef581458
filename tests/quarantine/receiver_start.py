"""Starting ``remediate serve``: from a chosen folder, for the tests of where the receiver keeps its files
(the ``started`` fixture in conftest.py keeps it from listening); or listening on loopback as Alertmanager
calls it in production, for the end-to-end tests."""

from __future__ import annotations

import io
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from certs import Pki, make_pki
from clirun import DEMO, clusterctl

from clusterctl.fanout import Runner
from clusterctl.inventory.loader import load_inventory
from clusterctl.quarantine.receiver import Remediator, serve
from clusterctl.quarantine.webhook_server import ListenAddress, Security, TokenFile, tls_context
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


def secured_receiver(folder: Path, inventory: str | Path) -> SecuredReceiver:
    """The receiver on ``inventory``'s hosts listening on a free loopback port in this process, as
    ``remediate serve`` runs it with a bearer token and mutual TLS (certificates made in ``folder``)."""
    log = io.StringIO()
    pki = make_pki(folder / "pki")
    token = folder / "remediate.token"
    token.write_text(secrets.token_hex(32) + "\n")
    token.chmod(0o600)
    security = Security(TokenFile(str(token)), tls_context(str(pki.server_cert), str(pki.server_key), str(pki.ca)),
                        mutual=True)
    connect = make_connector(ConnectOptions())
    remediator = Remediator(load_inventory(str(inventory)), lambda: Runner(connect, parallel=8, timeout_s=60), log,
                            journal_folder=str(folder / "undo"))
    bound: list[int] = []
    started = threading.Event()
    threading.Thread(target=serve, args=(remediator, ListenAddress("127.0.0.1", 0), security),
                     kwargs={"ready": lambda p: (bound.append(p), started.set())}, daemon=True).start()
    assert started.wait(30)
    return SecuredReceiver(remediator, log, f"https://127.0.0.1:{bound[0]}/webhook", token, pki)
