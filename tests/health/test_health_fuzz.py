"""Mangled real recordings: each health parser returns its typed result or raises its own ParseError,
never another exception; the judge never fails on what a parser returned."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from fixture_files import read_fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.errors import ParseError
from clusterctl.facts.dcgmi import parse_dcgmi_diag
from clusterctl.facts.ib_counters import parse_ib_counters
from clusterctl.facts.kernel_log import parse_kernel_log
from clusterctl.facts.lspci import parse_lspci
from clusterctl.facts.nvlink_errors import parse_nvlink_errors
from clusterctl.facts.nvsmi_query import parse_nvidia_smi_q
from clusterctl.health.checks import HostInput
from clusterctl.health.probe import HostProbe
from clusterctl.health.run import judge

#: (parser, HostProbe attribute, a real recording to mangle); small ones keep the run fast.
CASES: list[tuple[Callable[[str], Any], str, str, str]] = [
    (parse_nvidia_smi_q, "smi", "nvidia-smi-q", "gpud-535.129.03-a10-pcie-remap-pending.txt"),
    (parse_nvidia_smi_q, "smi", "nvidia-smi-q", "mlengineering-510.73.08-a100-remap-pending-clipped.txt"),
    (parse_kernel_log, "kernel", "kernel-log", "gpud-dmesg-T-xid119-h100.log"),
    (parse_kernel_log, "kernel", "kernel-log", "nvtrust124-dmesg-sxid-h100-nvswitch.log"),
    (parse_nvlink_errors, "nvlink_errors", "nvlink-e", "mlengineering-h100-clipped.txt"),
    (parse_ib_counters, "ib_counters", "ib-counters", "brev-perfquery-cx6-hdr.txt"),
    (parse_dcgmi_diag, "dcgm", "dcgmi", "dcgm253-4.2.3-570.148.08-l40s-clipped.txt"),
    (parse_dcgmi_diag, "dcgm", "dcgmi", "dcgm139-3x-json-skips-clipped.json"),
]


def _mangle(text: str, data: st.DataObject) -> str:
    lines = text.splitlines()
    for _ in range(data.draw(st.integers(0, 6))):
        if not lines:
            break
        i = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["drop", "cut", "dup", "junk", "swap"]))
        if action == "drop":
            del lines[i]
        elif action == "cut":
            lines[i] = lines[i][: data.draw(st.integers(0, max(len(lines[i]) - 1, 0)))]
        elif action == "dup":
            lines.insert(i, lines[i])
        elif action == "junk":
            lines.insert(i, data.draw(st.text(max_size=40)))
        else:
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), case=st.sampled_from(CASES))
def test_mangled_recordings_parse_or_raise_parse_error(data: st.DataObject,
                                                       case: tuple[Callable[[str], Any], str, str, str]) -> None:
    parse, attribute, tool, name = case
    text = _mangle(read_fixture(tool, name), data)
    try:
        value = parse(text)
    except ParseError as exc:
        assert exc.line is None or exc.line >= 1
        return
    judge([HostInput("h", HostProbe(**{attribute: value}))])


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=300))
def test_random_text_never_crashes_a_parser(text: str) -> None:
    for parse in (parse_nvidia_smi_q, parse_kernel_log, parse_nvlink_errors, parse_ib_counters, parse_lspci,
                  parse_dcgmi_diag):
        with contextlib.suppress(ParseError):
            parse(text)
