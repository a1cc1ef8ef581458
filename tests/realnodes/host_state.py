"""What the real-node tier must leave on the host exactly as it found it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from nodes import CGROUP_NAME, MASKED_SYSCTLS, STATE_ROOT, cgroup_hierarchies

#: Paths kubeadm, kubelet, containerd and kubectl write to on a machine: none may appear on the host.
NODE_PATHS = ("/etc/kubernetes", "/var/lib/kubelet", "/var/lib/etcd", "/var/lib/cni", "/etc/cni",
              "/etc/containerd", "/run/containerd", "/var/log/pods", "/etc/clusterctl-realnodes-probe")


def snapshot() -> dict[str, object]:
    """The host's mount table, network links and addresses, the sysctls nodes write, the tier's
    cgroups, state folder and the node paths that exist."""
    mounts = sorted(" ".join(line.split()[3:5]) for line in Path("/proc/self/mountinfo").read_text().splitlines())
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    addresses = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    sysctls = {name: Path("/proc/sys", name).read_text().strip()
               for name in (*MASKED_SYSCTLS, "net/ipv4/ip_forward") if Path("/proc/sys", name).exists()}
    return {
        "mounts": mounts,
        "links": sorted(line.split(":")[1].strip() for line in links.splitlines()),
        "addresses": sorted(addresses.splitlines()),
        "sysctls": sysctls,
        "cgroups": sorted(str(h / CGROUP_NAME) for h in cgroup_hierarchies() if (h / CGROUP_NAME).exists()),
        "state": STATE_ROOT.exists(),
        "node paths": sorted(p for p in NODE_PATHS if Path(p).exists()),
    }
