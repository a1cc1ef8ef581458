"""Values of plugin variables, checked the way each plugin reads them (data/plugin_vars.yaml).

The plugins differ: Google's TCPXO plugin parses integers with absl::SimpleAtoi and ignores a
value outside its [min, max] (keeping the default); aws-ofi-nccl takes true/false or an integer
for booleans, compares enum words case-insensitively, and fails to initialise on a value it
cannot convert; plugins built on NCCL's NCCL_PARAM read integers with strtoll.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from clusterctl.nccl.value_problem import ValueProblem

if TYPE_CHECKING:
    from clusterctl.nccl.knowledge import VariableInfo

_INT_RE = re.compile(r"^\s*[+-]?\d+\s*$")


def _problem(severity: str, message: str, fix: str) -> ValueProblem:
    return ValueProblem(code="INVALID_VALUE", severity=severity, message=message, fix=fix)


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
    if info.kind == "enum" and info.values:
        words = {v.lower() if info.case_insensitive else v for v in info.values}
        if (text.lower() if info.case_insensitive else text) not in words:
            return [_problem("error", f"{name}={value} is not one of {', '.join(info.values)}: {_consequence(info)}",
                             f"use one of {', '.join(info.values)}")]
        return []
    if info.kind == "bool":
        accepts_words = info.plugin is not None and info.plugin.id == "aws-ofi-nccl"
        if accepts_words and text.lower() in ("true", "false"):
            return []
        if not _INT_RE.match(text) or (not accepts_words and int(text) not in (0, 1)):
            return [_problem("error" if accepts_words else "warning",
                             f"{name}={value} is not 0 or 1: {_consequence(info)}", f"write {name}=1 or {name}=0")]
        return []
    if info.kind == "int":
        if not _INT_RE.match(text):
            return [_problem("error" if info.plugin and info.plugin.id == "aws-ofi-nccl" else "warning",
                             f"{name}={value} is not a whole number: {_consequence(info)}", "write a whole number")]
        number = int(text)
        low, high = info.minimum, info.maximum
        if (low is not None and number < low) or (high is not None and number > high):
            bounds = f"{low if low is not None else '...'}-{high if high is not None else '...'}"
            return [_problem("warning", f"{name}={value} is outside {bounds}: {_consequence(info)}",
                             f"use a value in {bounds}")]
    return []
