"""Every step of a host's remediation, kept on its node (annotations), so any machine's ``status HOST`` shows it.

``clusterctl.dev/heal-state``: where the host stands (``healing: reboot``, ``released``, ``needs
hardware``, ``flapping``); ``clusterctl.dev/heal-history``: the steps, newest last, as JSON
(``at``, ``step``, ``result``, ``detail``), the last ``KEPT`` of them. The quarantines' own times
are ``node_ops.HISTORY`` (``node_ops.quarantine_times``); flapping is counted from those.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace

from clusterctl.facts.kube_nodes import KubeNode
from clusterctl.quarantine.node_ops import quarantine_times
from clusterctl.utc import epoch

STATE = "clusterctl.dev/heal-state"
STEPS = "clusterctl.dev/heal-history"
KEPT = 30
DETAIL_CHARS = 300


@dataclass(frozen=True)
class StepEntry:
    at: str
    step: str
    #: A step's engine ``Status`` (``changed``, ``ok``, ``failed``); the check's, release's or end's word.
    result: str
    detail: str = ""


def steps_of(node: KubeNode) -> list[StepEntry]:
    try:
        raw = json.loads(node.annotations.get(STEPS) or "[]")
    except json.JSONDecodeError:
        return []
    if not isinstance(raw, list):
        return []
    return [StepEntry(*(str(e.get(f.name, "")) for f in fields(StepEntry))) for e in raw if isinstance(e, dict)]


def with_step(node_steps: list[StepEntry], entry: StepEntry) -> str:
    entry = replace(entry, detail=entry.detail[:DETAIL_CHARS])
    return json.dumps([asdict(e) for e in [*node_steps, entry][-KEPT:]], separators=(",", ":"))


def quarantines_within(node: KubeNode, window_s: float, now: float) -> list[str]:
    """The quarantine times of ``node`` within the last ``window_s`` seconds before ``now``."""
    return [stamp for stamp in quarantine_times(node) if (at := epoch(stamp)) is not None and now - at <= window_s]
