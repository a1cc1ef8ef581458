"""Writing /etc/nccl.conf to hosts (atomically, with a backup), or showing what would change."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterctl.nccl.tune.render import CONF_PATH

if TYPE_CHECKING:
    from clusterctl.fanout import FleetResult, Runner
    from clusterctl.inventory.model import Host
    from clusterctl.transport.base import Transport


@dataclass(frozen=True)
class PushOutcome:
    path: str
    changed: bool
    #: Unified diff of the current file against the new one ("" when equal).
    diff: str
    backup_path: str | None = None
    dry_run: bool = False


def unified_diff(old: str | None, new: str, *, path: str, host: str) -> str:
    before = (old or "").splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    label = "/dev/null" if old is None else f"{host}:{path}"
    return "".join(difflib.unified_diff(before, after, fromfile=label, tofile=f"{host}:{path} (tuned)"))


def push_conf(
    runner: Runner,
    hosts: Sequence[Host],
    content_for: Callable[[str], str],
    *,
    dry_run: bool = False,
    path: str = CONF_PATH,
) -> FleetResult[PushOutcome]:
    """Write ``content_for(host name)`` to ``path`` on each host; with ``dry_run`` only diff it."""

    def task(transport: Transport) -> PushOutcome:
        name = transport.host.name
        new = content_for(name)
        current = transport.get(path, sudo=True)
        old = current.decode("utf-8", errors="replace") if current is not None else None
        diff = unified_diff(old, new, path=path, host=name)
        if dry_run or old == new:
            return PushOutcome(path=path, changed=old != new, diff=diff, dry_run=dry_run)
        result = transport.put(path, new.encode("utf-8"), mode=0o644, sudo=True, backup=True)
        return PushOutcome(path=path, changed=result.changed, diff=diff, backup_path=result.backup_path)

    return runner.run_task(hosts, task, label="dry-run nccl.conf" if dry_run else "push nccl.conf")
