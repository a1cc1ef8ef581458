"""nvidia-runtime: the NVIDIA Container Toolkit made ready for the containerd the containerd phase set up.

Who writes what, so that the two phases agree instead of fighting:

* the **containerd** phase writes the ``nvidia`` runtime into ``/etc/containerd/config.toml``
  itself (``BinaryName`` ``/usr/bin/nvidia-container-runtime``, ``SystemdCgroup``, default
  runtime or RuntimeClass, ``enable_cdi``) and keeps drop-ins others wrote;
* this phase never runs ``nvidia-ctk runtime configure`` (it would add ``imports`` and a
  ``99-nvidia.toml`` drop-in that duplicates, and on containerd 1.x replaces, the CRI table the
  containerd phase owns). It checks that the runtime binary the config names exists, and when
  the inventory asks for CDI (``bootstrap.cdi: true``) generates the CDI spec with
  ``nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml``, again whenever the spec does not
  name the loaded driver (a driver upgrade makes the old spec point at missing libraries);
* the ``nvidia`` RuntimeClass object (runtime ``runtimeclass``) is a cluster resource: the
  GPU add-ons phase creates it.

On a host the inventory marks ``gpus: false`` there is nothing to do ("the host has no GPUs"):
the packages phase installed no toolkit there.
"""

from __future__ import annotations

from clusterctl.bootstrap.containerd_config import NVIDIA_RUNTIME_BINARY
from clusterctl.bootstrap.phase import GpuPhase, PhaseContext
from clusterctl.changes import MAKES_FILE, Change, make_folders
from clusterctl.errors import ParseError
from clusterctl.facts.nvidia_toolkit import ToolkitFacts, parse_cdi_list, parse_toolkit_probe, toolkit_probe
from clusterctl.findings import Finding, Severity

CDI_SPEC = "/etc/cdi/nvidia.yaml"
PROBE = toolkit_probe(NVIDIA_RUNTIME_BINARY, CDI_SPEC)


class NvidiaRuntime(GpuPhase[ToolkitFacts]):
    name = "nvidia-runtime"
    confirmable = True
    description = "NVIDIA Container Toolkit: runtime binary checked, CDI spec when asked"
    timeout_s = 180.0

    def reads(self, ctx: PhaseContext) -> list[tuple[str, bool]]:
        return [(PROBE, True)]

    def check(self, ctx: PhaseContext) -> ToolkitFacts:
        return parse_toolkit_probe(ctx.reader.run(PROBE, sudo=True).stdout)

    def plan(self, ctx: PhaseContext, state: ToolkitFacts) -> list[Change]:
        if not ctx.inventory.bootstrap.cdi:
            return []
        if state.cdi_spec is not None and (state.driver is None or state.driver in state.cdi_spec):
            return []  # the spec there names the loaded driver
        host = ctx.host.name
        why = "no CDI spec yet" if state.cdi_spec is None else f"the CDI spec does not name driver {state.driver}"
        # A spec that was not there is bootstrap's (reset lists it: a command wrote it, no hash was kept).
        new = state.cdi_spec is None
        return [*make_folders(ctx.reader, host, [CDI_SPEC.rsplit("/", 1)[0]]),
                Change.run(host, f"nvidia-ctk cdi generate --output={CDI_SPEC}", timeout_s=120,
                           summary=f"generate the CDI spec ({why})", makes=(MAKES_FILE + CDI_SPEC,) if new else (),
                           cannot_undo="the spec nvidia-ctk wrote stays ('clusterctl reset' removes one bootstrap "
                           "made)")]

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        facts = self.check(ctx)
        host = ctx.host.name
        out: list[Finding] = []
        if facts.ctk_version is None:
            out.append(Finding(Severity.ERROR, "NVIDIA_CTK_MISSING", "nvidia-ctk is not installed", host=host,
                               fix="Run the packages phase (it installs nvidia-container-toolkit)."))
        if not facts.runtime_binary:
            out.append(Finding(Severity.ERROR, "NVIDIA_RUNTIME_MISSING", f"{NVIDIA_RUNTIME_BINARY}, the runtime "
                               "containerd's config names, does not exist", host=host))
        if ctx.inventory.bootstrap.cdi:
            result = ctx.reader.run("nvidia-ctk cdi list", sudo=True)
            try:
                devices = parse_cdi_list(result.stdout + result.stderr) if result.ok else ()
            except ParseError as exc:
                devices = ()
                out.append(Finding(Severity.ERROR, "CDI_LIST_UNREADABLE", str(exc), host=host))
            if not any(d.startswith("nvidia.com/gpu=") for d in devices):
                out.append(Finding(Severity.ERROR, "CDI_NO_GPUS", "the CDI spec lists no nvidia.com/gpu device",
                                   host=host, fix=f"nvidia-ctk cdi generate --output={CDI_SPEC}"))
        return out
