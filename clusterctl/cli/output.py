"""Turning results into JSON/YAML and into the small rich pieces every command shares."""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from pathlib import Path
from typing import Any

from clusterctl.secret import Secret, mask_text


def to_plain(value: Any) -> Any:
    """Dataclasses, enums, tuples and paths as JSON-ready dicts/lists/strings."""
    # Plain values first: reports are mostly strings and numbers already (a 1,000-host survey
    # walks a few million of them), so the common case must cost one isinstance check.
    if value is None or (isinstance(value, (str, int, float, bool)) and not isinstance(value, Enum)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return {f.name: to_plain(getattr(value, f.name)) for f in fields if not f.name.startswith("_")}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Secret):
        return str(value)  # the mask
    return value


def dump(payload: Any, fmt: str) -> str:
    """JSON or YAML text; any registered secret that slipped into a value is masked."""
    plain = to_plain(payload)
    if fmt == "json":
        return mask_text(json.dumps(plain, indent=2, sort_keys=False) + "\n")
    import yaml

    return mask_text(str(yaml.safe_dump(plain, sort_keys=False, default_flow_style=False, allow_unicode=True)))


SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan", "ok": "green"}
