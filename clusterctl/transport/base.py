"""The one small interface every way of reaching a host implements.

A transport runs shell commands on one host and moves files to and from it. It never
raises for a command that ran and exited non-zero (that is data: ``CommandResult``); it
raises ``TransportError`` when the host could not be asked at all (unreachable, refused
host key, authentication, timeout), with a ``FailureKind`` a user can act on.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host
    from clusterctl.secret import Secret
    from clusterctl.transport.output import OnLine


class FailureKind(str, Enum):
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "authentication failed"
    HOST_KEY_REFUSED = "host key refused"
    TIMED_OUT = "timed out"
    #: The run was interrupted (Ctrl-C) while this host was still working.
    INTERRUPTED = "interrupted"
    COMMAND_FAILED = "command failed"
    ERROR = "error"


class TransportError(Exception):
    def __init__(self, kind: FailureKind, message: str) -> None:
        from clusterctl.secret import mask_text

        self.kind = kind
        # A command line in a message may carry a secret someone put there by mistake.
        self.message = mask_text(message)
        super().__init__(f"{kind.value}: {self.message}")


@dataclass(frozen=True)
class CommandResult:
    command: str
    stdout: str
    stderr: str
    exit_code: int
    duration_s: float

    def __post_init__(self) -> None:
        from clusterctl.secret import mask_text

        # Results are printed, logged and saved: the command line never shows a secret.
        object.__setattr__(self, "command", mask_text(self.command))

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def stderr_tail(self, lines: int = 5) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


class Exclusive(NamedTuple):
    """What ``Transport.create_exclusive_then`` did: ``held`` is the file already there (``None``: this call
    created it), ``result`` the command's (``None`` where it did not run), ``made_folder`` whether this call
    made the file's folder (clusterctl's then, to remove once empty)."""

    held: bytes | None
    result: CommandResult | None
    made_folder: bool = False


@dataclass(frozen=True)
class RunRequest:
    """A command line and how to run it: ``Transport.run``'s arguments, spelled out once.

    Implementations receive it in ``execute``; wrappers (the fan-out's time budget) pass it on
    with one field changed (``dataclasses.replace``) instead of repeating every keyword.
    """

    command: str
    sudo: bool = False
    timeout: float | None = None
    env: Mapping[str, str] | None = None
    stdin: bytes | None = None
    #: Called with each output line as it arrives, masked (``LineSplitter``): what
    #: ``exec --stream`` prints. Called from the transport's reader thread(s), possibly for
    #: stdout and stderr at once; the result still holds the whole (capped) output.
    on_line: OnLine | None = None
    #: Asked through a read-only view (``clusterctl.host_reader``): the command must change nothing.
    #: A real host cannot tell and runs it; a simulated host refuses one that changes its state.
    read_only: bool = False
    #: Bytes of each stream the result keeps (head and tail, ``transport.output.CappedOutput``);
    #: None: ``CLUSTERCTL_MAX_OUTPUT``'s cap. A caller that reads the output through ``on_line``
    #: and keeps what it needs (``health``) asks for little here, so memory stays bounded.
    max_output: int | None = None


@dataclass(frozen=True)
class PutRequest:
    """A file to write and how: ``Transport.put``'s arguments, spelled out once (see ``write``)."""

    path: str
    data: bytes
    mode: int | None = None
    sudo: bool = False
    backup: bool = True
    owner: str | None = None


@dataclass(frozen=True)
class PutResult:
    path: str
    #: False when the file already held exactly these bytes (nothing written).
    changed: bool
    #: Where the previous content was kept, if there was any.
    backup_path: str | None = None


def env_prefix(env: Mapping[str, str] | None) -> str:
    """``export A='x' B='y'; `` with every name checked and every value quoted."""
    from clusterctl.inventory.values import ENV_NAME  # not at start-up: commands' --help import this module

    if not env:
        return ""
    parts = []
    for name, value in env.items():
        if not ENV_NAME.fullmatch(name):
            raise ValueError(f"not a valid environment variable name: {name!r}")
        parts.append(f"{name}={shlex.quote(str(value))}")
    return "export " + " ".join(parts) + "; "


#: Every command runs in the C locale: the parsers read what the tools print in it (``df``'s "Filesystem" header,
#: "No such file or directory", dpkg-query's "no packages found"), and a host whose locale is another language
#: (``LANG=zh_CN.UTF-8`` in /etc/default/locale, or sent by the SSH client) would print them translated.
PARSED_LOCALE = {"LC_ALL": "C"}
#: A user's own command (``clusterctl exec``), whose output no parser reads, runs in the host's own locale:
#: an empty LC_ALL is no setting (POSIX), so LANG and the LC_* the session has apply again (non-ASCII file
#: names, a Python without locale coercion, sort order), as with ssh, pdsh or clush.
HOST_LOCALE = {"LC_ALL": ""}
#: What sudo prints when it would have to ask for a password but may not (``sudo -n``).
_SUDO_NEEDS_PASSWORD = ("a password is required", "a terminal is required", "no askpass program")
#: Printed by the password wrapper when sudo did not take the password it was given.
SUDO_PASSWORD_REJECTED = "clusterctl: sudo did not accept the sudo password"


def wrap_command(
    command: str, *, sudo: bool = False, env: Mapping[str, str] | None = None, sudo_password: bool = False
) -> str:
    """The exact shell line a transport runs for ``command``.

    The line sets ``LC_ALL=C`` first (``PARSED_LOCALE``), for sudo as for the command. With sudo the whole
    line, environment included, runs under ``sudo -n sh -c`` so that a password prompt can never hang a fleet
    run (``-n`` fails instead of asking).

    With ``sudo_password`` the first line of the command's stdin is the password (the
    transport prepends it, see ``Transport.command_line``). The wrapper reads it into a shell
    variable (never an argument: ``ps`` on the host cannot show it), hands it to
    ``sudo -S -v`` only when sudo really asks (a NOPASSWD rule or cached credentials need
    none), then runs the command with ``sudo -n``, so the rest of stdin reaches the command
    and never sudo's prompt. Where sudo keeps no credentials between calls
    (``timestamp_timeout=0``) the password is piped to ``sudo -S`` once more, ahead of stdin.
    """
    line = env_prefix({**PARSED_LOCALE, **(env or {})}) + command
    if not sudo:
        return line
    # sudo's own refusals are translated too ("sudo: 需要密码" for "a password is required"), and
    # sudo_refusal reads them in English: sudo runs in the C locale as well, not only the command.
    inner = "sudo -n sh -c " + shlex.quote(line)
    if not sudo_password:
        return env_prefix(PARSED_LOCALE) + inner
    piped = "sudo -S -p '' sh -c " + shlex.quote(line)
    return (
        env_prefix(PARSED_LOCALE) + "IFS= read -r CLUSTERCTL_SUDO_PW; "
        "if ! sudo -n true 2>/dev/null; then "
        "printf '%s\\n' \"$CLUSTERCTL_SUDO_PW\" | sudo -S -v -p '' 2>/dev/null "
        f"|| {{ echo {shlex.quote(SUDO_PASSWORD_REJECTED)} >&2; exit 1; }}; fi; "
        f"if sudo -n true 2>/dev/null; then CLUSTERCTL_SUDO_PW=; exec {inner}; fi; "
        f"{{ printf '%s\\n' \"$CLUSTERCTL_SUDO_PW\"; CLUSTERCTL_SUDO_PW=; exec cat; }} | {piped}"
    )


def sudo_refusal(result: CommandResult, *, had_password: bool) -> TransportError | None:
    """A clear error when sudo itself (not the command) refused, naming the fix."""
    if result.exit_code == 0:
        return None
    text = result.stderr.lower()
    if SUDO_PASSWORD_REJECTED.lower() in text:
        return TransportError(
            FailureKind.AUTH_FAILED,
            "sudo did not accept the sudo password given (--ask-sudo-pass, CLUSTERCTL_SUDO_PASS "
            "or CLUSTERCTL_SUDO_PASS_FILE); check it, or that this user may use sudo there",
        )
    if any(marker in text for marker in _SUDO_NEEDS_PASSWORD) and "sudo" in text:
        if had_password:
            return TransportError(
                FailureKind.AUTH_FAILED,
                "sudo asks for a password on every call there (timestamp_timeout=0?) and did not "
                "take the one given",
            )
        return TransportError(
            FailureKind.AUTH_FAILED,
            "sudo needs a password there; rerun with --ask-sudo-pass (or set CLUSTERCTL_SUDO_PASS, "
            "or CLUSTERCTL_SUDO_PASS_FILE naming a file of mode 0600), or allow this user NOPASSWD sudo",
        )
    return None


def atomic_write_script(
    path: str, *, mode: int | None, backup: bool, owner: str | None = None
) -> str:
    """Shell that writes stdin to ``path`` atomically, keeping what was there.

    - A symlink is written through: its final target is replaced, the link stays a link.
    - The data goes to a ``mktemp`` file in the target's folder (so ``mv`` is a rename on one
      file system); a trap removes it on any failure (a full disk, a signal), so no
      temporary file is ever left behind.
    - The new file gets the old file's mode and owner unless ``mode``/``owner`` are given
      (new files: ``mode`` or 0644, owned by whoever writes).
    - The backup is named ``PATH.bak.<UTC timestamp>.<random>`` (made by ``mktemp``), so
      two runs in the same second never share one, and keeps the old mode and owner.
    - Writers of files in one folder are serialised with ``flock`` on the folder where
      ``flock`` exists, so two concurrent writers each back up what the other left.
    - Nothing is replaced when the content is already there.

    It prints ``unchanged`` or ``changed``, and ``backup:PATH`` when it kept the old content.
    """
    q = shlex.quote(path)
    keep = ": ; "
    if backup:
        keep = (
            'bak=$(mktemp "$target.bak.$(date -u +%Y%m%d%H%M%S).XXXXXX"); '
            'cp -p "$target" "$bak"; echo "backup:$bak"; '
        )
    new_mode = f"{mode:o}" if mode is not None else "644"
    set_mode = f'chmod {mode:o} "$tmp"; ' if mode is not None else ""
    set_owner = f'chown {shlex.quote(owner)} "$tmp"; ' if owner else ""
    return (
        "set -e; "
        f"target={q}; "
        'if [ -L "$target" ]; then target=$(readlink -f -- "$target"); fi; '
        'dir=$(dirname -- "$target"); '
        # (A folder this user cannot read cannot be locked: the write goes on unlocked.)
        'if command -v flock >/dev/null 2>&1 && [ -d "$dir" ] && [ -r "$dir" ]; then exec 9<"$dir"; '
        'flock -x -w 300 9 || { echo "clusterctl: another writer of $target held the lock for 300s" >&2; exit 75; }; '
        "fi; "
        'tmp=$(mktemp "$dir/.$(basename -- "$target").clusterctl-tmp.XXXXXX"); '
        "trap 'rm -f \"$tmp\"' EXIT; trap 'exit 143' TERM HUP INT; "
        'cat > "$tmp"; '
        'if [ -f "$target" ]; then '
        'if cmp -s "$tmp" "$target"; then echo unchanged; exit 0; fi; '
        'chmod "$(stat -c %a -- "$target")" "$tmp"; '
        'chown "$(stat -c %u:%g -- "$target")" "$tmp" 2>/dev/null || '
        '{ [ "$(stat -c %u:%g -- "$target")" = "$(id -u):$(id -g)" ] || '
        '{ echo "clusterctl: cannot keep the owner of $target (needs sudo)" >&2; exit 1; }; }; '
        f"{keep}"
        f'else chmod {new_mode} "$tmp"; fi; '
        f"{set_mode}{set_owner}"
        'mv -f "$tmp" "$target"; echo changed'
    )


class Transport:
    """Reaches one host. Use as a context manager so connections are closed.

    An implementation overrides ``execute`` (and ``write`` when it keeps files itself); callers
    use ``run``, ``put``, ``get``: their keywords are spelled out once, here.
    """

    #: The sudo password (``--ask-sudo-pass``); ``None``: sudo runs with ``-n`` and never asks.
    sudo_password: Secret | None = None

    def __init__(self, host: Host) -> None:
        self.host = host

    def run(
        self,
        command: str,
        *,
        sudo: bool = False,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        on_line: OnLine | None = None,
        max_output: int | None = None,
    ) -> CommandResult:
        """Run a shell command line. Values in it must already be quoted by the caller.

        ``timeout`` is this command's own limit: when it passes, the command is stopped on
        the host (not only abandoned) and ``TransportError(TIMED_OUT)`` is raised.
        ``on_line(stream, line)`` gets each line of output as it arrives (see ``RunRequest``);
        ``max_output``: bytes per stream the result keeps.
        """
        return self.execute(RunRequest(command, sudo, timeout, env, stdin, on_line, max_output=max_output))

    def execute(self, request: RunRequest) -> CommandResult:
        """Run ``request``: what each transport implements (``run`` is its one public spelling)."""
        raise NotImplementedError(f"{type(self).__name__} runs no commands")

    def command_line(self, request: RunRequest, *, sudo: bool) -> tuple[str, bytes | None]:
        """The line to run for ``request`` and the stdin to send, with the sudo password wired in when there is one."""
        password = self.sudo_password if sudo else None
        line = wrap_command(request.command, sudo=sudo, env=request.env, sudo_password=password is not None)
        if password is not None:  # the password's line first, as the wrapper reads it
            return line, password.reveal().encode() + b"\n" + (request.stdin or b"")
        return line, request.stdin

    def finish(self, command: str, out: bytes, err: bytes, exit_code: int, start: float, *, sudo: bool
               ) -> CommandResult:
        """The result of a command that ran (its output decoded, ``start``: ``time.monotonic()`` when it
        began); raises when sudo itself refused (a password needed or rejected)."""
        result = CommandResult(command, out.decode(errors="replace"), err.decode(errors="replace"), exit_code,
                               round(time.monotonic() - start, 4))
        if sudo:
            refusal = sudo_refusal(result, had_password=self.sudo_password is not None)
            if refusal is not None:
                raise refusal
        return result

    def burst(self) -> AbstractContextManager[None]:
        """``with transport.burst():`` the commands sent inside come one right after another, the
        caller waiting on nothing else in between (a survey reading a host's facts). A transport
        may hold on to what it needs between them: the in-process simulator keeps its turn
        (``clusterctl.mock.turns``) instead of handing it to another host at every command. Only
        for such runs: code that waits on another host inside one could hold that host up."""
        return nullcontext()

    def stop_remote(self) -> None:
        """Ask every command this transport is running to stop (SIGTERM on the host), without waiting.

        Used by the fan-out on Ctrl-C before ``close``; safe to call from another thread.
        """

    def put(
        self,
        path: str,
        data: bytes,
        *,
        mode: int | None = None,
        sudo: bool = False,
        backup: bool = True,
        owner: str | None = None,
    ) -> PutResult:
        """Write ``data`` to ``path`` atomically, keeping mode, owner, symlinks, and a backup.

        ``mode``/``owner`` (``"user:group"``) set the file's; by default an existing file keeps
        its own and a new one gets 0644. See ``atomic_write_script`` for the details.
        """
        return self.write(PutRequest(path, data, mode, sudo, backup, owner))

    def write(self, request: PutRequest) -> PutResult:
        """Carry out ``put``: one shell script through ``execute``; transports with their own files override it."""
        path, data, sudo = request.path, request.data, request.sudo
        script = atomic_write_script(path, mode=request.mode, backup=request.backup, owner=request.owner)
        result = self.run("sh -c " + shlex.quote(script), sudo=sudo, stdin=data)
        if not result.ok:
            raise _failed("write", path, result)
        kept = [line[len("backup:") :] for line in result.stdout.splitlines() if line.startswith("backup:")]
        return PutResult(path=path, changed="changed" in result.stdout.split(), backup_path=kept[-1] if kept else None)

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        """Content of ``path``, byte for byte, or ``None`` when there is no such file.

        The file travels base64-encoded (output is text), so any byte survives; a host
        without ``base64`` gets ``cat`` and UTF-8 text.
        """
        import base64
        import binascii

        q = shlex.quote(path)
        result = self.run(
            f"if [ ! -e {q} ]; then exit 3; fi; if command -v base64 >/dev/null 2>&1; then base64 < {q}; "
            f"else echo plain; cat {q}; fi",
            sudo=sudo,
        )
        if result.exit_code == 3:
            return None
        if not result.ok:
            raise _failed("read", path, result)
        if result.stdout.startswith("plain\n"):
            return result.stdout[len("plain\n") :].encode()
        try:
            return base64.b64decode("".join(result.stdout.split()), validate=True)
        except (binascii.Error, ValueError):
            raise TransportError(
                FailureKind.COMMAND_FAILED,
                f"could not read {path}: the file is larger than the output kept per command "
                f"(CLUSTERCTL_MAX_OUTPUT) or came back damaged",
            ) from None

    def create_exclusive(self, path: str, data: bytes, *, sudo: bool = False) -> bytes | None:
        """Create ``path`` holding ``data`` only if it does not exist (``O_EXCL``: a lock file).

        Returns ``None`` when this call created it, else the content already there. Two callers
        racing for the same path never both get ``None``. The content is written to a temporary
        file first and hard-linked into place (``ln`` fails when the path exists), so the path
        never exists empty or half-written: a run cut off here (Ctrl-C) leaves either nothing
        or a whole lock it can recognise as its own and release.
        """
        return self.create_exclusive_then(path, data, None, sudo=sudo).held

    def create_exclusive_then(self, path: str, data: bytes, command: str | None, *, sudo: bool = False) -> Exclusive:
        """``create_exclusive``, and where this call created the file, ``command`` right after it in
        the same round trip (a run's lock and its first reads), under the same ``sudo``; and whether
        this call made the file's folder, which its maker alone may remove (once empty).
        """
        q = shlex.quote(path)
        folder = shlex.quote(path.rsplit("/", 1)[0] or "/")
        then = f"; {command}" if command else ""
        # The folder is made again if it went between (its maker removed it, empty, as it gave its lock back).
        script = (f"made=; for try in 1 2 3; do [ -d {folder} ] || {{ mkdir -p {folder} && made=' folder'; }}; "
                  f"tmp=$(mktemp {folder}/.clusterctl-new.XXXXXX) && break; done && "
                  "trap 'rm -f \"$tmp\"' EXIT && cat > \"$tmp\" && "
                  f"if ln \"$tmp\" {q} 2>/dev/null; then echo \"created$made\"{then}; else cat {q}; exit 3; fi")
        result = self.run("sh -c " + shlex.quote(script), sudo=sudo, stdin=data)
        said, _, rest = result.stdout.partition("\n")
        created = said in ("created", "created folder")
        if not created and result.exit_code == 3:
            return Exclusive(result.stdout.encode(), None)
        if not created or (command is None and (not result.ok or rest.strip())):
            raise _failed("create", path, result)
        ran = CommandResult(command, rest, result.stderr, result.exit_code, result.duration_s) if command else None
        return Exclusive(None, ran, made_folder=said == "created folder")

    def remove(self, path: str, *, sudo: bool = False) -> None:
        """Remove ``path`` if it exists."""
        result = self.run(f"rm -f {shlex.quote(path)}", sudo=sudo)
        if not result.ok:
            raise _failed("remove", path, result)

    def close(self) -> None:
        """Release the connection, if any. Safe to call twice and from another thread."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _failed(what: str, path: str, result: CommandResult) -> TransportError:
    """``could not write PATH (exit N): <stderr's last lines>``: a file primitive's command failed."""
    return TransportError(
        FailureKind.COMMAND_FAILED, f"could not {what} {path} (exit {result.exit_code}): {result.stderr_tail()}"
    )


#: Opens a transport to a host within a time limit (seconds); used by the fan-out.
Connector = Callable[["Host", float], Transport]
