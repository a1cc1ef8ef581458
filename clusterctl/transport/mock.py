"""A host that replays a recorded profile (see CONTRIBUTING.md / README for the format).

Used by tests, the demo inventory and CI dry-runs: no network, no GPU. The profile maps
command lines to recorded outputs; files written with ``put`` and state set by commands
are remembered for the life of the transport so later reads see them.
"""

from __future__ import annotations

import re
import shlex
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.errors import UsageError
from clusterctl.secret import mask_text
from clusterctl.transport.base import CommandResult, FailureKind, PutResult, Transport, TransportError, env_prefix

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host

PROFILE_FILE = "profile.yaml"
_RULE_KEYS = {"match", "regex", "stdout", "stdout_text", "stderr", "stderr_text", "exit", "delay", "set_state",
              "when_state", "fail"}


@dataclass(frozen=True)
class Rule:
    match: str | None
    regex: re.Pattern[str] | None
    #: One output, or several that successive matches cycle through (run-to-run noise).
    stdouts: tuple[str, ...]
    stderr: str
    exit_code: int
    delay_s: float
    set_state: tuple[tuple[str, str], ...]
    when_state: tuple[tuple[str, str], ...]
    #: Simulate a transport failure (``unreachable``, ``timed out``...) instead of output.
    fail: str | None

    def matches(self, command: str, state: Mapping[str, str]) -> bool:
        if any(state.get(k) != v for k, v in self.when_state):
            return False
        if self.match is not None:
            return normalise(command) == normalise(self.match)
        return self.regex is not None and self.regex.search(command) is not None


@dataclass(frozen=True)
class Profile:
    root: Path
    hostname: str | None
    rules: tuple[Rule, ...]
    #: Absolute host path -> content.
    files: dict[str, bytes] = field(default_factory=dict)


def normalise(command: str) -> str:
    return " ".join(command.split())


def _read(folder: Path, name: str, where: str) -> str:
    path = folder / name
    try:
        return path.read_text()
    except OSError as exc:
        raise UsageError(f"mock profile file {path} cannot be read ({exc.strerror})", file=where) from exc


def _parse_rule(raw: Any, folder: Path, where: str) -> Rule:
    if not isinstance(raw, dict):
        raise UsageError("each entry of 'commands' must be a mapping", file=where, field="commands")
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise UsageError(f"unknown key(s) {sorted(unknown)} in a command rule", file=where, field="commands")
    if ("match" in raw) == ("regex" in raw):
        raise UsageError("a command rule needs exactly one of 'match' or 'regex'", file=where, field="commands")
    try:
        regex = re.compile(str(raw["regex"])) if "regex" in raw else None
    except re.error as exc:
        raise UsageError(f"bad regex {raw['regex']!r}: {exc}", file=where, field="commands") from exc
    if isinstance(raw.get("stdout"), list):
        stdouts = tuple(_read(folder, str(name), where) for name in raw["stdout"])
    elif "stdout" in raw:
        stdouts = (_read(folder, str(raw["stdout"]), where),)
    else:
        stdouts = (str(raw.get("stdout_text", "")),)
    stderr = _read(folder, raw["stderr"], where) if "stderr" in raw else str(raw.get("stderr_text", ""))
    return Rule(
        match=str(raw["match"]) if "match" in raw else None,
        regex=regex,
        stdouts=stdouts,
        stderr=stderr,
        exit_code=int(raw.get("exit", 0)),
        delay_s=float(raw.get("delay", 0)),
        set_state=tuple((str(k), str(v)) for k, v in (raw.get("set_state") or {}).items()),
        when_state=tuple((str(k), str(v)) for k, v in (raw.get("when_state") or {}).items()),
        fail=str(raw["fail"]) if raw.get("fail") else None,
    )


@lru_cache(maxsize=256)
def load_profile(folder: str) -> Profile:
    """Read a profile folder (and the ones it ``extends``). Cached: profiles are read-only."""
    import yaml

    root = Path(folder).resolve()
    index = root / PROFILE_FILE
    where = str(index)
    if not index.is_file():
        raise UsageError(f"mock profile {root} has no {PROFILE_FILE}", file=str(root), field="profile")
    try:
        data = yaml.safe_load(index.read_text()) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"invalid YAML: {exc}", file=where) from exc
    if not isinstance(data, dict):
        raise UsageError("a profile must be a mapping", file=where)
    rules = tuple(_parse_rule(r, root, where) for r in data.get("commands") or [])
    files = {str(p): _read(root, name, where).encode() for p, name in (data.get("files") or {}).items()}
    hostname = data.get("hostname")
    if data.get("extends"):
        parent = load_profile(str((root / str(data["extends"])).resolve()))
        rules = rules + parent.rules
        files = {**parent.files, **files}
        hostname = hostname or parent.hostname
    return Profile(root=root, hostname=str(hostname) if hostname else None, rules=rules, files=files)


_CAT = re.compile(r"^(?:sudo -n sh -c )?cat (\S+)$")


class MockTransport(Transport):
    """Answers commands from a profile; keeps written files and state in memory."""

    def __init__(self, host: Host, profile: Profile | None = None) -> None:
        super().__init__(host)
        if profile is None:
            if not host.profile:
                raise UsageError(f"host {host.name} uses the mock transport but names no profile", field="profile")
            profile = load_profile(host.profile)
        self.profile = profile
        self.files: dict[str, bytes] = dict(profile.files)
        self.state: dict[str, str] = {}
        #: How often each rule answered, to cycle through its outputs.
        self._answers: dict[int, int] = {}
        #: Every command line this host was asked to run, in order (tests and dry-run read it).
        self.history: list[str] = []
        self._lock = threading.Lock()
        self._closed = False

    def run(
        self,
        command: str,
        *,
        sudo: bool = False,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        if self._closed:
            raise TransportError(FailureKind.ERROR, "connection closed")
        start = time.monotonic()
        # Like ssh, the environment travels as an ``export A='x'; `` prefix of the command
        # line, so rules can match on it (a fake nccl-tests answering per NCCL_ALGO).
        command = env_prefix(env) + command
        with self._lock:
            self.history.append(mask_text(command))
        rule = self._find(command)
        if rule is None:
            return CommandResult(command, *self._builtin(command), round(time.monotonic() - start, 4))
        if rule.fail:
            raise TransportError(FailureKind(rule.fail), f"{self.host.name}: simulated failure")
        if rule.delay_s:
            if timeout is not None and rule.delay_s > timeout:
                time.sleep(timeout)
                raise TransportError(FailureKind.TIMED_OUT, f"no answer within {timeout:g}s: {command}")
            time.sleep(rule.delay_s)
        with self._lock:
            self.state.update(rule.set_state)
            count = self._answers.get(id(rule), 0)
            self._answers[id(rule)] = count + 1
        stdout = rule.stdouts[count % len(rule.stdouts)]
        return CommandResult(command, stdout, rule.stderr, rule.exit_code, round(time.monotonic() - start, 4))

    def _find(self, command: str) -> Rule | None:
        with self._lock:
            state = dict(self.state)
        for rule in self.profile.rules:
            if rule.matches(command, state):
                return rule
        return None

    def _builtin(self, command: str) -> tuple[str, str, int]:
        """What any host answers without a rule: hostname, cat of a known file, true."""
        line = normalise(command)
        if line == "hostname":
            return (self.profile.hostname or self.host.name) + "\n", "", 0
        if line in ("true", ":"):
            return "", "", 0
        cat = _CAT.match(line)
        if cat:
            path = shlex.split(cat.group(1))[0]
            if path in self.files:
                return self.files[path].decode(errors="replace"), "", 0
            return "", f"cat: {path}: No such file or directory\n", 1
        words = line.split()
        tool = words[0] if words else ""
        return "", f"sh: 1: {tool}: not found\n", 127

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
        with self._lock:
            old = self.files.get(path)
            if old == data:
                return PutResult(path=path, changed=False)
            backup_path = None
            if old is not None and backup:
                backup_path = f"{path}.bak.{time.strftime('%Y%m%d%H%M%S')}"
                self.files[backup_path] = old
            self.files[path] = data
            self.history.append(f"# put {path} ({len(data)} bytes, mode {mode or 0o644:o})")
        return PutResult(path=path, changed=True, backup_path=backup_path)

    def get(self, path: str, *, sudo: bool = False) -> bytes | None:
        with self._lock:
            return self.files.get(path)

    def create_exclusive(self, path: str, data: bytes, *, sudo: bool = False) -> bytes | None:
        with self._lock:
            if path in self.files:
                return self.files[path]
            self.files[path] = data
            self.history.append(f"# create {path} ({len(data)} bytes)")
        return None

    def remove(self, path: str, *, sudo: bool = False) -> None:
        with self._lock:
            self.files.pop(path, None)
            self.history.append(f"# remove {path}")

    def close(self) -> None:
        self._closed = True
