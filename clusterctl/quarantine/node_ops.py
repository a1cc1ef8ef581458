"""The node changes of quarantine and release: taint, cordon, annotations, each with the command that reverts it.

Every builder compares with the node as read (``KubeNode``) and returns only what differs, so
a second quarantine of a quarantined node changes nothing, and each ``Change`` carries its undo
(``uncordon`` for a cordon, the previous annotation values for an annotation), so that
``clusterctl undo JOURNAL`` puts the node back as it was. Commands run as root on the first
control-plane host with the admin kubeconfig; every value is quoted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from clusterctl.changes import MAKES_QUARANTINE, Change
from clusterctl.facts.kube import kubectl
from clusterctl.facts.kube_nodes import KubeNode, Taint

TAINT_KEY = "clusterctl.dev/unhealthy"
TAINT_EFFECT = "NoSchedule"
ANNOTATION_PREFIX = "clusterctl.dev/quarantine-"
#: who (user@machine), when (UTC, ISO 8601), why (the reason given), codes (finding codes, comma-separated).
ANNOTATION_KEYS = ("by", "at", "reason", "codes")


def annotation(name: str) -> str:
    return ANNOTATION_PREFIX + name


def reason_and_codes(node: KubeNode) -> tuple[str, tuple[str, ...]]:
    """The quarantine's reason and finding codes as kept on the node (``""`` and ``()`` where none)."""
    codes = node.annotations.get(annotation("codes"), "")
    return node.annotations.get(annotation("reason"), ""), tuple(c for c in codes.split(",") if c)


def taint_value(code: str) -> str:
    """``code`` as a taint value (a label value: 63 characters of ``[A-Za-z0-9._-]``, alphanumeric ends)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", code).strip("._-")[:63].rstrip("._-")
    return cleaned or "manual"  # cleaned, it is a label value unless nothing was left


def taint(cp: str, node: KubeNode, value: str) -> list[Change]:
    wanted = Taint(TAINT_KEY, TAINT_EFFECT, value)
    current = next((t for t in node.taints if t.key == TAINT_KEY and t.effect == TAINT_EFFECT), None)
    if current == wanted:
        return []
    name = shlex.quote(node.name)
    add = kubectl(f"taint nodes {name} --overwrite {shlex.quote(wanted.spec())}")
    undo = (kubectl(f"taint nodes {name} {shlex.quote(f'{TAINT_KEY}:{TAINT_EFFECT}-')}") if current is None
            else kubectl(f"taint nodes {name} --overwrite {shlex.quote(current.spec())}"))
    return [Change.run(cp, add, summary=f"taint node {node.name} {wanted.spec()}", undo=undo, timeout_s=60,
                       node=node.name, makes=(MAKES_QUARANTINE,) if current is None else ())]


def untaint(cp: str, node: KubeNode) -> list[Change]:
    current = next((t for t in node.taints if t.key == TAINT_KEY), None)
    if current is None:
        return []
    remove = kubectl(f"taint nodes {shlex.quote(node.name)} {shlex.quote(f'{TAINT_KEY}-')}")
    undo = kubectl(f"taint nodes {shlex.quote(node.name)} --overwrite {shlex.quote(current.spec())}")
    return [Change.run(cp, remove, summary=f"remove taint {TAINT_KEY} from node {node.name}", undo=undo,
                       timeout_s=60, node=node.name)]


def cordon(cp: str, node: KubeNode, on: bool = True) -> list[Change]:
    """Cordon the node (``on``) or uncordon it, the other its undo; nothing where it is so already."""
    if node.unschedulable == on:
        return []
    verb, back = ("cordon", "uncordon") if on else ("uncordon", "cordon")
    return [Change.run(cp, kubectl(f"{verb} {shlex.quote(node.name)}"), summary=f"{verb} node {node.name}",
                       undo=kubectl(f"{back} {shlex.quote(node.name)}"), timeout_s=60, node=node.name)]


def annotate(cp: str, node: KubeNode, wanted: Mapping[str, str | None]) -> list[Change]:
    """Set (value) or remove (None) annotations; one command, its undo restoring every previous value."""
    def argument(key: str, value: str | None) -> str:  # kubectl annotate's: KEY- removes, KEY=VALUE sets
        return shlex.quote(f"{key}-" if value is None else f"{key}={value}")

    before = {key: was for key, value in wanted.items() if (was := node.annotations.get(key)) != value}
    if not before:
        return []
    words = " ".join(argument(key, wanted[key]) for key in before)
    back = " ".join(argument(key, was) for key, was in before.items())
    verb = "annotate" if any(v is not None for v in wanted.values()) else "remove the annotations of"
    shown = ", ".join(k.removeprefix("clusterctl.dev/") for k in before)
    return [Change.run(cp, kubectl(f"annotate --overwrite node {shlex.quote(node.name)} {words}"),
                       summary=f"{verb} node {node.name} ({shown})",
                       undo=kubectl(f"annotate --overwrite node {shlex.quote(node.name)} {back}"), timeout_s=60,
                       node=node.name)]


def quarantine_annotations(*, who: str, when: str, reason: str, codes: list[str]) -> dict[str, str | None]:
    return {annotation("by"): who, annotation("at"): when, annotation("reason"): reason,
            annotation("codes"): ",".join(codes)}


#: Every quarantine's time (UTC, comma-separated, the newest last; kept through release): flapping is read from it.
HISTORY = annotation("history")
HISTORY_KEPT = 20


def quarantine_times(node: KubeNode) -> list[str]:
    """The node's quarantines' times, the oldest first (``HISTORY``)."""
    return [t for t in node.annotations.get(HISTORY, "").split(",") if t]


def with_history(node: KubeNode, when: str) -> dict[str, str | None]:
    """The history annotation with ``when`` added (the oldest dropped beyond ``HISTORY_KEPT``)."""
    return {HISTORY: ",".join([*quarantine_times(node), when][-HISTORY_KEPT:])}


def release_annotations() -> dict[str, str | None]:
    return {annotation(name): None for name in ANNOTATION_KEYS}


def is_quarantined(node: KubeNode) -> bool:
    return node.taint(TAINT_KEY) is not None or annotation("at") in node.annotations


def out_of_service(node: KubeNode) -> bool:
    """Quarantined by clusterctl, or cordoned by anyone: counted against the cap, listed by ``status``."""
    return node.unschedulable or is_quarantined(node)

