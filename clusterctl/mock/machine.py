"""One mock host: a profile's rules over simulated tools, on a persistent state folder.

``MockMachine.run_line`` answers a whole command line (the in-process mock transport);
``MockMachine.run_argv`` answers one program call (the sshd mock hosts' replay, where a real
shell already split the line). Both pick an answer in the same order:

1. the first profile rule that matches (its ``when_state``, ``skip`` and ``times`` honoured;
   counts and ``set_state`` values kept in the host's state, so they last between processes);
2. the simulated tool of that name, when the host has it (``clusterctl.mock.tools``): the file
   utilities always (in-process), the stateful machine tools only when the profile says
   ``simulate: true``;
3. ``sh: 1: TOOL: not found``, exit 127.

In-process, a line no rule matches as a whole is run by the small shell
(``clusterctl.mock.shell``), which applies the same order to each program in it.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import shlex
import shutil
import threading
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import Any

from clusterctl.mock.profile import Profile, Rule
from clusterctl.mock.shell import Shell
from clusterctl.mock.state import STATE_VERSION, ClusterState, HostState, MockCluster, StateError
from clusterctl.mock.tools import BIN_DIRS, FILE_TOOLS, tool_module
from clusterctl.mock.tools import packages as db
from clusterctl.mock.tools.base import ToolContext, ToolResult, UsageError, usage_error
from clusterctl.mock.turns import pause
from clusterctl.wording import seconds

#: Folders every Debian/Ubuntu host has; files written elsewhere need their folder made first.
SKELETON = (
    "/etc/apt/sources.list.d", "/etc/apt/keyrings", "/etc/apt/preferences.d", "/etc/default", "/etc/profile.d",
    "/etc/sysctl.d", "/etc/modules-load.d", "/etc/modprobe.d", "/etc/systemd/system", "/etc/security/limits.d",
    "/etc/ssl/certs", "/usr/local/bin", "/usr/local/sbin", "/usr/lib/sysctl.d", "/usr/share/keyrings", "/opt",
    "/root", "/home", "/tmp", "/var/lib", "/var/log", "/var/tmp", "/run",
)


class SimulatedFailure(Exception):
    """A rule's ``fail:``: the transport reports this failure kind instead of an answer."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@functools.lru_cache(maxsize=4096)
def command_lines(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The command lines a user may have typed for this argv, most literal first.

    Rules are written as users type them (``nvidia-smi topo -m``); arguments that needed
    quoting are tried both quoted and bare, since the shell removed the quotes. Kept for the argvs
    seen lately: a fleet's hosts run the same programs with the same arguments, and quoting each
    argument again for every host cost more than the rule look-up.
    """
    quoted = shlex.join(argv)
    bare = " ".join(argv)
    return (quoted,) if quoted == bare else (quoted, bare)


def initial_state(profile: Profile) -> dict[str, Any]:
    """The host's state document on first use, from the profile's ``machine:`` section."""
    machine = profile.machine
    raw_packages = machine.get("packages") or {}
    packages = {str(name): {"version": str(version)} for name, version in (raw_packages.get("installed") or {}).items()}
    services: dict[str, Any] = {}
    for name, spec in (machine.get("services") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        services[str(name)] = {
            "active": "active" if spec.get("active", False) is True else str(spec.get("active") or "inactive"),
            "enabled": "enabled" if spec.get("enabled", False) is True else str(spec.get("enabled") or "disabled"),
        }
    modules = machine.get("modules") or {}
    return {
        "version": STATE_VERSION,
        "profile": str(profile.root),
        "values": {},
        "rule_hits": {},
        "answers": {},
        "services": services,
        "packages": packages,
        "holds": [str(name) for name in raw_packages.get("held") or []],  # as apt-mark keeps them
        "modules": [str(m) for m in modules.get("loaded") or []],
        "sysctl": {str(k): str(v) for k, v in (machine.get("sysctl") or {}).items()},
        "swap": list(machine.get("swap") or []),
    }


@dataclass(eq=False, repr=False)
class MockMachine:
    """A profile played on a host state; see the module docstring for the answering order."""

    profile: Profile
    host: HostState
    cluster: ClusterState
    _: KW_ONLY
    host_name: str
    #: In-process the file tools (cat, test, mkdir...) are simulated; on sshd hosts the real ones run.
    shell_builtins: bool = True
    #: Per thread: the rule counts taken during the current command line.
    _call: threading.local = field(default_factory=threading.local, init=False, repr=False)

    def __post_init__(self) -> None:
        self.seed()

    @classmethod
    def open(cls, profile: Profile, state_folder: Path | str, host_name: str, *,
             shell_builtins: bool = True) -> MockMachine:
        cluster = MockCluster(state_folder)
        return cls(profile, cluster.host(host_name), cluster.cluster, host_name=host_name,
                   shell_builtins=shell_builtins)

    @property
    def hostname(self) -> str:
        return self.profile.hostname or self.host_name

    # -- state ---------------------------------------------------------------------------

    def seed(self) -> None:
        """Create the host's state from the profile on first use (or after the profile changed)."""
        if self._seeded(self.host.snapshot()):
            return  # a snapshot says so (writes are atomic): no lock taken, nothing written
        with self.host.edit() as data:
            if self._seeded(data):
                return
            if data and self.host.fs.root.exists():
                # Pointed at another profile: a different machine, so start it afresh.
                shutil.rmtree(self.host.fs.root)
            data.clear()
            data.update(initial_state(self.profile))
            for folder in SKELETON:
                self.host.fs.mkdir(folder)
            for path, content in self.profile.files.items():
                self.host.fs.write(path, content)
            self._seed_packages(data)

    def _seeded(self, data: dict[str, Any]) -> bool:
        return data.get("profile") == str(self.profile.root) and data.get("version") == STATE_VERSION

    def _seed_packages(self, data: dict[str, Any]) -> None:
        """Packages installed at first boot bring their files and (running) services, as after apt."""
        ctx = self.context([], b"", {})
        repo = db.repository(ctx)
        services = data.setdefault("services", {})
        for name, entry in (data.get("packages") or {}).items():
            package = db.package(repo, name)
            db.install_files(ctx, package, str(entry.get("version")))
            for unit in package.units:
                services.setdefault(unit, {"active": "active", "enabled": "enabled"})

    # -- rules ---------------------------------------------------------------------------

    def _take_rule(self, lines: Sequence[str]) -> tuple[Rule | None, int]:
        """Under the state lock: the first rule that applies now (counting skips, ``times`` and
        cycling answers) and how many times it answered before; state it sets is stored."""
        chosen: Rule | None = None
        count = 0
        with self.host.edit() as data:
            values = {str(k): str(v) for k, v in (data.get("values") or {}).items()}
            hits = data.setdefault("rule_hits", {})
            counted: dict[int, int] | None = getattr(self._call, "counted", None)
            for index in self.profile.rules_matching(list(lines)):
                rule = self.profile.rules[index]
                if not rule.state_allows(values):
                    continue
                seen = int(hits.get(str(index), 0))
                if rule.skip or rule.times is not None:
                    # One command line counts once per rule, even when the rule is tried on the
                    # whole line and again on the program inside it.
                    if counted is not None and index in counted:
                        seen = counted[index]
                    else:
                        hits[str(index)] = seen + 1
                        if counted is not None:
                            counted[index] = seen
                    if seen < rule.skip or (rule.times is not None and seen >= rule.skip + rule.times):
                        continue
                chosen = rule
                answers = data.setdefault("answers", {})
                count = int(answers.get(str(index), 0))
                answers[str(index)] = count + 1
                if not rule.fail:
                    data.setdefault("values", {}).update(dict(rule.set_state))
                break
        return chosen, count

    def _first_match(self, lines: Sequence[str]) -> Rule | None:
        """The first rule answering any of ``lines`` in the current state (read only if a rule asks)."""
        values: dict[str, str] | None = None
        for index in self.profile.rules_matching(list(lines)):
            rule = self.profile.rules[index]
            if rule.when_state:
                values = self.host.values() if values is None else values
                if not rule.state_allows(values):
                    continue
            return rule
        return None

    def answer_rule(self, lines: Sequence[str], *, timeout: float | None = None) -> ToolResult | None:
        """The answer of the first rule matching any of ``lines``, or None when none applies."""
        first = self._first_match(lines)
        if first is None:
            return None
        # A plain recorded answer changes no state: no lock, no write (survey replays dozens of
        # these per host).
        chosen, count = (first, 0) if first.replays_plainly else self._take_rule(lines)
        if chosen is None:
            return None
        if chosen.delay_s:
            if timeout is not None and chosen.delay_s > timeout:
                pause(timeout)
                raise SimulatedFailure("timed out", f"no answer within {seconds(timeout)}")
            pause(chosen.delay_s)
        if chosen.fail:
            raise SimulatedFailure(chosen.fail, f"{self.host_name}: simulated failure")
        stdout = chosen.stdouts[count % len(chosen.stdouts)]
        if chosen.recorded_at is not None:  # the recording only: what was logged since is dated now
            stdout = redate(stdout, chosen.recorded_at)
        since = self.host.fs.read_inside(chosen.append_file) if chosen.append_file else None
        if since:
            stdout += since.decode("utf-8", errors="replace")
        return ToolResult(stdout, chosen.stderr, chosen.exit_code)

    # -- tools ---------------------------------------------------------------------------

    def _tree_binary(self, name: str) -> str | None:
        for folder in BIN_DIRS:
            try:
                if self.host.fs.is_file(f"{folder}/{name}"):
                    return f"{folder}/{name}"
            except StateError:
                continue
        return None

    def simulates(self, name: str) -> bool:
        """Whether a simulated tool answers ``name`` here.

        The file utilities (``cat``, ``test``, ``mkdir``...) serve the host's tree in-process; the
        stateful machine tools (``systemctl``, ``apt-get``, ``kubeadm``...) only on a profile that
        says ``simulate: true``: any other profile answers with its recordings alone, so that a
        replayed host never answers from the simulation instead.
        """
        if tool_module(name) is None:
            return False
        return self.shell_builtins if name in FILE_TOOLS else self.profile.simulate

    def _simulated_here(self, name: str) -> bool:
        """Whether the simulated tool ``name`` answers on this host: simulated here, and shipped by
        no package (``cat``, ``uname``...) or by one that is installed."""
        module = tool_module(name)
        if module is None or not self.simulates(name):
            return False
        packages: tuple[str, ...] = getattr(module, "PACKAGES", ())
        installed = self.host.snapshot().get("packages") or {}
        return not packages or any(p in installed for p in packages)

    def _present(self, name: str) -> bool:
        """``has_tool(name) is not None``, without finding where: a simulated tool that answers here
        needs no look-up in the six bin folders."""
        return self._simulated_here(name) or self._tree_binary(name) is not None or name in self.profile.tool_names

    def has_tool(self, name: str) -> str | None:
        """Where the host has a program ``name`` (its path), or None."""
        found = self._tree_binary(name)
        if found:
            return found
        return f"/usr/bin/{name}" if self._simulated_here(name) or name in self.profile.tool_names else None

    def context(self, argv: list[str], stdin: bytes, env: dict[str, str], cwd: str = "/root") -> ToolContext:
        return ToolContext(argv=argv, stdin=stdin, env=env, host=self.host, cluster=self.cluster,
                           host_name=self.host_name, hostname=self.hostname, machine=self.profile.machine,
                           run=lambda line: self.run_line(line), cwd=cwd)

    def run_tool(self, argv: list[str], stdin: bytes = b"", env: dict[str, str] | None = None,
                 cwd: str = "/root") -> ToolResult | None:
        """The simulated tool's answer, or None when the host has no such program."""
        module = tool_module(argv[0]) if argv else None
        if module is None or not self.simulates(argv[0]) or not self._present(argv[0]):
            return None
        if not self.shell_builtins and _reads_stdin(argv):
            # On an sshd host the replay gets no stdin for file utilities: the real cat copies
            # it (``cat > FILE`` of put and of the bootstrap lock).
            return None
        ctx = self.context(list(argv), stdin, dict(env or {}), cwd)
        try:
            result: ToolResult = module.run(ctx)
        except UsageError as exc:
            result = usage_error(argv[0], exc)
        # What the tool logged along the way (kubeadm's klog warnings) comes before its answer's own stderr.
        return replace(result, stderr="".join(ctx.logged) + result.stderr)

    # -- entry points --------------------------------------------------------------------

    def run_argv(self, argv: Sequence[str], stdin: bytes = b"", env: dict[str, str] | None = None,
                 *, timeout: float | None = None, cwd: str = "/root") -> ToolResult:
        """One program call: a rule, else the simulated tool, else "not found" (exit 127)."""
        argv = list(argv)
        answer = self.answer_rule(command_lines(tuple(argv)), timeout=timeout)
        if answer is not None:
            return answer
        result = self.run_tool(argv, stdin, env, cwd)
        if result is not None:
            return result
        return ToolResult("", f"sh: 1: {argv[0] if argv else ''}: not found\n", 127)

    def run_line(self, line: str, stdin: bytes = b"", env: dict[str, str] | None = None,
                 *, timeout: float | None = None) -> ToolResult:
        """A whole shell line: a rule for the whole line, else the mock shell runs it."""
        outermost = getattr(self._call, "counted", None) is None
        if outermost:
            self._call.counted = {}
        try:
            return self._run_line(line, stdin, env, timeout=timeout)
        finally:
            if outermost:
                self._call.counted = None

    def _run_line(self, line: str, stdin: bytes, env: dict[str, str] | None, *, timeout: float | None) -> ToolResult:
        answer = self.answer_rule([line], timeout=timeout)
        if answer is not None:
            return answer

        def dispatch(argv: list[str], data: bytes, environ: dict[str, str], shell: Shell) -> tuple[bytes, bytes, int]:
            if argv[:2] == ["command", "-v"]:
                where = self.has_tool(argv[2])
                return ((where + "\n").encode(), b"", 0) if where else (b"", b"", 1)
            result = self.run_argv(argv, data, environ, timeout=timeout, cwd=shell.cwd)
            return result.stdout.encode(), result.stderr.encode(), result.exit_code

        def write(path: str, data: bytes, append: bool) -> None:
            parent = path.rsplit("/", 1)[0] or "/"
            try:
                if not self.host.fs.is_dir(parent):
                    raise OSError(2, "Directory nonexistent")
                old = self.host.fs.read(path) if append else None
                self.host.fs.write(path, (old or b"") + data)
            except StateError as exc:
                raise OSError(str(exc)) from None

        def glob(pattern: str) -> list[str]:
            try:
                return self.host.fs.glob(pattern)
            except (StateError, ValueError):
                return []

        shell = Shell(dispatch, env=dict(env or {}), glob=glob, read_file=self.host.fs.read_inside, write_file=write)
        out, err, code = shell.run(line, stdin)
        return ToolResult(out.decode(errors="replace"), err.decode(errors="replace"), code)


def _reads_stdin(argv: Sequence[str]) -> bool:
    """Whether this ``cat`` copies its stdin (no file operand, or ``-``)."""
    operands = [a for a in argv[1:] if a == "-" or not a.startswith("-")]
    return argv[0] == "cat" and (not operands or "-" in operands)


_ISO_STAMP = re.compile(r"\b(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})([+-]\d{2}:?\d{2})")


def redate(text: str, recorded_at: dt.datetime) -> str:
    """``text`` with each ISO timestamp (journalctl's short-iso) moved by the time since ``recorded_at``."""
    shift = dt.datetime.now(dt.timezone.utc) - recorded_at

    def moved(match: re.Match[str]) -> str:
        try:
            stamp = dt.datetime.strptime(match.group(1) + match.group(2).replace(":", ""), "%Y-%m-%dT%H:%M:%S%z")
        except ValueError:
            return match.group(0)
        return (stamp + shift).strftime("%Y-%m-%dT%H:%M:%S") + match.group(2)

    return _ISO_STAMP.sub(moved, text)
