"""Mock profiles: a folder with ``profile.yaml`` and recorded outputs (format in README/docs).

``load_profile`` reads one (and the profiles it ``extends``) into a ``Profile``: the command
rules (first match wins; this profile's before inherited ones), the files the host has, its
hostname, whether the stateful simulated tools answer what the rules do not (``simulate:``, off
by default: a profile replays its recordings) and its ``machine:`` section (package repository,
services, kernel modules, sysctl, swap: the starting point of the simulated tools, see
``clusterctl.mock``).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from clusterctl.deep_merge import deep_merge
from clusterctl.errors import UsageError
from clusterctl.json_input import (
    BadField,
    count,
    flag,
    items,
    join,
    kind_of,
    mapping,
    maybe,
    number,
    read_json,
    read_yaml,
    shown,
    text,
)
from clusterctl.transport.base import FailureKind

PROFILE_FILE = "profile.yaml"
_RULE_KEYS = ("match", "regex", "stdout", "stdout_text", "stderr", "stderr_text", "exit", "delay", "set_state",
              "when_state", "fail", "skip", "times", "append_file", "recorded_at")
#: Top-level keys of profile.yaml.
_PROFILE_KEYS = ("extends", "hostname", "files", "commands", "machine", "simulate")


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
    #: Let this many matching calls pass by first (to fail at the 2nd restart, not the 1st).
    skip: int = 0
    #: Answer at most this many calls, then let later rules or the simulated tool answer (None: always).
    times: int | None = None
    #: A file of the host whose content follows the recorded output when it exists: what was logged
    #: since the recording (a kernel message injected by a test, gone at the next boot when under /run).
    append_file: str | None = None
    #: When the output was recorded (ISO 8601 with offset): its timestamps are moved forward by the
    #: time since, as if it had been recorded now, so that a window (``health --since 30m``) sees
    #: the events as old as they were at the recording, not as old as the recording.
    recorded_at: datetime | None = None

    @property
    def replays_plainly(self) -> bool:
        """Always the same answer and no state set: answering it needs no bookkeeping."""
        return not self.skip and self.times is None and len(self.stdouts) == 1 and not self.set_state

    def state_allows(self, state: Mapping[str, str]) -> bool:
        return all(state.get(k) == v for k, v in self.when_state)

    def matches_command(self, command: str, normalised: str) -> bool:
        """Whether the rule answers ``command`` (``normalised``: the same, whitespace-normalised)."""
        if self.match is not None:
            return normalised == self._normalised_match
        return self.regex is not None and self.regex.search(command) is not None

    @functools.cached_property
    def _normalised_match(self) -> str:
        return normalise(self.match or "")


@dataclass(frozen=True)
class Profile:
    root: Path
    hostname: str | None
    rules: tuple[Rule, ...]
    #: Absolute host path -> content.
    files: dict[str, bytes] = field(default_factory=dict)
    #: The ``machine:`` section: what the simulated tools start from (merged over ``extends``).
    machine: Mapping[str, Any] = field(default_factory=dict)
    #: ``simulate: true``: the stateful simulated tools answer what the rules do not. Off by
    #: default, so a recorded profile answers only with its recordings (inherited over ``extends``).
    simulate: bool = False

    def rules_to_try(self, normalised: str) -> list[int]:
        """Indexes of the rules that may answer this (whitespace-normalised) line, in the profile's
        order: the ``match`` rules equal to it and every ``regex`` rule (still to be tried). A host
        answers dozens of lines per survey; most rules are ``match`` rules."""
        exact, patterns = self._rule_index
        found = exact.get(normalised)
        return sorted({*found, *patterns}) if found else list(patterns)

    def rules_matching(self, lines: list[str]) -> list[int]:
        """Indexes, in the profile's order, of the rules whose ``match`` or ``regex`` answers one of
        ``lines`` (``when_state`` aside: that is the host's to judge). Matching depends on the line
        alone, and a fleet's hosts send the same lines: each line is matched once (kept per profile,
        a bounded number of lines)."""
        if len(lines) == 1:
            return list(self._rules_matching_line(lines[0]))
        return sorted({i for line in lines for i in self._rules_matching_line(line)})

    def _rules_matching_line(self, line: str) -> tuple[int, ...]:
        memo = self._matched
        found = memo.get(line)
        if found is None:
            norm = normalise(line)
            found = tuple(i for i in self.rules_to_try(norm) if self.rules[i].matches_command(line, norm))
            if len(memo) >= _MATCHED_KEPT:
                memo.clear()  # lines with run-unique words (temporary names) must not pile up
            memo[line] = found
        return found

    @functools.cached_property
    def _matched(self) -> dict[str, tuple[int, ...]]:
        return {}

    @functools.cached_property
    def _rule_index(self) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
        exact: dict[str, tuple[int, ...]] = {}
        for index, rule in enumerate(self.rules):
            if rule.match is not None:
                key = normalise(rule.match)
                exact[key] = (*exact.get(key, ()), index)
        return exact, tuple(i for i, rule in enumerate(self.rules) if rule.match is None)

    @functools.cached_property
    def tool_names(self) -> frozenset[str]:
        """Program names (first word) that the rules answer, inherited rules included: worked out
        once (every ``command -v`` on a host asks it)."""
        names: set[str] = set()
        for rule in self.rules:
            word = ""
            if rule.match is not None:
                word = rule.match.split()[0] if rule.match.split() else ""
            elif rule.regex is not None:
                literal = re.match(r"\^?([A-Za-z0-9_.+-]+)", rule.regex.pattern)
                word = literal.group(1) if literal else ""
            if word and _TOOL_WORD.match(word):
                names.add(word)
        return frozenset(names)


#: How many command lines a profile remembers the matching rules of (``Profile.rules_matching``).
_MATCHED_KEPT = 4096

_TOOL_WORD = re.compile(r"^[A-Za-z0-9_.+\[-]+$")


def normalise(command: str) -> str:
    return " ".join(command.split())


def _read(folder: Path, name: str, where: str) -> str:
    path = folder / name
    try:
        return path.read_text()
    except OSError as exc:
        raise UsageError(f"mock profile file {path} cannot be read ({exc.strerror})", file=where) from exc


def _parse_rule(value: Any, field: str, folder: Path, where: str) -> Rule:
    raw = mapping(value, field, optional=_RULE_KEYS)
    if ("match" in raw) == ("regex" in raw):
        raise BadField(field, "a command rule needs exactly one of 'match' or 'regex'")
    try:
        regex = re.compile(str(raw["regex"])) if "regex" in raw else None
    except re.error as exc:
        raise BadField(join(field, "regex"), f"bad regex {shown(str(raw['regex']))}: {exc}") from None
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
        exit_code=count(raw.get("exit", 0), join(field, "exit"), high=255),
        delay_s=number(raw.get("delay", 0), join(field, "delay"), low=0),
        set_state=_states(raw, "set_state", field),
        when_state=_states(raw, "when_state", field),
        fail=maybe(lambda v, f: text(v, f, choices=tuple(k.value for k in FailureKind)), raw.get("fail") or None,
                   join(field, "fail")),
        skip=count(raw.get("skip", 0), join(field, "skip")),
        times=maybe(count, raw.get("times"), join(field, "times")),
        append_file=str(raw["append_file"]) if raw.get("append_file") else None,
        recorded_at=maybe(_recorded_at, raw.get("recorded_at"), join(field, "recorded_at")),
    )


def _states(raw: dict[str, Any], key: str, field: str) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in mapping(raw.get(key) or {}, join(field, key)).items())


def _recorded_at(value: object, field: str) -> datetime:
    try:
        stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    except ValueError:
        stamp = None
    if stamp is None or stamp.tzinfo is None:
        raise BadField(field, f"{shown(str(value))} is not an ISO 8601 time with an offset")
    return stamp


#: Keys of ``machine:`` whose shape clusterctl checks (what a value must be, in words); others are free
#: for simulated tools.
_MACHINE_SHAPES: dict[str, tuple[type, str]] = {
    **{key: (dict, "an object") for key in ("packages", "services", "modules", "sysctl")},
    "swap": (list, "a list"), "kernel": (str, "text")}


#: Held while a profile is read: the fan-out's threads all ask for the fleet's profile at once,
#: and without it each of them would read and parse the same YAML (50 of 64 did).
_LOADING = threading.RLock()
#: The profiles being read, under ``_LOADING``, down an ``extends`` chain: one met again closes a circle.
_EXTENDING: list[Path] = []


def load_profile(folder: str) -> Profile:
    """Read a profile folder (and the ones it ``extends``), once per process: profiles are read-only."""
    with _LOADING:
        return _read_profile(folder)


def forget_profiles() -> None:
    """Read profiles again on their next use (tests that rewrite a profile's files)."""
    _read_profile.cache_clear()


@lru_cache(maxsize=256)
def _read_profile(folder: str) -> Profile:
    root = Path(folder).resolve()
    index = root / PROFILE_FILE
    if not index.is_file():
        raise UsageError(f"mock profile {root} has no {PROFILE_FILE}", file=str(root), field="profile")
    _EXTENDING.append(root)
    try:
        return read_json(str(index), "mock-profile", "a mock profile", lambda data: _profile(root, data or {}),
                         decode=read_yaml)
    finally:
        _EXTENDING.pop()


def _profile(root: Path, value: Any) -> Profile:
    where = str(root / PROFILE_FILE)
    data = mapping(value, "", optional=_PROFILE_KEYS)
    machine = dict(mapping(data.get("machine") or {}, "machine"))
    for key, (shape, words) in _MACHINE_SHAPES.items():
        if machine.get(key) is not None and not isinstance(machine[key], shape):
            raise BadField(f"machine.{key}", f"{kind_of(machine[key])} where {words} belongs")
    rules = items(data.get("commands") or [], "commands", lambda rule, field: _parse_rule(rule, field, root, where))
    files = {str(p): _read(root, name, where).encode() for p, name in mapping(data.get("files") or {}, "files").items()}
    hostname = data.get("hostname")
    simulate = maybe(flag, data.get("simulate"), "simulate")
    if data.get("extends"):
        extended = (root / str(data["extends"])).resolve()
        if extended in _EXTENDING:
            circle = [*_EXTENDING[_EXTENDING.index(extended):], extended]
            raise BadField("extends", "the profiles extend each other in a circle: " + " -> ".join(map(str, circle)))
        parent = load_profile(str(extended))
        rules = rules + parent.rules
        files = {**parent.files, **files}
        hostname = hostname or parent.hostname
        machine = deep_merge(parent.machine, machine)  # the child's ``machine:`` over the parent's
        simulate = parent.simulate if simulate is None else simulate
    if machine and not simulate:
        raise UsageError("'machine' describes what the simulated tools start from, but this profile does not "
                         "use them", file=where, field="machine",
                         hint="Add 'simulate: true' (or remove 'machine:' to replay the recordings alone).")
    return Profile(root=root, hostname=str(hostname) if hostname else None, rules=rules, files=files,
                   machine=machine, simulate=bool(simulate))


