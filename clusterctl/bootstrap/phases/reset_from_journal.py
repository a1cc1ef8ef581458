"""The part of ``clusterctl reset`` that bootstrap's own undo journals decide (``bootstrap.reset_journals``).

Newest change first, as ``clusterctl undo`` goes: a file bootstrap created is removed, and a file
it replaced comes back from the backup the gate kept, each only while the file still holds what the
journal says bootstrap wrote (its SHA-256); a file changed since is listed and kept unless
``--force``. A command is reverted by the undo the journal kept for it (``swapon -a``, the previous
sysctl values, ``apt-mark unhold``); ``kubeadm init``/``join`` are reverted by the reset phase's own
``kubeadm reset``; what lives in the cluster's API goes with it; the rest is named as not reverted.
Folders bootstrap made go once they are empty. Packages bootstrap installed (absent before) are
listed, and purged only with ``--purge-packages``.

Only reads the host (``ctx.reader``): the steps are ``Change``s the gate applies or records.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field

from clusterctl.bootstrap.phase import PhaseContext
from clusterctl.bootstrap.reset_journals import HostJournal
from clusterctl.changes import (
    MAKES_DIR,
    MAKES_FILE,
    MAKES_IN_CLUSTER,
    MAKES_KUBEADM_NODE,
    MAKES_NO_TRACE,
    MAKES_PACKAGE,
    MAKES_TEMPORARY,
    Change,
    ChangeKind,
    GateRecord,
)
from clusterctl.wording import first_few

#: clusterctl's own folder: nobody else writes there, so an empty one goes even where a journal of an older
#: clusterctl names only a folder inside it (its ``mkdir -p`` made the parents unrecorded).
CLUSTERCTL_DIR = "/etc/kubernetes/clusterctl"
#: Tags whose change leaves nothing reset must take away (the cluster's API objects go with kubeadm reset).
_NOTHING_TO_TAKE = (MAKES_IN_CLUSTER, MAKES_NO_TRACE)


@dataclass
class JournalPlan:
    """What the journals ask of one host, worked out against the host as it is now."""

    tags: set[str] = field(default_factory=set)
    #: File removals and restores and command undos, newest change first.
    steps: list[Change] = field(default_factory=list)
    #: Files bootstrap wrote that changed since (or whose backup is gone): listed and kept.
    kept_changed: list[str] = field(default_factory=list)
    #: Summaries of bootstrap's commands that nothing reverts (``load overlay now``).
    not_reverted: list[str] = field(default_factory=list)
    #: Paths the steps remove, for the folders' emptiness.
    removed: set[str] = field(default_factory=set)
    #: Files made by a command (no hash kept), still there: listed unless --force removes them.
    command_files: list[str] = field(default_factory=list)
    #: Folders bootstrap made: removed when empty after the steps.
    dirs: list[str] = field(default_factory=list)


def plan_from_journals(ctx: PhaseContext, entries: tuple[HostJournal, ...], *, force: bool) -> JournalPlan:
    plan = JournalPlan()
    records: list[GateRecord] = [r for e in entries for r in e.records]
    for record in records:
        plan.tags.update(record.change.makes)
    # What each file would hold once the newer steps ran: an older record is judged against that.
    now: dict[str, bytes | None] = {}

    def content(path: str) -> bytes | None:
        if path not in now:
            now[path] = ctx.reader.get(path, sudo=True)
        return now[path]

    host = ctx.host.name
    for record in reversed(records):
        change = record.change
        if change.kind is ChangeKind.WRITE_FILE and change.path:
            _file_step(plan, ctx, record, content(change.path), now, force=force)
        elif MAKES_KUBEADM_NODE in change.makes:
            continue  # kubeadm init/join: the reset phase's kubeadm reset takes it back
        elif MAKES_TEMPORARY in change.makes:
            continue  # verify's GPU test pod an interrupt left: an API object, it goes with the cluster
        elif any(t.startswith(MAKES_DIR) for t in change.makes):
            continue  # folders go once empty, after every other step (folder_steps)
        elif change.undo_command:
            plan.steps.append(Change.run(host, change.undo_command, summary=f"undo '{change.summary}' (bootstrap)",
                                         sudo=change.sudo))
            for made in (t[len(MAKES_FILE):] for t in change.makes if t.startswith(MAKES_FILE)):
                plan.removed.add(made)  # the undo removes the file its command made (a signing key)
                now[made] = None
        elif not any(t.startswith((MAKES_DIR, MAKES_PACKAGE, MAKES_FILE)) or t in _NOTHING_TO_TAKE
                     for t in change.makes):
            plan.not_reverted.append(change.summary)
    for tag in sorted(plan.tags):
        if tag.startswith(MAKES_FILE):
            path = tag[len(MAKES_FILE):]
            if content(path) is not None:
                plan.command_files.append(path)
        elif tag.startswith(MAKES_DIR):
            plan.dirs.append(tag[len(MAKES_DIR):])
    return plan


def _file_step(plan: JournalPlan, ctx: PhaseContext, record: GateRecord, current: bytes | None,
               now: dict[str, bytes | None], *, force: bool) -> None:
    change = record.change
    path = change.path or ""
    written = record.written_sha256
    as_written = current is not None and (written is None or hashlib.sha256(current).hexdigest() == written)
    host = ctx.host.name
    if change.current is None:  # bootstrap created it
        if current is None:
            return  # gone already
        if as_written or force:
            plan.steps.append(Change.remove_file(host, path, sudo=change.sudo,
                                                 summary=f"remove {path} (bootstrap made it)"))
            plan.removed.add(path)
            now[path] = None
        else:
            plan.kept_changed.append(f"{path} (changed since bootstrap wrote it)")
        return
    backup = record.backup_path
    saved = ctx.reader.get(backup, sudo=True) if backup else None
    if saved is None:
        plan.kept_changed.append(f"{path} (bootstrap changed it; its backup {backup or '(none kept)'} is gone)")
        return
    if current == saved:
        return  # restored already
    if as_written or (force and current is not None):
        plan.steps.append(Change.write_file(host, path, saved, current=current, mode=change.mode, sudo=change.sudo,
                                            backup=False, summary=f"restore {path} from {backup} (bootstrap "
                                            "changed it)"))
        now[path] = saved
    elif current is None:
        return  # removed since: nothing of bootstrap's to take away there
    else:
        plan.kept_changed.append(f"{path} (changed since bootstrap wrote it; its backup {backup} is kept)")


def folder_steps(ctx: PhaseContext, plan: JournalPlan, *, force: bool) -> tuple[list[Change], list[str]]:
    """``rmdir`` of the folders bootstrap made that the steps leave empty (deepest first); the others, listed
    (``--force``: removed with what is in them)."""
    folders = set(plan.dirs)
    for folder in plan.dirs:  # an older clusterctl's mkdir -p made clusterctl's own parents unrecorded
        parent = folder.rsplit("/", 1)[0]
        while parent.startswith(CLUSTERCTL_DIR):
            folders.add(parent)
            parent = parent.rsplit("/", 1)[0]
    steps: list[Change] = []
    left: list[str] = []
    gone: set[str] = set(plan.removed)
    host, q = ctx.host.name, shlex.quote
    for folder in sorted(folders, key=lambda f: (-f.count("/"), f)):
        listing = ctx.reader.run(f"ls -1A {q(folder)}", sudo=True, timeout=60)
        if not listing.ok:
            continue  # not there (any more)
        others = [n for n in (line.strip() for line in listing.stdout.splitlines())
                  if n and f"{folder}/{n}" not in gone]
        if not others:
            steps.append(Change.run(host, f"rmdir {q(folder)}", summary=f"remove the empty folder {folder} "
                                    "(bootstrap made it)"))
        elif force:
            steps.append(Change.run(host, f"rm -rf {q(folder)}", summary=f"remove {folder} and what is in it "
                                    "(--force)"))
        else:
            left.append(f"{folder} (bootstrap made it; it holds {first_few(sorted(others), 3, ', ')})")
            continue
        gone.add(folder)
    return steps, left
