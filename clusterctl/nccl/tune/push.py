"""Writing /etc/nccl.conf to hosts: one phase on the action engine, recorded (``--dry-run``) or applied.

Each host's file is one ``Change.write_file`` with the content there now, so the dry run shows
the same diff the push applies. The engine (``clusterctl.engine.run``) runs the phase: it takes
the host lock, writes each change to the undo journal before the gate makes it (atomically, with
a backup), and on Ctrl-C or SIGTERM finishes the journal with what was written, so ``clusterctl
undo`` can always put the previous files back (or remove a file that was new).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from clusterctl.changes import Change, GateRecord
from clusterctl.engine.phase import Phase, PhaseContext
from clusterctl.engine.progress import RunPlace
from clusterctl.engine.run import RunReport, RunSettings, run_phases
from clusterctl.fanout import FleetResult, HostOutcome, Runner
from clusterctl.fanout.outcomes import Failure
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Host, Inventory
from clusterctl.nccl.tune.managed_block import SiteConflict, merge_managed_block
from clusterctl.nccl.tune.render import CONF_PATH
from clusterctl.transport.base import FailureKind

#: The undo journal's command, and what ``clusterctl undo`` says it reverts.
PUSH_COMMAND = "tune-nccl --push"


@dataclass
class PushOptions:
    """What the push phase writes; ``site_conflicts`` is filled per host as the phase reads the files."""

    content_for: Callable[[str], str]
    site_conflicts: dict[str, list[SiteConflict]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note_conflicts(self, host: str, conflicts: list[SiteConflict]) -> None:
        with self._lock:
            self.site_conflicts[host] = conflicts


class PushNcclConf(Phase[Change, PhaseContext]):
    """clusterctl's managed block of /etc/nccl.conf; the site's own lines in the file are kept."""

    name = "nccl-conf"
    description = "write the tuned NCCL settings into clusterctl's block of /etc/nccl.conf"
    confirmable = False
    timeout_s = 120.0

    def check(self, ctx: PhaseContext) -> Change:
        """The file's content as it should be, from what is there now (``managed_block``)."""
        options: PushOptions = ctx.options
        current = ctx.reader.get(CONF_PATH, sudo=True)
        old = current.decode("utf-8", errors="replace") if current is not None else None
        content, conflicts = merge_managed_block(old, options.content_for(ctx.host.name))
        if conflicts:
            options.note_conflicts(ctx.host.name, conflicts)
        return Change.write_file(ctx.host.name, CONF_PATH, content, current=current, mode=0o644, sudo=True,
                                 summary=f"write tuned NCCL settings to {CONF_PATH}")

    def plan(self, ctx: PhaseContext, state: Change) -> list[Change]:
        return [state]

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        options: PushOptions = ctx.options
        now = ctx.reader.get(CONF_PATH, sudo=True)
        text = now.decode("utf-8", errors="replace") if now is not None else None
        if text is not None and text == merge_managed_block(text, options.content_for(ctx.host.name))[0]:
            return []
        return [Finding(Severity.ERROR, "NCCL_CONF_NOT_WRITTEN",
                        f"{CONF_PATH} does not hold the tuned settings after the write", host=ctx.host.name)]


PUSH_PHASES: tuple[Phase[Change, PhaseContext], ...] = (PushNcclConf(),)


def push_conf(
    runner: Runner,
    inventory: Inventory,
    hosts: Sequence[Host],
    content_for: Callable[[str], str],
    *,
    apply: bool,
    state_dir: str | None = None,
    force_unlock: bool = False,
    site_conflicts: dict[str, list[SiteConflict]] | None = None,
) -> RunReport:
    """Write ``content_for(host name)`` into clusterctl's block of /etc/nccl.conf on each host, on the engine:
    recorded (``apply=False``: nothing touched, no lock, no journal) or applied under the host lock with
    the undo journal written ahead of each write. Site lines the block overrides go to ``site_conflicts``."""
    options = PushOptions(content_for, {} if site_conflicts is None else site_conflicts)
    journal = RunPlace.of(inventory, "tune-nccl", state_dir).journal(PUSH_COMMAND) if apply else None
    settings = RunSettings(apply=apply, options=options, journal=journal, force_unlock=force_unlock,
                           resume_hint="the same tune-nccl --push --yes (hosts already written are left as they are)")
    return run_phases(inventory, hosts, runner, PUSH_PHASES, settings)


def pushed_records(report: RunReport, hosts: Sequence[Host]) -> FleetResult[GateRecord]:
    """Per host what the push did (or would do) with its file, or why the host failed: the shape the
    CLI prints for every gate (``cli/changes_view.py``)."""
    by_host = {r.host: r for r in report.results if r.phase == PushNcclConf.name}
    outcomes: list[HostOutcome[GateRecord]] = []
    for host in hosts:
        result = by_host.get(host.name)
        # The engine names every host that failed (its lock refused, the phase failed) in failed_hosts.
        why = report.failed_hosts.get(host.name)
        if result is None or why is not None or not isinstance(result.state, Change):
            message = why or (result.message if result is not None else "not reached")
            outcomes.append(HostOutcome(host, None, Failure(FailureKind.ERROR, message),
                                        result.duration_s if result else 0.0))
            continue
        # Where the gate wrote the file, its own record (with the backup it kept); else the change recorded or found.
        record = next(iter(result.records), None) or GateRecord(result.state, applied=report.applied,
                                                                  changed=bool(result.changes))
        outcomes.append(HostOutcome(host, record, None, result.duration_s))
    return FleetResult(tuple(outcomes))
