"""ProxyJump: connections to jump hosts, shared by every host behind them, and forwarding."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import paramiko

from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.transport.ssh.config import SSHTarget, remaining


class JumpPool:
    """Connections to jump hosts, shared by every host behind them and closed with the last one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[tuple[Any, ...], tuple[paramiko.Transport, int]] = {}
        self._building: dict[tuple[Any, ...], threading.Lock] = {}

    def acquire(self, key: tuple[Any, ...], build: Callable[[], paramiko.Transport]) -> paramiko.Transport:
        with self._lock:
            gate = self._building.setdefault(key, threading.Lock())
        with gate:  # one thread builds a jump connection; the others wait and share it
            with self._lock:
                held = self._conns.get(key)
                if held is not None and held[0].is_active():
                    self._conns[key] = (held[0], held[1] + 1)
                    return held[0]
            transport = build()
            with self._lock:
                self._conns[key] = (transport, 1)
            return transport

    def release(self, key: tuple[Any, ...]) -> None:
        to_close = None
        with self._lock:
            held = self._conns.get(key)
            if held is None:
                return
            if held[1] <= 1:
                del self._conns[key]
                to_close = held[0]
            else:
                self._conns[key] = (held[0], held[1] - 1)
        if to_close is not None:
            to_close.close()


jump_pool = JumpPool()


def direct_tcpip(via: paramiko.Transport, dest: SSHTarget, deadline: float) -> paramiko.Channel:
    """A channel through ``via`` to ``dest``."""
    try:
        return via.open_channel(
            "direct-tcpip",
            (dest.hostname, dest.port),
            ("127.0.0.1", 0),
            timeout=remaining(deadline, "the jump host's forwarding"),
        )
    except paramiko.ChannelException as exc:
        raise TransportError(
            FailureKind.UNREACHABLE,
            f"the jump host could not connect to {dest.hostname}:{dest.port}: {exc.text}",
        ) from exc
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise TransportError(
            FailureKind.UNREACHABLE, f"forwarding through the jump host failed: {exc}"
        ) from exc
