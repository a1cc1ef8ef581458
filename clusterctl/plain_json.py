"""The one conversion of clusterctl's data to plain JSON values (``-o json``, saved reports, findings)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from clusterctl.secret import Secret


def to_plain(value: Any) -> Any:
    """Dataclasses, enums, tuples and paths as JSON-ready dicts/lists/strings."""
    # Plain values first: reports are mostly strings and numbers already (a 1,000-host survey
    # walks a few million of them), so the common case must cost one isinstance check.
    if value is None or (isinstance(value, (str, int, float, bool)) and not isinstance(value, Enum)):
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
