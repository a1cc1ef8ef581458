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

#: Exactly these types are plain already (subclasses, such as str enums, are not).
_SCALARS = frozenset({str, int, float, bool, type(None)})


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
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Secret):
        return str(value)  # the mask: a secret never reaches JSON, YAML or a saved file
    return value


def dumps_indented(value: Any) -> str:
    """``json.dumps(to_plain(value), indent=2)``: the same text, in one walk and much less time.

    The standard library encodes indented JSON in Python generators (its C encoder does not
    indent) after ``to_plain`` walked the values once already: a 1,000-host survey's 27 MB
    took longer to print than to read its hosts. Here plain values (exactly ``str``, ``int``,
    ``float``, ``bool``, ``None``, ``dict``, ``list``, ``tuple``) are written as they are met,
    strings escaped by the C escaper, and anything else goes through ``to_plain`` first.
    """
    pieces: list[str] = []
    _encode(value, "\n", pieces.append)
    return "".join(pieces)


def _encode(value: Any, newline: str, add: Callable[[str], None]) -> None:
    """Append ``value``'s pieces; ``newline`` is the line break and indentation ``value`` starts at."""
    kind = type(value)
    if kind is str:
        add(encode_basestring_ascii(value))
    elif value is None:
        add("null")
    elif value is True:
        add("true")
    elif value is False:
        add("false")
    elif kind is int:
        add(int.__repr__(value))
    elif kind is float:
        add(_FLOAT_WORDS.get(value, "NaN") if value != value or value in _FLOAT_WORDS else float.__repr__(value))
    elif kind is dict:
        if not value:
            add("{}")
            return
        inner = newline + "  "
        separator = "," + inner
        add("{" + inner)
        first = True
        for key, item in value.items():
            if not first:
                add(separator)
            first = False
            add(encode_basestring_ascii(key if type(key) is str else str(key)) + ": ")
            _encode(item, inner, add)
        add(newline + "}")
    elif kind is list or kind is tuple:
        if not value:
            add("[]")
            return
        inner = newline + "  "
        separator = "," + inner
        add("[" + inner)
        first = True
        for item in value:
            if not first:
                add(separator)
            first = False
            _encode(item, inner, add)
        add(newline + "]")
    else:
        plain = to_plain(value)
        if plain is not value:
            _encode(plain, newline, add)
        elif isinstance(value, str):  # a str subclass to_plain keeps: json writes its text
            add(encode_basestring_ascii(value))
        elif isinstance(value, int):
            add(int.__repr__(value))
        elif isinstance(value, float):
            add(float.__repr__(value))
        else:
            raise TypeError(f"Object of type {kind.__name__} is not JSON serializable")


#: How ``json.dumps`` writes the floats that are not numbers.
_FLOAT_WORDS = {float("inf"): "Infinity", float("-inf"): "-Infinity"}
