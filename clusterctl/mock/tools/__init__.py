"""Simulated tools: one module per tool, registered by name in ``TOOLS``.

A tool module defines ``run(ctx: ToolContext) -> ToolResult`` and may define ``PACKAGES``
(the Debian packages that ship the tool: it then exists on a mock host only once one of
them is installed, or an executable of that name is in the host's tree). See
``clusterctl.mock`` for the whole API and an example.
"""

from __future__ import annotations

import functools
from importlib import import_module
from types import ModuleType

#: Command name -> module that simulates it. Adding a tool: write the module, add a line here.
TOOLS: dict[str, str] = {
    # the host's files and shell utilities (they read and write the state tree)
    **{name: "clusterctl.mock.tools.files" for name in (
        "cat", "test", "[", "mkdir", "rm", "rmdir", "cp", "mv", "ls", "touch", "chmod", "grep", "head", "tail",
        "date", "sleep", "uname", "hostname", "install",
    )},
    "systemctl": "clusterctl.mock.tools.systemctl",
    "apt-get": "clusterctl.mock.tools.apt_get",
    "dpkg-query": "clusterctl.mock.tools.dpkg_query",
    "dpkg": "clusterctl.mock.tools.dpkg",
    "apt-mark": "clusterctl.mock.tools.apt_mark",
    "modprobe": "clusterctl.mock.tools.modprobe",
    "lsmod": "clusterctl.mock.tools.modprobe",
    "sysctl": "clusterctl.mock.tools.sysctl",
    "swapon": "clusterctl.mock.tools.swap",
    "swapoff": "clusterctl.mock.tools.swap",
    "nvidia-ctk": "clusterctl.mock.tools.nvidia_ctk",
    "ctr": "clusterctl.mock.tools.ctr",
    "containerd": "clusterctl.mock.tools.containerd",
    "curl": "clusterctl.mock.tools.curl",
    "crictl": "clusterctl.mock.tools.crictl",
    # Cluster tools sharing one simulated Kubernetes cluster (clusterctl.mock.tools.kube_state):
    "kubeadm": "clusterctl.mock.tools.kubeadm",
    "kubelet": "clusterctl.mock.tools.kubelet",
    "kubectl": "clusterctl.mock.tools.kubectl",
    "helm": "clusterctl.mock.tools.helm",
    # Slurm's scontrol, sharing the mock cluster's node states:
    "scontrol": "clusterctl.mock.tools.scontrol",
}

#: Tools that only the in-process mock simulates: on an sshd mock host the real shell and
#: coreutils answer them (reading the host's private tree when it is isolated).
FILE_TOOLS = frozenset(name for name, module in TOOLS.items() if module.endswith(".files"))

#: Folders searched for an executable of a tool's name in the host's tree.
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


@functools.lru_cache(maxsize=1024)
def tool_module(name: str) -> ModuleType | None:
    """The module simulating ``name``, or None when there is none."""
    module = TOOLS.get(name)
    # Imported on first use (a survey needs a handful of the tools); kept by name after that,
    # since the simulator asks for every program of every command line.
    return import_module(module) if module else None
