"""Memory per host stays bounded whatever a host prints (issue 37: two 40 MB probe outputs took
860 MB for one host): each probe keeps a bounded head and tail as it streams, and says what it dropped."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from clusterctl.health.checks import Baseline, HostInput, judge_host
from clusterctl.health.model import HealthOptions
from clusterctl.health.probe import PROBE_HEAD_BYTES, PROBE_TAIL_BYTES, ProbeCollector
from clusterctl.health.run import probe_host
from clusterctl.inventory.model import Host
from clusterctl.transport.local import LocalTransport

MB = 1024 * 1024
FLOOD = 40 * MB


def _flooding_tools(folder: Path) -> Path:
    """nvidia-smi -q and lspci -vvv that print 40 MB each, as a host in trouble can."""
    folder.mkdir()
    line = "GPU 00000000:07:00.0  Xid noise that a debug loop prints again and again and again"
    flood = f"yes '{line}' | head -c {FLOOD}"
    (folder / "nvidia-smi").write_text(f"#!/bin/sh\nif [ \"$1\" = -q ]; then {flood}; fi\n")
    (folder / "lspci").write_text(f"#!/bin/sh\n{flood}\n")
    for tool in folder.iterdir():
        tool.chmod(0o755)
    return folder


def test_two_40_mb_probe_outputs_cost_a_few_mb_and_are_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = _flooding_tools(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    transport = LocalTransport(Host(name="here", transport="local"))
    tracemalloc.start()
    try:
        probe = probe_host(transport, HealthOptions(probe_timeout_s=120))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Two 40 MB outputs read through; what is held is each probe's head and tail as Python lines,
    # plus parsing them: below what the issue measured for a normal host (61 MB), whatever is printed.
    assert peak < 48 * MB, f"peak {peak / MB:.0f} MiB"
    assert set(probe.cut) == {"nvidia-smi-q", "lspci"}
    printed, dropped = probe.cut["lspci"]
    assert printed >= FLOOD and dropped >= FLOOD - PROBE_HEAD_BYTES - PROBE_TAIL_BYTES - 200, (printed, dropped)
    item = HostInput("here", probe)
    cut = [f for f in judge_host(item, Baseline([item])) if f.code == "PROBE_OUTPUT_CUT"]
    assert {f.subject for f in cut} == {"nvidia-smi-q", "lspci"}
    assert "printed 40.0 MiB: its first 2.0 MiB and last 1.0 MiB were judged" in cut[0].message


def test_the_collector_keeps_each_probes_head_tail_and_status_line() -> None:
    collector = ProbeCollector(head=100, tail=50)
    collector("stdout", "### small")
    collector("stdout", "one line")
    collector("stdout", "@@rc 0")
    collector("stdout", "### big")
    for i in range(1000):
        collector("stdout", f"line {i:04d}")
    collector("stdout", "@@rc 3")
    collector("stderr", "ignored")
    text = collector.text()
    assert text.startswith("### small\none line\n@@rc 0\n### big\nline 0000\n")
    assert text.endswith("line 0999\n@@rc 3\n")
    assert "line 0500" not in text
    assert collector.cut() == {"big": (1000 * 10 + 7, collector.cut()["big"][1])}
    assert collector.cut()["big"][1] > 9000
