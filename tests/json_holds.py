"""Every fact a parser reads reaches the JSON: a parsed value compared, field by field, with its JSON (``json_holds``),
or each field changed in turn where the JSON is made of the facts rather than their copy (``fields_unreached``)."""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from functools import partial
from typing import Any


def json_holds(value: Any, plain: Any, path: str) -> int:
    """Assert ``plain`` (the JSON) holds ``value`` field by field; returns how many leaves were compared."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        assert isinstance(plain, dict), f"{path}: {type(value).__name__} is not an object in the JSON"
        count = 0
        for field in dataclasses.fields(value):
            assert field.name in plain, f"{path}.{field.name} is not in the JSON"
            count += json_holds(getattr(value, field.name), plain[field.name], f"{path}.{field.name}")
        return count
    if isinstance(value, tuple) and isinstance(plain, dict):  # a tuple written as a named record, in its order
        assert len(plain) == len(value), f"{path}: {len(value)} items, JSON {plain!r:.80}"
        return json_holds(value, list(plain.values()), path)
    if isinstance(value, (tuple, list)):
        assert isinstance(plain, list) and len(plain) == len(value), f"{path}: {len(value)} items, JSON {plain!r:.80}"
        return sum(json_holds(item, plain[i], f"{path}[{i}]") for i, item in enumerate(value))
    if isinstance(value, (set, frozenset)):
        assert isinstance(plain, list) and sorted(plain) == sorted(value), f"{path}: {value!r}, JSON {plain!r}"
        return len(value) or 1
    if isinstance(value, dict):
        assert isinstance(plain, dict) and set(map(str, value)) == set(plain), f"{path}: keys differ"
        return sum(json_holds(item, plain[str(key)], f"{path}[{key!r}]") for key, item in value.items())
    assert plain == value, f"{path}: parsed {value!r}, JSON has {plain!r}"
    return 1


# --- every field reaches the JSON: each field changed in turn must change the JSON ------------------


def fields_unreached(values: Iterable[Any], render: Callable[[Any], Any]) -> set[str]:
    """``Class.field`` names of the dataclass fields in ``values`` (parsed results, walked through tuples,
    dicts and nested dataclasses) whose change leaves ``render(value)`` the same: facts that do not reach
    the JSON. Each field of each item is changed in turn (a value of its type where it is empty: one item
    made of such values in an empty tuple of dataclasses); a field is reached when one change in one of
    ``values`` shows. A field holding dataclasses is reached through theirs."""
    seen: set[str] = set()
    reached: set[str] = set()
    for value in values:
        before = json.dumps(render(value), sort_keys=True, default=str)
        for name, change in _changes(value):
            seen.add(name)
            if change is None:
                reached.add(name)  # a field holding dataclasses: reached through their fields
            elif name not in reached and json.dumps(render(change()), sort_keys=True, default=str) != before:
                reached.add(name)
    return seen - reached


Change = Callable[[], Any]


def assert_reached_but(exempt: dict[str, str], values: Iterable[Any], render: Callable[[Any], Any]) -> None:
    """Every field of ``values`` reaches ``render``'s JSON, but those ``exempt`` names (field: why), and each
    of those is still one that does not (an exemption nothing needs any more fails too)."""
    unreached = fields_unreached(values, render)
    assert {name: exempt.get(name, "a fact the JSON lacks") for name in unreached} == \
        {name: why for name, why in exempt.items() if name in unreached}


def demo_json(command: str, schema: str) -> dict[str, Any]:
    """``clusterctl -o json COMMAND`` on the bundled demo, checked against its schema file."""
    import jsonschema
    from clirun import DEMO, REPO_ROOT, clusterctl

    data: dict[str, Any] = clusterctl("-i", str(DEMO), "-o", "json", command).json()
    jsonschema.validate(data, json.loads((REPO_ROOT / "clusterctl" / "schemas" / schema).read_text()))
    return data


def _changes(value: Any) -> Iterator[tuple[str, Change | None]]:
    """(``Class.field``, what makes ``value`` with that one field of one item changed) for every field in
    ``value``; ``None`` for a field that holds dataclasses (their fields are walked in turn). Made only when
    called: a matrix of 700 links is not copied 4,000 times for fields already found."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        hints = typing.get_type_hints(type(value))
        for field in dataclasses.fields(value):
            current = getattr(value, field.name)
            if _holds_dataclasses(current):
                yield f"{type(value).__name__}.{field.name}", None
            else:
                other = partial(_other, current, hints[field.name])
                yield f"{type(value).__name__}.{field.name}", partial(_replaced, value, field.name, other)
            for inner, change in _changes(current):
                yield inner, change and partial(_replaced, value, field.name, change)
    elif isinstance(value, tuple):
        for index, item in enumerate(value):
            for inner, change in _changes(item):
                yield inner, change and partial(_item_replaced, value, index, change)
    elif isinstance(value, dict):
        for key, item in value.items():
            for inner, change in _changes(item):
                yield inner, change and partial(_item_replaced, value, key, change)


def _replaced(value: Any, name: str, change: Change) -> Any:
    return dataclasses.replace(value, **{name: change()})


def _item_replaced(value: Any, key: Any, change: Change) -> Any:
    if isinstance(value, dict):
        return _same_kind(value, {**value, key: change()})
    items = list(value)
    items[key] = change()
    return _same_kind(value, items)


def _holds_dataclasses(current: Any) -> bool:
    return any(dataclasses.is_dataclass(item) for item in (current if isinstance(current, tuple) else (current,)))


def _same_kind(value: Any, items: Any) -> Any:
    """``items`` as ``value``'s type: a parser's tuple or dict subclass keeps its warnings and source."""
    if type(value) in (tuple, dict):
        return type(value)(items)
    if isinstance(value, dict):
        made = type(value)(items)
        made.warnings = value.warnings
        return made
    extra = {"source": value.source} if hasattr(value, "source") else {}
    return type(value)(items, value.warnings, **extra)


def _other(value: Any, hint: Any) -> Any:
    """A value unlike ``value``, of its type (of the type ``hint`` names where ``value`` is empty)."""
    if value is None or value == () or value == {}:
        return _of_type(hint)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 7777
    if isinstance(value, datetime):
        return value + timedelta(days=7777)
    if isinstance(value, str):
        # A name with a number (GPU3, mlx5_0) gets another number: code that reads the number still can.
        number = re.fullmatch(r"(.*?)(\d+)", value)
        return f"{number.group(1)}{int(number.group(2)) + 7777}" if number else value + "-changed"
    if isinstance(value, tuple):
        first = value[0]  # one more item, shaped as the first (a GID is a tuple of three)
        return (*value, tuple(_other(x, None) for x in first) if isinstance(first, tuple) else _other(first, None))
    if isinstance(value, dict):
        key, item = next(iter(value.items()))
        return {**value, _other(key, None): item}
    if isinstance(value, frozenset):
        return value | {_other(next(iter(value)), None)}
    raise TypeError(f"no changed value for {value!r}")


def _of_type(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None) and a is not Ellipsis]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _of_type(args[0])
    if origin is tuple:
        return (_of_type(args[0]),) if len(args) == 1 else tuple(_of_type(a) for a in args)
    if origin is dict:
        return {_of_type(args[0]): _of_type(args[1])}
    if origin is frozenset:
        return frozenset({_of_type(args[0])})
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return hint(**{f.name: _of_type(hints[f.name]) for f in dataclasses.fields(hint)})
    return {bool: True, int: 7777, float: 77.25, str: "changed"}[hint]
