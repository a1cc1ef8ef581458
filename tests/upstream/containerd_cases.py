"""The containerd cases of the real-tools tier: which containerd reads which clusterctl config.

The 2.2 config (version 3) is the demo's, the 2.3 one (version 4) the Kubernetes 1.37 variant's,
both as the bootstrap left them on the mock hosts; the 1.6 one (version 2) is rendered for
Debian's package, which .ci/run installs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demo_calls import VARIANTS, DemoRecordings, Variant
from real_tools import system_tool
from toolset import CONTAINERD_22, CONTAINERD_23

from clusterctl.bootstrap.containerd_config import WantedContainerd, render_config

Tool = Callable[[str, str], Path]
DEBIAN = "1.6"


@dataclass(frozen=True)
class Case:
    containerd: str
    variant: Variant | None
    version: int
    sandbox: str


CASES = (
    Case(CONTAINERD_22, VARIANTS[0], 3, "registry.k8s.io/pause:3.10.2"),
    Case(CONTAINERD_23, VARIANTS[2], 4, "registry.k8s.io/pause:3.10.2"),
    Case(DEBIAN, None, 2, "registry.k8s.io/pause:3.10.1"),
)


def binaries(case: Case, upstream_tool: Tool) -> tuple[Path, Path]:
    if case.containerd != DEBIAN:
        return upstream_tool("containerd", case.containerd), upstream_tool("ctr", case.containerd)
    return system_tool("containerd", "containerd"), system_tool("ctr", "containerd")


def clusterctl_config(case: Case, demo_recordings: DemoRecordings) -> str:
    if case.variant is None:
        wanted = WantedContainerd("1.6.20", 2, case.sandbox, "default", False)
        return render_config(wanted)
    config = demo_recordings.get(case.variant).file("gpu-a2", "/etc/containerd/config.toml")
    assert config is not None, "the bootstrap wrote no /etc/containerd/config.toml"
    return config.decode()


def cri_tables(dumped: dict[str, Any], version: int) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(runtime table's ``containerd`` part, images/registry part, sandbox image) of a dumped config."""
    plugins = dumped["plugins"]
    if version == 2:
        cri = plugins["io.containerd.grpc.v1.cri"]
        return cri["containerd"], cri["registry"], cri["sandbox_image"]
    images = plugins["io.containerd.cri.v1.images"]
    return (plugins["io.containerd.cri.v1.runtime"]["containerd"], images["registry"],
            images["pinned_images"]["sandbox"])
