"""clusterctl's NCCL knowledge base: what each variable name means, who reads it, what it accepts.

The facts live in ``data/nccl_vars.yaml`` (derived from NCCL's source and user guide, see
docs/nccl-lint.md); this module loads them into :class:`VariableInfo` records.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from clusterctl.nccl.versions import NcclVersion, try_parse_version

#: Every value grammar the knowledge base may name.
KINDS: frozenset[str] = frozenset(
    {"int", "bool", "enum", "list", "string", "bytes", "hca-list", "ifname-list", "algo-list", "proto-list",
     "subsys-list", "level"}
)
#: Who reads a variable.
SCOPES: frozenset[str] = frozenset({"core", "example-plugin", "sharp-plugin", "pytorch", "nccl-tests", "nonexistent"})

#: Words shown to users for each scope.
SCOPE_READER: dict[str, str] = {
    "core": "libnccl",
    "example-plugin": "NCCL's example plugins (plugins/ in the NCCL repository), not libnccl itself",
    "sharp-plugin": "the SHARP/IBext network plugin (Mellanox nccl-rdma-sharp-plugins), not libnccl itself",
    "pytorch": "PyTorch's ProcessGroupNCCL, not libnccl",
    "nccl-tests": "the nccl-tests benchmarks, not libnccl",
    "nonexistent": "nothing: no NCCL release reads it",
}


@dataclass(frozen=True)
class VersionedValue:
    """A value that holds from ``since`` (a release series such as "2.23") on; None = any older release."""

    value: str
    since: NcclVersion | None


@dataclass(frozen=True)
class VariableInfo:
    name: str
    scope: str
    kind: str
    values: tuple[str, ...] = ()
    case_insensitive: bool = False
    minimum: int | None = None
    maximum: int | None = None
    maximum_by_version: tuple[tuple[int, NcclVersion | None], ...] = ()
    multiple_of: int | None = None
    clamped: bool = False
    default: str | None = None
    defaults: tuple[VersionedValue, ...] = ()
    since: NcclVersion | None = None
    since_text: str | None = None
    removed: NcclVersion | None = None
    removed_text: str | None = None
    replaced_by: str | None = None
    replaced_note: str | None = None
    deprecated_values: dict[str, str] = field(default_factory=dict)
    documented: bool = False
    source: str = ""
    note: str | None = None
    hint: str | None = None

    # -- versions -----------------------------------------------------------------------

    def read_by(self, version: NcclVersion) -> bool:
        """Whether ``version`` reads this variable, at the release-series accuracy of the reference."""
        if self.since is not None and version.series < self.since.series:
            return False
        return not (self.removed is not None and version >= self.removed)

    def default_for(self, version: NcclVersion | None) -> VersionedValue | None:
        """The default NCCL ``version`` uses (the newest one when ``version`` is None)."""
        if self.defaults:
            if version is None:
                return self.defaults[0]
            for item in self.defaults:
                if item.since is None or version.series >= item.since.series:
                    return item
            return None
        if self.default is None:
            return None
        return VersionedValue(self.default, None)

    def maximum_for(self, version: NcclVersion | None) -> int | None:
        """The upper bound for ``version``; the most permissive one when the version is unknown."""
        if not self.maximum_by_version:
            return self.maximum
        if version is None:
            return max(value for value, _ in self.maximum_by_version)
        for value, since in self.maximum_by_version:
            if since is None or version.series >= since.series:
                return value
        return self.maximum

    # -- values -------------------------------------------------------------------------

    def validate(self, value: str, version: NcclVersion | None = None) -> list[ValueProblem]:
        """What is wrong with ``value`` for this variable (empty list: nothing)."""
        from clusterctl.nccl.grammar import check_value

        return check_value(self, value, version)


@dataclass(frozen=True)
class ValueProblem:
    """One thing wrong with a value: a stable code, a severity, what NCCL does with it, how to fix it."""

    code: str
    severity: str
    message: str
    fix: str


class KnowledgeBase:
    def __init__(self, variables: dict[str, VariableInfo]) -> None:
        self._variables = variables
        # A long file repeats the same few misspellings; difflib per line made lint quadratic-slow.
        self._similar: dict[tuple[str, int], list[str]] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._variables

    def __len__(self) -> int:
        return len(self._variables)

    def names(self) -> list[str]:
        return sorted(self._variables)

    def variables(self) -> list[VariableInfo]:
        return [self._variables[n] for n in self.names()]

    def variable(self, name: str) -> VariableInfo | None:
        return self._variables.get(name)

    def similar(self, name: str, *, limit: int = 3) -> list[str]:
        """Known names that look like ``name`` (typos), best first; never names that do not exist."""
        key = (name, limit)
        if key not in self._similar:
            candidates = [n for n, v in self._variables.items() if v.scope != "nonexistent" and n != name]
            self._similar[key] = difflib.get_close_matches(name, candidates, n=limit, cutoff=0.8)
        return list(self._similar[key])


@lru_cache(maxsize=1)
def knowledge_base() -> KnowledgeBase:
    """The knowledge base shipped with clusterctl (loaded once)."""
    from importlib import resources

    import yaml

    text = resources.files("clusterctl.nccl").joinpath("data/nccl_vars.yaml").read_text(encoding="utf-8")
    entries = yaml.safe_load(text)
    variables = {e["name"]: variable_from_entry(e) for e in entries}
    return KnowledgeBase(variables)


def _version(text: Any) -> NcclVersion | None:
    if text is None:
        return None
    version = try_parse_version(str(text))
    if version is None:
        raise ValueError(f"bad version {text!r} in the NCCL knowledge base")
    return version


def variable_from_entry(entry: dict[str, Any]) -> VariableInfo:
    """One knowledge-base record from its YAML entry (raises ValueError on a malformed entry)."""
    defaults = tuple(
        VersionedValue(str(d["value"]), _version(d.get("since"))) for d in entry.get("defaults") or ()
    )
    maximum_by_version = tuple(
        (int(d["value"]), _version(d.get("since"))) for d in entry.get("maximum_by_version") or ()
    )
    return VariableInfo(
        name=str(entry["name"]),
        scope=str(entry["scope"]),
        kind=str(entry["kind"]),
        values=tuple(str(v) for v in entry.get("values") or ()),
        case_insensitive=bool(entry.get("case_insensitive", False)),
        minimum=entry.get("minimum"),
        maximum=entry.get("maximum"),
        maximum_by_version=maximum_by_version,
        multiple_of=entry.get("multiple_of"),
        clamped=bool(entry.get("clamped", False)),
        default=None if entry.get("default") is None else str(entry["default"]),
        defaults=defaults,
        since=_version(entry.get("since")),
        since_text=entry.get("since_note"),
        removed=_version(entry.get("removed")),
        removed_text=entry.get("removed_note"),
        replaced_by=entry.get("replaced_by"),
        replaced_note=entry.get("replaced_note"),
        deprecated_values={str(k): str(v) for k, v in (entry.get("deprecated_values") or {}).items()},
        documented=bool(entry.get("documented", False)),
        source=str(entry.get("source", "")),
        note=entry.get("note"),
        hint=entry.get("hint"),
    )
