"""Software stack checks: the inventory's version pins, and drift from the fleet majority."""

from __future__ import annotations

from clusterctl.facts.model import SoftwareStack
from clusterctl.survey.checks.baseline import FleetBaseline
from clusterctl.survey.checks.codes import Finding, Severity, finding
from clusterctl.survey.checks.host import SurveyedHost

#: Pin name -> SoftwareStack attributes to read, first non-empty wins.
_PIN_FIELDS: dict[str, tuple[str, ...]] = {
    "driver": ("driver",),
    "cuda": ("cuda",),
    "nccl": ("nccl",),
    "kubernetes": ("kubelet", "kubeadm"),
    "containerd": ("containerd",),
}
#: Installed by ``clusterctl bootstrap``: absent before it, so "not installed" is only info.
_BOOTSTRAPPED = frozenset({"kubernetes", "containerd"})
DRIFT_FIELDS: tuple[str, ...] = ("driver", "cuda", "nccl", "kernel", "containerd", "kubelet", "os_version")


def version_matches(pin: str, actual: str) -> bool:
    """``535`` matches ``535.104.05``; ``v1.29`` matches ``1.29.3``; ``12.2`` does not match ``12.20``."""
    want = pin.strip().lstrip("vV").split(".")
    have = actual.strip().lstrip("vV").split(".")
    return have[: len(want)] == want


def _stack_value(stack: SoftwareStack, names: tuple[str, ...]) -> tuple[str | None, str]:
    for name in names:
        value = getattr(stack, name)
        if value:
            return str(value), name
    return None, names[0]


def check_stack(state: SurveyedHost, baseline: FleetBaseline) -> list[Finding]:
    stack = state.facts.stack if state.facts else None
    if stack is None:
        return []
    out: list[Finding] = []
    pin_failed: set[str] = set()
    for component, pin in state.host.stack.pinned().items():
        value, attribute = _stack_value(stack, _PIN_FIELDS.get(component, (component,)))
        if value is None:
            reason = stack.missing.get(attribute, "not found")
            severity = Severity.INFO if component in _BOOTSTRAPPED else Severity.WARNING
            out.append(finding(severity, "STACK_PIN_MISMATCH", state.name,
                               f"{component}: pinned {pin}, not installed ({reason})",
                               component=component, pinned=pin, installed=None, reason=reason))
            pin_failed.add(attribute)
        elif not version_matches(pin, value):
            out.append(finding(Severity.ERROR, "STACK_PIN_MISMATCH", state.name,
                               f"{component}: {value} installed, inventory pins {pin}",
                               component=component, pinned=pin, installed=value))
            pin_failed.add(attribute)
    for attribute in DRIFT_FIELDS:
        if attribute in pin_failed:
            continue
        expected = baseline.stack_value(attribute)
        value = getattr(stack, attribute)
        if expected is None or value == expected:
            continue
        shown = value or f"not found ({stack.missing.get(attribute, 'not installed')})"
        out.append(finding(Severity.WARNING, "STACK_DRIFT", state.name,
                           f"{attribute}: {shown}; most hosts run {expected}",
                           component=attribute, installed=value, fleet=expected))
    return out
