"""What bootstrap's own undo journals say it made on each host: what ``clusterctl reset`` takes away.

Every ``clusterctl bootstrap`` and ``bootstrap phase NAME`` that changes hosts writes a journal
under ``<state dir>/undo/`` (``undo_journal.WriteAheadJournal``): each file it wrote (with the SHA-256
of what it wrote, the backup of what it replaced, or the fact that the file was new), each command
with its undo, and what a change made beyond its file (``Change.makes``: a package installed that
was absent, a kubeadm node, an etcd member, the CNI, a folder). Reset reads those of the same fleet
(cluster name and ``RunPlace.key``, so a same-named host of another inventory is never taken
for this one) that no earlier reset or undo used on the host. A host that no journal of the fleet
names was bootstrapped by an older clusterctl (journals before version 2 record no fleet and no
``makes``) or with another ``--state-dir``: reset falls back to known names there, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.changes import MAKES_CNI, MAKES_PACKAGE, GateRecord
from clusterctl.undo_journal import journals_in

#: The reset phase's own journals (``bootstrap phase reset``) record what reset did, not what bootstrap made.
RESET_COMMAND = "bootstrap phase reset"


@dataclass(frozen=True)
class HostJournal:
    """One journal's records for one host, in the order the run made them."""

    path: str
    records: tuple[GateRecord, ...]


@dataclass(frozen=True)
class ResetJournals:
    """Bootstrap's journals of one fleet, by host."""

    folder: str
    #: Host -> its journals no reset or undo used yet, oldest first. A host that is missing: no journal
    #: of this fleet names it. An empty tuple: journals name it, and every one was used already.
    hosts: Mapping[str, tuple[HostJournal, ...]] = field(default_factory=dict)
    #: CNIs bootstrap's network phase installed on this fleet (``cni:calico``), read from any of its
    #: journals: the CNI's DaemonSet wrote its files on every node, not only where the phase ran.
    cnis: frozenset[str] = frozenset()
    #: Host -> the packages bootstrap installed there (absent before), sorted, from used journals too: a
    #: reset leaves them installed and says a rerun with ``--purge-packages`` purges them.
    packages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Journals that could not be read (path -> why), named in the plan rather than silently skipped.
    unreadable: Mapping[str, str] = field(default_factory=dict)


def bootstrap_journals(folder: Path, *, cluster: str, fleet: str) -> ResetJournals:
    """The journals of bootstrap runs on this fleet under ``folder`` (``<state dir>/undo``)."""
    journals, unreadable = journals_in(folder, "bootstrap*.json")
    # Not an older clusterctl's (no fleet, no makes), another fleet's, or reset's own.
    journals = [j for j in journals if j.version >= 2 and j.cluster == cluster and j.fleet == fleet
                and j.command != RESET_COMMAND and j.command.startswith("bootstrap")]
    hosts: dict[str, list[HostJournal]] = {}
    cnis: set[str] = set()
    packages: dict[str, set[str]] = {}
    for journal in journals:
        by_host: dict[str, list[GateRecord]] = {}
        for record in journal.records:
            by_host.setdefault(record.change.host, []).append(record)
            cnis.update(tag[len(MAKES_CNI):] for tag in record.change.makes if tag.startswith(MAKES_CNI))
            packages.setdefault(record.change.host, set()).update(
                tag[len(MAKES_PACKAGE):] for tag in record.change.makes if tag.startswith(MAKES_PACKAGE))
        for host, records in by_host.items():
            mine = hosts.setdefault(host, [])
            if host not in journal.used:
                mine.append(HostJournal(str(journal.path), tuple(records)))
    return ResetJournals(str(folder), {h: tuple(j) for h, j in hosts.items()}, frozenset(cnis), unreadable=unreadable,
                         packages={h: tuple(sorted(p)) for h, p in packages.items()})
