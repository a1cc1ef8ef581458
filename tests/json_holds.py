"""Every fact a parser reads reaches the JSON: a parsed value compared, field by field, with its JSON."""

from __future__ import annotations

import dataclasses
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
