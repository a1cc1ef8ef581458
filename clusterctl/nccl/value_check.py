"""What is wrong with a setting's value: the reader's own grammar, NCCL's or its plugin's.

One function picks the grammar for a variable, so the knowledge base (``knowledge``, the data)
stays below the grammars that check values (``grammar`` for libnccl, ``plugins`` for network and
tuner plugins), and neither of them imports it at run time.
"""

from __future__ import annotations

from clusterctl.nccl.grammar import ValueProblem, check_value
from clusterctl.nccl.knowledge import VariableInfo
from clusterctl.nccl.plugins import check_plugin_value
from clusterctl.nccl.versions import NcclVersion


def value_problems(info: VariableInfo, value: str, version: NcclVersion | None = None) -> list[ValueProblem]:
    """What is wrong with ``value`` for this variable (empty list: nothing)."""
    return check_plugin_value(info, value) if info.plugin is not None else check_value(info, value, version)
