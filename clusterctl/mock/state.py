"""What a mock host remembers between ``clusterctl`` processes, kept in a folder on disk.

Layout of one mock cluster's state folder (see ``clusterctl.inventory.mock_state`` for where it is)::

    <state>/cluster.json          cluster-wide: joined nodes, helm releases, labels (shared)
    <state>/hosts/<host>/fs/...   the host's filesystem tree (/etc/..., /var/lib/...)
    <state>/hosts/<host>/host.json services, packages, modules, sysctl, swap, set_state values,
                                   how often each profile rule answered

Every read-modify-write of a JSON document happens under an exclusive ``flock`` on a lock
file beside it, so the threads of one fan-out and the processes of sshd mock hosts (one
process per command) never lose each other's updates. JSON is written to a temporary file
and renamed, so a reader never sees half a document.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clusterctl.mock.turns import waiting
from clusterctl.writable import replace_file

STATE_VERSION = 1
#: What the simulator notes about itself in ``host.json`` on every answered read (how often each
#: profile rule answered): no part of the host, so a read-only command may advance it.
BOOKKEEPING_KEYS = ("answers", "rule_hits")


class ReadOnlyViolation(Exception):
    """A command asked for read-only (``RunRequest.read_only``) tried to change the simulated host."""


_read_only = threading.local()


@contextlib.contextmanager
def read_only(command: str) -> Iterator[None]:
    """While the block runs (in this thread), any change to a host's state raises ``ReadOnlyViolation``."""
    previous = getattr(_read_only, "command", None)
    _read_only.command = command
    try:
        yield
    finally:
        _read_only.command = previous


def refuse_change(action: str) -> None:
    """Raise ``ReadOnlyViolation`` when a read-only command is running in this thread; else nothing."""
    command = getattr(_read_only, "command", None)
    if command is not None:
        raise ReadOnlyViolation(f"a read-only command would {action}: {command}")


def _host_part(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in BOOKKEEPING_KEYS}


class StateError(Exception):
    """A path that escapes the host's tree, or a state document that cannot be read."""


class JsonDocument:
    """One JSON object on disk, edited under an exclusive lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_path = path.with_name(path.name + ".lock")
        #: The text last read and the file it came from (inode, mtime, size): simulated tools read
        #: their host's state on every call, and an unchanged file need not be opened again.
        self._seen: tuple[tuple[int, int, int], str] | None = None
        #: The document parsed from ``_seen``'s text, for ``snapshot``.
        self._parsed: tuple[tuple[int, int, int], dict[str, Any]] | None = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                # Held by another thread or process: wait without holding up the other simulated hosts.
                with waiting():
                    fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _current(self) -> tuple[tuple[int, int, int], str] | None:
        """The file's stamp (inode, mtime, size) and text now; None when there is no file."""
        try:
            info = os.stat(self.path)
            stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
            if self._seen is not None and self._seen[0] == stamp:
                return self._seen
            # Writes replace the file (a new inode), so a changed file never keeps its stamp.
            self._seen = (stamp, self.path.read_text(encoding="utf-8"))
            return self._seen
        except FileNotFoundError:
            return None

    def _parse(self, text: str) -> dict[str, Any]:
        try:
            data = json.loads(text or "{}")
        except ValueError as exc:
            raise StateError(f"mock state {self.path} is not valid JSON ({exc}); reset it with "
                             "'clusterctl mock reset'") from None
        if not isinstance(data, dict):
            raise StateError(f"mock state {self.path} is not a JSON object; reset it with 'clusterctl mock reset'")
        return data

    def snapshot(self) -> dict[str, Any]:
        """The document as ``read`` gives it, shared between callers until the file changes: for
        look-ups only, never to be changed (a simulated host answers dozens of them per command
        line, each of which parsed the document again)."""
        current = self._current()
        if current is None:
            return {}
        stamp, text = current
        parsed = self._parsed
        if parsed is not None and parsed[0] == stamp:
            return parsed[1]
        data = self._parse(text)
        self._parsed = (stamp, data)
        return data

    def read(self) -> dict[str, Any]:
        """A snapshot of the document ({} when it does not exist yet).

        No lock: every write replaces the file whole (``os.replace``), so a reader sees the old
        document or the new one, never half of one. Replayed commands read state on every call.
        """
        current = self._current()
        return self._parse(current[1]) if current is not None else {}

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, Any]]:
        """``with doc.edit() as data:`` change ``data`` in place; written back when the block ends.

        Written only when ``data`` changed: most edits only look (seeding an already seeded host).
        """
        with self._locked():
            data = self.read()
            guarded = getattr(_read_only, "command", None) is not None
            # Compared compactly (the C encoder); indented only when written.
            before = json.dumps(data, sort_keys=True)
            host_before = copy.deepcopy(_host_part(data)) if guarded else None
            yield data
            if guarded and _host_part(data) != host_before:
                refuse_change(f"change {self.path.name}")
            if json.dumps(data, sort_keys=True) == before and self.path.exists():
                return
            replace_file(self.path, json.dumps(data, indent=1, sort_keys=True), mode=0o600, durable=False)


class FileTree:
    """A host's filesystem: absolute host paths mapped under one folder.

    ``/etc/containerd/config.toml`` lives at ``<root>/etc/containerd/config.toml``. Paths are
    normalised lexically and may not leave the tree (``/../..`` stays at ``/``), and symbolic
    links inside the tree are never followed out of it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root_text = str(root)
        self._resolved_root: Path | None = None

    def _lexical_text(self, path: str) -> str:
        """``path`` normalised without touching the disk, as text: the simulator asks for thousands of paths a
        run (every program looked up in six bin folders), and string work costs a fraction of ``pathlib``'s."""
        if not path.startswith("/"):
            raise StateError(f"mock host paths are absolute; got {path!r}")
        parts: list[str] = []
        for part in path.split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part not in (".", ""):
                parts.append(part)
        return "/".join((self._root_text, *parts)) if parts else self._root_text

    def local(self, path: str) -> Path:
        """Where host path ``path`` lives on this machine."""
        text = self._lexical_text(path)
        if not self._has_link(text, last=True):
            return Path(text)
        # A symlink planted in the tree must not lead out of it.
        resolved = Path(text).resolve()
        if self._resolved_root is None:
            self._resolved_root = self.root.resolve()
        root = self._resolved_root
        if resolved != root and root not in resolved.parents:
            raise StateError(f"{path} leads out of the mock host's tree")
        return Path(text)

    def _has_link(self, text: str, *, last: bool) -> bool:
        """Whether a component of ``text`` below the tree's root (the last one too with ``last``) is a
        symbolic link. The simulator looks up thousands of paths a run, and only a path with a link
        in it can lead out of the tree: one ``lstat`` per component inside the tree (up to the first
        that does not exist) costs a fraction of resolving the whole path from ``/``."""
        if len(text) <= len(self._root_text):
            return False
        parts = text[len(self._root_text) + 1:].split("/")
        if not last:
            parts.pop()
        current = self._root_text
        for part in parts:
            current = f"{current}/{part}"
            try:
                mode = os.lstat(current).st_mode
            except (FileNotFoundError, NotADirectoryError):
                return False  # nothing below a missing component can be a link
            except OSError:
                return True  # cannot tell: resolve the path whole
            if stat.S_ISLNK(mode):
                return True
        return False

    def _stat(self, path: str, text: str | None = None) -> os.stat_result | None:
        """What is at ``path`` (links followed inside the tree), or None; ``StateError`` when a link
        on the way leads out of the tree. ``text``: ``path``'s place here, when known already."""
        text = text or self._lexical_text(path)
        try:
            found = os.lstat(text)
        except (FileNotFoundError, NotADirectoryError):
            # Nothing at the lexical place (not even a link): most of the simulator's look-ups are
            # for programs in bin folders a host does not have.
            return None
        if stat.S_ISLNK(found.st_mode) or self._has_link(text, last=False):
            self.local(path)
            try:
                return os.stat(text)
            except (FileNotFoundError, NotADirectoryError):
                return None  # a link to nothing
        return found

    def read(self, path: str) -> bytes | None:
        text = self._lexical_text(path)
        found = self._stat(path, text)
        if found is None:
            self.local(path)  # a missing file behind a link out of the tree is refused all the same
            return None
        if stat.S_ISDIR(found.st_mode):
            return None
        try:
            with open(text, "rb") as fh:
                return fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def read_inside(self, path: str) -> bytes | None:
        """``read``, and None too for a path that leads out of the tree (for readers that cannot fail)."""
        try:
            return self.read(path)
        except StateError:
            return None

    def write(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        refuse_change(f"write {path}")
        replace_file(self.local(path), data, mode=mode, durable=False)

    def create_exclusive(self, path: str, data: bytes) -> bytes | None:
        """Create ``path`` (and its folder) only if absent; None when created, else what is there."""
        refuse_change(f"create {path}")
        target = self.local(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return target.read_bytes()
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return None

    def exists(self, path: str) -> bool:
        return self._stat(path) is not None

    def is_file(self, path: str) -> bool:
        found = self._stat(path)
        return found is not None and stat.S_ISREG(found.st_mode)

    def is_dir(self, path: str) -> bool:
        found = self._stat(path)
        return found is not None and stat.S_ISDIR(found.st_mode)

    def mkdir(self, path: str, *, parents: bool = True) -> None:
        refuse_change(f"create the folder {path}")
        self.local(path).mkdir(parents=parents, exist_ok=parents)

    def remove(self, path: str, *, recursive: bool = False) -> bool:
        """Remove a file (or a folder with ``recursive``); False when there was nothing."""
        refuse_change(f"remove {path}")
        target = self.local(path)
        if target.is_dir() and not target.is_symlink():
            if not recursive:
                raise IsADirectoryError(path)
            shutil.rmtree(target)
            return True
        try:
            target.unlink()
        except FileNotFoundError:
            return False
        return True

    def listdir(self, path: str) -> list[str]:
        return sorted(p.name for p in self.local(path).iterdir())

    def glob(self, pattern: str) -> list[str]:
        """Host paths matching an absolute shell pattern (``/etc/sysctl.d/*.conf``), sorted."""
        rel = pattern.lstrip("/")
        if not rel:
            return ["/"]
        folder = rel.rpartition("/")[0]
        if folder and not any(c in folder for c in "*?[") and not os.path.isdir(f"{self._root_text}/{folder}"):
            return []  # the pattern's fixed folder is not there (``/usr/lib64/libnccl.so.*`` on Debian)
        return sorted("/" + str(p.relative_to(self.root)) for p in self.root.glob(rel))


class HostState(JsonDocument):
    """One mock host's persistent state: its ``host.json`` document, and its ``fs`` tree."""

    def __init__(self, folder: Path, name: str) -> None:
        super().__init__(folder / "host.json")
        self.folder = folder
        self.name = name
        self.fs = FileTree(folder / "fs")

    @property
    def seeded(self) -> bool:
        return self.path.exists()

    def values(self) -> dict[str, str]:
        """The ``set_state`` values rules have set so far."""
        raw = self.snapshot().get("values") or {}
        return {str(k): str(v) for k, v in raw.items()}

    def section(self, name: str) -> dict[str, Any]:
        """A copy of one section (``services``, ``packages``...); {} when absent."""
        value = self.snapshot().get(name)
        return dict(value) if isinstance(value, dict) else {}


class ClusterState(JsonDocument):
    """State shared by every host of one mock cluster (``cluster.json``)."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder / "cluster.json")


class MockCluster:
    """One mock cluster's state folder: its hosts and its shared state."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self.cluster = ClusterState(self.folder)

    def host(self, name: str) -> HostState:
        if not name or "/" in name or name in (".", ".."):
            raise StateError(f"not a usable mock host name: {name!r}")
        return HostState(self.folder / "hosts" / name, name)

    def reset(self, hosts: list[str] | None = None) -> list[str]:
        """Forget hosts' state (all of them and the cluster's when ``hosts`` is None); what was removed."""
        folders = [self.folder] if hosts is None else [self.host(name).folder for name in hosts]
        removed = [folder for folder in dict.fromkeys(folders) if folder.exists()]
        for folder in removed:
            shutil.rmtree(folder)
        return [str(folder) for folder in removed]
