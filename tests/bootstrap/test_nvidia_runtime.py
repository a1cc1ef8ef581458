"""The nvidia-runtime phase: CDI device lists from real toolkits, and when a spec is (re)generated."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.bootstrap.phase import PhaseContext
from clusterctl.bootstrap.phases.nvidia_runtime import NvidiaRuntime
from clusterctl.errors import ParseError
from clusterctl.facts.nvidia_toolkit import ToolkitFacts, parse_cdi_list, parse_ctk_version, parse_toolkit_probe
from clusterctl.inventory.model import BootstrapConfig, Host, Inventory
from clusterctl.transport.local import LocalTransport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-ctk"


def test_cdi_list_of_two_toolkit_releases() -> None:
    for name in ("cdi-list-1.17.8.txt", "cdi-list-1.19.0-logfmt.txt"):
        devices = parse_cdi_list((FIXTURES / name).read_text())
        assert devices[0] == "nvidia.com/gpu=0" and devices[-1] == "nvidia.com/gpu=all" and len(devices) == 9
    assert parse_ctk_version((FIXTURES / "version-1.17.8.txt").read_text()) == "1.17.8"


def test_an_unreadable_toolkit_version_names_its_line_in_the_whole_probe_output() -> None:
    probe = ("@@clusterctl@@ driver\n550.90.07\n@@clusterctl@@ runtime\n/usr/bin/nvidia-container-runtime\n"
             "@@clusterctl@@ ctk-version\nSegmentation fault (core dumped)\n")
    with pytest.raises(ParseError) as error:
        parse_toolkit_probe(probe)
    assert error.value.line == 6 and "section 'ctk-version'" in str(error.value)
    assert error.value.text == "Segmentation fault (core dumped)"


def ctx(cdi: bool) -> PhaseContext:
    host = Host(name="n1", transport="local")
    return PhaseContext(host, LocalTransport(host), Inventory(name="lab", hosts=(host,),
                                                             bootstrap=BootstrapConfig(cdi=cdi)))


def test_cdi_spec_generated_when_missing_or_naming_another_driver() -> None:
    phase = NvidiaRuntime()
    assert phase.plan(ctx(False), ToolkitFacts("1.20.0", True, None, "535.154.05")) == []
    plan = phase.plan(ctx(True), ToolkitFacts("1.20.0", True, None, "535.154.05"))
    # /etc/cdi is made first, only where the host (this machine, read) lacks it.
    made = [] if Path("/etc/cdi").is_dir() else ["mkdir -m 0755 /etc/cdi"]
    assert [c.command for c in plan] == [*made, "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"]
    stale = phase.plan(ctx(True), ToolkitFacts("1.20.0", True, "libcuda.so.535.104.05\n", "535.154.05"))
    assert "does not name driver 535.154.05" in stale[-1].summary
    assert phase.plan(ctx(True), ToolkitFacts("1.20.0", True, "libcuda.so.535.154.05\n", "535.154.05")) == []
