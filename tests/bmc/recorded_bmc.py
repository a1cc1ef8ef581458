"""A BMC that answers with a real BMC's recorded ComputerSystem (tests/fixtures/redfish), on loopback over HTTP.

Only the service root and the Systems collection around the recording are made up here (the fewest
fields ``sushy`` reads: ``Systems``, ``Members``); the system itself is served as recorded. A
``ComputerSystem.Reset`` POST is recorded and carried out at once (the system's ``PowerState``
becomes ``Off`` or ``On``), or answered with a recorded error body (``refuse``); every other path,
the ``@Redfish.ActionInfo`` a recording names included, is a 404, as on a BMC that has no such
resource, unless ``extra`` serves a recording there. ``members`` are other systems the collection lists
beside it, each made up too (its ``@odata.id``, ``Id`` and ``PowerState`` only), as a BMC of several
systems answers for each.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "redfish"
OFF_RESETS = ("ForceOff", "GracefulShutdown", "PushPowerButton")


class RecordedBmc:
    """``with RecordedBmc("supermicro-...-system.json") as bmc:`` ``bmc.url``, ``bmc.resets``, ``bmc.system``."""

    def __init__(self, recording: str, *, refuse: tuple[int, str] | None = None, members: tuple[str, ...] = (),
                 extra: dict[str, str] | None = None) -> None:
        self.system: dict[str, Any] = json.loads((FIXTURES / recording).read_text())
        self.members = [*members, self.system["@odata.id"]]
        self.extra = {path: json.loads((FIXTURES / name).read_text()) for path, name in (extra or {}).items()}
        #: Each path asked for with GET, in order.
        self.gets: list[str] = []
        self.path = self.system["@odata.id"].rstrip("/")  # iLO 4 ends its paths with a slash
        self.refuse = None if refuse is None else (refuse[0], (FIXTURES / refuse[1]).read_bytes())
        #: Each ResetType asked for, in order.
        self.resets: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    def documents(self) -> dict[str, Any]:
        return {"/redfish/v1": {"@odata.id": "/redfish/v1/", "Id": "RootService", "RedfishVersion": "1.11.0",
                                "Systems": {"@odata.id": "/redfish/v1/Systems"}},
                "/redfish/v1/Systems": {"@odata.id": "/redfish/v1/Systems", "Members@odata.count": len(self.members),
                                        "Members": [{"@odata.id": m} for m in self.members]},
                **{m: {"@odata.id": m, "Id": m.rsplit("/", 1)[-1], "PowerState": "On"} for m in self.members},
                self.path: self.system, **self.extra}

    def __enter__(self) -> RecordedBmc:
        bmc = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: bytes = b"") -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                bmc.gets.append(self.path)
                document = bmc.documents().get(self.path.rstrip("/"))
                self._answer(404) if document is None else self._answer(200, json.dumps(document).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                asked = json.loads(self.rfile.read(length) or b"{}")
                target = bmc.system["Actions"]["#ComputerSystem.Reset"]["target"]
                if self.path.rstrip("/") != target.rstrip("/"):
                    self._answer(404)
                    return
                bmc.resets.append(asked.get("ResetType", ""))
                if bmc.refuse is not None:
                    self._answer(*bmc.refuse)
                    return
                bmc.system["PowerState"] = "Off" if asked.get("ResetType") in OFF_RESETS else "On"
                self._answer(204)

            def log_message(self, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
