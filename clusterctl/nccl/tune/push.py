"""Writing /etc/nccl.conf to hosts through the change gate: recorded (``--dry-run``) or applied.

Each host's file is one ``Change.write_file`` with the content there now, so the dry run shows
the same diff the push applies; applied, the gate writes it atomically with a backup and keeps
what ``clusterctl undo`` needs to put the previous file back (or remove a file that was new).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from clusterctl.changes import Change, Gate, GateRecord
from clusterctl.nccl.tune.render import CONF_PATH

if TYPE_CHECKING:
    from clusterctl.fanout import FleetResult, Runner
    from clusterctl.inventory.model import Host
    from clusterctl.nccl.tune.managed_block import SiteConflict
    from clusterctl.transport.base import Transport


def conf_change(host: str, content: str, current: bytes | None, *, path: str = CONF_PATH) -> Change:
    return Change.write_file(host, path, content, current=current, summary=f"write tuned NCCL settings to {path}",
                             mode=0o644, sudo=True)


def push_conf(
    runner: Runner,
    hosts: Sequence[Host],
    content_for: Callable[[str], str],
    *,
    gate: Gate,
    path: str = CONF_PATH,
    site_conflicts: dict[str, list[SiteConflict]] | None = None,
) -> FleetResult[GateRecord]:
    """Pass ``content_for(host name)`` for ``path`` on each host through ``gate``: recorded or written.

    The content goes into clusterctl's managed block; the site's own lines in the file are kept
    (``managed_block``), and those the block overrides are added to ``site_conflicts[host]``.
    """
    from clusterctl.nccl.tune.managed_block import merge_managed_block

    def task(transport: Transport) -> GateRecord:
        name = transport.host.name
        current = transport.get(path, sudo=True)
        old = current.decode("utf-8", errors="replace") if current is not None else None
        content, conflicts = merge_managed_block(old, content_for(name))
        if conflicts and site_conflicts is not None:
            site_conflicts[name] = conflicts
        return gate.submit(transport, conf_change(name, content, current, path=path))

    return runner.run_task(hosts, task, label="push nccl.conf" if gate.apply else "dry-run nccl.conf")
