"""Mangled real recordings: every parser returns its typed result or raises ParseError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fixture_files import FIXTURES as FIXTURES_ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.errors import ParseError
from clusterctl.facts.gpus import parse_gpus
from clusterctl.facts.model import GPUInfo, NetDevice, NVLinkStatus, RDMADevice, SoftwareStack, TopoMatrix
from clusterctl.facts.netdev import parse_ibdev2netdev, parse_ip_addr
from clusterctl.facts.nvlink import parse_nvlink
from clusterctl.facts.rdma import parse_ibv_devinfo
from clusterctl.facts.stack import parse_stack
from clusterctl.facts.topo import parse_topo

FIXTURES = FIXTURES_ROOT


def _is_tuple_of(kind: type) -> Callable[[Any], bool]:
    return lambda result: isinstance(result, tuple) and all(isinstance(item, kind) for item in result)


PARSERS: dict[str, tuple[Callable[[str], Any], Callable[[Any], bool], str]] = {
    "topo": (parse_topo, lambda r: isinstance(r, TopoMatrix), "topo"),
    "gpus": (parse_gpus, _is_tuple_of(GPUInfo), "nvidia-smi"),
    "nvlink": (parse_nvlink, _is_tuple_of(NVLinkStatus), "nvlink"),
    "rdma": (parse_ibv_devinfo, _is_tuple_of(RDMADevice), "ibv_devinfo"),
    "stack": (parse_stack, lambda r: isinstance(r, SoftwareStack), "stack"),
    "netdev": (parse_ibdev2netdev, _is_tuple_of(NetDevice), "ibdev2netdev"),
    "ip": (parse_ip_addr, lambda r: isinstance(r, dict), "ibdev2netdev"),
}


def _recordings(folder: str) -> list[str]:
    return [p.read_text() for p in sorted((FIXTURES / folder).iterdir()) if p.name != "README.md"]


@st.composite
def mangled(draw: st.DrawFn, texts: list[str]) -> str:
    lines = draw(st.sampled_from(texts)).splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["drop", "duplicate", "truncate", "insert", "swap", "noise", "cells"]))
        if not lines:
            lines = [draw(st.text(max_size=40))]
            continue
        i = draw(st.integers(0, len(lines) - 1))
        if action == "drop":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "truncate":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif action == "insert":
            at = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:at] + draw(st.text(min_size=1, max_size=5)) + lines[i][at:]
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "noise":
            lines.insert(i, draw(st.text(max_size=60)) + "\n")
        else:
            cells = lines[i].split()
            if len(cells) > 1:
                a, b = draw(st.integers(0, len(cells) - 1)), draw(st.integers(0, len(cells) - 1))
                cells[a], cells[b] = cells[b], cells[a]
                lines[i] = "    ".join(cells) + "\n"
    return "".join(lines)


def _check(name: str, text: str) -> None:
    parse, is_typed, _folder = PARSERS[name]
    try:
        result = parse(text)
    except ParseError as error:
        assert error.line is None or 1 <= error.line <= len(text.splitlines()) + 1
        return
    assert is_typed(result)


_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_mangled_recordings_give_typed_result_or_parse_error(name: str) -> None:
    texts = _recordings(PARSERS[name][2])

    @_SETTINGS
    @given(mangled(texts))
    def run(text: str) -> None:
        _check(name, text)

    run()


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_random_text_gives_typed_result_or_parse_error(name: str) -> None:
    @settings(max_examples=50, deadline=None)
    @given(st.text(max_size=300))
    def run(text: str) -> None:
        _check(name, text)

    run()
