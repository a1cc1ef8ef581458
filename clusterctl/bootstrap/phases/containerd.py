"""containerd: the whole config at the version the installed containerd reads, restart, verify, roll back.

Who writes what (the containerd and nvidia-runtime phases agree instead of fighting):

* this phase owns ``/etc/containerd/config.toml`` (rendered whole from
  ``templates/bootstrap/containerd/``): config version by the installed containerd (2 for 1.x,
  3 for 2.0-2.2, 4 for 2.3+), ``imports`` of ``/etc/containerd/conf.d/*.toml`` kept, runc and
  ``nvidia`` runtimes with ``SystemdCgroup = true``, ``nvidia`` as the default runtime or not
  (``bootstrap.runtime``), CDI when asked, the sandbox image the pinned kubeadm expects, and
  registry mirrors as ``certs.d/<registry>/hosts.toml``. Every runtime already in the host's
  config (an ``nvidia`` entry written by ``nvidia-ctk`` or the GPU Operator with its own
  ``BinaryName``, a kata runtime...) is carried over, so a re-run never loses one;
* it never writes drop-ins; drop-ins others wrote (``99-nvidia.toml`` by ``nvidia-ctk`` >= 1.18
  or the GPU Operator) stay, and are checked: a drop-in at a higher config version than the
  root is refused (containerd 2.3.0-2.3.4 die on it), another version is a warning, and one that
  would override a value this phase manages (on containerd 1.x a drop-in's plugin table replaces
  the root's whole table) stops the phase before anything changes;
* the nvidia-runtime phase never runs ``nvidia-ctk runtime configure`` (which would edit this
  file and add a drop-in); it handles the toolkit's own files (CDI spec).

The write is atomic with a backup; containerd is restarted and must answer with its CRI plugin
``ok``; otherwise the backup is restored and containerd restarted again, and both are reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from clusterctl.bootstrap import matrix
from clusterctl.bootstrap.cluster.kubeadm_images import DEFAULT_REPOSITORY, TAGS_BY_MINOR
from clusterctl.bootstrap.cluster.settings import site_image
from clusterctl.bootstrap.containerd_config import (
    WantedContainerd,
    carried_settings,
    check_dropins,
    config_version_for,
    file_version,
    parse_toml,
    registry_server,
    render_config,
    runtimes_of,
)
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import MAKES_NO_TRACE, Change, GateRecord
from clusterctl.errors import ParseError
from clusterctl.facts.containerd import (
    ContainerdFacts,
    containerd_probe,
    cri_status,
    parse_containerd_probe,
    parse_ctr_plugins,
)
from clusterctl.findings import Finding, Severity
from clusterctl.templating import render
from clusterctl.wording import first_few


@dataclass
class ContainerdState:
    facts: ContainerdFacts
    wanted: WantedContainerd | None = None
    problems: list[Finding] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def sandbox_image(ctx: PhaseContext, facts: ContainerdFacts) -> str:
    bootstrap = ctx.inventory.bootstrap
    if bootstrap.sandbox_image:
        return bootstrap.sandbox_image
    # The installed kubeadm's pause; before it is installed, kubeadm's for the pinned minor (``kubeadm_images``).
    version = matrix.parse_version(ctx.host.stack.kubernetes or "")
    tags = TAGS_BY_MINOR.get(version[1]) if version and version[0] == 1 else None
    pause = facts.kubeadm_pause or f"{DEFAULT_REPOSITORY}/pause:{tags.pause if tags else '3.10.1'}"
    # Under the site's image_repository, as kubeadm names its images there (its preflight warns of another).
    return site_image(pause, bootstrap.image_repository)


def hosts_toml(registry: str, mirrors: tuple[str, ...]) -> str:
    return render("bootstrap/containerd/hosts.toml.j2", registry=registry, server=registry_server(registry),
                  mirrors=list(mirrors))


class Containerd(Phase[ContainerdState]):
    name = "containerd"
    confirmable = True
    description = ("containerd config at the installed version's format, nvidia runtime, "
                   "restart, verify, roll back")
    timeout_s = 180.0
    #: After a rollback, containerd must answer on the old config (the verify reads say so).
    verify_after_rollback = True

    def _probe(self, ctx: PhaseContext) -> str:
        paths = ctx.options.containerd
        registries = tuple(name for name, _ in ctx.inventory.bootstrap.registry_mirrors)
        return containerd_probe(paths.config, paths.dropin_dir, paths.certs_dir, ctx.host.stack.kubernetes,
                                registries)

    def reads(self, ctx: PhaseContext) -> list[tuple[str, bool]]:
        reads = [(self._probe(ctx), True)]
        if ctx.options.applying:
            # verify's first question too: on a host where nothing changes, it is answered from here.
            reads.append((f"{ctx.options.containerd.ctr} plugins ls", True))
        return reads

    def check(self, ctx: PhaseContext) -> ContainerdState:
        paths = ctx.options.containerd
        result = ctx.reader.run(self._probe(ctx), sudo=True)
        facts = parse_containerd_probe(result.stdout)
        for name in list(facts.dropins):
            content = ctx.reader.get(f"{paths.dropin_dir}/{name}", sudo=True)
            facts.dropins[name] = (content or b"").decode("utf-8", errors="replace")
        state = ContainerdState(facts)
        host = ctx.host.name
        version = facts.version or ctx.host.stack.containerd
        if version is None:
            state.findings.append(Finding(Severity.ERROR, "CONTAINERD_UNKNOWN", "containerd is not installed and "
                                          "the stack pins no containerd version", host=host,
                                          fix="Pin stack.containerd, or run the packages phase first."))
            return state
        if facts.version and ctx.host.stack.containerd and \
                matrix.parse_version(facts.version) != matrix.parse_version(ctx.host.stack.containerd):
            state.findings.append(Finding(Severity.WARNING, "CONTAINERD_VERSION_DIFFERS",
                                          f"containerd {facts.version} is installed, the stack pins "
                                          f"{ctx.host.stack.containerd}; the config is written for {facts.version}",
                                          host=host))
        try:
            root = parse_toml(facts.config, paths.config) if facts.config else {}
            dropins = {f"{paths.dropin_dir}/{n}": parse_toml(text, f"{paths.dropin_dir}/{n}")
                       for n, text in facts.dropins.items()}
        except ParseError as exc:
            state.findings.append(Finding(Severity.ERROR, "CONTAINERD_CONFIG_UNREADABLE", str(exc), host=host,
                                          file=exc.what, line=exc.line,
                                          fix="Fix or remove the file: containerd would not start with it."))
            return state
        existing = runtimes_of(root)
        for doc in dropins.values():
            for name, body in runtimes_of(doc).items():
                existing.setdefault(name, body)
        settings = ctx.inventory.bootstrap
        target = config_version_for(version)
        carried, dropped = carried_settings(root, target)
        if dropped:
            state.findings.append(Finding(Severity.WARNING, "CONTAINERD_SETTINGS_DROPPED",
                                          f"{paths.config} sets CRI options clusterctl does not write; they are "
                                          f"dropped: {first_few(dropped, 6, ', ')}",
                                          host=host, file=paths.config, evidence={"dropped": dropped},
                                          fix=f"Put them in a drop-in under {paths.dropin_dir}/ at config version "
                                          f"{target}."))
        state.wanted = WantedContainerd(version, target, sandbox_image(ctx, facts), settings.runtime, settings.cdi,
                                        existing, paths.certs_dir, paths.dropin_dir, carried)
        # Drop-ins are checked against the root config as this phase will write it.
        rendered = parse_toml(render_config(state.wanted), "rendered containerd config")
        state.problems = check_dropins(target, version, rendered, dropins, state.wanted, host)
        if root and file_version(root) != target:
            state.findings.append(Finding(Severity.INFO, "CONTAINERD_CONFIG_MIGRATED",
                                          f"{paths.config} is config version {file_version(root)}; it is rewritten at "
                                          f"version {target} for containerd {version}", host=host))
        return state

    def findings(self, ctx: PhaseContext, state: ContainerdState) -> list[Finding]:
        return state.findings + state.problems

    def plan(self, ctx: PhaseContext, state: ContainerdState) -> list[Change]:
        if state.wanted is None:
            return []
        host, paths = ctx.host.name, ctx.options.containerd
        files = [Change.write_file(host, paths.config, render_config(state.wanted), current=state.facts.config,
                                   summary=f"containerd config (version {state.wanted.version})")]
        files += [Change.write_file(host, f"{paths.certs_dir}/{registry}/hosts.toml", hosts_toml(registry, mirrors),
                                    current=state.facts.hosts_files.get(registry),
                                    summary=f"registry mirrors for {registry}")
                  for registry, mirrors in ctx.inventory.bootstrap.registry_mirrors]
        changes = cc.with_folders(ctx, files)
        facts = state.facts
        if any(not c.is_noop for c in changes):
            changes.append(Change.run(host, paths.restart, summary="restart containerd", timeout_s=120,
                                      makes=(MAKES_NO_TRACE,)))
        elif facts.version is not None and facts.service in ("inactive", "failed"):
            # The config is right but containerd is down (stopped, or failed before): start it.
            changes.append(Change.run(host, paths.restart, summary=f"start containerd (it was {facts.service})",
                                      timeout_s=120, makes=(MAKES_NO_TRACE,)))
        if facts.version is not None and facts.enabled == "disabled":
            changes.append(Change.run(host, "systemctl enable containerd", summary="start containerd at boot",
                                      undo="systemctl disable containerd"))
        return changes

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        """Wait (bounded) for containerd to answer, then require its CRI plugin to be ``ok``."""
        paths = ctx.options.containerd
        result = cc.poll(ctx, f"{paths.ctr} plugins ls", within_s=paths.wait_s, every_s=0.5,
                         timeout=max(5.0, paths.wait_s))
        host = ctx.host.name
        if not result.ok:
            return [Finding(Severity.ERROR, "CONTAINERD_NOT_ANSWERING", f"containerd does not answer after the "
                            f"restart ({result.stderr_tail(2) or 'exit ' + str(result.exit_code)})", host=host,
                            fix="journalctl -u containerd shows why it did not start.")]
        try:
            status = cri_status(parse_ctr_plugins(result.stdout))
        except ParseError as exc:
            return [Finding(Severity.ERROR, "CONTAINERD_NOT_ANSWERING", str(exc), host=host)]
        if status != "ok":
            return [Finding(Severity.ERROR, "CONTAINERD_CRI_NOT_LOADED", f"containerd answers but its CRI plugin is "
                            f"{status or 'not listed'}", host=host, fix="journalctl -u containerd | grep cri")]
        return []

    def rollback(self, ctx: PhaseContext, records: Sequence[GateRecord]) -> list[Change]:
        # The old config is back (the gate restored it): containerd must run on it again.
        return [Change.run(ctx.host.name, ctx.options.containerd.restart, timeout_s=120,
                           summary="restart containerd with the previous config", makes=(MAKES_NO_TRACE,))]
