"""Scrape targets on loopback for a real Prometheus in tests: each serves recorded exposition text
(a cycle of texts, the next one per scrape, for a series that changes between scrapes)."""

from __future__ import annotations

import itertools
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class MetricsTargets:
    def __init__(self) -> None:
        self.servers: list[ThreadingHTTPServer] = []

    def serve(self, texts: list[str] | list[bytes]) -> int:
        """Start one target on 127.0.0.1; its port."""
        cycle = itertools.cycle([t.encode() if isinstance(t, str) else t for t in texts])
        lock = threading.Lock()

        class Metrics(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with lock:
                    body = next(cycle)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        self.servers.append(httpd)
        return int(httpd.server_address[1])

    def close(self) -> None:
        for httpd in self.servers:
            httpd.shutdown()
            httpd.server_close()
