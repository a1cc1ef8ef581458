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


def test_a_spec_is_missing_only_when_cat_says_so_and_the_toolkit_only_when_the_shell_does() -> None:
    """A spec whose first line says "not found" was read as no spec: bootstrap regenerated it as its own file,
    one that 'clusterctl reset' then removes."""
    spec = "# devices not found at generation are left out\ncdiVersion: 0.5.0\n# libcuda.so.550.90.07\n"
    probe = (f"@@clusterctl@@ ctk-version\nNVIDIA Container Toolkit CLI version 1.17.8\n@@clusterctl@@ runtime\n"
             f"/usr/bin/nvidia-container-runtime\n@@clusterctl@@ cdi-spec\n{spec}@@clusterctl@@ driver\n550.90.07\n")
    assert parse_toolkit_probe(probe) == ToolkitFacts("1.17.8", True, spec, "550.90.07")
    absent = ("@@clusterctl@@ ctk-version\nsh: 1: nvidia-ctk: not found\n@@clusterctl@@ runtime\n"
              "/usr/bin/ls: cannot access '/usr/bin/nvidia-container-runtime': No such file or directory\n"
              "@@clusterctl@@ cdi-spec\n/usr/bin/cat: /etc/cdi/nvidia.yaml: No such file or directory\n"
              "@@clusterctl@@ driver\ncat: /sys/module/nvidia/version: No such file or directory\n")
    assert parse_toolkit_probe(absent) == ToolkitFacts(None, False, None, None)
    assert parse_toolkit_probe(absent.replace("sh: 1: nvidia-ctk: not found", "")).ctk_version is None


def test_an_empty_spec_file_is_the_hosts_own_and_is_regenerated_not_taken_as_bootstraps() -> None:
    """An empty /etc/cdi/nvidia.yaml is a file the host had: regenerated because it names no driver, and not
    marked as one bootstrap made (which 'clusterctl reset' would delete)."""
    probe = ("@@clusterctl@@ ctk-version\nNVIDIA Container Toolkit CLI version 1.17.8\n@@clusterctl@@ runtime\n"
             "/usr/bin/nvidia-container-runtime\n@@clusterctl@@ cdi-spec\n@@clusterctl@@ driver\n550.90.07\n")
    facts = parse_toolkit_probe(probe)
    assert facts.cdi_spec == ""
    generate = NvidiaRuntime().plan(ctx(True), facts)[-1]
    assert "does not name driver 550.90.07" in generate.summary and generate.makes == ()
