"""kernel: ``overlay`` and ``br_netfilter`` loaded now and at boot, the sysctls Kubernetes needs now
and at boot, swap off now and in ``/etc/fstab`` (lines commented, the original text kept after
the marker, the previous file kept as a backup).
"""

from __future__ import annotations

import shlex

from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.changes import Change
from clusterctl.facts.kernel import KernelFacts, comment_out_swap, fstab_swap_lines, kernel_probe, parse_kernel_probe
from clusterctl.findings import Finding, Severity
from clusterctl.templating import render

MODULES = ("overlay", "br_netfilter")
SYSCTLS = {"net.bridge.bridge-nf-call-iptables": "1", "net.bridge.bridge-nf-call-ip6tables": "1",
           "net.ipv4.ip_forward": "1"}
MODULES_FILE = "/etc/modules-load.d/clusterctl-kubernetes.conf"
SYSCTL_FILE = "/etc/sysctl.d/99-clusterctl-kubernetes.conf"
FSTAB = "/etc/fstab"
#: What the phase reads: modules, the sysctls, swap and its three files, in one command.
PROBE = kernel_probe(tuple(SYSCTLS), (MODULES_FILE, SYSCTL_FILE, FSTAB))


class Kernel(Phase[KernelFacts]):
    name = "kernel"
    confirmable = True
    description = "overlay and br_netfilter, forwarding and bridge sysctls, swap off (now and at boot)"
    timeout_s = 120.0

    def reads(self, ctx: PhaseContext) -> list[tuple[str, bool]]:
        return [(PROBE, True)]

    def check(self, ctx: PhaseContext) -> KernelFacts:
        return parse_kernel_probe(ctx.reader.run(PROBE, sudo=True).stdout)

    def findings(self, ctx: PhaseContext, state: KernelFacts) -> list[Finding]:
        if state.modules is None:
            return [Finding(Severity.WARNING, "KERNEL_MODULES_UNKNOWN", f"cannot list kernel modules "
                            f"({state.missing.get('modules', 'lsmod failed')}); modprobe runs anyway",
                            host=ctx.host.name)]
        return []

    def plan(self, ctx: PhaseContext, state: KernelFacts) -> list[Change]:
        host = ctx.host.name
        modules_conf = render("bootstrap/kernel/modules-load.conf.j2", modules=MODULES)
        changes = [Change.write_file(host, MODULES_FILE, modules_conf, current=state.files.get(MODULES_FILE),
                                     summary="load overlay, br_netfilter at boot")]
        loaded = set(state.modules or ())
        changes += [Change.run(host, f"modprobe {shlex.quote(module)}", summary=f"load {module} now",
                               cannot_undo="a loaded module stays loaded until the next boot")
                    for module in MODULES if module not in loaded]
        changes.append(Change.write_file(host, SYSCTL_FILE, render("bootstrap/kernel/sysctl.conf.j2", settings=SYSCTLS),
                                         current=state.files.get(SYSCTL_FILE), summary="Kubernetes sysctls at boot"))
        wrong = {k: v for k, v in SYSCTLS.items() if state.sysctl.get(k) != v}
        if wrong:
            now = " ".join(shlex.quote(f"{k}={v}") for k, v in wrong.items())
            was = " ".join(shlex.quote(f"{k}={state.sysctl[k]}") for k in wrong if k in state.sysctl)
            changes.append(Change.run(host, f"sysctl -w {now}", summary="Kubernetes sysctls now",
                                      undo=f"sysctl -w {was}" if was else None))
        if state.swaps:
            changes.append(Change.run(host, "swapoff -a", summary=f"turn swap off now ({', '.join(state.swaps)})",
                                      undo="swapon -a"))
        fstab = state.files.get(FSTAB)
        if fstab is not None and fstab_swap_lines(fstab):
            changes.append(Change.write_file(host, FSTAB, comment_out_swap(fstab), current=fstab,
                                             summary="swap off at boot (fstab lines commented)"))
        return changes

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        facts = self.check(ctx)
        host = ctx.host.name
        out: list[Finding] = []
        missing = [m for m in MODULES if facts.modules is not None and m not in facts.modules]
        if missing:
            out.append(Finding(Severity.ERROR, "KERNEL_MODULE_NOT_LOADED", f"not loaded: {', '.join(missing)}",
                               host=host))
        wrong = [k for k, v in SYSCTLS.items() if facts.sysctl.get(k) != v]
        if wrong:
            out.append(Finding(Severity.ERROR, "SYSCTL_NOT_SET", f"not 1: {', '.join(wrong)}", host=host))
        if facts.swaps:
            out.append(Finding(Severity.ERROR, "SWAP_STILL_ON", f"swap still on: {', '.join(facts.swaps)}", host=host,
                               fix="A systemd .swap unit may turn it on: systemctl mask it."))
        return out
