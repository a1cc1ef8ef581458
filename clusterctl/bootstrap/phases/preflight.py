"""preflight: read-only checks of every host before anything changes.

OS and kernel, swap, the ports Kubernetes needs, unique hostnames and product UUIDs, time
sync, CPU and memory minimums, the NVIDIA driver loaded and equal to the stack pin and GPUs
visible (not on hosts the inventory marks ``gpus: false``), free space under /var/lib, and the
Kubernetes/containerd pins against the published support matrix. Error-level findings stop the
host (exit 1, one table of what fails where); warnings are shown and the run goes on (swap, for
one, is turned off by the kernel phase).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from clusterctl.bootstrap import matrix
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.errors import ClusterctlError
from clusterctl.facts.node import NODE_FACTS, NodeFacts
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.values import ip_literal

#: Port -> the processes that may hold it on a re-run (names as ``ss -p`` shows, 15 characters).
CONTROL_PLANE_PORTS: dict[int, tuple[str, ...]] = {
    6443: ("kube-apiserver",),
    2379: ("etcd",),
    2380: ("etcd",),
    10250: ("kubelet",),
    10257: ("kube-controller",),
    10259: ("kube-scheduler",),
}
WORKER_PORTS: dict[int, tuple[str, ...]] = {10250: ("kubelet",)}
#: kubeadm's own preflight minimums (control plane: 2 CPUs, 1700 MB).
MIN_CPUS_CONTROL_PLANE = 2
MIN_MEMORY_MIB_CONTROL_PLANE = 1700


def os_unsupported(ctx: PhaseContext, os_id: str | None, base: str | None, codename: str | None,
                   name: str | None = None) -> list[Finding]:
    """THE decision whether bootstrap can install on a host's OS (preflight and the packages phase ask it): the
    packages phase speaks apt, so the OS must use Debian's or Ubuntu's archives, and Docker's source of
    containerd.io needs a release of theirs for its suite (``base``, ``codename``: the one reading of
    os-release, ``facts.node.apt_base``). An OS not known (no os-release read) is refused only for that suite."""
    docker = ctx.inventory.bootstrap.containerd_package == "containerd.io"
    if (os_id is None and not docker) or (base and (codename or not docker)):
        return []
    message = "bootstrap installs packages with apt (Debian or Ubuntu)"
    if os_id is None:
        message = ("no /etc/os-release read (no ID, no VERSION_CODENAME), so Docker's apt source of containerd.io "
                   "(download.docker.com/linux/debian or linux/ubuntu) has no suite for it")
    elif base:  # Kali, Devuan: their own codename is no release in Docker's linux/debian
        message = (f"its /etc/os-release names no {base.title()} release (no {base.upper()}_CODENAME, "
                   f"{'no VERSION_CODENAME' if os_id == base else f'and the VERSION_CODENAME of {os_id} is its own'})"
                   f", so Docker's apt source of containerd.io (download.docker.com/linux/{base}) has no suite "
                   "for it")
    return [Finding(Severity.ERROR, "OS_UNSUPPORTED", f"{name or os_id}: {message}" if os_id else message,
                    host=ctx.host.name, evidence={"os": os_id}, fix="" if os_id and not base else "Set "
                    "bootstrap.containerd_package: containerd (the distribution's own package; Docker's source is "
                    "then not written).")]


class Preflight(Phase[NodeFacts]):
    name = "preflight"
    description = "read-only checks: OS, swap, ports, unique names, time, CPU/memory, driver, GPUs, disk"
    read_only = True
    timeout_s = 60.0

    def reads(self, ctx: PhaseContext) -> list[tuple[str, bool]]:
        return [(NODE_FACTS.command, NODE_FACTS.sudo)]

    def check(self, ctx: PhaseContext) -> NodeFacts:
        result = ctx.reader.run(NODE_FACTS.command, sudo=NODE_FACTS.sudo)
        if result.exit_code == 127 and not result.stdout:
            raise ClusterctlError(f"cannot run the preflight probe: {result.stderr_tail(2)}")
        return NODE_FACTS.parse(result.stdout)

    def findings(self, ctx: PhaseContext, state: NodeFacts) -> list[Finding]:
        host = ctx.host
        out: list[Finding] = []

        def add(severity: Severity, code: str, message: str, fix: str = "", **evidence: object) -> None:
            out.append(Finding(severity, code, message, host=host.name, fix=fix, evidence=evidence))

        control_plane = host.is_control_plane
        if state.os_id is None:
            add(Severity.ERROR, "OS_UNKNOWN", "cannot read /etc/os-release", "Check that the host is a Linux system.")
        out += os_unsupported(ctx, state.os_id, state.os_apt_base, state.os_codename, state.os_pretty)
        if state.kernel is None:
            add(Severity.WARNING, "KERNEL_UNKNOWN", "cannot read the kernel release (uname -r)")
        # Swap: the kubelet refuses to start with swap on (unless configured); the kernel phase turns it off.
        if state.swaps:
            names = ", ".join(s.name for s in state.swaps)
            add(Severity.WARNING, "SWAP_ON", f"swap is on ({names}); the kernel phase turns it off",
                "Nothing to do: 'clusterctl bootstrap' runs swapoff and comments the fstab line.", swaps=names)
        # Ports.
        wanted = CONTROL_PLANE_PORTS if control_plane else WORKER_PORTS
        for sock in state.listening or ():
            owners = wanted.get(sock.port)
            if owners is None:
                continue
            if sock.processes and any(p.startswith(owners) for p in sock.processes):
                continue  # Kubernetes itself, on a re-run
            held = ", ".join(sock.processes) or "another process"
            add(Severity.ERROR, "PORT_IN_USE", f"port {sock.port} is already in use by {held}",
                f"Stop what listens on {sock.port}; Kubernetes needs it ({'/'.join(owners)}).", port=sock.port)
        # The cluster's ranges: an address of the host inside one is routed into the pod network by the CNI
        # or taken by kube-proxy's service rules, and the node stops reaching (or being reached at) it.
        address = ip_literal(host.connect_address)
        for setting in ("pod_subnet", "service_subnet"):
            subnet = ipaddress.ip_network(getattr(ctx.inventory.bootstrap, setting))
            if address is not None and address in subnet:
                add(Severity.ERROR, "SUBNET_HOLDS_HOST", f"bootstrap.{setting} {subnet} holds the host's address "
                    f"{address}", f"Pick a {setting} that none of the hosts' networks use.", subnet=str(subnet))
        # CPU and memory.
        if state.cpus is not None and state.cpus < MIN_CPUS_CONTROL_PLANE:
            add(Severity.ERROR if control_plane else Severity.WARNING, "TOO_FEW_CPUS",
                f"{state.cpus} CPU(s); kubeadm wants at least {MIN_CPUS_CONTROL_PLANE}", cpus=state.cpus)
        if state.mem_total_kib is not None and state.mem_total_kib / 1024 < MIN_MEMORY_MIB_CONTROL_PLANE:
            add(Severity.ERROR if control_plane else Severity.WARNING, "TOO_LITTLE_MEMORY",
                f"{state.mem_total_kib // 1024} MiB of memory; kubeadm wants at least "
                f"{MIN_MEMORY_MIB_CONTROL_PLANE} MiB", mem_mib=state.mem_total_kib // 1024)
        # Time.
        if state.time_synced is False:
            add(Severity.WARNING, "TIME_NOT_SYNCED", "the clock is not synchronised (timedatectl: "
                "NTPSynchronized=no)", "Enable systemd-timesyncd or chrony: certificates and etcd need it.")
        # Driver and GPUs, on hosts with GPUs only.
        pin = host.stack.driver
        if not host.gpus:
            if state.gpus:
                add(Severity.WARNING, "GPUS_ON_GPU_LESS_HOST", f"{len(state.gpus)} GPU(s) visible, but the inventory "
                    "says the host has none (gpus: false): bootstrap installs no NVIDIA runtime here",
                    "Remove 'gpus: false' from the host (or its group) if its GPUs are to be used.",
                    gpus=len(state.gpus))
        elif state.nvidia_driver is None:
            if pin:
                add(Severity.ERROR, "DRIVER_NOT_LOADED", f"the NVIDIA driver is not loaded (pinned {pin})",
                    "Install and load the pinned driver before bootstrap.", pinned=pin)
        elif pin and state.nvidia_driver != pin:
            add(Severity.ERROR, "DRIVER_PIN_MISMATCH", f"NVIDIA driver {state.nvidia_driver} is loaded, the stack "
                f"pins {pin}", "Install the pinned driver, or change the pin.", loaded=state.nvidia_driver,
                pinned=pin)
        if host.gpus and (pin or state.nvidia_driver) and not state.gpus:
            why = state.missing.get("gpus", "nvidia-smi -L lists none")
            add(Severity.ERROR, "NO_GPUS", f"no GPU is visible ({why})", "Check the driver with nvidia-smi.")
        # Disk.
        minimum = ctx.inventory.bootstrap.min_var_lib_gib
        if state.var_lib is not None and state.var_lib.available_kib / 1024**2 < minimum:
            free = state.var_lib.available_kib / 1024**2
            add(Severity.ERROR, "DISK_LOW", f"{free:.1f} GiB free under /var/lib ({state.var_lib.mounted_on}); "
                f"bootstrap wants {minimum:g} GiB for images, etcd and logs", free_gib=round(free, 1))
        # Pins against the support matrix.
        out.extend(stack_findings(ctx))
        return out

    def fleet_findings(self, states: Mapping[str, NodeFacts]) -> list[Finding]:
        out: list[Finding] = []
        for attribute, code, what in (("hostname", "DUPLICATE_HOSTNAME", "hostname"),
                                      ("product_uuid", "DUPLICATE_PRODUCT_UUID", "product UUID")):
            seen: dict[str, list[str]] = {}
            for host, facts in states.items():
                value = getattr(facts, attribute)
                if value:
                    seen.setdefault(value, []).append(host)
            for value, hosts in seen.items():
                if len(hosts) > 1:
                    for host in hosts:
                        others = ", ".join(h for h in hosts if h != host)
                        out.append(Finding(Severity.ERROR, code, f"{what} {value} is also the {what} of {others}",
                                           host=host, fix=f"Every node needs its own {what} (kubeadm refuses "
                                           "duplicates).", evidence={"value": value}))
        return out


def stack_findings(ctx: PhaseContext) -> list[Finding]:
    """The stack pin against kubeadm's support window and containerd's Kubernetes table."""
    host = ctx.host
    out: list[Finding] = []
    kubernetes, containerd = host.stack.kubernetes, host.stack.containerd
    if not kubernetes:
        out.append(Finding(Severity.ERROR, "KUBERNETES_NOT_PINNED", "the stack pins no Kubernetes version",
                           host=host.name, fix="Set stack.kubernetes in the inventory (e.g. \"1.36.2\")."))
        return out
    verdict = matrix.kubernetes_supported(kubernetes)
    if verdict.message:
        out.append(Finding(Severity.ERROR if not verdict.ok else Severity.WARNING, "KUBERNETES_UNSUPPORTED",
                           verdict.message, host=host.name, fix="Pin a Kubernetes release kubeadm still supports."))
    if not containerd:
        out.append(Finding(Severity.ERROR, "CONTAINERD_NOT_PINNED", "the stack pins no containerd version",
                           host=host.name, fix="Set stack.containerd in the inventory."))
        return out
    verdict = matrix.containerd_supports(kubernetes, containerd)
    if verdict.message:
        out.append(Finding(Severity.ERROR if not verdict.ok else Severity.WARNING, "CONTAINERD_KUBERNETES_MISMATCH",
                           verdict.message, host=host.name, evidence={"kubernetes": kubernetes,
                                                                      "containerd": containerd},
                           fix="Pin a containerd that containerd's RELEASES.md lists for this Kubernetes."))
    return out

