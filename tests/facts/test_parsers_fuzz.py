"""Mangled real recordings: every parser returns its typed (possibly partial) result or raises its
own ParseError, never another exception; pasting noise around a recording changes nothing."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest
from fixture_files import FIXTURES as FIXTURES_ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.errors import ParseError
from clusterctl.facts.gpus import parse_gpus
from clusterctl.facts.model import (
    GPUInfo,
    NetDevice,
    NVLinkStatus,
    ParseWarning,
    RDMADevice,
    SoftwareStack,
    TopoMatrix,
    warnings_of,
)
from clusterctl.facts.nccltests import NcclTestResult, parse_nccl_tests
from clusterctl.facts.netdev import parse_ibdev2netdev, parse_ip_addr
from clusterctl.facts.nvlink import parse_nvlink
from clusterctl.facts.perftest import PerftestResult, parse_perftest
from clusterctl.facts.rdma import parse_ibstat, parse_rdma
from clusterctl.facts.stack import parse_stack
from clusterctl.facts.topo import parse_topo

FIXTURES = FIXTURES_ROOT


def _is_tuple_of(kind: type) -> Callable[[Any], bool]:
    return lambda result: isinstance(result, tuple) and all(isinstance(item, kind) for item in result)


PARSERS: dict[str, tuple[Callable[[str], Any], Callable[[Any], bool], str]] = {
    "topo": (parse_topo, lambda r: isinstance(r, TopoMatrix), "topo"),
    "gpus": (parse_gpus, _is_tuple_of(GPUInfo), "nvidia-smi"),
    "nvlink": (parse_nvlink, _is_tuple_of(NVLinkStatus), "nvlink"),
    "rdma": (parse_rdma, _is_tuple_of(RDMADevice), "ibv_devinfo"),
    "stack": (parse_stack, lambda r: isinstance(r, SoftwareStack), "stack"),
    "ibstat": (parse_ibstat, _is_tuple_of(RDMADevice), "ibstat"),
    "rdma-either": (parse_rdma, _is_tuple_of(RDMADevice), "ibstat"),
    "netdev": (parse_ibdev2netdev, _is_tuple_of(NetDevice), "ibdev2netdev"),
    # Real `ip -o -4 addr` recordings (not another tool's, where every input failed at line 1).
    "ip": (parse_ip_addr, lambda r: isinstance(r, dict) and all(isinstance(v, tuple) for v in r.values()), "ip"),
    "perftest": (parse_perftest, lambda r: isinstance(r, PerftestResult), "perftest"),
    "nccl-tests": (parse_nccl_tests, lambda r: isinstance(r, NcclTestResult), "nccl-tests"),
}


def _recordings(folder: str) -> list[str]:
    return [p.read_text() for p in sorted((FIXTURES / folder).iterdir()) if p.name != "README.md" and p.is_file()]


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
    for warning in warnings_of(result):
        assert isinstance(warning, ParseWarning)
        assert warning.line is None or 1 <= warning.line <= len(text.splitlines()) + 1


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


@st.composite
def pasted(draw: st.DrawFn, texts: list[str]) -> tuple[str, str]:
    """A recording, and the same recording as a terminal paste: prompt, fence, pane border, padding."""
    original = draw(st.sampled_from(texts))
    lines = original.splitlines()
    prompt = draw(st.sampled_from(["user@gpu-a1:~$ cmd", "[root@gpu01 ~]# cmd", "$ kubectl exec -it pod -- cmd",
                                   "(venv) me@box:/tmp$ cmd"]))
    border = draw(st.booleans()) and "\u2502" not in original  # one pane, not a pane inside a pane
    indent = draw(st.sampled_from(["", "    "]))
    width = max((len(line) for line in lines), default=0) + 2
    out = [prompt, *lines]
    if border:
        out = ["\u2502 " + line.ljust(width) + "\u2502" for line in out]
        out = ["\u250c" + "\u2500" * (width + 1) + "\u2510", *out, "\u2514" + "\u2500" * (width + 1) + "\u2518"]
    out = [indent + line + draw(st.sampled_from(["", "   ", "\t"])) for line in out]
    if draw(st.booleans()):
        out = ["```", *out, "```"]
    return original, "\n".join(out) + "\n"


def _same(a: Any, b: Any) -> bool:
    """Equal facts; warnings may differ only in their line numbers (the paste shifts lines)."""
    def strip(warning: ParseWarning) -> str:
        return re.sub(r"lines? \d+(-\d+)?", "line N", warning.message)

    def facts(value: Any) -> Any:
        return dataclasses.replace(value, warnings=()) if dataclasses.is_dataclass(value) else value

    return facts(a) == facts(b) and [strip(w) for w in warnings_of(a)] == [strip(w) for w in warnings_of(b)]


PASTE_SAFE = ("topo", "rdma", "ibstat", "netdev", "ip", "perftest", "nccl-tests")


@pytest.mark.parametrize("name", PASTE_SAFE)
def test_paste_noise_around_a_recording_changes_no_fact(name: str) -> None:
    parse, _typed, folder = PARSERS[name]
    texts = _recordings(folder)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(pasted(texts))
    def run(pair: tuple[str, str]) -> None:
        original, noisy = pair
        try:
            expected = parse(original)
        except ParseError:
            return
        assert _same(parse(noisy), expected)

    run()
