"""A real program run as on a host, with nothing of this machine changed: a private namespace.

``Sandbox.run`` runs a line under ``dash`` inside ``unshare --mount --net``: ``/etc`` and
``/var/lib`` are overlays whose writes land in the sandbox's folder (so they last from one run to
the next, like a host's disk), ``/run`` is an empty tmpfs (no systemd, no CRI socket of this
machine is reachable), the network has nothing but a down ``lo``, and the real tools come first
on ``PATH``. ``systemctl`` there is a shim that does nothing: the programs (kubeadm reset stops the
kubelet) find an init system, as on a host, without reaching this machine's.

For the commands that change a host for real (``kubeadm reset``, dry-run or not), where running
them on this machine would be wrong and a temporary root is not enough (they use fixed paths).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from contract import OFFLINE, Answer

LAYERS = (("/etc/", "etc"), ("/var/lib/", "var-lib"))
SETUP = """set -e
F="$1"; shift
mount -t overlay overlay -o lowerdir=/etc,upperdir="$F/etc-upper",workdir="$F/etc-work" /etc
mount -t overlay overlay -o lowerdir=/var/lib,upperdir="$F/var-lib-upper",workdir="$F/var-lib-work" /var/lib
mount -t tmpfs tmpfs /run
export PATH="$F/bin:$PATH"
exec dash -c "$1"
"""


class Sandbox:
    def __init__(self, folder: Path, tools: dict[str, Path], files: dict[str, bytes] | None = None) -> None:
        self.folder = folder
        for _, layer in LAYERS:
            for part in ("upper", "work"):
                (folder / f"{layer}-{part}").mkdir(parents=True, exist_ok=True)
        self.bin = folder / "bin"
        self.bin.mkdir(exist_ok=True)
        for name, path in tools.items():
            link = self.bin / name
            if not link.exists():
                link.symlink_to(path)
        shim = self.bin / "systemctl"
        shim.write_text("#!/bin/sh\nexit 0\n")
        shim.chmod(0o755)
        for path, data in (files or {}).items():
            target = self.host_path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def host_path(self, path: str) -> Path:
        for prefix, layer in LAYERS:
            if path.startswith(prefix):
                return self.folder / f"{layer}-upper" / path[len(prefix):]
        raise ValueError(f"{path}: only /etc and /var/lib are the sandbox's own")

    def run(self, line: str, stdin: bytes = b"", timeout: float = 60) -> Answer:
        env = {**os.environ, **OFFLINE}
        done = subprocess.run(["unshare", "--mount", "--net", "--", "sh", "-c", SETUP, "sandbox", str(self.folder),
                               line], input=stdin, capture_output=True, env=env, timeout=timeout)
        return Answer(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))

    def files(self, *folders: str) -> list[str]:
        """The regular files under ``folders`` as the sandboxed host sees them (deletions included)."""
        listed = self.run("find " + " ".join(folders) + " -type f 2>/dev/null | sort; true")
        return [line for line in listed.stdout.splitlines() if line]
