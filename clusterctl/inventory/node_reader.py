"""Reading YAML nodes with the file and line of every error: the part every section reader shares.

``native._Reader`` (the document: defaults, groups, hosts) and the section readers
(``bootstrap_section``, ``quarantine_section``, ``bmc_section``) all read through it, so none
needs another: a typed section is a table of field readers handed to ``NodeReader.fields``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from clusterctl.errors import InventoryFileReader
from clusterctl.inventory import values
from clusterctl.inventory.yaml_tree import Entry, Mapping, Node, Scalar, Sequence, as_mapping, kind_of, to_python

#: Reads one field of a section: its node and its path (``quarantine.heal.passes``) -> the typed value.
ValueReader = Callable[[Node, str], Any]


class NodeReader(InventoryFileReader):
    """Errors, scalars, mappings and name lists of one inventory file, each error naming file, line and field."""

    def __init__(self, file: str, base_dir: Path) -> None:
        self.file = file
        self.base_dir = base_dir

    def check_field(self, entry: Entry, known: Collection[str], field: str) -> None:
        """``entry``'s key is one of ``known``; else "unknown field" at its line (``field``: its path)."""
        if entry.key not in known:
            raise self.error(f"unknown field '{entry.key}'.", line=entry.key_line, field=field,
                             hint=values.did_you_mean(entry.key, known) or values.fields_hint(known))

    def fields(self, node: Node, field: str, readers: dict[str, ValueReader], *, what: str = "settings",
               refused: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
        """The section ``field`` (``""``: the whole file) of ``what``: each field written, read by its reader (the
        keys of ``readers`` are the valid fields, in the order a hint lists them); a field of ``refused`` is its
        (message, hint)."""
        out: dict[str, Any] = {}
        named = f"'{field}'" if field else "the file"
        for entry in self.mapping(node, field, must_be=f"{named} must be a mapping of {what}",
                                  hint=values.fields_hint(readers)).entries:
            sub = f"{field}.{entry.key}" if field else entry.key
            if refused and entry.key in refused:
                message, hint = refused[entry.key]
                raise self.error(message, line=entry.key_line, field=sub, hint=hint)
            self.check_field(entry, readers, sub)
            out[entry.key] = readers[entry.key](entry.value, sub)
        return out

    def plain(self, convert: Callable[[Any], Any]) -> ValueReader:
        """A field reader: the value as plain data (``to_python``: lists and mappings too), converted."""
        def read(node: Node, field: str) -> Any:
            with self.values_at(node.line, field):
                return convert(to_python(node))
        return read

    def single(self, convert: Callable[[Any], Any], *, raw: bool = False) -> ValueReader:
        """A field reader: one scalar, converted (see ``scalar``)."""
        return lambda node, field: self.scalar(node, field, convert, raw=raw)

    def mapping(self, node: Node, field: str, *, must_be: str, hint: str | None = None) -> Mapping:
        """``node`` as a mapping (empty for a key with no value), else the error "{must_be}, not ..."."""
        mapping = as_mapping(node)
        if mapping is None:
            raise self.error(f"{must_be}, not {kind_of(node)}.", line=node.line, field=field, hint=hint)
        return mapping

    def scalar(self, node: Node, field: str, convert: Callable[[Any], Any], *, raw: bool = False) -> Any:
        """One scalar, converted; ``raw`` passes numbers as written (``12.10``, not ``12.1``)."""
        if not isinstance(node, Scalar):
            raise self.error(f"expected a single value here, found {kind_of(node)}.", line=node.line, field=field)
        value = node.value
        if raw and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = node.text
        with self.values_at(node.line, field):
            return convert(value)

    def names(self, node: Node, field: str) -> tuple[str, ...]:
        if isinstance(node, Sequence):
            return tuple(
                self.scalar(item, f"{field}[{i}]", lambda v: values.text(v, "a name"), raw=True)
                for i, item in enumerate(node.items)
            )
        return tuple(self.scalar(node, field, lambda v: values.text_list(v, "this list"), raw=True))
