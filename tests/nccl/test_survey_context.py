"""``--survey``: the fleet's NCCL version, fabric and NVLink come from a saved survey."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from clirun import clusterctl

from clusterctl.nccl.lint import context_from_survey


@dataclass
class Port:
    link_layer: str


@dataclass
class Nic:
    fabric: bool
    ports: tuple[Port, ...]


@dataclass
class Host:
    stack: dict[str, Any]
    nics: tuple[Nic, ...] = ()
    nvlink_groups: tuple[tuple[int, ...], ...] = ()  # as SavedHost.nvlink_groups: domains of 2+ GPUs
    gpus: tuple[Any, ...] = ()


@dataclass
class Saved:
    hosts: dict[str, Host] = field(default_factory=dict)


def test_oldest_version_roce_fabric_and_nvlink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings are checked against the oldest NCCL the fleet runs, as tune-nccl derives them: one host on 2.18
    ignores what 2.21 reads, however few such hosts there are."""
    roce = (Nic(True, (Port("Ethernet"),)), Nic(False, (Port("InfiniBand"),)))
    saved = Saved({
        "a": Host({"nccl": "2.21.5"}, roce, ((0, 1, 2, 3),)),
        "b": Host({"nccl": "2.21.5"}, roce, ((0, 1, 2, 3),)),
        "c": Host({"nccl": "2.18.3"}, roce, ()),
    })
    monkeypatch.setattr("clusterctl.saved_survey.load_saved_survey", lambda path: saved)
    context = context_from_survey("survey.json")
    assert context is not None
    assert (context.nccl_version, context.fabric, context.nvlink) == ("2.18.3", "roce", True)
    assert context.versions_seen == ("2.18.3", "2.21.5")


def test_a_mixed_fleet_is_named_oldest_first_by_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warning lists the versions by version, not as text ("2.9.9" before "2.18.3"), and one release built
    twice ("-1", "+cuda") is one version, not a mixed fleet."""
    saved = Saved({"a": Host({"nccl": "2.18.3-1"}), "b": Host({"nccl": "2.9.9"}),
                   "c": Host({"nccl": "2.18.3+cuda12.2"})})
    monkeypatch.setattr("clusterctl.saved_survey.load_saved_survey", lambda path: saved)
    result = clusterctl("nccl", "lint", "-", "--format", "env", "--survey", "survey.json", stdin="NCCL_DEBUG=WARN\n")
    warning = " ".join(result.stderr.split())
    assert "hosts run different NCCL versions (2.9.9, 2.18.3); checking against 2.9.9" in warning
    # --nccl-version wins over the survey's oldest, and the warning names the version checked against
    result = clusterctl("nccl", "lint", "-", "--format", "env", "--survey", "survey.json", "--nccl-version", "2.18.3",
                        stdin="NCCL_DEBUG=WARN\n")
    assert "; checking against 2.18.3" in " ".join(result.stderr.split())
