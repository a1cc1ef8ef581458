"""One command line, two answers: a simulated tool on a mock host, and the real program.

``SimulatedHost`` is a mock host (``clusterctl.mock``) with the given Debian packages installed
and files in its tree; ``RealHost`` runs the line under ``dash`` with the real programs first on
``PATH`` (nothing else of the machine changes: files live under a temporary root). Lines and
file contents may say ``{root}``: ``""`` on the mock host, the temporary root on the real one, so
the same line names the same file on both.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: No program of the real tier may reach the internet (CI may have it, this project's machines
#: do not): an unreachable proxy makes kubeadm's version lookup fail at once, as air-gapped.
OFFLINE = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}


@dataclass(frozen=True)
class Answer:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class SimulatedHost:
    def __init__(self, folder: Path, packages: dict[str, str], files: dict[str, bytes] | None = None,
                 services: tuple[str, ...] = (), repository: dict[str, list[str]] | None = None) -> None:
        from clusterctl.mock.machine import MockMachine
        from clusterctl.mock.profile import load_profile

        profile = folder / "profile"
        profile.mkdir(parents=True, exist_ok=True)
        installed = "".join(f'      {name}: "{version}"\n' for name, version in packages.items())
        active = "".join(f"    {name}: {{active: true, enabled: true}}\n" for name in services)
        header = "hostname: sim\nsimulate: true\nmachine:\n  packages:\n    installed:\n"
        offered = "".join(f"      {name}: {versions}\n" for name, versions in (repository or {}).items())
        (profile / "profile.yaml").write_text(header + installed + ("    repository:\n" + offered if offered else "")
                                              + ("  services:\n" + active if services else ""))
        self.machine = MockMachine.open(load_profile(str(profile)), folder / "state", "sim")
        for path, data in (files or {}).items():
            self.machine.host.fs.write(path.format(root=""), data.replace(b"{root}", b""))

    def run(self, line: str, stdin: bytes = b"") -> Answer:
        result = self.machine.run_line(line.format(root=""), stdin)
        return Answer(result.exit_code, result.stdout, result.stderr)


class RealHost:
    def __init__(self, folder: Path, tools: dict[str, Path], files: dict[str, bytes] | None = None) -> None:
        self.root = folder / "root"
        self.bin = folder / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        for name, path in tools.items():
            link = self.bin / name
            if not link.exists():
                link.symlink_to(path)
        for path, data in (files or {}).items():
            target = Path(path.format(root=str(self.root)))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data.replace(b"{root}", str(self.root).encode()))

    def run(self, line: str, stdin: bytes = b"", timeout: float = 60) -> Answer:
        env = {**os.environ, **OFFLINE, "PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        done = subprocess.run(["dash", "-c", line.format(root=str(self.root))], input=stdin, capture_output=True,
                              env=env, timeout=timeout, cwd=self.root.parent)
        return Answer(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))
