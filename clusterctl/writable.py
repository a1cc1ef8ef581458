"""Check where results will be written before any host is touched.

A benchmark that runs for ten minutes and then cannot save its plot has wasted the ten
minutes; these checks run first and fail as usage errors (exit 2) that say why.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping
from pathlib import Path

from clusterctl.errors import UsageError

_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]")


def state_home() -> Path:
    """``$XDG_STATE_HOME/clusterctl`` (default ``~/.local/state/clusterctl``): where clusterctl keeps its state."""
    xdg = os.environ.get("XDG_STATE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state") / "clusterctl"


def state_dir(explicit: str | None = None) -> Path:
    """The state folder every run record goes in (progress, undo journals, the receiver's files):
    ``--state-dir``, else ``$CLUSTERCTL_STATE_DIR``, else ``state_home()``."""
    chosen = explicit or os.environ.get("CLUSTERCTL_STATE_DIR")
    return Path(chosen).expanduser() if chosen else state_home()


def make_folder(folder: Path, label: str) -> None:
    """Create ``folder`` and its parents (fine if it exists); ``label`` leads the usage error."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{label}: exists and is not a folder.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{label}: cannot create the folder: {exc.strerror or exc}.") from None


def writable_dir(path: str | Path, option: str, *, why: str = "") -> Path:
    """``path`` as a folder that exists (created if needed) and can be written to; ``why`` says, in the
    error, what an unwritable one would cost."""
    folder = Path(path).expanduser()
    make_folder(folder, f"{option} {path}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: the folder is not writable{'; ' + why if why else ''}.")
    return folder


def writable_file(path: str | Path, option: str) -> Path:
    """``path`` as a file that can be created or replaced: its folder exists and is writable."""
    file = Path(path).expanduser()
    if str(path) == "-":
        return file
    if file.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name.")
    parent = file.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: the folder {parent} does not exist.")
    if not os.access(parent, os.W_OK | os.X_OK) or (file.exists() and not os.access(file, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable.")
    return file


def host_file_name(host: str, suffix: str) -> str:
    """A file name for a host's output that cannot leave the folder (inventory names are untrusted), and that no
    other host's name gives: each character outside the safe ones (``%`` too) written as ``%XX``."""
    name = _UNSAFE.sub(lambda m: "".join(f"%{byte:02X}" for byte in m.group().encode()), host).lstrip(".") or "_"
    return name + suffix


def replace_file(path: Path, data: str | bytes, *, mode: int | None = None, parents: bool = True,
                 durable: bool = True) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) whole: the one writer of local files.

    Run records (progress, journals, confirmations) decide what a later run skips, and other programs
    read the rest (Grafana's provisioner, a job sourcing tuned settings), so a reader must see the old
    file or the new one, never half of one: a temporary file beside it, flushed to disk, then renamed
    over it. On any failure (a full disk, a folder in the way, Ctrl-C) the temporary is removed and the
    old file stays as it was. ``mode``: the new file's exact mode (0o600: its owner's alone); None: the
    usual one, as the umask makes it. ``parents``: create the folders above it. ``durable``: flush it to
    disk before the rename (False for the simulator's state, rewritten thousands of times a run: a
    crash loses nothing worth an ``fsync`` each).
    """
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = _temporary_beside(path, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _temporary_beside(path: Path, permissions: int) -> tuple[int, Path]:
    """A new file ``.NAME.RANDOM.tmp`` in ``path``'s folder, opened for writing; never an existing one."""
    if not path.name:  # '/' or '.': a folder, as the rename onto it would say
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    while True:
        temporary = path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, permissions), temporary
        except FileExistsError:
            continue


def write_files(files: Mapping[str, str], folder: str | Path) -> list[Path]:
    """Write each relative name's text under ``folder`` (subfolders created), each through ``replace_file``.
    ``folder`` is the ``--out DIR`` a user gave (dashboards, artifacts, tune-nccl): a file there, a folder
    where one of its files goes, or a full disk, is exit 2."""
    make_folder(Path(folder), f"--out {folder}")
    written: list[Path] = []
    for name, text in files.items():
        path = Path(folder) / name
        try:
            replace_file(path, text)
        except OSError as exc:
            # A folder where the file goes, a file where a folder above it goes, a full disk: the user's to mend.
            raise UsageError(f"--out {folder}: cannot write {path}: {exc.strerror or exc}.") from None
        written.append(path)
    return written
