"""Ansible inventories (INI and YAML) read as they are, so a cluster needs no second inventory.

Both formats are first read into the same small tree (groups with hosts, children and vars;
hosts with vars; every var with its line), then resolved the way Ansible does: a host gets
the vars of every group it belongs to, directly or through ``children``, applied from the
shallowest group to the deepest (``all`` first, equal depths by name), then its own vars.

Variables become host fields in ``ansible_vars``; everything clusterctl does not interpret
is kept in ``Host.vars``, secrets masked.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.errors import BadValue, InventoryFileReader
from clusterctl.hostlist import MAX_RANGE_HOSTS, padded_numbers
from clusterctl.inventory import values
from clusterctl.inventory.ansible_vars import HostBuilder, Var
from clusterctl.inventory.model import Host, Inventory
from clusterctl.inventory.yaml_tree import Mapping, Node, Scalar, as_mapping, is_empty, kind_of, to_python

_RANGE = re.compile(r"\[([0-9a-zA-Z]+):([0-9a-zA-Z]+)(?::([0-9]+))?\]")


@dataclass
class _Group:
    name: str
    line: int
    #: Its hosts in the order named, each once (a dict: 'name in list' per host made big ranges quadratic).
    hosts: dict[str, None] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    vars: dict[str, Var] = field(default_factory=dict)


@dataclass
class _HostDef:
    name: str
    line: int
    vars: dict[str, Var] = field(default_factory=dict)


class _Tree(InventoryFileReader):
    """Groups and hosts in the order the file names them."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.groups: dict[str, _Group] = {"all": _Group("all", 1)}
        self.hosts: dict[str, _HostDef] = {}

    def group(self, name: str, line: int) -> _Group:
        if name not in self.groups:
            self.groups[name] = _Group(name, line)
        return self.groups[name]

    def add_host(self, group: str, name: str, line: int, host_vars: dict[str, Var]) -> None:
        if name not in self.hosts:
            with self.values_at(line, name):
                values.host_name(name)
        host = self.hosts.setdefault(name, _HostDef(name, line))
        host.vars.update(host_vars)
        self.group(group, line).hosts.setdefault(name)

    def add_host_pattern(self, group: str, pattern: str, line: int, host_vars: dict[str, Var]) -> None:
        """Add every host a pattern such as ``gpu[01:04]`` names (both formats write ranges)."""
        with self.values_at(line, pattern):
            names = expand_host_range(pattern)
        for name in names:
            self.add_host(group, name, line, dict(host_vars))


# --- INI --------------------------------------------------------------------------------------


def parse_ansible_ini(text: str, *, file: str, base_dir: Path) -> Inventory:
    tree = _Tree(file)
    group, kind = "ungrouped", "hosts"
    for line_number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            group, kind = _ini_section(tree, line, line_number)
            continue
        if kind == "hosts":
            _ini_host_line(tree, group, line, line_number)
        elif kind == "vars":
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise tree.error(
                    f"expected 'name=value' in [{group}:vars], found '{line}'.", line_number, f"{group}:vars"
                )
            tree.group(group, line_number).vars[key.strip()] = Var(_ini_value(value.strip()), line_number)
        else:
            child = _shlex(tree, line, line_number)[0]
            children = tree.group(group, line_number).children
            tree.group(child, line_number)
            if child not in children:
                children.append(child)
    return _resolve(tree, base_dir, "ansible-ini")


def _ini_section(tree: _Tree, line: str, line_number: int) -> tuple[str, str]:
    match = re.fullmatch(r"\[([^\]:\s]+)(?::([^\]\s]*))?\]\s*(?:[#;].*)?", line)
    if not match:
        raise tree.error(
            f"cannot read the section header '{line}'.",
            line_number,
            hint="Write [group], [group:vars] or [group:children].",
        )
    name, kind = match.group(1), match.group(2) or "hosts"
    if kind not in ("hosts", "vars", "children"):
        hint = values.did_you_mean(kind, ("vars", "children")) or "Valid kinds: vars, children."
        raise tree.error(f"unknown section kind ':{kind}' in '{line}'.", line_number, hint=hint)
    tree.group(name, line_number)
    return name, kind


def _ini_host_line(tree: _Tree, group: str, line: str, line_number: int) -> None:
    # Ansible splits host lines like a shell would (quotes group words, '#' starts a comment),
    # but nothing here is ever run: a name like 'gpu;reboot' stays that exact text.
    tokens = _shlex(tree, line, line_number)
    if not tokens:
        return
    pattern, port = _split_port(tokens[0])
    host_vars: dict[str, Var] = {}
    if port is not None:
        host_vars["ansible_port"] = Var(port, line_number)
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise tree.error(
                f"expected 'name=value' after the host name, found '{token}'.",
                line_number,
                pattern,
                hint="Host variables are written 'gpu01 ansible_host=10.0.0.11 ansible_user=ubuntu'.",
            )
        host_vars[key] = Var(_ini_value(value), line_number)
    tree.add_host_pattern(group, pattern, line_number, host_vars)


def _shlex(tree: _Tree, line: str, line_number: int) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError as exc:
        raise tree.error(f"cannot split this line into words: {exc}.", line_number, hint="Check the quotes.") from None


def _split_port(pattern: str) -> tuple[str, str | None]:
    """``gpu01:2222`` -> (``gpu01``, ``2222``); IPv6 addresses and ranges keep their colons."""
    outside_ranges = re.sub(r"\[[^\]]*\]", "", pattern)
    if outside_ranges.count(":") == 1:
        name, _, port = pattern.rpartition(":")
        if port.isdigit() and name:
            return name, port
    return pattern, None


def _ini_value(raw: str) -> Any:
    """A value as Ansible's INI reader gives it: quoted text unquoted, everything else as written."""
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        try:
            return ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return raw[1:-1]
    return raw


_BROKEN_RANGE = re.compile(r"\[([^\]:]*):([^\]]*)\]")
#: The hint of a range that cannot be read.
_RANGE_FORMS = "Ranges look like [01:16] or [a:f], optionally with a step: [1:9:2]."


def _too_many(pattern: str, count: int) -> BadValue:
    return BadValue(f"the host range in '{pattern}' names {count:,} hosts, more than the limit of "
                    f"{MAX_RANGE_HOSTS:,}.", "Check the range's end.")


def expand_host_range(pattern: str) -> list[str]:
    """``gpu[01:04]`` -> gpu01..gpu04 (zero padding kept), ``n[a:c]``, ``[1:9:2]`` with a step."""
    match = _RANGE.search(pattern)
    if not match:
        broken = _BROKEN_RANGE.search(pattern)
        if broken and not _is_ipv6(broken.group(0)[1:-1]):
            # Ansible refuses 'z[1:]' too; taken literally it would become a host named 'z[1:]'.
            raise BadValue(f"the host range in '{pattern}' is incomplete.", _RANGE_FORMS)
        return [pattern]
    start, end, step_text = match.group(1), match.group(2), match.group(3)
    step = int(step_text) if step_text else 1
    head, tail = pattern[: match.start()], pattern[match.end() :]
    if step < 1:
        raise BadValue(f"the range step in '{pattern}' must be at least 1.")
    if start.isdigit() and end.isdigit():
        first, last = int(start), int(end)
        numbers = range(first, last + 1, step)
        if len(numbers) > MAX_RANGE_HOSTS:
            raise _too_many(pattern, len(numbers))
        items = padded_numbers(start, end, step)
    elif len(start) == 1 and len(end) == 1 and start.isalpha() and end.isalpha():
        first, last = ord(start), ord(end)
        items = [chr(c) for c in range(first, last + 1, step)]
    else:
        raise BadValue(f"cannot expand the host range in '{pattern}'.", _RANGE_FORMS)
    if first > last:
        raise BadValue(f"the host range in '{pattern}' goes backwards ({start} > {end}).")
    names = [name for item in items for name in expand_host_range(head + item + tail)]
    if len(names) > MAX_RANGE_HOSTS:  # nested ranges multiply
        raise _too_many(pattern, len(names))
    return names


def _is_ipv6(text: str) -> bool:
    return text.count(":") >= 2 and all(c in "0123456789abcdefABCDEF:." for c in text)


# --- YAML -------------------------------------------------------------------------------------


def parse_ansible_yaml(root: Node | None, *, file: str, base_dir: Path) -> Inventory:
    tree = _Tree(file)
    if not isinstance(root, Mapping):
        line = root.line if root is not None else 1
        raise tree.error(f"an Ansible YAML inventory must be a mapping with 'all:', not {kind_of(root)}.", line)
    for entry in root.entries:
        _yaml_group(tree, entry.key, entry.key_line, entry.value, parent=None)
    return _resolve(tree, base_dir, "ansible-yaml")


def _yaml_group(tree: _Tree, name: str, line: int, node: Node, parent: str | None) -> None:
    group = tree.group(name, line)
    if parent is not None and name not in tree.groups[parent].children:
        tree.groups[parent].children.append(name)
    group_body = as_mapping(node)
    if group_body is None:
        raise tree.error(
            f"group '{name}' must be a mapping with 'hosts', 'children' or 'vars', not {kind_of(node)}.",
            node.line,
            name,
        )
    for entry in group_body.entries:
        if entry.key not in ("hosts", "children", "vars"):
            hint = values.did_you_mean(entry.key, ("hosts", "children", "vars"))
            raise tree.error(
                f"unknown key '{entry.key}' in group '{name}'.",
                entry.key_line,
                f"{name}.{entry.key}",
                hint or "A group has only 'hosts', 'children' and 'vars'.",
            )
        body = as_mapping(entry.value)
        if body is None:
            raise tree.error(
                f"'{entry.key}' of group '{name}' must be a mapping, not {kind_of(entry.value)}.",
                entry.key_line,
                f"{name}.{entry.key}",
                "Ansible YAML lists hosts as keys: 'hosts: {gpu01: {ansible_host: 10.0.0.11}}'.",
            )
        if entry.key == "vars":
            group.vars.update(_yaml_vars(body))
        elif entry.key == "children":
            for child in body.entries:
                _yaml_group(tree, child.key, child.key_line, child.value, parent=name)
        else:
            for host in body.entries:
                _yaml_host(tree, name, host.key, host.key_line, host.value)


def _yaml_host(tree: _Tree, group: str, pattern: str, line: int, node: Node) -> None:
    host_vars: dict[str, Var] = {}
    if isinstance(node, Mapping):
        host_vars = _yaml_vars(node)
    elif not is_empty(node):
        raise tree.error(
            f"host '{pattern}' must map to its variables (or nothing), not {kind_of(node)}.",
            node.line,
            f"{group}.hosts.{pattern}",
        )
    tree.add_host_pattern(group, pattern, line, host_vars)


def _yaml_vars(node: Mapping) -> dict[str, Var]:
    out: dict[str, Var] = {}
    for entry in node.entries:
        value = entry.value
        # Numbers keep the text as written where a version or name is meant (cuda 12.10).
        plain = value.text if isinstance(value, Scalar) and isinstance(value.value, float) else to_python(value)
        out[entry.key] = Var(plain, entry.key_line)
    return out


# --- from the tree to the model ---------------------------------------------------------------


def _resolve(tree: _Tree, base_dir: Path, fmt: str) -> Inventory:
    ungrouped = tree.group("ungrouped", 1)
    depth, ancestors = _walk(tree, _parents(tree))
    order = {name: index for index, name in enumerate(tree.groups)}
    grouped = {host for g in tree.groups.values() if g.name not in ("all", "ungrouped") for host in g.hosts}
    # Ungrouped: the hosts no real group names, in file order (as Ansible does).
    ungrouped.hosts = dict.fromkeys(n for n in [*ungrouped.hosts, *tree.hosts] if n not in grouped)

    memberships: dict[str, set[str]] = {name: set() for name in tree.hosts}
    for group in tree.groups.values():
        for host in group.hosts:
            memberships[host].update(ancestors[group.name])
    hosts: list[Host] = []
    for host_def in tree.hosts.values():
        groups = sorted(memberships[host_def.name] | {"all"}, key=lambda g: (depth[g], g))
        merged: dict[str, Var] = {}
        for group_name in groups:
            merged.update(tree.groups[group_name].vars)
        merged.update(host_def.vars)
        listed = tuple(sorted(memberships[host_def.name] - {"all"}, key=lambda g: order[g]))
        hosts.append(HostBuilder(file=tree.file, name=host_def.name, line=host_def.line, vars=merged, groups=listed,
                                 base_dir=base_dir).build())

    group_hosts = {name: tuple(h.name for h in hosts if name in h.groups) for name in tree.groups
                   if name != "all" and (name != "ungrouped" or ungrouped.hosts)}
    if not hosts:
        raise tree.error("the inventory lists no hosts.", None, hint="Add host lines under a [group] section.")
    return Inventory(name=Path(tree.file).stem, hosts=tuple(hosts), groups=group_hosts, source=tree.file, format=fmt)


def _parents(tree: _Tree) -> dict[str, set[str]]:
    parents: dict[str, set[str]] = {name: set() for name in tree.groups}
    for group in tree.groups.values():
        for child in group.children:
            parents[child].add(group.name)
    for name, found in parents.items():
        if name != "all" and not found:
            found.add("all")
    return parents


def _walk(tree: _Tree, parents: dict[str, set[str]]) -> tuple[dict[str, int], dict[str, set[str]]]:
    """Each group's depth below ``all`` and its ancestors (itself included), in one walk up ``parents``; a loop is
    an error, one through ``all`` too (as in Ansible: ``all`` holds every group, so none can hold it)."""
    depth: dict[str, int] = {}
    ancestors: dict[str, set[str]] = {}

    def visit(name: str, path: tuple[str, ...]) -> int:
        if name in path:
            cycle = " -> ".join((*path[path.index(name) :], name))
            raise tree.error(
                f"the groups contain each other in a loop: {cycle}.",
                tree.groups[name].line,
                f"{name}:children",
            )
        if name not in depth:
            parent_depths = [visit(p, (*path, name)) for p in parents[name]]
            depth[name] = 0 if name == "all" else 1 + max(parent_depths)
            ancestors[name] = {name}.union(*(ancestors[p] for p in parents[name]))
        return depth[name]

    for name in tree.groups:
        visit(name, ())
    return depth, ancestors
