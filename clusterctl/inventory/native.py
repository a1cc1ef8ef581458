"""clusterctl's own inventory format (YAML), read with line numbers for every error.

Layout: ``cluster``, ``defaults`` (settings for every host), ``groups`` (``vars`` and
``hosts``), ``hosts`` (a mapping by name, or a list of mappings with ``name:``). Settings are
applied defaults < group vars (in the order the groups are written) < the host itself; the
sections ``fabric``, ``ssh``, ``ssh.options``, ``stack``, ``labels`` and ``vars`` merge key by
key, every other setting is replaced as a whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from clusterctl.inventory import values
from clusterctl.inventory.bmc_section import read_bmc
from clusterctl.inventory.bootstrap_section import read_bootstrap
from clusterctl.inventory.model import Fabric, Host, Inventory, SSHOptions, StackPin
from clusterctl.inventory.node_reader import NodeReader
from clusterctl.inventory.quarantine_section import read_quarantine
from clusterctl.inventory.yaml_tree import (
    Entry,
    Mapping,
    Node,
    Scalar,
    Sequence,
    is_empty,
    kind_of,
    parse_yaml,
    to_python,
)


@dataclass(frozen=True)
class _Setting:
    """One value from the file, with where it was written (for errors found after merging)."""

    value: Any
    line: int
    field: str


class _Section(dict[str, _Setting]):
    """Settings that merge key by key across defaults, groups and host (``fabric``, ``ssh``...)."""


Layer = dict[str, _Setting]
FieldReader = Callable[["_Reader", Node, str], Any]


@dataclass(frozen=True)
class _HostDef:
    """A host as written: its name, the line that names it and its own settings."""

    name: str
    line: int
    settings: Layer


@dataclass(frozen=True)
class _GroupDef(_HostDef):
    """A group as written: a name, line and settings (its ``vars``) like a host, plus its hosts."""

    members: tuple[str, ...]


def parse_native(text: str, *, file: str, base_dir: Path, tree: Node | None = None) -> Inventory:
    """A clusterctl YAML inventory's ``text``; ``InventoryError`` names file, line and field of any problem.

    ``base_dir`` anchors relative profiles; ``tree``: the text's ``parse_yaml`` when the caller has it
    already (it is not read twice).
    """
    return _Reader(file, base_dir).read(tree if tree is not None else parse_yaml(text, file))


def read_fabric(file: str, node: Node, field: str) -> Fabric:
    """A ``fabric`` mapping by itself (the node agent's config), read as the inventory's ``fabric:`` is."""
    section = _Reader(file, Path(file).parent).settings(node, field, FABRIC_FIELDS)
    return Fabric(**{k: s.value for k, s in section.items() if s.value is not None})


class _Reader(NodeReader):
    """The document's structure: defaults, groups, hosts and their settings."""

    def __init__(self, file: str, base_dir: Path) -> None:
        super().__init__(file, base_dir)
        #: ``profile:`` as written -> the folder it names (see ``profile``).
        self._profiles: dict[str, str | None] = {}

    # --- the document -------------------------------------------------------------------

    def read(self, root: Node | None) -> Inventory:
        if root is None or is_empty(root):
            raise self.error(
                "the inventory is empty.", line=1, field=None, hint="It needs at least a 'hosts:' section."
            )
        if not isinstance(root, Mapping):
            raise self.error(
                f"the inventory must be a mapping with 'cluster', 'defaults', 'groups' and 'hosts', "
                f"but it is {kind_of(root)}.",
                line=root.line,
                field=None,
            )
        for entry in root.entries:
            self.check_known(entry, TOP_FIELDS, entry.key)
        cluster = root.get("cluster")
        name = Path(self.file).stem
        if cluster is not None:
            name = self.scalar(cluster.value, "cluster", lambda v: values.text(v, "the cluster name"), raw=True)
        defaults_entry = root.get("defaults")
        defaults = self.settings(defaults_entry.value, "defaults", DEFAULT_FIELDS) if defaults_entry else _Section()
        hosts_entry = root.get("hosts")
        if hosts_entry is None:
            raise self.error(
                "the inventory has no 'hosts:' section.",
                line=root.line,
                field="hosts",
                hint="List the machines under 'hosts:', e.g. 'hosts: {gpu-a1: {address: 10.0.0.11}}'.",
            )
        host_defs = self.hosts(hosts_entry.value)
        groups_entry = root.get("groups")
        group_defs = self.groups(groups_entry.value, [h.name for h in host_defs]) if groups_entry else []

        hosts: list[Host] = []
        for host_def in host_defs:
            member_of = [g for g in group_defs if host_def.name in g.members]
            layers = [defaults, *(g.settings for g in member_of), host_def.settings]
            hosts.append(self.build_host(host_def, layers, tuple(g.name for g in member_of)))
        groups = {g.name: tuple(h.name for h in host_defs if h.name in g.members) for g in group_defs}
        # The sections a file leaves out keep the defaults of ``Inventory``.
        readers: dict[str, Callable[[_Reader, Node, str], Any]] = {
            "bootstrap": read_bootstrap, "quarantine": read_quarantine,
            "bmc": partial(read_bmc, host_names=[h.name for h in hosts])}
        sections = {key: read(self, written.value, key) for key, read in readers.items() if (written := root.get(key))}
        return Inventory(name=name, hosts=tuple(hosts), groups=groups, source=self.file, format="clusterctl",
                         **sections)

    def hosts(self, node: Node) -> list[_HostDef]:
        defs: list[_HostDef] = []
        if isinstance(node, Mapping):
            # Duplicate names in a mapping were already refused by the YAML reader.
            for entry in node.entries:
                field = f"hosts.{entry.key}"
                self.check_host_name(entry.key, entry.key_line, field)
                defs.append(_HostDef(entry.key, entry.key_line, self.host_settings(entry.value, field)))
        elif isinstance(node, Sequence):
            seen: dict[str, int] = {}
            for index, item in enumerate(node.items):
                host_def = self.listed_host(item, index)
                if host_def.name in seen:
                    raise self.error(
                        f"duplicate host '{host_def.name}': it is already defined at line {seen[host_def.name]}.",
                        line=host_def.line,
                        field=f"hosts[{index}].name",
                        hint="Each host may appear once; merge the two entries.",
                    )
                seen[host_def.name] = host_def.line
                defs.append(host_def)
        elif not is_empty(node):
            raise self.error(
                f"'hosts' must be a mapping of host names to settings (or a list of hosts with 'name:'), "
                f"not {kind_of(node)}.",
                line=node.line,
                field="hosts",
            )
        if not defs:
            raise self.error(
                "the inventory lists no hosts.",
                line=node.line,
                field="hosts",
                hint="Add at least one host under 'hosts:'.",
            )
        return defs

    def listed_host(self, item: Node, index: int) -> _HostDef:
        field = f"hosts[{index}]"
        if isinstance(item, Scalar) and isinstance(item.value, str):
            self.check_host_name(item.value, item.line, field)
            return _HostDef(item.value, item.line, _Section())
        if not isinstance(item, Mapping):
            raise self.error(
                f"each host in the 'hosts' list must be a mapping with 'name:', not {kind_of(item)}.",
                line=item.line,
                field=field,
            )
        name_entry = item.get("name")
        if name_entry is None:
            raise self.error(
                "this host has no 'name:'.",
                line=item.line,
                field=field,
                hint="In a list of hosts, each one needs 'name: <host name>'.",
            )
        name = self.scalar(name_entry.value, f"{field}.name", lambda v: values.text(v, "a host name"), raw=True)
        self.check_host_name(name, name_entry.key_line, f"{field}.name")
        rest = Mapping(tuple(e for e in item.entries if e.key != "name"), item.line)
        return _HostDef(name, name_entry.key_line, self.host_settings(rest, f"hosts.{name}"))

    def check_host_name(self, name: str, line: int, field: str) -> None:
        if not name.strip():
            raise self.error("a host name must not be empty.", line=line, field=field)
        # Commands quote every name, but a name with a space or ';' cannot name a node, a file or
        # a Kubernetes object: refused here, so plan never says "ok" for an apply that must fail.
        with self.values_at(line, field):
            values.host_name(name)

    def host_settings(self, node: Node, field: str) -> Layer:
        return self.settings(
            node, field, HOST_FIELDS, must_be="a host's settings must be a mapping (address, port, user...)",
            hint="Write 'gpu-a1: {address: 10.0.0.11}' or leave the value empty.",
        )

    def groups(self, node: Node, host_names: list[str]) -> list[_GroupDef]:
        groups = self.mapping(node, "groups", must_be="'groups' must be a mapping of group names to {vars, hosts}")
        known = set(host_names)
        out: list[_GroupDef] = []
        for entry in groups.entries:
            field = f"groups.{entry.key}"
            if entry.key == "all":
                raise self.error(
                    "the group name 'all' is reserved: it always means every host.",
                    line=entry.key_line,
                    field=field,
                )
            body = entry.value
            settings: Layer = _Section()
            members_node: Node | None = None
            if isinstance(body, Sequence):
                members_node = body  # shorthand: ``rack-a: [gpu-a1, gpu-a2]``
            elif isinstance(body, Mapping):
                for item in body.entries:
                    self.check_known(item, GROUP_FIELDS, f"{field}.{item.key}")
                vars_entry = body.get("vars")
                if vars_entry is not None:
                    settings = self.settings(vars_entry.value, f"{field}.vars", DEFAULT_FIELDS)
                hosts_entry = body.get("hosts")
                members_node = hosts_entry.value if hosts_entry else None
            elif not is_empty(body):
                raise self.error(
                    f"a group must be a mapping with 'vars' and 'hosts', not {kind_of(body)}.",
                    line=body.line,
                    field=field,
                )
            members = self.group_members(members_node, f"{field}.hosts", known)
            out.append(_GroupDef(entry.key, entry.key_line, settings, members))
        return out

    def group_members(self, node: Node | None, field: str, known: set[str]) -> tuple[str, ...]:
        if node is None or is_empty(node):
            return ()
        if not isinstance(node, Sequence):
            raise self.error(
                f"a group's 'hosts' must be a list of host names, not {kind_of(node)}.",
                line=node.line,
                field=field,
            )
        members: list[str] = []
        for index, item in enumerate(node.items):
            name = self.scalar(item, f"{field}[{index}]", lambda v: values.text(v, "a host name"), raw=True)
            if name not in known:
                raise self.error(
                    f"the group lists host '{name}', which is not defined under 'hosts'.",
                    line=item.line,
                    field=f"{field}[{index}]",
                    hint=values.did_you_mean(name, known) or "Define the host under 'hosts:' first.",
                )
            if name not in members:
                members.append(name)
        return tuple(members)

    # --- settings -----------------------------------------------------------------------

    def check_known(self, entry: Entry, spec: dict[str, Any], path: str) -> None:
        """``entry``'s key is one of ``spec``'s; a host's own field set elsewhere is named as such."""
        if entry.key in spec:  # the usual case, read for every field of every host: nothing to sort
            return
        if entry.key in HOST_FIELDS:
            raise self.error(f"'{entry.key}' can only be set on a host, not here.", line=entry.key_line, field=path)
        self.check_field(entry, sorted(spec), path)

    def settings(
        self, node: Node, field: str, spec: dict[str, FieldReader], *, must_be: str | None = None,
        hint: str | None = None,
    ) -> _Section:
        """Known fields, each read by its reader from ``spec``."""
        name = field.rsplit(".", 1)[-1]
        mapping = self.mapping(
            node, field, must_be=must_be or f"'{name}' must be a mapping of settings",
            hint=hint or values.fields_hint(sorted(spec)),
        )
        section = _Section()
        for entry in mapping.entries:
            sub = f"{field}.{entry.key}"
            self.check_known(entry, spec, sub)
            section[entry.key] = _Setting(spec[entry.key](self, entry.value, sub), entry.key_line, sub)
        return section

    def free_mapping(self, node: Node, field: str, *, text_values: bool) -> _Section:
        """A mapping whose keys the user chooses (labels, ssh options, vars)."""
        name = field.rsplit(".", 1)[-1]
        mapping = self.mapping(node, field, must_be=f"'{name}' must be a mapping of names to values")
        section = _Section()
        for entry in mapping.entries:
            sub = f"{field}.{entry.key}"
            if text_values:
                value: Any = self.scalar(entry.value, sub, partial(values.text, what=f"'{entry.key}'"), raw=True)
            else:
                value = to_python(entry.value)
            section[entry.key] = _Setting(value, entry.key_line, sub)
        return section

    def roles(self, node: Node, field: str) -> tuple[str, ...]:
        if not isinstance(node, Sequence) or not node.items:  # one text, or none: values.roles says what is wrong
            return tuple(self.plain(values.roles)(node, field))
        read = (self.scalar(item, f"{field}[{i}]", values.role) for i, item in enumerate(node.items))
        return tuple(dict.fromkeys(read))  # each role once, in the order written, each error at its line

    # --- one host -----------------------------------------------------------------------

    def build_host(self, host_def: _HostDef, layers: list[Layer], groups: tuple[str, ...]) -> Host:
        merged: Layer = {}
        for layer in layers:
            merged = _merge(merged, layer)

        def value(key: str, default: Any = None) -> Any:
            setting = merged.get(key)
            return default if setting is None or setting.value is None else setting.value

        def section(key: str) -> dict[str, Any]:
            return {k: s.value for k, s in value(key, _Section()).items()}

        fabric, ssh, stack = section("fabric"), section("ssh"), section("stack")
        transport = value("transport", "ssh")
        return Host(
            name=host_def.name,
            address=value("address"),
            port=value("port"),
            user=value("user"),
            roles=value("roles", ("worker",)),
            rack=value("rack"),
            groups=groups,
            labels=tuple(section("labels").items()),
            fabric=Fabric(**{k: v for k, v in fabric.items() if v is not None}),
            ssh=SSHOptions(
                key_file=ssh.get("key_file"),
                jump_host=ssh.get("jump_host"),
                options=tuple((k, s.value) for k, s in (ssh.get("options") or {}).items()),
            ),
            transport=transport,
            profile=self.profile(host_def, merged.get("profile"), transport),
            mock_state=values.mock_state_folder(value("mock_state"), self.base_dir),
            stack=StackPin(**{k: v for k, v in stack.items() if v is not None}),
            gpus=value("gpus", True),
            vars=tuple(values.mask_secrets(section("vars")).items()),
            source=f"{self.file}:{host_def.line}",
        )

    def profile(self, host_def: _HostDef, setting: _Setting | None, transport: str) -> str | None:
        given = None if setting is None else setting.value
        # A fleet names its profile once (in defaults or a group): found on disk once per file.
        key = given if transport == "mock" and isinstance(given, str) else None
        if key is not None and key in self._profiles:
            return self._profiles[key]
        line, field = (host_def.line, f"hosts.{host_def.name}.profile") if setting is None or given is None \
            else (setting.line, setting.field)
        with self.values_at(line, field, f"host '{host_def.name}': "):
            found = values.host_profile(given, transport, self.base_dir,
                                        "Add 'profile: <folder with profile.yaml>' to the host, a group or defaults.")
        if key is not None:
            self._profiles[key] = found
        return found


def _merge(base: Layer, over: Layer) -> Layer:
    out = dict(base)
    for key, setting in over.items():
        below = out.get(key)
        if below is not None and isinstance(below.value, _Section) and isinstance(setting.value, _Section):
            out[key] = _Setting(_Section(_merge(below.value, setting.value)), setting.line, setting.field)
        else:
            out[key] = setting
    return out


# --- the schema: field name -> reader -------------------------------------------------------


def _optional(convert: Callable[[Any], Any], *, raw: bool = False) -> FieldReader:
    """A setting that may be left empty (``None``), else converted (``raw``: see ``NodeReader.scalar``)."""
    return lambda r, node, field: r.scalar(node, field, lambda v: None if v is None else convert(v), raw=raw)


def _checked(convert: Callable[[Any, str], Any], what: str) -> FieldReader:
    """An optional text setting (numbers as written) and its check, ``what`` naming it in messages."""
    return _optional(lambda v: convert(v, what), raw=True)


FABRIC_FIELDS: dict[str, FieldReader] = {
    "type": _optional(values.fabric_type),
    "rate_gbps": _optional(partial(values.positive_number, what="rate_gbps")),
    "hcas": lambda r, node, field: r.names(node, field),
    "within_rack_min": _optional(partial(values.fraction, what="within_rack_min")),
    "across_racks_min": _optional(partial(values.fraction, what="across_racks_min")),
    "latency_warn_us": _optional(partial(values.positive_number, what="latency_warn_us")),
    "latency_error_us": _optional(partial(values.positive_number, what="latency_error_us")),
    "rail_optimized": _optional(partial(values.boolean, what="rail_optimized")),
}

def _ssh_options(r: _Reader, node: Node, field: str) -> _Section:
    options = r.free_mapping(node, field, text_values=True)
    for key, setting in options.items():
        if key.lower() == "proxycommand":
            # Dropping it would connect directly, around the proxy the user set: refuse it.
            raise r.error("ProxyCommand is not supported: clusterctl connects through jump hosts only.",
                          line=setting.line, field=setting.field,
                          hint="Write ssh: {jump_host: '[user@]bastion[:port]'} (ProxyJump) instead.")
    return options


SSH_FIELDS: dict[str, FieldReader] = {
    "key_file": _checked(values.text, "key_file"),
    "jump_host": _checked(values.jump_host, "jump_host"),
    "options": _ssh_options,
}

STACK_FIELDS: dict[str, FieldReader] = {
    name: _checked(values.version, f"the {name} version") for name in StackPin.__dataclass_fields__
}

DEFAULT_FIELDS: dict[str, FieldReader] = {
    "port": _optional(values.port),
    "user": _checked(values.text, "user"),
    "roles": lambda r, node, field: r.roles(node, field),
    "rack": _checked(values.text, "rack"),
    "gpus": _optional(partial(values.boolean, what="gpus")),
    "labels": lambda r, node, field: r.free_mapping(node, field, text_values=True),
    "transport": lambda r, node, field: r.scalar(node, field, values.transport),
    "profile": _checked(values.text, "profile"),
    "mock_state": _checked(values.text, "mock_state"),
    "fabric": lambda r, node, field: r.settings(node, field, FABRIC_FIELDS),
    "ssh": lambda r, node, field: r.settings(node, field, SSH_FIELDS),
    "stack": lambda r, node, field: r.settings(node, field, STACK_FIELDS),
    "vars": lambda r, node, field: r.free_mapping(node, field, text_values=False),
}

HOST_FIELDS: dict[str, FieldReader] = {"address": _checked(values.address, "address"), **DEFAULT_FIELDS}

GROUP_FIELDS: dict[str, None] = {"vars": None, "hosts": None}

TOP_FIELDS: dict[str, None] = {"cluster": None, "defaults": None, "groups": None, "hosts": None, "bootstrap": None,
                                   "quarantine": None, "bmc": None}
