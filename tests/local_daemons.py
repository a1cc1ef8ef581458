"""Real daemons the tests start on loopback (Debian's prometheus, prometheus-alertmanager and
prometheus-node-exporter): their command lines, a free port, and one way to start them that always
stops them, each daemon's output in ``FOLDER/<name>.log``."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def prometheus(folder: Path, port: int) -> list[str]:
    """Prometheus with ``folder/prometheus.yml``, its data in ``folder/prom-data``."""
    return [str(PROMETHEUS), f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'prom-data'}", f"--web.listen-address=127.0.0.1:{port}"]


def alertmanager(folder: Path, port: int) -> list[str]:
    """Alertmanager with ``folder/alertmanager.yml``, alone (no cluster port)."""
    return [str(ALERTMANAGER), f"--config.file={folder / 'alertmanager.yml'}", f"--storage.path={folder / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]


def node_exporter(textfiles: Path, port: int) -> list[str]:
    """node-exporter serving only the textfile collector's ``textfiles`` folder."""
    return [str(NODE_EXPORTER), "--collector.disable-defaults", "--collector.textfile",
            f"--collector.textfile.directory={textfiles}", f"--web.listen-address=127.0.0.1:{port}"]


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate, and kill what does not exit within 20 s (a loaded machine)."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def running(folder: Path, **commands: list[str]) -> Iterator[Callable[[], None]]:
    """``with running(folder, prometheus=[...]) as alive:`` starts each command with its output in
    ``folder/<name>.log`` and stops them all on leaving; ``alive()`` fails the test, with the end of
    every log, when one of them has exited."""
    processes = {name: subprocess.Popen(args, stdout=(folder / f"{name}.log").open("wb"), stderr=subprocess.STDOUT)
                 for name, args in commands.items()}

    def alive() -> None:
        assert all(p.poll() is None for p in processes.values()), \
            "\n".join((folder / f"{name}.log").read_text()[-2000:] for name in processes)

    try:
        yield alive
    finally:
        for process in processes.values():
            stop(process)
