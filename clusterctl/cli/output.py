"""Turning results into JSON/YAML and into the small rich pieces every command shares."""

from __future__ import annotations

import json
from typing import Any

from clusterctl.plain_json import to_plain

__all__ = ["SEVERITY_STYLE", "dump", "to_plain"]


def dump(payload: Any, fmt: str) -> str:
    plain = to_plain(payload)
    if fmt == "json":
        return json.dumps(plain, indent=2, sort_keys=False) + "\n"
    import yaml

    return str(yaml.safe_dump(plain, sort_keys=False, default_flow_style=False, allow_unicode=True))


SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan", "ok": "green"}
