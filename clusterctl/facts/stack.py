"""The host's software stack, read with ONE compound command.

One round trip instead of ten: each tool's output is printed under a ``### <section>``
line, and every tool may be absent (``2>&1 || true``) so a missing kubelet does not hide the
driver version. ``parse_stack`` turns the sections into a ``SoftwareStack`` and records, for
each component it could not read, why (``command not found``, no such file...).
"""

from __future__ import annotations

import re

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact, absent_reason
from clusterctl.facts.model import SoftwareStack
from clusterctl.facts.node import parse_os_release
from clusterctl.facts.sections import filled_lines, split_sections

_WHAT = "software stack"

#: (section name, shell command). Each command's stderr is kept: it says why a tool is missing.
STACK_SECTIONS: tuple[tuple[str, str], ...] = (
    ("os-release", "cat /etc/os-release 2>&1"),
    ("kernel", "uname -r 2>&1"),
    ("driver", "cat /proc/driver/nvidia/version 2>&1"),
    ("nvidia-smi", "nvidia-smi 2>&1 | head -n 4"),
    ("nvcc", "nvcc --version 2>&1"),
    # Versions live in the library file name or the package; each lookup may fail quietly.
    (
        "nccl",
        "ls -1 /usr/lib/x86_64-linux-gnu/libnccl.so.* /usr/lib/aarch64-linux-gnu/libnccl.so.* "
        "/usr/lib64/libnccl.so.* /usr/local/lib/libnccl.so.* 2>/dev/null; "
        "dpkg-query -W -f='${Package} ${Version}\\n' 'libnccl*' 2>/dev/null; "
        "rpm -qa 'libnccl*' 2>/dev/null",
    ),
    ("containerd", "containerd --version 2>&1"),
    ("kubelet", "kubelet --version 2>&1"),
    ("kubeadm", "kubeadm version -o short 2>&1"),
    ("nvidia-ctk", "nvidia-ctk --version 2>&1"),
)


_VERSION = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)*)")
_DRIVER = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)")
#: 610+ drivers' banner says ``KMD Version: 610.57.04     CUDA UMD Version: 13.3``.
_SMI_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(\d+\.\d+(?:\.\d+)?)")
_SMI_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(\d+\.\d+)")
_NVCC = re.compile(r"release (\d+\.\d+)")
_NCCL = (
    re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)"),
    re.compile(r"^libnccl2? (\d+\.\d+\.\d+)", re.MULTILINE),
    re.compile(r"^libnccl-(\d+\.\d+\.\d+)", re.MULTILINE),
)
_KERNEL = re.compile(r"^\d+\.\d+\S*$")


def parse_stack(text: str) -> SoftwareStack:
    sections = split_sections(text, _WHAT)
    found: dict[str, str | None] = {}
    missing: dict[str, str] = {}

    def read(component: str, section: str, pattern: re.Pattern[str]) -> None:
        if section not in sections:
            missing.setdefault(component, f"section '{section}' absent from the output")
            return
        output = sections.text(section)
        reason = absent_reason(output)
        if reason is not None:
            missing.setdefault(component, reason)
            return
        match = pattern.search(output)
        if match:
            found[component] = match.group(1)
            missing.pop(component, None)
        else:
            missing.setdefault(component, f"unrecognised output: {next(iter(filled_lines(output)), '')[:80]!r}")

    why = absent_reason(sections.text("os-release"))
    release: dict[str, str] = {}
    if why is None:
        try:
            release = parse_os_release(sections.text("os-release"))
        except ParseError as exc:
            why = str(exc)  # the line it could not read, named
    if "NAME" not in release:
        missing["os"] = why or "no NAME= line in /etc/os-release"

    kernel = next(iter(filled_lines(sections.text("kernel"))), "")
    if _KERNEL.match(kernel):
        found["kernel"] = kernel
    else:
        missing["kernel"] = absent_reason(sections.text("kernel")) or "unrecognised output of uname -r"

    # The driver version is in /proc; nvidia-smi's banner also has it when /proc is hidden.
    read("driver", "driver", _DRIVER)
    if "driver" not in found:
        read("driver", "nvidia-smi", _SMI_DRIVER)  # a reason /proc gave stays the one named
    read("cuda", "nvidia-smi", _SMI_CUDA)
    read("cuda_toolkit", "nvcc", _NVCC)
    nccl = next((m.group(1) for pattern in _NCCL if (m := pattern.search(sections.text("nccl")))), None)
    if nccl:
        found["nccl"] = nccl
    else:
        missing["nccl"] = ("no libnccl library or package found" if "nccl" in sections
                           else "section 'nccl' absent from the output")
    for component, section in (("containerd", "containerd"), ("kubelet", "kubelet"), ("kubeadm", "kubeadm"),
                               ("nvidia_container_toolkit", "nvidia-ctk")):
        read(component, section, _VERSION)
    # Each component read is under its field's name in ``found``.
    return SoftwareStack(os_name=release.get("NAME"), os_version=release.get("VERSION_ID"), missing=missing, **found)


STACK: Fact[SoftwareStack] = Fact(
    "stack", "; ".join(f"echo '### {name}'; {{ {command}; }} || true" for name, command in STACK_SECTIONS), parse_stack)
