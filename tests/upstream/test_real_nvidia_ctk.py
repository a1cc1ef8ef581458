"""The real ``nvidia-ctk runtime configure`` over clusterctl's containerd config, and what containerd makes of it.

clusterctl writes the ``nvidia`` runtime into config.toml itself and never runs ``nvidia-ctk
runtime configure`` (phase nvidia-runtime's docstring says why), but the GPU Operator and users
do, and nvidia-ctk 1.18+ then writes its drop-in ``conf.d/99-nvidia.toml``. So: nvidia-ctk's
``--dry-run`` must describe the same runtime clusterctl writes; the drop-in it writes over
clusterctl's root must leave clusterctl's settings in place when the matching containerd reads
both; and clusterctl's own model of the merge (``effective_config``, behind its drop-in checks)
must predict what the real containerd dumps.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from containerd_cases import CASES, Case, Tool, binaries, clusterctl_config, cri_tables
from containerd_daemon import relocated
from demo_calls import DemoRecordings

from clusterctl.bootstrap.containerd_config import (
    WantedContainerd,
    check_dropins,
    effective_config,
    file_version,
    parse_toml,
)
from clusterctl.findings import Severity

CTK = "1.20.0"


def configure(nvidia_ctk: Path, root: Path, dropin: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(nvidia_ctk), "runtime", "configure", "--runtime=containerd", f"--config={root}",
                           f"--drop-in-config={dropin}", "--nvidia-set-as-default", *extra], capture_output=True,
                          text=True, timeout=60)


def runtime_part(doc: dict[str, Any], version: int) -> dict[str, Any]:
    plugin = "io.containerd.grpc.v1.cri" if version == 2 else "io.containerd.cri.v1.runtime"
    part: dict[str, Any] = doc["plugins"][plugin]["containerd"]
    return part


def same_settings(rewritten: dict[str, Any], ours: dict[str, Any]) -> bool:
    """The root nvidia-ctk rewrites holds clusterctl's settings; it adds its default drop-in folder to
    ``imports`` (on a host that is clusterctl's own: the tests moved clusterctl's to a temporary one)."""
    extra = [i for i in rewritten.get("imports", []) if i not in ours.get("imports", [])]
    rest = {k: v for k, v in rewritten.items() if k != "imports"}
    kept = {k: v for k, v in ours.items() if k != "imports"}
    return extra in ([], ["/etc/containerd/conf.d/*.toml"]) and rest == kept


def setup(case: Case, demo_recordings: DemoRecordings, folder: Path) -> tuple[Path, Path, str]:
    root = folder / "config.toml"
    text = relocated(clusterctl_config(case, demo_recordings), folder)
    root.write_text(text)
    (folder / "conf.d").mkdir(exist_ok=True)
    return root, folder / "conf.d" / "99-nvidia.toml", text


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"containerd-{c.containerd}")
def test_nvidia_ctk_dry_run_describes_the_runtime_clusterctl_writes(
        case: Case, demo_recordings: DemoRecordings, upstream_tool: Tool, tmp_path: Path) -> None:
    nvidia_ctk = upstream_tool("nvidia-ctk", CTK)
    root, dropin, text = setup(case, demo_recordings, tmp_path)
    done = configure(nvidia_ctk, root, dropin, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert not dropin.exists() and root.read_text() == text, "--dry-run wrote a file"
    # --dry-run prints the drop-in, then the root config as it would rewrite it (from its imports line).
    dropin_text, _, root_text = done.stdout.partition("\nimports = ")
    theirs = parse_toml(dropin_text, "nvidia-ctk --dry-run")
    assert same_settings(parse_toml("imports = " + root_text, "nvidia-ctk --dry-run"), parse_toml(text, "ours"))
    assert file_version(theirs) == case.version, "nvidia-ctk's drop-in must carry the root's version"
    ours = parse_toml(text, "clusterctl's config")
    their_runtime, our_runtime = runtime_part(theirs, case.version), runtime_part(ours, case.version)
    assert their_runtime["default_runtime_name"] == our_runtime["default_runtime_name"] == "nvidia"
    for key in ("runtime_type",):
        assert their_runtime["runtimes"]["nvidia"][key] == our_runtime["runtimes"]["nvidia"][key]
    for key in ("BinaryName", "SystemdCgroup"):
        assert their_runtime["runtimes"]["nvidia"]["options"][key] == our_runtime["runtimes"]["nvidia"]["options"][key]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"containerd-{c.containerd}")
def test_its_drop_in_over_clusterctls_root_keeps_clusterctls_settings_as_clusterctl_predicts(
        case: Case, demo_recordings: DemoRecordings, upstream_tool: Tool, tmp_path: Path) -> None:
    nvidia_ctk = upstream_tool("nvidia-ctk", CTK)
    containerd, _ = binaries(case, upstream_tool)
    root, dropin, text = setup(case, demo_recordings, tmp_path)
    done = configure(nvidia_ctk, root, dropin)
    assert done.returncode == 0, done.stderr
    # nvidia-ctk rewrites the root file even though it already imports conf.d: the settings stay the
    # same, clusterctl's comments are lost (so clusterctl's next plan shows the file as changed).
    assert same_settings(parse_toml(root.read_text(), "root after nvidia-ctk"), parse_toml(text, "clusterctl's root"))
    assert "# Written by clusterctl" in text and "# Written by clusterctl" not in root.read_text()
    dumped = subprocess.run([str(containerd), "--config", str(root), "config", "dump"], capture_output=True,
                            text=True, timeout=60)
    assert dumped.returncode == 0, dumped.stderr
    real = parse_toml(dumped.stdout, "containerd config dump")
    runtime, registry, sandbox = cri_tables(real, case.version)
    assert runtime["default_runtime_name"] == "nvidia" and sandbox == case.sandbox
    assert {"runc", "nvidia"} <= set(runtime["runtimes"])
    assert runtime["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    assert registry["config_path"] == "/etc/containerd/certs.d"
    # clusterctl's model of the merge predicts the real result, and so finds nothing to report.
    major = 1 if case.containerd.startswith("1.") else 2
    ours, theirs = parse_toml(text, "root"), parse_toml(dropin.read_text(), "drop-in")
    predicted = effective_config(ours, [theirs], major)
    predicted_runtime, predicted_registry, predicted_sandbox = cri_tables(predicted, case.version)
    assert predicted_registry["config_path"] == registry["config_path"]
    assert set(predicted_runtime["runtimes"]) == set(runtime["runtimes"])
    for name in predicted_runtime["runtimes"]:
        assert (predicted_runtime["runtimes"][name]["options"].get("BinaryName") or None) == \
            (runtime["runtimes"][name]["options"].get("BinaryName") or None), name
    assert (predicted_runtime["default_runtime_name"], predicted_sandbox) == (runtime["default_runtime_name"], sandbox)
    wanted = WantedContainerd(case.containerd if major == 2 else "1.6.20", case.version, case.sandbox, "default",
                              False)
    problems = check_dropins(case.version, wanted.containerd_version, ours, {str(dropin): theirs}, wanted, "h")
    assert [p for p in problems if p.severity is Severity.ERROR] == []
