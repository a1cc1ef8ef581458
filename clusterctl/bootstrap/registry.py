"""The bootstrap phases, in the order they run: ``PHASES`` is the one place that order is said.

Each entry names a phase class as ``"module:Class"`` and is imported on first use, so
``clusterctl --help`` never loads a phase. A plain ``clusterctl bootstrap`` runs the entries
marked ``default`` from top to bottom (node phases, then cluster phases, then the final checks);
the others (``reset``) run only when asked by name (``clusterctl bootstrap phase reset``,
``clusterctl reset``). Adding a phase is one module under ``phases/`` and one line here.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Any

from clusterctl.bootstrap.phase import Phase
from clusterctl.engine.run import select_phases as select


@dataclass(frozen=True)
class PhaseEntry:
    #: ``"clusterctl.bootstrap.phases.kernel:Kernel"``: the module and the ``Phase`` class in it.
    target: str
    #: Part of a plain ``clusterctl bootstrap`` run; False for on-demand phases such as reset.
    default: bool = True


#: Every phase, in run order.
PHASES: tuple[PhaseEntry, ...] = (
    # Node phases: each host on its own.
    PhaseEntry("clusterctl.bootstrap.phases.preflight:Preflight"),
    PhaseEntry("clusterctl.bootstrap.phases.kernel:Kernel"),
    PhaseEntry("clusterctl.bootstrap.phases.packages:Packages"),
    PhaseEntry("clusterctl.bootstrap.phases.containerd:Containerd"),
    PhaseEntry("clusterctl.bootstrap.phases.nvidia_runtime:NvidiaRuntime"),
    # Cluster phases: kubeadm, then what runs on the cluster.
    PhaseEntry("clusterctl.bootstrap.phases.control_plane:ControlPlane"),
    PhaseEntry("clusterctl.bootstrap.phases.control_plane:Join"),
    PhaseEntry("clusterctl.bootstrap.phases.network:Network"),
    PhaseEntry("clusterctl.bootstrap.phases.gpu_addons:GpuAddons"),
    PhaseEntry("clusterctl.bootstrap.phases.topology_labels:TopologyLabels"),
    PhaseEntry("clusterctl.bootstrap.phases.alert_rules:AlertRules"),
    PhaseEntry("clusterctl.bootstrap.phases.node_agent:NodeAgentAccess"),
    PhaseEntry("clusterctl.bootstrap.phases.node_agent:NodeAgent"),
    # The finished cluster works.
    PhaseEntry("clusterctl.bootstrap.phases.verify:Verify"),
    # On demand only.
    PhaseEntry("clusterctl.bootstrap.phases.reset:Reset", default=False),
)

_lock = threading.Lock()
_loaded: list[tuple[Phase[Any], bool]] | None = None


def _instantiate(entry: PhaseEntry) -> Phase[Any]:
    module_name, _, class_name = entry.target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    phase = cls()
    if not isinstance(phase, Phase):
        raise TypeError(f"{entry.target} is not a bootstrap Phase")
    return phase


def _load() -> list[tuple[Phase[Any], bool]]:
    global _loaded
    with _lock:
        if _loaded is None:
            loaded = [(_instantiate(e), e.default) for e in PHASES]
            names = [p.name for p, _ in loaded]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"two bootstrap phases are named {', '.join(twice)}")
            _loaded = loaded
        return _loaded


def all_phases(*, include_on_demand: bool = False) -> list[Phase[Any]]:
    """Every phase in run order (on-demand phases such as reset only when asked)."""
    return [p for p, default in _load() if default or include_on_demand]


def phase_named(name: str) -> Phase[Any]:
    """The phase called ``name`` (on-demand ones too); exit 2 naming the phases there are when none is."""
    return select_phases(name)[0]


def select_phases(only: str | None = None, skip: str | None = None) -> list[Phase[Any]]:
    """The phases of a run: one named phase (on-demand ones too), or all default phases minus ``--skip-phases``."""
    loaded = _load()
    return select([p for p, default in loaded if default], only, skip, command="bootstrap",
                  on_demand=[p for p, default in loaded if not default])
