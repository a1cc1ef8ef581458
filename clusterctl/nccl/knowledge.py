"""clusterctl's NCCL knowledge base: what each variable name means, who reads it, what it accepts.

The facts live in ``data/nccl_vars.yaml`` (derived from NCCL's source and user guide, see
docs/nccl-lint.md) and ``data/plugin_vars.yaml`` (what well-known network and tuner plugins read,
from each plugin's source); this module loads them into :class:`VariableInfo` records.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from clusterctl.nccl.versions import NcclVersion, try_parse_version

#: Who reads a variable (its ``scope``), in the words shown to users.
SCOPE_READER: dict[str, str] = {
    "core": "libnccl",
    "example-plugin": "NCCL's example plugins (plugins/ in the NCCL repository), not libnccl itself",
    "sharp-plugin": "the SHARP/IBext network plugin (Mellanox nccl-rdma-sharp-plugins), not libnccl itself",
    "pytorch": "PyTorch's ProcessGroupNCCL, not libnccl",
    "nccl-tests": "the nccl-tests benchmarks, not libnccl",
    "build": "build systems and install scripts (where NCCL is found or installed), not libnccl at run time",
    "nonexistent": "nothing: no NCCL release reads it",
    "plugin": "a network or tuner plugin, not libnccl itself",
}


@dataclass(frozen=True)
class Plugin:
    """A network or tuner plugin whose variables the knowledge base knows, from its source."""

    id: str
    name: str
    repo: str
    commit: str
    #: Names under these prefixes belong to this plugin alone.
    prefixes: tuple[str, ...] = ()


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
    removed: NcclVersion | None = None
    replaced_by: str | None = None
    replaced_note: str | None = None
    deprecated_values: dict[str, str] = field(default_factory=dict)
    source: str = ""
    note: str | None = None
    hint: str | None = None
    #: For ``scope == "plugin"``: the plugin that reads it.
    plugin: Plugin | None = None
    #: Values accepted only from a release on (NVB for the level variables since 2.8...).
    value_since: dict[str, NcclVersion] = field(default_factory=dict)
    #: For ``scope == "pytorch"``: the first PyTorch release series that reads it, as (major, minor),
    #: where PyTorch's release notes or renaming PR say so (data/pytorch_vars.yaml).
    pytorch_since: tuple[int, int] | None = None

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
            return next((d for d in self.defaults if d.since is None or version.series >= d.since.series), None)
        return None if self.default is None else VersionedValue(self.default, None)

    def maximum_for(self, version: NcclVersion | None) -> int | None:
        """The upper bound for ``version``; the most permissive one when the version is unknown."""
        if not self.maximum_by_version:
            return self.maximum
        if version is None:
            return max(value for value, _ in self.maximum_by_version)
        return next((value for value, since in self.maximum_by_version
                     if since is None or version.series >= since.series), self.maximum)

    # -- values -------------------------------------------------------------------------

    def values_for(self, version: NcclVersion | None) -> tuple[str, ...]:
        """The accepted values ``version`` knows (all of them when the version is unknown)."""
        return self.values if version is None else tuple(
            v for v in self.values if v not in self.value_since or version >= self.value_since[v])


class KnowledgeBase:
    def __init__(self, variables: dict[str, VariableInfo], plugins: tuple[Plugin, ...] = ()) -> None:
        self._variables = variables
        self.plugins = plugins
        # A long file repeats the same few misspellings; difflib per line made lint slow.
        self._similar: dict[tuple[str, int, str | None, bool], list[str]] = {}

    def plugin_owning(self, name: str) -> Plugin | None:
        """The plugin whose prefix ``name`` carries (NCCL_FASTRAK_..., OFI_NCCL_...), if any."""
        return next((plugin for plugin in self.plugins if name.startswith(plugin.prefixes)), None)

    def variables(self) -> list[VariableInfo]:
        return [self._variables[n] for n in sorted(self._variables)]

    def variable(self, name: str) -> VariableInfo | None:
        return self._variables.get(name)

    def catalogued(self, name: str) -> VariableInfo:
        """The entry of a variable clusterctl's own rules read facts from (KeyError: the catalogue lost it)."""
        return self._variables[name]

    def similar(self, name: str, *, limit: int = 3, version: NcclVersion | None = None,
                living: bool = True) -> list[str]:
        """Known names that look like ``name`` (typos), best first; never names that do not exist.

        With ``living`` only names that ``version`` reads (the newest release when None): a fix
        must never point at a variable that was removed. A name under a plugin's prefix is
        compared with that plugin's variables only.
        """
        key = (name, limit, None if version is None else str(version), living)
        if key in self._similar:
            return list(self._similar[key])
        owner = self.plugin_owning(name)
        candidates = [n for n, v in self._variables.items() if v.scope != "nonexistent" and n != name
                      and (owner is None or (v.plugin is not None and v.plugin.id == owner.id))
                      and (not living or self.is_living(v, version))]
        self._similar[key] = difflib.get_close_matches(name, candidates, n=limit, cutoff=0.8)
        return list(self._similar[key])

    def is_living(self, info: VariableInfo, version: NcclVersion | None) -> bool:
        if info.scope != "core":
            return True
        return info.removed is None if version is None else info.read_by(version)

    def successor(self, info: VariableInfo, version: NcclVersion | None) -> str | None:
        """The living variable that replaced ``info`` (following replacements), if any."""
        seen = {info.name}
        current = info
        while current.replaced_by:
            name = current.replaced_by.split("=")[0].split()[0]
            nxt = self._variables.get(name)
            if nxt is None or name in seen:
                return None
            if self.is_living(nxt, version):
                return name
            seen.add(name)
            current = nxt
        return None


@lru_cache(maxsize=1)
def knowledge_base() -> KnowledgeBase:
    """The knowledge base shipped with clusterctl (loaded once)."""
    data = resources.files("clusterctl.nccl").joinpath("data")
    entries = yaml.safe_load(data.joinpath("nccl_vars.yaml").read_text(encoding="utf-8"))
    variables = {e["name"]: variable_from_entry(e) for e in entries}
    plugins = []
    for entry in yaml.safe_load(data.joinpath("plugin_vars.yaml").read_text(encoding="utf-8")):
        plugin = Plugin(id=str(entry["id"]), name=str(entry["name"]), repo=str(entry["repo"]),
                        commit=str(entry["commit"]), prefixes=tuple(entry.get("prefixes") or ()))
        plugins.append(plugin)
        for var in entry["variables"]:
            known = variables.get(var["name"])
            if known is not None and known.scope == "core":
                continue  # libnccl reads it too: its own entry says how
            variables[var["name"]] = plugin_variable(var, plugin)
    for entry in yaml.safe_load(data.joinpath("pytorch_vars.yaml").read_text(encoding="utf-8")):
        variables[entry["name"]] = pytorch_variable(entry)
    for entry in yaml.safe_load(data.joinpath("build_vars.yaml").read_text(encoding="utf-8")):
        variables.setdefault(entry["name"], VariableInfo(
            name=str(entry["name"]), scope="build", kind="string", source=f"[build] {entry['source']}"))
    return KnowledgeBase(variables, tuple(plugins))


def pytorch_series(text: str) -> tuple[int, int]:
    """``(2, 4)`` for "2.4", "2.4.1", "2.4.0+cu121", "2.5.0a0"; ValueError otherwise."""
    found = re.match(r"^\s*(\d+)\.(\d+)", text)
    if found is None:
        raise ValueError(f"not a PyTorch version: {text!r}")
    return int(found.group(1)), int(found.group(2))


def _grammar(entry: dict[str, Any]) -> dict[str, Any]:
    """The fields every data file writes alike: the name, and the values it takes and defaults to."""
    return {
        "name": str(entry["name"]),
        "kind": str(entry["kind"]),
        "values": tuple(str(v) for v in entry.get("values") or ()),
        "case_insensitive": bool(entry.get("case_insensitive", False)),
        "minimum": entry.get("minimum"),
        "maximum": entry.get("maximum"),
        "default": None if entry.get("default") is None else str(entry["default"]),
    }


def pytorch_variable(entry: dict[str, Any]) -> VariableInfo:
    """One PyTorch ProcessGroupNCCL variable (an entry of data/pytorch_vars.yaml)."""
    since = entry.get("pytorch_since")
    seen = ", ".join(entry.get("seen_in") or ())
    return VariableInfo(
        **_grammar(entry),
        scope="pytorch",
        source=f"[pytorch] torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp (pytorch/pytorch); seen in {seen} "
               "(clusterctl/nccl/data/pytorch_vars.yaml)",
        note=entry.get("note"),
        pytorch_since=pytorch_series(str(since)) if since else None,
    )


def plugin_variable(entry: dict[str, Any], plugin: Plugin) -> VariableInfo:
    """One plugin variable (an entry of data/plugin_vars.yaml)."""
    note = entry.get("note")
    if entry.get("removed"):
        note = "removed from the plugin (it warns and ignores it)" + (f"; {note}" if note else "")
    elif entry.get("deprecated"):
        note = "deprecated by the plugin" + (f"; {note}" if note else "")
    return VariableInfo(
        **_grammar(entry),
        scope="plugin",
        source=f"{plugin.repo}@{plugin.commit[:10]} {entry.get('source', '')}".strip(),
        note=note,
        plugin=plugin,
    )


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
        **_grammar(entry),
        scope=str(entry["scope"]),
        maximum_by_version=maximum_by_version,
        multiple_of=entry.get("multiple_of"),
        clamped=bool(entry.get("clamped", False)),
        defaults=defaults,
        since=_version(entry.get("since")),
        removed=_version(entry.get("removed")),
        replaced_by=entry.get("replaced_by"),
        replaced_note=entry.get("replaced_note"),
        deprecated_values={str(k): str(v) for k, v in (entry.get("deprecated_values") or {}).items()},
        source=str(entry.get("source", "")),
        note=entry.get("note"),
        hint=entry.get("hint"),
        value_since={str(k): v for k, v in ((k, _version(v)) for k, v in (entry.get("value_since") or {}).items())
                     if v is not None},
    )
