"""A short-lived containerd on temporary folders: clusterctl's config, its own root, state and sockets.

The config is clusterctl's as rendered, with only what a second daemon on one machine needs
changed: ``root``, ``state``, the gRPC/ttrpc sockets and the drop-in folder moved under a
temporary folder (config version 4 keeps the server sockets under
``plugins."io.containerd.server.v1.*"``, older versions at the top level).
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from types import TracebackType


def relocated(config: str, folder: Path) -> str:
    """``config`` with root, state, sockets and the drop-in folder under ``folder``."""
    version = int(m.group(1)) if (m := re.search(r"^version\s*=\s*(\d+)", config, re.M)) else 1
    text = config.replace('"/etc/containerd/conf.d/*.toml"', f'"{folder}/conf.d/*.toml"')
    top = f'root = "{folder}/root"\nstate = "{folder}/state"\n'
    text = re.sub(r"^(version\s*=\s*\d+\n)", lambda m: m.group(1) + top, text, count=1, flags=re.M)
    if version >= 4:
        sockets = (f'\n[plugins."io.containerd.server.v1.grpc"]\n  address = "{folder}/ctd.sock"\n'
                   f'[plugins."io.containerd.server.v1.ttrpc"]\n  address = "{folder}/ctd.sock.ttrpc"\n')
    else:
        sockets = f'\n[grpc]\n  address = "{folder}/ctd.sock"\n[ttrpc]\n  address = "{folder}/ctd.sock.ttrpc"\n'
    return text + sockets


class ContainerdDaemon:
    """``with ContainerdDaemon(binary, ctr, folder, config) as daemon:`` runs it until the block ends."""

    def __init__(self, containerd: Path, ctr: Path, folder: Path, config: str) -> None:
        self.containerd, self.ctr, self.folder = containerd, ctr, folder
        (folder / "conf.d").mkdir(parents=True, exist_ok=True)
        self.config = folder / "config.toml"
        self.config.write_text(relocated(config, folder))
        self.socket = folder / "ctd.sock"
        self.log = folder / "daemon.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ContainerdDaemon:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen([str(self.containerd), "--config", str(self.config)], stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"containerd exited ({self.process.returncode}): {self.log_tail()}")
            if self.socket.exists() and self.run_ctr("version").returncode == 0:
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"containerd did not answer within 60 s: {self.log_tail()}")

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)

    def run_ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.ctr), "--address", str(self.socket), "--connect-timeout", "2s", *args],
                              capture_output=True, text=True, timeout=30)

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
