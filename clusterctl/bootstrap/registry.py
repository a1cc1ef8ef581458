"""The ordered list of bootstrap phases: node phases first, then cluster phases.

Each phase module calls ``register(PhaseClass(), order=N)`` at import time. ``order`` places
it in the run; the convention leaves room between neighbours:

* 100-199 node phases (``preflight`` 100, ``kernel`` 110, ``packages`` 120, ``containerd`` 130,
  ``nvidia-runtime`` 140);
* 200-299 cluster phases (control plane, network, GPU add-ons, labels, alert rules);
* 300-399 checks of the finished cluster (``verify``);
* phases that tear down (``reset``) register with ``default=False``: they run only when asked
  by name (``clusterctl bootstrap phase reset``), never as part of ``clusterctl bootstrap``.

Modules are listed in ``PHASE_MODULES`` and imported on first use, so ``clusterctl --help``
stays fast; a new phase module only needs adding there.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Any

from clusterctl.bootstrap.phase import Phase
from clusterctl.errors import UsageError
from clusterctl.inventory.values import did_you_mean

#: Modules whose import registers phases. Cluster phases (issue 12) append theirs here.
PHASE_MODULES: list[str] = [
    "clusterctl.bootstrap.phases.preflight",
    "clusterctl.bootstrap.phases.kernel",
    "clusterctl.bootstrap.phases.packages",
    "clusterctl.bootstrap.phases.containerd",
    "clusterctl.bootstrap.phases.nvidia_runtime",
    "clusterctl.bootstrap.phases.control_plane",
    "clusterctl.bootstrap.phases.network",
    "clusterctl.bootstrap.phases.gpu_addons",
    "clusterctl.bootstrap.phases.topology_labels",
    "clusterctl.bootstrap.phases.alert_rules",
    "clusterctl.bootstrap.phases.verify",
    "clusterctl.bootstrap.phases.reset",
]


@dataclass(frozen=True)
class Registered:
    phase: Phase[Any]
    order: int
    #: Part of a plain ``clusterctl bootstrap`` run; False for on-demand phases such as reset.
    default: bool


_phases: dict[str, Registered] = {}
_lock = threading.Lock()
_loaded = False


def register(phase: Phase[Any], *, order: int, default: bool = True) -> Phase[Any]:
    """Add ``phase`` to the run at position ``order``; a second phase of the same name is an error."""
    with _lock:
        known = _phases.get(phase.name)
        if known is not None and type(known.phase) is not type(phase):
            raise ValueError(f"two bootstrap phases are named {phase.name!r}")
        _phases[phase.name] = Registered(phase, order, default)
    return phase


def unregister(name: str) -> None:
    """Remove a phase (tests that register their own)."""
    with _lock:
        _phases.pop(name, None)


def _load() -> None:
    global _loaded
    if _loaded:
        return
    for module in PHASE_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            # A listed module that is not written yet must not break the phases that are.
            if exc.name != module:
                raise
    _loaded = True


def all_phases(*, include_on_demand: bool = False) -> list[Phase[Any]]:
    """Every phase in run order (on-demand phases such as reset only when asked)."""
    _load()
    with _lock:
        entries = sorted(_phases.values(), key=lambda r: (r.order, r.phase.name))
    return [r.phase for r in entries if r.default or include_on_demand]


def phase_named(name: str) -> Phase[Any]:
    _load()
    with _lock:
        entry = _phases.get(name)
        names = sorted(_phases)
    if entry is None:
        raise UsageError(
            f"there is no bootstrap phase named {name!r}.",
            field="phase",
            hint=did_you_mean(name, names) or "Phases: " + ", ".join(p.name for p in all_phases()) + ".",
        )
    return entry.phase


def select_phases(only: str | None = None, skip: str | None = None) -> list[Phase[Any]]:
    """The phases of a run: one named phase, or all default phases minus ``--skip-phases``."""
    chosen = [phase_named(only)] if only else all_phases()
    skipped = [s.strip() for s in (skip or "").split(",") if s.strip()]
    for name in skipped:
        phase_named(name)  # a typo in --skip-phases must not silently skip nothing
    return [p for p in chosen if p.name not in skipped]
