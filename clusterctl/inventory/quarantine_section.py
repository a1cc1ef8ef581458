"""The ``quarantine:`` section of clusterctl's inventory: the policy of ``health --quarantine`` and
``remediate serve``.

```yaml
quarantine:
  max_unavailable: 10%              # or a host count; never more hosts out of service at once
  quarantine_codes: [GPU_XID]       # health codes that quarantine (default: any error of an unhealthy host)
  drain_codes: [NVLINK_DOWN]        # ... and also drain (default: codes whose Xid-catalogue action
                                    # takes the host down: RESET_GPU, RESTART_BM, RMA, ...)
  ignore_codes: [PCIE_DOWNGRADED]   # never quarantine for these
  alerts: {GPUXidError: quarantine, GPUTemperatureHigh: report}   # remediate serve: drain|quarantine|report
  heal:                             # the escalation chain (clusterctl heal, remediate serve --heal)
    passes: 2                       # consecutive release-gate passes before a host returns
    pass_interval_s: 2
    level: 1                        # health level of the release gate
    flapping: {count: 3, window_h: 24}   # quarantined 3 times in 24 h: stays out for a person
    chains: {GPUFellOffTheBus: [power-cycle], GPU_XID: [reset-gpu, reboot, power-cycle]}
    timeouts: {reboot: 600, power-cycle: 900}   # seconds per step, the host back and Ready included
```
Every error names the file, line and field.
"""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING, Any

from clusterctl.inventory import values
from clusterctl.inventory.model import HEAL_STEPS, HealConfig, QuarantineConfig

if TYPE_CHECKING:
    from clusterctl.inventory.node_reader import NodeReader
    from clusterctl.inventory.yaml_tree import Node

ALERT_ACTIONS = ("drain", "quarantine", "report")
_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
_MAX = re.compile(r"^(\d+)(%?)$")


def max_unavailable(value: Any, what: str = "max_unavailable") -> str:
    """``3`` or ``10%`` (at least one host either way), as text."""
    text = str(value).strip()
    match = _MAX.match(text)
    if isinstance(value, bool) or not match or (match.group(2) and not 0 < int(match.group(1)) <= 100) \
            or int(match.group(1)) < 1:
        raise values.BadValue(f"{what} must be a host count (1 or more) or a percentage such as 10%, got {text!r}")
    return text


def _codes(value: Any, what: str) -> frozenset[str]:
    names = values.text_list(value, what)
    for name in names:
        if not _CODE.match(name):
            raise values.BadValue(f"{what}: {name!r} is not a finding code (letters, digits and _)")
    return frozenset(names)


def read_quarantine(r: NodeReader, node: Node, field: str) -> QuarantineConfig:
    return QuarantineConfig(**r.fields(node, field, {
        "max_unavailable": r.plain(max_unavailable),
        **{name: r.plain(partial(_codes, what=name)) for name in ("quarantine_codes", "drain_codes", "ignore_codes")},
        "alerts": r.plain(_alerts),
        "heal": partial(read_heal, r),
    }))


def _alerts(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise values.BadValue("alerts must map alert names to drain, quarantine or report")
    for name, action in raw.items():
        if str(action) not in ALERT_ACTIONS:
            raise values.BadValue(f"alerts.{name}: {action!r} is not one of {', '.join(ALERT_ACTIONS)}")
    return {str(name): str(action) for name, action in raw.items()}


def _count(value: Any, what: str, low: int = 1, *, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise values.BadValue(f"{what} must be a whole number of at least {low}, not {values.describe(value)}")
    if high is not None and value > high:
        raise values.BadValue(f"{what} must be {low} to {high}")
    return value


def _step(step: str, what: str) -> str:
    if step not in HEAL_STEPS:
        raise values.BadValue(f"{what}: {step!r} is not a step", hint=values.one_of_hint(step, HEAL_STEPS))
    return step


def read_heal(r: NodeReader, node: Node, field: str) -> HealConfig:
    out = r.fields(node, field, {
        "passes": r.plain(lambda raw: _count(raw, "passes")),
        "pass_interval_s": r.plain(lambda raw: values.positive_number(raw, "pass_interval_s")),
        "level": r.plain(lambda raw: _count(raw, "level", 0, high=3)),
        "flapping": r.plain(_flapping),
        "chains": r.plain(_chains),
        "timeouts": r.plain(_timeouts),
    })
    return HealConfig(**out.pop("flapping", {}), **out)


def _flapping(raw: Any) -> dict[str, float]:
    """``{count, window_h}`` as HealConfig's ``flap_count`` and ``flap_window_s``."""
    if not isinstance(raw, dict) or set(raw) - {"count", "window_h"}:
        raise values.BadValue("flapping must be a mapping of count and window_h",
                              hint="e.g. flapping: {count: 3, window_h: 24}")
    out: dict[str, float] = {}
    if "count" in raw:
        out["flap_count"] = _count(raw["count"], "flapping.count", 2)
    if "window_h" in raw:
        out["flap_window_s"] = values.positive_number(raw["window_h"], "flapping.window_h") * 3600
    return out


def _chains(raw: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, dict):
        raise values.BadValue("chains must map finding codes or alert names to lists of steps",
                              hint="e.g. chains: {GPUFellOffTheBus: [power-cycle]}")
    return {str(code): tuple(_step(step, f"chains.{code}") for step in values.text_list(steps, f"chains.{code}"))
            for code, steps in raw.items()}


def _timeouts(raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise values.BadValue("timeouts must map steps to seconds", hint="e.g. timeouts: {reboot: 600}")
    timeouts: dict[str, float] = {}
    for step, seconds in raw.items():
        timeouts[_step(str(step), "timeouts")] = values.positive_number(seconds, f"timeouts.{step}")
    return timeouts
