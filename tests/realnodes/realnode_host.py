"""What the real-node tier must leave on the host exactly as it found it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from nodes import CGROUP_NAME, MASKED_SYSCTLS, STATE_ROOT, cgroup_hierarchies

#: Paths kubeadm, kubelet, containerd and kubectl write to on a machine: none may appear on the host.
NODE_PATHS = ("/etc/kubernetes", "/var/lib/kubelet", "/var/lib/etcd", "/var/lib/cni", "/etc/cni",
              "/etc/containerd", "/run/containerd", "/var/log/pods", "/etc/clusterctl-realnodes-probe")


#: Writable sysctls whose value moves by itself.
VOLATILE_SYSCTLS = ("kernel/ns_last_pid",)


def host_sysctls() -> dict[str, str]:
    """Every writable sysctl outside net/ (the host's network namespace, which nodes cannot reach)."""
    values: dict[str, str] = {}
    for root, dirs, files in os.walk("/proc/sys"):
        if root == "/proc/sys/net":
            dirs[:] = []
            continue
        for name in files:
            path = os.path.join(root, name)
            if path.removeprefix("/proc/sys/") in VOLATILE_SYSCTLS:
                continue
            try:
                if os.stat(path).st_mode & 0o200:
                    with open(path) as handle:
                        values[path] = handle.read()
            except OSError:
                continue
    return values


def snapshot() -> dict[str, object]:
    """The host's mount table, network links and addresses, its sysctls (every writable one outside
    net/, and ip_forward), the tier's cgroups, state folder and the node paths that exist."""
    mounts = sorted(" ".join(line.split()[3:5]) for line in Path("/proc/self/mountinfo").read_text().splitlines())
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    addresses = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    sysctls = {name: Path("/proc/sys", name).read_text().strip()
               for name in (*MASKED_SYSCTLS, "net/ipv4/ip_forward") if Path("/proc/sys", name).exists()}
    sysctls.update(host_sysctls())
    return {
        "mounts": mounts,
        "links": sorted(line.split(":")[1].strip() for line in links.splitlines()),
        "addresses": sorted(addresses.splitlines()),
        "sysctls": sysctls,
        "cgroups": sorted(str(h / CGROUP_NAME) for h in cgroup_hierarchies() if (h / CGROUP_NAME).exists()),
        "state": STATE_ROOT.exists(),
        "node paths": sorted(p for p in NODE_PATHS if Path(p).exists()),
        "devices": sorted(os.listdir("/dev")),
    }
