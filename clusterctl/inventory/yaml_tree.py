"""YAML read into a small tree that remembers the line of every key and value.

PyYAML's ``safe_load`` forgets where things were and silently keeps the last of two equal
keys, so a copy-pasted host would vanish without a word. Here the document is composed into
nodes and walked by hand: every mapping entry keeps its key's line, duplicate keys are an
error naming both lines, and scalars keep the text as written (``cuda: 12.10`` stays
``"12.10"`` when a field wants text). A JSON document is read into the same tree (``parse_json``),
so that its fields are checked by the same readers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterctl.errors import InventoryError, InventoryFileReader, UsageError
from clusterctl.json_input import read_yaml, syntax_error

#: Upper bound on nodes visited, so an alias bomb ("billion laughs") fails fast.
MAX_NODES = 200_000

_MERGE_TAG = "tag:yaml.org,2002:merge"
_STANDARD_TAG_PREFIX = "tag:yaml.org,2002:"


@dataclass(frozen=True)
class Scalar:
    value: Any
    #: The scalar exactly as written (without quotes).
    text: str
    line: int


@dataclass(frozen=True)
class Entry:
    key: str
    key_line: int
    value: Node


@dataclass(frozen=True)
class Mapping:
    entries: tuple[Entry, ...]
    line: int

    def get(self, key: str) -> Entry | None:
        return next((entry for entry in self.entries if entry.key == key), None)


@dataclass(frozen=True)
class Sequence:
    items: tuple[Node, ...]
    line: int


Node = Scalar | Mapping | Sequence


def to_python(node: Node | None) -> Any:
    """Plain dicts, lists and scalars, for free-form variables."""
    if node is None:
        return None
    if isinstance(node, Scalar):
        return node.value
    if isinstance(node, Sequence):
        return [to_python(item) for item in node.items]
    return {e.key: to_python(e.value) for e in node.entries}


def is_empty(node: Node) -> bool:
    """A key written with no value (``vars:``): every inventory format reads it as "nothing here"."""
    return isinstance(node, Scalar) and node.value is None


def as_mapping(node: Node) -> Mapping | None:
    """``node`` as a mapping, an empty one for a key with no value; ``None`` for a scalar or a
    list, so that the caller can say what it wanted there."""
    if isinstance(node, Mapping):
        return node
    return Mapping((), node.line) if is_empty(node) else None


def kind_of(node: Node | None) -> str:
    if node is None or is_empty(node):
        return "an empty value"
    if isinstance(node, Mapping):
        return "a mapping"
    if isinstance(node, Sequence):
        return "a list"
    return f"the value '{node.text}'"


def parse_yaml(text: str, file: str) -> Node | None:
    """The document's root node, or ``None`` for an empty document.

    Raises ``InventoryError`` with the line and column PyYAML reports for a syntax error.
    """
    try:
        return read_yaml(text, lambda loader: _Walker(loader, file).document())
    except InventoryError:
        raise
    except UsageError as exc:
        raise InventoryError(f"this is {exc.message}.", file=file, line=exc.line, hint="Check indentation, colons "
                             "after keys and matching quotes around that line.") from None


def parse_json(text: str, file: str) -> Node | None:
    """A JSON document as the same tree, every key and value with its line, read with the standard
    library alone (the node agent's config, on a node whose Python has no PyYAML); ``None`` for an
    empty one. A syntax error names its line and column, a key given twice both lines, as in YAML."""
    import json
    from bisect import bisect_left

    if not text.strip():
        return None
    try:
        json.loads(text)  # the syntax checked once: the walk below reads a valid document
    except json.JSONDecodeError as exc:
        raise InventoryError(f"this is not valid JSON at {syntax_error(exc)}.",
                             file=file, line=exc.lineno) from None
    except RecursionError:
        raise InventoryError("this JSON is nested too deep.", file=file) from None
    newlines = [at for at, char in enumerate(text) if char == "\n"]
    decoder = json.JSONDecoder()
    reader = InventoryFileReader()
    reader.file = file

    def line(at: int) -> int:
        return bisect_left(newlines, at) + 1

    def past(at: int, mark: str = "") -> int:
        """Past the blanks at ``at``, then past ``mark`` (a colon or a comma) and the blanks after it."""
        while text[at] in " \t\r\n":
            at += 1
        return past(at + 1) if mark and text[at] == mark else at

    def walk(at: int) -> tuple[Node, int]:
        if text[at] not in "{[":
            value, end = decoder.raw_decode(text, at)
            return Scalar(value, value if isinstance(value, str) else text[at:end], line(at)), end
        start, close = line(at), "}" if text[at] == "{" else "]"
        entries: dict[str, Entry] = {}
        items: list[Node] = []
        at = past(at + 1)
        while text[at] != close:
            if close == "]":
                item, at = walk(at)
                items.append(item)
            else:
                key, end = decoder.raw_decode(text, at)
                if key in entries:
                    raise reader.error(f"duplicate key '{key}': it is already defined at line "
                                       f"{entries[key].key_line}.", line(at), key,
                                       "JSON readers keep only the last one; remove one of them.")
                value, end = walk(past(end, ":"))
                entries[key] = Entry(key, line(at), value)
                at = end
            at = past(at, ",")
        return (Sequence(tuple(items), start) if close == "]" else Mapping(tuple(entries.values()), start)), at + 1

    return walk(past(0))[0]


class _Walker(InventoryFileReader):
    def __init__(self, loader: Any, file: str) -> None:
        self.loader = loader
        self.file = file
        self.visited = 0
        #: Nodes on the current path, to refuse an alias that contains itself.
        self.active: set[int] = set()

    def document(self) -> Node | None:
        """The loader's one document as a tree, or ``None`` for an empty one."""
        root = self.loader.get_single_node()
        return None if root is None else self.walk(root, "")

    def walk(self, node: Any, path: str) -> Node:
        import yaml

        self.visited += 1
        if self.visited > MAX_NODES:
            raise self.error(f"the document expands to more than {MAX_NODES} values (aliases repeated too often).",
                             node.start_mark.line + 1)
        line = node.start_mark.line + 1
        if id(node) in self.active:
            raise self.error("an alias refers to itself (recursive anchor).", line)
        if isinstance(node, yaml.ScalarNode):
            return Scalar(self._scalar_value(node), node.value, line)
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return Sequence(tuple(self.walk(item, path) for item in node.value), line)
            return self._mapping(node, line, path)
        finally:
            self.active.discard(id(node))

    def _scalar_value(self, node: Any) -> Any:
        # A tag PyYAML's safe loader does not know (Ansible's ``!vault``, ``!unsafe``) stays
        # opaque text instead of failing the whole inventory.
        if node.tag and not node.tag.startswith(_STANDARD_TAG_PREFIX):
            return node.value
        return self.loader.construct_object(node, deep=True)

    def _mapping(self, node: Any, line: int, path: str) -> Mapping:
        import yaml

        explicit: dict[str, Entry] = {}
        merged: dict[str, Entry] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if key_node.tag == _MERGE_TAG:
                # ``<<: *defaults``: inherited entries lose against keys written here.
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    inherited = self.walk(source, path)
                    if not isinstance(inherited, Mapping):
                        raise self.error("'<<' must merge a mapping.", key_line)
                    for entry in inherited.entries:
                        merged.setdefault(entry.key, entry)
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.error("a key must be a plain name, not a list or mapping.", key_line)
            key = key_node.value
            field = f"{path}.{key}" if path else key
            if key in explicit:
                what = "host" if path.rsplit(".", 1)[-1] == "hosts" else "key"
                raise self.error(f"duplicate {what} '{key}': it is already defined at line {explicit[key].key_line}.",
                                 key_line, field, "YAML would silently keep only the last one; remove or rename one "
                                 "of them.")
            explicit[key] = Entry(key, key_line, self.walk(value_node, field))
        entries = dict(merged)
        entries.update(explicit)
        return Mapping(tuple(entries.values()), line)
