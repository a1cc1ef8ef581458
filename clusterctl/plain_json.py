"""The one conversion of clusterctl's data to plain JSON values (``-o json``, saved reports, findings),
and the indented JSON text of such values (``dumps_indented``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from enum import Enum
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

from clusterctl.secret import Secret


def _float_text(value: float) -> str:
    return _FLOAT_WORDS.get(value, "NaN") if value != value or value in _FLOAT_WORDS else float.__repr__(value)


#: The plain scalars, by their exact type (subclasses, such as str enums, are not plain; ``bool`` is not
#: ``int`` here), and the JSON text of each.
_SCALARS: dict[type, Callable[[Any], str]] = {
    str: encode_basestring_ascii, int: int.__repr__, float: _float_text,
    bool: lambda value: "true" if value else "false", type(None): lambda _value: "null",
}


def to_plain(value: Any) -> Any:
    """Dataclasses, enums, tuples and paths as JSON-ready dicts/lists/strings."""
    # Plain values first: reports are mostly strings and numbers already, in plain dicts and
    # lists (a 1,000-host survey walks a few million of them), so the common case is one type
    # look-up per value and no call.
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): v if type(v) in _SCALARS else to_plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _SCALARS else to_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) and not isinstance(value, Enum):
        return value
    to_json = getattr(value, "to_json", None)
    if callable(to_json) and not isinstance(value, type):
        # Types with a documented JSON shape of their own (Finding, Change) keep it everywhere.
        return to_plain(to_json())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return {f.name: to_plain(getattr(value, f.name)) for f in fields if not f.name.startswith("_")}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_plain(v) for v in value]
    if isinstance(value, (Path, Secret)):
        return str(value)  # a Secret's text is its mask: a secret never reaches JSON, YAML or a saved file
    return value


def dumps_indented(value: Any) -> str:
    """``json.dumps(to_plain(value), indent=2)``: the same text, in one walk and much less time.

    The standard library encodes indented JSON in Python generators (its C encoder does not
    indent) after ``to_plain`` walked the values once already: a 1,000-host survey's 27 MB
    took longer to print than to read its hosts. Here plain values (exactly ``str``, ``int``,
    ``float``, ``bool``, ``None``, ``dict``, ``list``, ``tuple``) are written as they are met,
    scalars inline by the C escaper and ``repr`` (no call of ours per value), and anything else
    goes through ``to_plain`` first. A list met again at the same depth (a report's alike hosts
    share the parts made from identical outputs) is written from the text of its last writing, and
    so is a dict (health's facts of alike hosts are the same dicts, ``health.summary.host_facts``).
    """
    return _IndentedWriter().text(value, "\n")


class _IndentedWriter:
    """One ``dumps_indented`` call, and the texts of the containers it met more than once.

    Identities are safe keys for the length of the call: the value being written holds every
    container in it, nothing changes it meanwhile, and what ``to_plain`` makes on the way is kept
    here until the end, so no identity is reused. Only a container met a second time has its text
    kept (keeping every text would hold the document several times over).
    """

    def __init__(self) -> None:
        self._met: set[tuple[int, str]] = set()
        self._texts: dict[tuple[int, str], str] = {}
        self._made: list[Any] = []

    def text(self, value: Any, newline: str) -> str:
        """``value``'s text; ``newline`` is the line break and indentation it starts at."""
        kind = type(value)
        scalar = _SCALARS.get
        if kind is dict or kind is list or kind is tuple:
            if not value:
                return "{}" if kind is dict else "[]"
            key = (id(value), newline)
            found = self._texts.get(key)
            if found is not None:
                return found
            inner = newline + "  "
            if kind is dict:
                parts = [f"{encode_basestring_ascii(name if type(name) is str else str(name))}: "
                         f"{write(item) if (write := scalar(type(item))) is not None else self.text(item, inner)}"
                         for name, item in value.items()]
                written = f"{{{inner}{(',' + inner).join(parts)}{newline}}}"
            else:
                parts = [write(item) if (write := scalar(type(item))) is not None else self.text(item, inner)
                         for item in value]
                written = f"[{inner}{(',' + inner).join(parts)}{newline}]"
            if key in self._met:
                self._texts[key] = written
            else:
                self._met.add(key)
            return written
        write = scalar(kind)
        if write is not None:
            return write(value)
        plain = to_plain(value)
        if plain is not value:
            self._made.append(plain)  # alive until the end: its containers' identities stay theirs
            return self.text(plain, newline)
        for base in (str, int, float):  # a subclass to_plain keeps: written as json writes its base type
            if isinstance(value, base):
                return _SCALARS[base](value)
        raise TypeError(f"Object of type {kind.__name__} is not JSON serializable")


#: How ``json.dumps`` writes the floats that are not numbers.
_FLOAT_WORDS = {float("inf"): "Infinity", float("-inf"): "-Infinity"}
