"""The open connections of one fan-out run, reused across its tasks and bounded in number.

Past ``max_open`` the least recently used idle connection is closed, so a 1,000-host run
never holds 1,000 sockets. A connection that failed (timeout, transport error) is closed
instead of going back to the pool.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import threading
import weakref
from collections import OrderedDict

from clusterctl.inventory.model import Host
from clusterctl.transport.base import Connector, Transport

log = logging.getLogger("clusterctl.fanout")


class ConnectionPool:
    def __init__(self, connect: Connector, *, max_open: int) -> None:
        self.connect = connect
        self.max_open = max_open
        self._open: OrderedDict[str, Transport] = OrderedDict()
        self._lock = threading.Lock()
        #: Connections closed under their task (``forget``): never pooled again.
        self._closed_under_task: weakref.WeakSet[Transport] = weakref.WeakSet()
        raise_fd_limit()

    def checkout(self, host: Host, timeout_s: float) -> Transport:
        """The host's open connection, or a new one (which may raise ``TransportError``)."""
        with self._lock:
            transport = self._open.pop(host.name, None)
        return transport if transport is not None else self.connect(host, timeout_s)

    def checkin(self, host: Host, transport: Transport, healthy: bool) -> None:
        to_close: list[Transport] = []
        with self._lock:
            if healthy and transport not in self._closed_under_task:
                self._open[host.name] = transport
            else:
                to_close.append(transport)
            while len(self._open) > self.max_open:
                _, oldest = self._open.popitem(last=False)
                to_close.append(oldest)
        for t in to_close:
            close_quietly(t)

    def forget(self, transport: Transport) -> None:
        """A connection closed under its task (Ctrl-C, a deadline) is never handed out again, even when
        its task checked it back in as healthy in between."""
        with self._lock:
            self._closed_under_task.add(transport)
            for name, open_one in list(self._open.items()):
                if open_one is transport:
                    del self._open[name]

    def close(self) -> None:
        with self._lock:
            transports = list(self._open.values())
            self._open.clear()
        for t in transports:
            close_quietly(t)


def close_quietly(transport: Transport) -> None:
    try:
        transport.close()
    except Exception:  # closing a broken connection must not mask the real failure
        log.debug("closing %s failed", transport.host.name, exc_info=True)


def raise_fd_limit() -> None:
    """Lift the soft open-files limit to the hard one: each open connection holds a socket."""
    with contextlib.suppress(ValueError, OSError):  # some sandboxes forbid it
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
