"""``--survey``: the fleet's NCCL version, fabric and NVLink come from a saved survey."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

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
    nvlink_domains: tuple[tuple[int, ...], ...] = ()
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
