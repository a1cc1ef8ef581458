"""``clusterctl copy SRC DEST``: one local file to the same path on every selected host.

pdcp's and ``ansible -m copy``'s job, through the change gate: each host's file is written
atomically with a backup of what was there (the transport's ``put``), ``--dry-run`` records
the change and writes nothing, and the undo journal lets ``clusterctl undo`` put it back.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.changes import Change, GateRecord
from clusterctl.errors import UsageError
from clusterctl.transport.base import FailureKind, TransportError

if TYPE_CHECKING:
    from clusterctl.fanout import FleetResult, Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import Transport

#: Largest file ``copy`` sends (it is held in memory once and sent to every host).
MAX_COPY_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class CopyRequest:
    source: str
    dest: str
    mode: int | None = None
    sudo: bool = False
    dry_run: bool = False
    #: ``--state-dir``: where the undo journal goes, as every run record does (``None``: the one default).
    state_dir: str | None = None


def read_source(source: str) -> tuple[bytes, int]:
    """The local file's bytes and permission bits; a folder, special or huge file is a usage error."""
    try:
        info = os.stat(source)
        if stat.S_ISDIR(info.st_mode):
            raise UsageError("is a folder; copy sends one file.", file=source)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError("is not a regular file.", file=source)
        if info.st_size > MAX_COPY_BYTES:
            raise UsageError(f"larger than the {MAX_COPY_BYTES // 2**20} MiB limit of copy.", file=source)
        return Path(source).read_bytes(), stat.S_IMODE(info.st_mode)
    except OSError as exc:
        raise UsageError(f"cannot read: {exc.strerror}.", file=source) from None


def remote_path(source: str, dest: str) -> str:
    """``DEST``, or ``DEST/<source name>`` when DEST ends with '/' (as cp and scp read it)."""
    if not dest.startswith("/"):
        raise UsageError(f"DEST {dest!r} must be an absolute path on the hosts (e.g. /etc/{Path(source).name}).")
    if "\0" in dest or "\n" in dest:
        raise UsageError("DEST must not contain NUL or newline characters.")
    return posixpath.join(dest, Path(source).name) if dest.endswith("/") else dest


def copy_file(runner: Runner, inventory: Inventory, hosts: Sequence[Host],
              request: CopyRequest) -> tuple[FleetResult[GateRecord], str | None]:
    """Write the file on every host through the engine's journaled gate (recorded only, with ``dry_run``): each
    write in the undo journal before it is made; the outcomes and the journal (``None``: nothing changed)."""
    from clusterctl.engine.journaled import journaled_gate

    data, local_mode = read_source(request.source)
    path = remote_path(request.source, request.dest)
    mode = request.mode if request.mode is not None else local_mode
    with journaled_gate("copy", inventory, apply=not request.dry_run, state_dir=request.state_dir) as step:
        def task(transport: Transport) -> GateRecord:
            # Read in both modes, so a dry run fails where the write would: no folder, or not writable.
            folder = posixpath.dirname(path)
            q = shlex.quote(folder)
            found = transport.run(f"if [ ! -d {q} ]; then echo missing; elif [ ! -w {q} ]; then echo read-only; fi",
                                  sudo=request.sudo).stdout.split()
            if found:
                why = "is not writable" + ("" if request.sudo else " (--sudo writes as root)")
                raise TransportError(FailureKind.COMMAND_FAILED, f"cannot write {path}: the folder {folder} "
                                     + ("does not exist or is not a folder" if found == ["missing"] else why))
            current = transport.get(path, sudo=request.sudo)
            change = Change.write_file(transport.host.name, path, data, current=current, mode=mode,
                                       sudo=request.sudo, summary=f"copy {request.source} to {path}")
            return step.gate.submit(transport, change)

        fleet = runner.run_task(hosts, task, label="copy (dry run)" if request.dry_run else "copy")
    return fleet, step.journal
