"""sushy-tools' Redfish emulator (OpenStack's, from PyPI) on loopback, one emulated system per mock host.

``RedfishEmulator(folder, hosts, mock_state=...)`` starts ``sushy-emulator`` with its fake driver
(``SUSHY_EMULATOR_FAKE_DRIVER``; systems listed in ``SUSHY_EMULATOR_FAKE_SYSTEMS``, named after
the hosts, all On), HTTP Basic auth from an htpasswd file (bcrypt, the only digest it reads),
TLS with a certificate for 127.0.0.1 signed by a CA of its own (``ca_file``), listening on
127.0.0.1 only (its default is Flask's, also loopback; it is set anyway).

The fake driver applies a power change 1 to 11 s after it is asked (``apply_time``), and with
``external_notifier`` it PUTs the system (name, ``power_state``) to ``EXTERNAL_NOTIFICATION_URL``
at every change it applies. A small listener here takes those PUTs and switches the mock host of
that name off or on (``clusterctl.mock.power``): the BMC's power drives the simulated machine,
which is unreachable while off and boots (its kernel log since boot gone) when switched on.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from certs import make_pki
from local_daemons import free_port, stop

USERNAME = "clusterctl-admin"
#: The emulator's own password: the tests check it appears in no output, log, journal or argv.
PASSWORD = "Rf-9xQ2-bmc-pass-7Lk"
EMULATOR = shutil.which("sushy-emulator") or str(Path(sys.executable).parent / "sushy-emulator")


def available() -> bool:
    return Path(EMULATOR).exists()


class RedfishEmulator:
    """``with RedfishEmulator(folder, ["gpu-a1", ...], mock_state=STATE) as bmc:`` ``bmc.url``, ``bmc.ca_file``."""

    def __init__(self, folder: Path, hosts: Sequence[str], *, mock_state: Path | None = None) -> None:
        self.folder = folder
        self.hosts = list(hosts)
        self.mock_state = mock_state
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        #: (time, system name, power_state) of every notification the emulator sent.
        self.notified: list[tuple[float, str, str]] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._listener: ThreadingHTTPServer | None = None
        self.log = folder / "sushy-emulator.log"

    def system(self, host: str) -> str:
        return f"/redfish/v1/Systems/{self.uuid(host)}"

    @staticmethod
    def uuid(host: str) -> str:
        import uuid

        return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}.clusterctl.test"))

    def __enter__(self) -> RedfishEmulator:
        import bcrypt

        self.folder.mkdir(parents=True, exist_ok=True)
        pki = make_pki(self.folder, "clusterctl test BMC CA")
        self.ca_file = pki.ca
        htpasswd = self.folder / "htpasswd"
        digest = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        htpasswd.write_text(f"{USERNAME}:{digest}\n")
        self._start_listener()
        assert self._listener is not None
        notify = f"http://127.0.0.1:{self._listener.server_address[1]}/power"
        systems = [{"uuid": self.uuid(h), "name": h, "power_state": "On", "external_notifier": True,
                    "nics": [{"mac": f"52:54:00:00:{i // 256:02x}:{i % 256:02x}", "ip": f"10.0.0.{i + 1}"}]}
                   for i, h in enumerate(self.hosts)]
        config = self.folder / "emulator.conf"
        config.write_text(
            "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\n"
            f"SUSHY_EMULATOR_LISTEN_PORT = {self.port}\n"
            "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
            f"SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}\n"
            f"SUSHY_EMULATOR_STATE_DIR = {str(self.folder / 'state')!r}\n"
            f"SUSHY_EMULATOR_AUTH_FILE = {str(htpasswd)!r}\n"
            f"SUSHY_EMULATOR_SSL_CERT = {str(pki.server_cert)!r}\n"
            f"SUSHY_EMULATOR_SSL_KEY = {str(pki.server_key)!r}\n"
            f"EXTERNAL_NOTIFICATION_URL = {notify!r}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SUSHY_")}
        self._process = subprocess.Popen([EMULATOR, "--config", str(config)], stdout=self.log.open("wb"),
                                         stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60  # a bound for a loaded machine, not a speed goal
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"sushy-emulator exited: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"sushy-emulator did not listen within 60 s: {self.log.read_text()[-2000:]}")

    def _start_listener(self) -> None:
        emulator = self

        class Notified(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                system: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
                emulator.on_power(str(system.get("name")), str(system.get("power_state")))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self._listener = ThreadingHTTPServer(("127.0.0.1", 0), Notified)
        threading.Thread(target=self._listener.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def on_power(self, name: str, state: str) -> None:
        self.notified.append((time.time(), name, state))
        if self.mock_state is None or name not in self.hosts:
            return
        from clusterctl.mock.power import boot, powered_off
        from clusterctl.mock.state import MockCluster

        host = MockCluster(self.mock_state).host(name)
        if state != "On":
            with host.edit() as data:
                data.setdefault("values", {})["power"] = "off"
        elif powered_off(host):
            boot(host)

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            stop(self._process)
            self._process = None
        if self._listener is not None:
            self._listener.shutdown()
            self._listener.server_close()
            self._listener = None
