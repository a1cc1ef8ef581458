"""Every change clusterctl makes to a host passes through one gate.

A ``Change`` says what would change on one host: a file to write (with the content that is
there now, so the plan can show a diff) or a command to run. The ``Gate`` either *records* it
(plan, dry-run: nothing is touched anywhere) or *applies* it through the host's transport and
keeps what undo needs: the backup path of a file it replaced, the fact that a file was new, or
the command that reverts a command. ``tune-nccl --push``, ``bench ib`` and every bootstrap phase
go through it, so dry-run and undo behave the same everywhere (the k0sctl and pyinfra idea: plan
is the same code as apply, stopped before the host is touched).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import shlex
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from clusterctl.errors import ClusterctlError
from clusterctl.secret import Secret, mask_text
from clusterctl.transport.base import FailureKind, TransportError

if TYPE_CHECKING:
    from clusterctl.host_reader import HostReader
    from clusterctl.transport.base import CommandResult, Transport


#: ``Change.makes`` tags: what a change leaves on a host that ``clusterctl reset`` must know about.
MAKES_KUBEADM_NODE = "kubeadm-node"
MAKES_ETCD_MEMBER = "etcd-member"
MAKES_IN_CLUSTER = "in-cluster"
MAKES_NO_TRACE = "no-trace"
MAKES_PACKAGE = "package:"
MAKES_DIR = "dir:"
MAKES_CNI = "cni:"
MAKES_FILE = "file:"
#: A temporary change (``Gate.temporary``: verify's GPU test pod) a journal keeps until it is cleaned up;
#: ``reset`` leaves it to the cluster's own removal.
MAKES_TEMPORARY = "temporary"
#: clusterctl's quarantine taint put on a node that had none (``Change.node``): undoing it returns the node
#: to service, so ``undo`` passes it through release's checks first (a cordon alone, an upgrade's or a
#: drain's, is no quarantine; nor a taint that replaced one: its undo puts that one back).
MAKES_QUARANTINE = "quarantine"
#: A pod's eviction (``quarantine.drain.eviction``): a drain phase plans it, the drain makes it (budgets retried).
MAKES_EVICTION = "eviction"
#: What a change of bootstrap's packages phase is for: the packages it installs or holds (``apt:kubelet``), an
#: apt source (``apt-repo:kubernetes``, its key or its file). The upgrade takes the Kubernetes ones from its plan.
MAKES_APT = "apt:"
MAKES_REPO = "apt-repo:"

#: ``Change.cannot_undo`` reasons several phases give.
#: An object a phase put in the cluster's API (a manifest applied, a Helm release).
STAYS_IN_CLUSTER = "it stays in the cluster until 'clusterctl reset' takes the cluster down"


class ChangeKind(str, Enum):
    WRITE_FILE = "write file"
    RUN_COMMAND = "run command"
    #: Remove one file (undo of a file that was new, a temporary file's clean-up).
    REMOVE_FILE = "remove file"


@dataclass(frozen=True)
class Change:
    host: str
    #: One line for people: "load br_netfilter at boot", "restart containerd".
    summary: str
    kind: ChangeKind
    #: For WRITE_FILE: where, what, and what is there now (None: no such file).
    path: str | None = None
    content: bytes | None = None
    current: bytes | None = None
    #: The file's mode; ``None``: a replaced file keeps its own, a new one gets 0644.
    mode: int | None = None
    #: For RUN_COMMAND: the shell line, every value in it already quoted.
    command: str | None = None
    #: Given to the command on stdin (a join token, a password): never in argv, never shown.
    stdin_secret: Secret | None = None
    #: A shell line that reverts RUN_COMMAND where one exists ("swapon -a" for "swapoff -a").
    undo_command: str | None = None
    #: Why nothing reverts RUN_COMMAND, given where the change is planned ("kubeadm does not support
    #: downgrades"): undo names the change with it and fails, rather than pass over what it leaves;
    #: with ``makes=(MAKES_NO_TRACE,)`` it says why there is nothing to put back ("an evicted pod is
    #: recreated by its controller") and does not fail (``not_undone``).
    cannot_undo: str | None = None
    sudo: bool = True
    timeout_s: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    #: Given to RUN_COMMAND on stdin when it is no secret (a manifest for ``kubectl apply -f -``).
    stdin: bytes | None = None
    #: For WRITE_FILE: keep the replaced content as a backup (undo's own restores keep none).
    backup: bool = True
    #: What this change brings onto the host beyond its own file, for ``clusterctl reset`` to read back
    #: from the undo journal (``MAKES_*`` below): ``package:kubelet`` (installed, absent before),
    #: ``kubeadm-node``, ``etcd-member``, ``cni:calico``, ``dir:/etc/kubernetes/clusterctl``,
    #: ``in-cluster`` (an API object: it goes with the cluster), ``no-trace`` (leaves nothing behind).
    makes: tuple[str, ...] = ()
    #: For a change made through a cluster's API from ``host`` (kubectl on a control plane, scontrol on
    #: Slurm's controller): the node it is about, which ``undo --list`` names.
    node: str | None = None

    @classmethod
    def write_file(
        cls,
        host: str,
        path: str,
        content: str | bytes,
        *,
        current: str | bytes | None,
        summary: str | None = None,
        mode: int | None = None,
        sudo: bool = True,
        backup: bool = True,
    ) -> Change:
        data = content.encode() if isinstance(content, str) else content
        old = current.encode() if isinstance(current, str) else current
        return cls(host, summary or f"write {path}", ChangeKind.WRITE_FILE, path=path, content=data, current=old,
                   mode=mode, sudo=sudo, backup=backup)

    @classmethod
    def remove_file(cls, host: str, path: str, *, summary: str | None = None, sudo: bool = True) -> Change:
        return cls(host, summary or f"remove {path}", ChangeKind.REMOVE_FILE, path=path, sudo=sudo)

    @classmethod
    def run(
        cls,
        host: str,
        command: str,
        *,
        summary: str | None = None,
        undo: str | None = None,
        cannot_undo: str | None = None,
        sudo: bool = True,
        timeout_s: float | None = None,
        stdin_secret: Secret | None = None,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        makes: tuple[str, ...] = (),
        node: str | None = None,
    ) -> Change:
        return cls(host, summary or command, ChangeKind.RUN_COMMAND, command=command, undo_command=undo,
                   cannot_undo=cannot_undo, sudo=sudo, timeout_s=timeout_s, stdin_secret=stdin_secret, stdin=stdin,
                   env=dict(env or {}), makes=makes, node=node)

    @property
    def is_noop(self) -> bool:
        """A file write whose content is already there: nothing to do."""
        return self.kind is ChangeKind.WRITE_FILE and self.content == self.current

    def diff(self) -> str:
        """Unified diff of the file as it is against the file as it would be ("" for commands)."""
        if self.kind is not ChangeKind.WRITE_FILE or self.path is None:
            return ""
        old_label = "/dev/null" if self.current is None else f"{self.host}:{self.path}"
        if _binary(self.current) or _binary(self.content):
            # A chart archive or any other binary file: a line diff would print bytes to the terminal.
            return f"Binary files {old_label} and {self.host}:{self.path} differ\n"
        before = (self.current or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
        after = (self.content or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
        text = "".join(difflib.unified_diff(before, after, fromfile=old_label, tofile=f"{self.host}:{self.path}"))
        return mask_text(text)

    def describe(self) -> str:
        """What would be done, safe to print: secrets masked."""
        if self.kind is ChangeKind.WRITE_FILE:
            mode = f" (mode {self.mode:o})" if self.mode is not None else ""
            return mask_text(f"write {self.path}{mode}")
        if self.kind is ChangeKind.REMOVE_FILE:
            return mask_text(f"rm -f {shlex.quote(self.path or '')}")
        return mask_text(self.command or "")

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"host": self.host, "summary": mask_text(self.summary), "kind": self.kind.value}
        if self.kind is ChangeKind.WRITE_FILE:
            mode = f"{self.mode:o}" if self.mode is not None else None
            data.update(path=self.path, mode=mode, diff=self.diff(), new_file=self.current is None)
        elif self.kind is ChangeKind.REMOVE_FILE:
            data.update(path=self.path, sudo=self.sudo)
        else:
            data.update(command=self.describe(), sudo=self.sudo)
        return data


def make_folders(reader: HostReader, host: str, folders: Iterable[str]) -> list[Change]:
    """The one way a change makes folders on a host: none where each of ``folders`` is there, else one
    ``mkdir`` of the absent ones and of their absent parents (parents first), each with mode 0755.

    The host is read first (``test -d``, upwards from each folder until one is there), so the journal
    names exactly the folders this change makes (``MAKES_DIR``), never one that was there before: undo
    (``rmdir``, deepest first) and ``clusterctl reset`` remove those once empty, and only those.
    """
    absent: list[str] = []
    for folder in dict.fromkeys(f.rstrip("/") for f in folders):
        chain: list[str] = []
        path = folder
        while path and path not in absent and \
                reader.run(f"test -d {shlex.quote(path)}", sudo=True).exit_code != 0:
            chain.append(path)
            path = path.rsplit("/", 1)[0]
        absent += reversed(chain)
    if not absent:
        return []
    q = shlex.quote
    # A pending entry of an interrupted run may name a folder that was never made: undo passes over it.
    undo = " && ".join(f"if [ -d {q(f)} ]; then rmdir {q(f)}; fi" for f in reversed(absent))
    return [Change.run(host, "mkdir -m 0755 " + " ".join(q(f) for f in absent),
                       summary=f"create {', '.join(absent)}", undo=undo, makes=tuple(MAKES_DIR + f for f in absent))]


def _binary(data: bytes | None) -> bool:
    if not data:
        return False
    if b"\0" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@dataclass(frozen=True)
class GateRecord:
    """What the gate did with one change."""

    change: Change
    #: False in record mode (plan, dry-run): nothing was touched.
    applied: bool
    #: False when the host already matched (a file with identical content).
    changed: bool
    #: Where the previous file content was kept, for undo.
    backup_path: str | None = None
    #: The command's result, for RUN_COMMAND changes that ran.
    result: CommandResult | None = None
    #: Part of a temporary change (``Gate.temporary``): the gate cleans it up, nothing for undo.
    temporary: bool = False
    #: A temporary change its run cleaned up (read from an interrupted run's journal, which names it):
    #: nothing left for undo.
    cleaned_up: bool = False
    #: SHA-256 of what a WRITE_FILE put on the host, as an undo journal keeps it: ``clusterctl undo``
    #: checks the file still holds exactly that before restoring or removing it. (A rollback in the
    #: same run works from the in-memory record and does not check.)
    written_sha256: str | None = None
    #: SHA-256 of what a WRITE_FILE replaced, as a journal's pending entry keeps it (the write was cut
    #: off, so no backup path is known): a file that still holds it was never written, nothing to undo.
    previous_sha256: str | None = None

    @property
    def failed(self) -> bool:
        return self.result is not None and not self.result.ok


class ChangeFailed(ClusterctlError):
    """A change's command ran and failed: an error reported in words, never as a traceback or a class
    name. Carries the record so the caller can report and undo."""

    def __init__(self, record: GateRecord, result: CommandResult) -> None:
        self.record, self.result = record, result
        tail = result.stderr_tail(3)
        # kubeadm names why it stopped in "[ERROR <check>]: ..." lines well above its last lines
        # ("... preflight checks failed"): keep them, the tail alone does not say what to fix.
        errors = [line.strip() for line in result.stderr.splitlines()
                  if line.lstrip().startswith("[ERROR ") and line.strip() not in tail][:3]
        tail = "\n".join([*errors, tail]) if errors else tail
        super().__init__(mask_text(f"{record.change.summary}: exit {result.exit_code}" + (f": {tail}" if tail else "")))


#: How ``undo --dry-run`` says a step's command (the CLI prints the command whole on its own line, to be copied).
WOULD_RUN = "would run: "


@dataclass(frozen=True)
class UndoStep:
    """How one applied change is reverted: the change that does it (None: nothing can), and what to say."""

    change: Change | None
    #: The line once done (or why it cannot be done).
    done: str
    #: The line in record mode (``undo --dry-run``) of a step with a change; one without says ``done`` there too.
    planned: str = ""
    #: What it is about stays as the run made it (nothing reverts it, its backup is gone, its file is refused).
    left: bool = False


@dataclass(frozen=True)
class UndoLine:
    """One line of ``Gate.undo``: what was (or would be) done about one record (``None``: a temporary change
    ``Gate.clean_up_left`` cleaned up)."""

    record: GateRecord | None
    text: str
    #: In record mode, the command its step would run (its ``UndoStep.change.command``), said whole by the CLI.
    would_run: str | None = None
    #: What it is about stays as the run made it (a change that failed, that nothing reverts, a file refused, a
    #: clean-up that failed): the one test behind undo's exit 1 and the engine's put-back, whatever the text says.
    left: bool = False


class ChangeLog(Protocol):
    """Where an applying gate writes each change down before it reaches its host, and how it went after
    (``undo_journal.WriteAheadJournal``): an interrupt or a crash at any point leaves a journal that
    ``clusterctl undo`` completes. ``before`` raises to refuse the change (a journal that cannot be
    written stops the run before the host is touched)."""

    def before(self, change: Change) -> int: ...
    def after(self, entry: int, record: GateRecord) -> None: ...
    def cut_off(self, entry: int) -> None: ...
    #: A temporary change (its undo is its clean-up), written down before it is set up; ``cleaned``
    #: once its clean-up is done (by the block that made it, or by the engine after an interrupt).
    def temporary(self, change: Change) -> int: ...
    def cleaned(self, entry: int) -> None: ...


@dataclass(frozen=True)
class Temporary:
    """A temporary change set up and not cleaned up yet: what cleans it up, and its journal entry."""

    host: str
    summary: str
    cleanup: tuple[Change, ...]
    entry: int | None


class Gate:
    """The one place changes reach hosts. ``Gate(apply=False)`` records; ``Gate(apply=True)`` applies.

    Thread-safe: one gate serves a whole fan-out; ``records`` keeps every change in the order
    it passed, across hosts.
    """

    def __init__(self, *, apply: bool, log: ChangeLog | None = None,
                 interrupted: threading.Event | None = None) -> None:
        self.apply = apply
        self.log = log
        #: Set once Ctrl-C or SIGTERM stops the run (the fan-out's ``Runner.interrupted``): a temporary
        #: change is then not cleaned up over the connection being closed under it, but left to
        #: ``clean_up_left`` on a fresh one (the action engine's put-back).
        self.interrupted = interrupted
        self._records: list[GateRecord] = []
        self._lock = threading.Lock()
        self._left: list[Temporary] = []

    @property
    def records(self) -> list[GateRecord]:
        with self._lock:
            return list(self._records)

    def records_for(self, host: str) -> list[GateRecord]:
        return [r for r in self.records if r.change.host == host]

    def _keep(self, record: GateRecord) -> GateRecord:
        with self._lock:
            self._records.append(record)
        return record

    def record(self, change: Change) -> GateRecord:
        """Keep ``change`` as planned without reaching its host: a plan step, whatever ``apply`` is.

        For commands that only the apply run can carry out (a benchmark's servers and clients),
        so that their dry run shows exactly what would run, host by host, in the same records.
        """
        return self._keep(GateRecord(change, applied=False, changed=not change.is_noop))

    def submit(self, transport: Transport, change: Change, *, temporary: bool = False) -> GateRecord:
        """Record or apply ``change`` on ``transport``'s host. A failed command raises ``ChangeFailed``."""
        if change.is_noop or not self.apply:
            return self._keep(GateRecord(change, applied=False, changed=not change.is_noop, temporary=temporary))
        if self.log is None or temporary:
            return self._make(transport, change, temporary=temporary)
        entry = self.log.before(change)
        try:
            record = self._make(transport, change, temporary=temporary)
        except ChangeFailed as exc:
            self.log.after(entry, exc.record)
            raise
        except BaseException:  # cut off on its way (an interrupt, a lost connection): it may have happened
            self.log.cut_off(entry)
            raise
        self.log.after(entry, record)
        return record

    def _make(self, transport: Transport, change: Change, *, temporary: bool) -> GateRecord:
        if change.kind is ChangeKind.WRITE_FILE:
            assert change.path is not None and change.content is not None
            put = transport.put(change.path, change.content, mode=change.mode, sudo=change.sudo, backup=change.backup)
            return self._keep(GateRecord(change, applied=True, changed=put.changed, backup_path=put.backup_path,
                                         temporary=temporary))
        if change.kind is ChangeKind.REMOVE_FILE:
            assert change.path is not None
            transport.remove(change.path, sudo=change.sudo)
            return self._keep(GateRecord(change, applied=True, changed=True, temporary=temporary))
        assert change.command is not None
        stdin = change.stdin_secret.reveal().encode() if change.stdin_secret is not None else change.stdin
        result = transport.run(change.command, sudo=change.sudo, timeout=change.timeout_s, env=change.env or None,
                               stdin=stdin)
        record = self._keep(GateRecord(change, applied=True, changed=True, result=result, temporary=temporary))
        if not result.ok:
            raise ChangeFailed(record, result)
        return record

    def submit_all(self, transport: Transport, changes: Sequence[Change]) -> list[GateRecord]:
        return [self.submit(transport, c) for c in changes]

    @contextlib.contextmanager
    def temporary(self, transport: Transport, setup: Sequence[Change], cleanup: Sequence[Change]
                  ) -> Iterator[list[GateRecord]]:
        """``with gate.temporary(t, [make], [remove]):`` a change that lasts only as long as the block.

        ``setup`` passes the gate first; every ``cleanup`` change passes it when the block ends,
        however it ends (an exception, a failed setup change): a hostfile for ``mpirun``, a test pod.
        In record mode both are recorded and the block still runs. A failing clean-up is raised
        once all were tried, unless the block is already raising.

        Applying with a journal, the temporary change is written down before its setup (its undo is
        its clean-up) and marked cleaned once its clean-up is done: a run killed in between leaves a
        journal that ``clusterctl undo`` completes. Once the run is ``interrupted`` the block's own
        connection is being closed: the clean-up is then left to ``clean_up_left`` on a fresh one.
        """
        summary = setup[-1].summary if setup else "temporary change"
        if self.apply and self._stopping():  # a worker that has not seen the interrupt yet: start nothing
            raise TransportError(FailureKind.INTERRUPTED, "not made, the run is stopping: " + summary)
        left = self._set_aside(transport.host.name, summary, cleanup) if self.apply else None
        try:
            yield [self.submit(transport, change, temporary=True) for change in setup]
        except BaseException:
            if not self._stopping():
                self._clean_up(transport, cleanup, left)
            raise
        if self._stopping():
            return
        failure = self._clean_up(transport, cleanup, left)
        if failure is not None:
            raise failure

    def _stopping(self) -> bool:
        return self.interrupted is not None and self.interrupted.is_set()

    def _set_aside(self, host: str, summary: str, cleanup: Sequence[Change]) -> Temporary:
        """Keep (and journal, before it is made) a temporary change about to be set up."""
        entry = None
        if self.log is not None:
            undo = _cleanup_command(cleanup)
            entry = self.log.temporary(Change(host, f"temporary: {summary}", ChangeKind.RUN_COMMAND,
                                              command=summary, undo_command=undo,
                                              sudo=any(c.sudo for c in cleanup), makes=(MAKES_TEMPORARY,)))
        left = Temporary(host, summary, tuple(cleanup), entry)
        with self._lock:
            self._left.append(left)
        return left

    def _clean_up(self, transport: Transport, cleanup: Sequence[Change], left: Temporary | None = None
                  ) -> Exception | None:
        first: Exception | None = None
        for change in cleanup:
            try:
                self.submit(transport, change, temporary=True)
            except (ChangeFailed, TransportError) as exc:
                first = first or exc
        if first is None and left is not None:
            with self._lock:
                mine = any(t is left for t in self._left)
                self._left = [t for t in self._left if t is not left]
            if mine and left.entry is not None and self.log is not None:
                self.log.cleaned(left.entry)
        return first

    def left_over(self, host: str | None = None) -> list[Temporary]:
        """Temporary changes set up and not cleaned up (on ``host``): an interrupted run's to clean up."""
        with self._lock:
            return [t for t in self._left if host is None or t.host == host]

    def clean_up_left(self, transport: Transport) -> list[UndoLine]:
        """Clean up what ``temporary`` left on ``transport``'s host (after an interrupt, on a fresh
        connection); one line each. What fails stays in the journal for ``clusterctl undo``."""
        lines = []
        for left in self.left_over(transport.host.name):
            failure = self._clean_up(transport, left.cleanup, left)
            if failure is None:
                lines.append(UndoLine(None, mask_text(f"cleaned up the temporary {left.summary}")))
            else:
                why = failure.message if isinstance(failure, TransportError) else str(failure)
                lines.append(UndoLine(None, mask_text(f"failed to clean up the temporary {left.summary}: {why}"),
                                      left=True))
        return lines

    def undo(self, transport: Transport, records: Sequence[GateRecord], *, force: bool = False) -> list[UndoLine]:
        """Revert applied changes, newest first, through this gate; returns what was done, one line each
        with the record it is about (and in record mode the command it would run).

        A file whose content is no longer what the gate wrote (edited by hand since, or made
        again by someone else) is left alone with a ``refused:`` line, unless ``force``.

        A replaced file comes back from its backup, a new file is removed, a command is reverted
        by its undo command when it has one (and is reported as not revertible otherwise). In
        record mode the same steps are worked out (backups are looked for) and recorded, and the
        lines say what would be done: ``undo --dry-run`` is this code, stopped before the host.
        """
        lines: list[UndoLine] = []
        for record in reversed(records):
            if record.cleaned_up:
                line = UndoLine(record, f"'{record.change.summary}': cleaned up by the run itself, nothing to undo")
            # A command that failed did not happen: nothing to undo, nothing to say.
            elif not record.applied or not record.changed or record.temporary or record.failed:
                continue
            else:
                line = self._undo_one(transport, record, force)
            lines.append(replace(line, text=mask_text(line.text),
                                 would_run=line.would_run and mask_text(line.would_run)))
        return lines

    def _undo_one(self, transport: Transport, record: GateRecord, force: bool) -> UndoLine:
        """``undo``'s line for one record (in record mode with the command its step would run)."""
        try:
            step = undo_step(transport, record, force=force)
        except TransportError as exc:
            return UndoLine(record, f"failed to undo '{record.change.summary}': {exc.message}", left=True)
        if step.change is None:
            return UndoLine(record, step.done, left=step.left)
        try:
            self.submit(transport, step.change)  # in record mode: recorded, the host untouched
        except ChangeFailed as exc:
            return UndoLine(record, f"failed to undo '{record.change.summary}': {exc.result.stderr_tail(2)}", left=True)
        except TransportError as exc:
            return UndoLine(record, f"failed to undo {record.change.path or record.change.summary}: {exc.message}",
                            left=True)
        return UndoLine(record, step.done) if self.apply else UndoLine(record, step.planned, step.change.command)


def undo_step(transport: Transport, record: GateRecord, *, force: bool = False) -> UndoStep:
    """What reverts ``record`` on its host: read (the backup, the file as it is now), never written.

    Before a file of a journal is restored or removed its content is checked against what the
    gate wrote (``written_sha256``): a mismatch means someone changed it since, and undo would
    destroy their work, so it is refused unless ``force``.
    """
    change = record.change
    if change.kind is ChangeKind.WRITE_FILE and change.path is not None:
        path = change.path
        expected = record.written_sha256
        if expected is not None and not force:
            now = transport.get(path, sudo=change.sudo)
            if now is None and change.current is None:
                return UndoStep(None, f"{path} is already gone (it was new): nothing to remove")
            if now is not None and record.previous_sha256 is not None and \
                    hashlib.sha256(now).hexdigest() == record.previous_sha256 != expected:
                return UndoStep(None, f"{path} holds what it held before: the write was cut off before it reached "
                                "the host, nothing to undo")
            if now is None or hashlib.sha256(now).hexdigest() != expected:
                what = "was removed" if now is None else "was changed"
                return UndoStep(None, f"refused: {path} {what} since clusterctl wrote it (its content is not what the "
                                "journal recorded); undo it with --force to overwrite that", left=True)
        if record.backup_path:
            # Through the transport's own file primitives, so undo works the same on every
            # transport (ssh, local, mock) and restores the mode with the content.
            saved = transport.get(record.backup_path, sudo=change.sudo)
            if saved is None:
                return UndoStep(None, f"cannot restore {path}: backup {record.backup_path} is gone", left=True)
            now = transport.get(path, sudo=change.sudo)
            restore = Change.write_file(change.host, path, saved, current=now, mode=change.mode, sudo=change.sudo,
                                        backup=False, summary=f"restore {path} from {record.backup_path}")
            return UndoStep(restore, f"restored {path} from {record.backup_path}",
                            f"would restore {path} from {record.backup_path}")
        if change.current is None:
            remove = Change.remove_file(change.host, path, sudo=change.sudo, summary=f"remove {path} (it was new)")
            return UndoStep(remove, f"removed {path} (it was new)", f"would remove {path} (it was new)")
        return UndoStep(None, f"cannot restore {path}: no backup was kept", left=True)
    if change.undo_command:
        revert = Change.run(change.host, change.undo_command, summary=f"undo '{change.summary}'", sudo=change.sudo,
                            timeout_s=change.timeout_s)
        return UndoStep(revert, f"undid '{change.summary}'", f"{WOULD_RUN}{change.undo_command}")
    return not_undone(change)


#: Said of a change whose journal gives no reason (one written before changes gave theirs).
NO_REASON = "no way back was recorded for it"


def not_undone(change: Change) -> UndoStep:
    """The one verdict on a command undo cannot revert, with its reason (``cannot_undo``).

    A change that leaves nothing to put back (``MAKES_NO_TRACE``: a restart, an eviction, a list
    refresh) is "nothing to undo" and does not fail undo; any other leaves its host different from
    before the run, so "cannot undo" and undo exits 1: a script never takes a partial undo for a whole one.
    """
    if MAKES_NO_TRACE in change.makes:
        why = f": {change.cannot_undo}" if change.cannot_undo else " leaves nothing behind"
        return UndoStep(None, f"nothing to undo: '{change.summary}'{why}")
    return UndoStep(None, f"cannot undo '{change.summary}': {change.cannot_undo or NO_REASON}", left=True)


def _cleanup_command(cleanup: Sequence[Change]) -> str | None:
    """One shell line that does ``cleanup`` (a temporary change's undo, in its journal); ``None``: none can."""
    parts = []
    for change in cleanup:
        if change.kind is ChangeKind.RUN_COMMAND and change.command and not change.env and change.stdin is None \
                and change.stdin_secret is None:
            parts.append(change.command)
        elif change.kind is ChangeKind.REMOVE_FILE and change.path:
            parts.append(f"rm -f -- {shlex.quote(change.path)}")
        else:
            return None
    return " && ".join(parts) if parts else None


class HostGate:
    """A ``Gate`` bound to one host's transport: submit, undo and temporary changes there, nothing else (what a
    phase's ``apply`` gets: it never holds the transport)."""

    def __init__(self, gate: Gate, transport: Transport) -> None:
        self.gate = gate
        #: The host's connection, for a step that reads between its changes (a drain's evictions).
        self.transport = transport

    def submit(self, change: Change) -> GateRecord:
        return self.gate.submit(self.transport, change)

    def submit_all(self, changes: Sequence[Change]) -> list[GateRecord]:
        return self.gate.submit_all(self.transport, changes)

    def temporary(self, setup: Sequence[Change], cleanup: Sequence[Change]
                  ) -> contextlib.AbstractContextManager[list[GateRecord]]:
        return self.gate.temporary(self.transport, setup, cleanup)

    def records(self) -> list[GateRecord]:
        return self.gate.records_for(self.transport.host.name)
