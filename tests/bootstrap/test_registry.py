"""``registry.PHASES`` is the one list of phases: every phase module's phases are in it, once, in run order."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import clusterctl.bootstrap.phases as phases_package
from clusterctl.bootstrap.phase import ClusterWidePhase, Phase
from clusterctl.bootstrap.registry import PHASES, all_phases, phase_named, select_phases


def test_every_phase_class_in_the_phases_folder_is_listed_exactly_once() -> None:
    defined = set()
    for module in pkgutil.iter_modules(phases_package.__path__):
        loaded = importlib.import_module(f"{phases_package.__name__}.{module.name}")
        for name, value in vars(loaded).items():
            if inspect.isclass(value) and issubclass(value, Phase) and value not in (Phase, ClusterWidePhase) \
                    and value.__module__ == loaded.__name__ and not inspect.isabstract(value):
                defined.add(f"{loaded.__name__}:{name}")
    listed = [entry.target for entry in PHASES]
    assert sorted(listed) == sorted(set(listed)), "a phase is listed twice"
    assert set(listed) == defined, "a phase module's phase is missing from registry.PHASES (or listed but gone)"


def test_the_run_order_is_the_order_of_the_list() -> None:
    names = [p.name for p in all_phases(include_on_demand=True)]
    assert names == [phase_named(n).name for n in names]
    assert names[:5] == ["preflight", "kernel", "packages", "containerd", "nvidia-runtime"]
    assert names[-2:] == ["verify", "reset"]
    assert "reset" not in [p.name for p in all_phases()]
    assert [p.name for p in select_phases(skip="kernel,verify")] == [n for n in names[:-1]
                                                                      if n not in ("kernel", "verify")]
