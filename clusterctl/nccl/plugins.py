"""Values of plugin variables, checked the way each plugin reads them (data/plugin_vars.yaml).

The plugins differ: Google's TCPXO plugin parses integers with absl::SimpleAtoi and ignores a
value outside its [min, max] (keeping the default); aws-ofi-nccl takes true/false or an integer
for booleans, compares enum words case-insensitively, and fails to initialise on a value it
cannot convert; plugins built on NCCL's NCCL_PARAM read integers with strtoll.
"""

from __future__ import annotations

import re

from clusterctl.nccl.grammar import ValueProblem, invalid, matching_choice
from clusterctl.nccl.knowledge import VariableInfo

_INT_RE = re.compile(r"^\s*[+-]?\d+\s*$")


def _consequence(info: VariableInfo) -> str:
    plugin = info.plugin
    if plugin is None:
        return "the plugin does not accept it"
    if plugin.id == "aws-ofi-nccl":
        return "aws-ofi-nccl fails to initialise (EINVAL)"
    if plugin.id == "gpudirect-tcpxo":
        return f"the TCPXO plugin ignores it and keeps its default ({info.default})"
    return "the plugin reads something else than written"


def check_plugin_value(info: VariableInfo, value: str) -> list[ValueProblem]:
    """What is wrong with ``value`` for a plugin variable (empty list: nothing)."""
    name, text = info.name, value.strip()
    # aws-ofi-nccl fails on a value it cannot convert; the others keep their default.
    aws = info.plugin is not None and info.plugin.id == "aws-ofi-nccl"
    if info.kind == "enum" and info.values:
        if matching_choice(info, text, info.values) is None:
            return [invalid(f"{name}={value} is not one of {', '.join(info.values)}: {_consequence(info)}",
                            f"use one of {', '.join(info.values)}")]
        return []
    if info.kind == "bool":
        if aws and text.lower() in ("true", "false"):
            return []
        if not _INT_RE.match(text) or (not aws and int(text) not in (0, 1)):
            return [invalid(f"{name}={value} is not 0 or 1: {_consequence(info)}", f"write {name}=1 or {name}=0",
                            "error" if aws else "warning")]
        return []
    if info.kind == "int":
        if not _INT_RE.match(text):
            return [invalid(f"{name}={value} is not a whole number: {_consequence(info)}", "write a whole number",
                            "error" if aws else "warning")]
        number = int(text)
        low, high = info.minimum, info.maximum
        if (low is not None and number < low) or (high is not None and number > high):
            bounds = f"{low if low is not None else '...'}-{high if high is not None else '...'}"
            return [invalid(f"{name}={value} is outside {bounds}: {_consequence(info)}", f"use a value in {bounds}",
                            "warning")]
    return []
