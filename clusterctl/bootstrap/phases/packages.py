"""packages: containerd, kubeadm/kubelet/kubectl and the NVIDIA Container Toolkit at the pinned
versions, from the configured apt sources, held against upgrade. Hosts without GPUs (inventory
``gpus: false``) get neither the toolkit nor NVIDIA's apt source.

Sources are deb822 files ``/etc/apt/sources.list.d/clusterctl-<name>.sources`` with their own
keyring under ``/etc/apt/keyrings/`` (``Signed-By``), so no other source can vouch for these
packages. Keys come from the inventory (``apt_repos[].key_file``, read on the control machine
and written to the host: no network needed) or are fetched by the host from the source's key
URL once (through the mirror when one is set). The Kubernetes/containerd pair is checked
against containerd's published support table before anything is installed.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.bootstrap.apt_sources import (
    KEYRING_DIR,
    Pin,
    chosen_repos,
    keyring_name,
    render_sources,
    sources_path,
    wanted_packages,
)
from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.phases.preflight import os_unsupported, stack_findings
from clusterctl.bootstrap.run_data import RunOptions
from clusterctl.changes import MAKES_APT, MAKES_FILE, MAKES_NO_TRACE, MAKES_PACKAGE, MAKES_REPO, Change, make_folders
from clusterctl.errors import UsageError
from clusterctl.facts.packages import PackageFacts, packages_probe, parse_packages_probe
from clusterctl.findings import Finding, Severity
from clusterctl.host_reader import HostReader
from clusterctl.hostlist import compress
from clusterctl.inventory.model import AptRepo

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import CommandResult, Transport

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}
#: Seconds apt waits for a dpkg/apt lock another process holds (unattended-upgrades right after
#: boot, a cloud-init run) instead of failing at once; apt 1.9.11+ honours it, older apt ignores it.
APT_LOCK_WAIT_S = 120
APT_LOCK = f"-o DPkg::Lock::Timeout={APT_LOCK_WAIT_S}"
#: Keep config files already on the host (containerd's config.toml is the containerd phase's). No
#: ``--allow-downgrades``: a pin below what a host runs is refused (``DOWNGRADE_REFUSED``) unless the
#: user asked for the downgrade (``bootstrap --allow-downgrade``, ``DOWNGRADE``).
INSTALL = f"apt-get install -y {APT_LOCK} --allow-change-held-packages -o Dpkg::Options::=--force-confold"
DOWNGRADE = "--allow-downgrades"
#: The finding that refuses a downgrade; ``bootstrap.run._refuse_downgrades`` turns it into exit 2.
DOWNGRADE_REFUSED = "DOWNGRADE_REFUSED"
#: Where the inventory pins each package, for the message that asks to move the pin.
PIN_FIELDS = {"kubelet": "stack.kubernetes", "kubeadm": "stack.kubernetes", "kubectl": "stack.kubernetes",
              "containerd": "stack.containerd", "containerd.io": "stack.containerd"}
UPDATE = f"apt-get update {APT_LOCK}"


def pin_field(ctx: PhaseContext, package: str) -> str:
    """Where the inventory pins ``package``: ``stack.kubernetes``, or an Ansible inventory's
    ``clusterctl_stack_kubernetes``."""
    field_name = PIN_FIELDS.get(package, "bootstrap.nvidia_container_toolkit")
    if ctx.inventory.format != "clusterctl" and field_name.startswith("stack."):
        return "clusterctl_stack_" + field_name.removeprefix("stack.")
    return field_name


def packages_at(pairs: Iterable[tuple[str, str]]) -> str:
    """``kubelet, kubeadm, kubectl 1.36.3-1.1``: packages named once per version they share, in order."""
    by_version: dict[str, list[str]] = {}
    for package, version in pairs:
        by_version.setdefault(version, []).append(package)
    return "; ".join(f"{', '.join(packages)} {version}" for version, packages in by_version.items())


def read_downgrades(runner: Runner, hosts: Sequence[Host], inventory: Inventory, options: RunOptions | None = None,
                    what: str = "bootstrap") -> tuple[list[Finding], dict[str, dict[tuple[str, bool], CommandResult]]]:
    """Each host's packages and whether installing the pins would downgrade them (``downgrade_finding``), read
    before a run changes anything: a refusal then stops it with nothing changed, not after its first phases.
    Returns the findings, and the answers by host: the run's first read (``RunSettings.answered``). A host that
    does not answer is left out, for the run to report as every other failure."""
    def read_host(transport: Transport) -> tuple[Finding | None, dict[tuple[str, bool], CommandResult]]:
        reader = HostReader(transport, what=what)
        reader.remember()
        ctx = PhaseContext(inventory.host(transport.host.name), reader, inventory, options=options or RunOptions())
        return Packages().downgrade_finding(ctx, Packages().check(ctx)), reader.kept()

    read = runner.run_task(hosts, read_host, label="packages").values
    return [f for f, _ in read.values() if f is not None], {host: answers for host, (_, answers) in read.items()}


def refused_downgrades(findings: Iterable[Finding], named: Mapping[str, str] | None = None
                       ) -> tuple[str, str, dict[str, str]] | None:
    """What ``DOWNGRADE_REFUSED`` findings say together, for one paragraph: the hosts grouped by what they
    run (``gpu-a[1-3] run kubelet, kubeadm, kubectl 1.36.3-1.1``), the pins with what pins each (the field,
    or what ``named`` says the command calls it: upgrade's ``--to``), and each package's field; ``None``: no
    downgrade was refused."""
    groups: dict[str, list[str]] = {}
    pinned: dict[str, str] = {}
    fields: dict[str, str] = {}
    for finding in findings:
        if finding.code != DOWNGRADE_REFUSED or not finding.host:
            continue
        groups.setdefault(packages_at(finding.evidence.get("running", {}).items()), []).append(finding.host)
        pinned.update(finding.evidence.get("pinned", {}))
        fields.update(finding.evidence.get("fields", {}))
    if not groups:
        return None
    pins = packages_at((p, f"{v} ({(named or {}).get(p, fields.get(p, ''))})") for p, v in pinned.items())
    return "; ".join(f"{compress(hosts)} run{'s' if len(hosts) == 1 else ''} {running}"
                     for running, hosts in groups.items()), pins, fields


def _key_bytes(repo: AptRepo) -> bytes | None:
    if not repo.key_file:
        return None
    try:
        return Path(repo.key_file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the signing key of apt source '{repo.name}': {exc.strerror}",
                         file=repo.key_file, field="bootstrap.apt_repos.key_file") from None


class Packages(Phase[PackageFacts]):
    name = "packages"
    confirmable = True
    description = "containerd, kubeadm/kubelet/kubectl, NVIDIA Container Toolkit: pinned, held"
    timeout_s = 900.0

    def _repos(self, ctx: PhaseContext, facts: PackageFacts | None) -> list[AptRepo]:
        return chosen_repos(ctx.host.stack, ctx.inventory.bootstrap, facts.apt_base if facts else None,
                            facts.codename if facts else None, gpus=ctx.host.gpus)

    def _probe(self, ctx: PhaseContext) -> str:
        pins = wanted_packages(ctx.host.stack, ctx.inventory.bootstrap, gpus=ctx.host.gpus)
        # File names do not depend on the OS (only Docker's URL and suite inside do).
        files = tuple(sources_path(r) for r in self._repos(ctx, None))
        return packages_probe(tuple(p.package for p in pins), files, KEYRING_DIR)

    def reads(self, ctx: PhaseContext) -> list[tuple[str, bool]]:
        return [(self._probe(ctx), True)]

    def check(self, ctx: PhaseContext) -> PackageFacts:
        repos = self._repos(ctx, None)
        result = ctx.reader.run(self._probe(ctx), sudo=True)
        facts = parse_packages_probe(result.stdout)
        # Keys given as files are compared byte for byte (they may be binary keyrings).
        for repo in repos:
            key = _key_bytes(repo)
            name = keyring_name(repo, key)
            if key is not None and name in facts.keyrings:
                data = ctx.reader.get(f"{KEYRING_DIR}/{name}", sudo=True)
                facts.files[f"{KEYRING_DIR}/{name}"] = None if data is None else data.decode("latin-1")
        return facts

    def findings(self, ctx: PhaseContext, state: PackageFacts) -> list[Finding]:
        out = [f for f in stack_findings(ctx) if f.severity is Severity.ERROR]
        out += os_unsupported(ctx, state.os_id, state.apt_base, state.codename)
        downgrade = self.downgrade_finding(ctx, state)
        return out + ([downgrade] if downgrade else [])

    def downgrade_finding(self, ctx: PhaseContext, state: PackageFacts) -> Finding | None:
        """THE decision whether installing the pins would take a package the host runs back to an older
        version (after ``upgrade apply``, or a newer package put there by hand): ``DOWNGRADE_REFUSED``
        unless the user asked for it (``DOWNGRADE``); ``None``: no downgrade. ``upgrade`` asks it too."""
        older = self._downgrades(ctx, state)
        if not older:
            return None
        fields = {p.package: pin_field(ctx, p.package) for p, _ in older}
        runs = packages_at((p.package, version) for p, version in older)
        pins = packages_at((p.package, f"{p.upstream} ({fields[p.package]})") for p, _ in older)
        evidence = {"running": {p.package: version for p, version in older},
                    "pinned": {p.package: p.upstream for p, _ in older}, "fields": fields}
        if ctx.options.allow_downgrade:
            return Finding(Severity.WARNING, "DOWNGRADE", f"goes back from {runs} to the inventory's pins: {pins} "
                           "(--allow-downgrade)", host=ctx.host.name, evidence=evidence)
        refused = Finding(Severity.ERROR, DOWNGRADE_REFUSED, f"runs {runs}, newer than the inventory's pins: "
                          f"{pins}; not downgraded unless asked", host=ctx.host.name, evidence=evidence,
                          fix="Set the pin to the version the host runs (as after 'clusterctl upgrade apply'), or "
                          "pass --allow-downgrade to go back to the pin.")
        fix = ctx.options.downgrade_fix
        return refused if fix is None else replace(refused, fix=fix([refused]))

    @staticmethod
    def _downgrades(ctx: PhaseContext, state: PackageFacts) -> list[tuple[Pin, str]]:
        pins = wanted_packages(ctx.host.stack, ctx.inventory.bootstrap, gpus=ctx.host.gpus)
        found = ((p, state.packages.get(p.package)) for p in pins)
        return [(p, got.version) for p, got in found if got is not None and got.installed and p.downgrades(got.version)]

    def plan(self, ctx: PhaseContext, state: PackageFacts) -> list[Change]:
        host = ctx.host.name
        changes: list[Change] = []
        for refused in os_unsupported(ctx, state.os_id, state.apt_base, state.codename):  # upgrade plans it too
            raise UsageError(f"{host}: {refused.message}")
        sources_changed = False
        if any(keyring_name(r, _key_bytes(r)) not in state.keyrings for r in self._repos(ctx, state)):
            changes += make_folders(ctx.reader, host, [KEYRING_DIR])
        for repo in self._repos(ctx, state):
            first = len(changes)
            key = _key_bytes(repo)
            keyring = keyring_name(repo, key)
            keyring_path = f"{KEYRING_DIR}/{keyring}"
            if key is not None:
                known = state.files.get(keyring_path)
                current_key = known.encode("latin-1") if known is not None else None
                change = Change.write_file(host, keyring_path, key, current=current_key,
                                           summary=f"signing key of '{repo.name}' from {repo.key_file}")
                sources_changed |= not change.is_noop
                changes.append(change)
            elif keyring not in state.keyrings:
                if not repo.key_url:
                    raise UsageError(f"apt source '{repo.name}' has neither key_file nor key_url",
                                     field="bootstrap.apt_repos")
                changes.append(Change.run(
                    host, f"curl -fsSL --retry 3 {shlex.quote(repo.key_url)} -o {shlex.quote(keyring_path)}",
                    summary=f"fetch the signing key of '{repo.name}'", undo=f"rm -f {shlex.quote(keyring_path)}",
                    makes=(MAKES_FILE + keyring_path,)))
                sources_changed = True
            source = Change.write_file(host, sources_path(repo), render_sources(repo, keyring_path),
                                       current=state.files.get(sources_path(repo)), summary=f"apt source '{repo.name}'")
            sources_changed |= not source.is_noop
            changes.append(source)
            changes[first:] = [replace(c, makes=(*c.makes, MAKES_REPO + repo.name)) for c in changes[first:]]
        pins = wanted_packages(ctx.host.stack, ctx.inventory.bootstrap, gpus=ctx.host.gpus)
        missing = [p for p in pins if not self._installed(state, p)]
        if missing or sources_changed:
            changes.append(Change.run(host, UPDATE, summary="refresh apt's package lists", env=APT_ENV,
                                      timeout_s=300 + APT_LOCK_WAIT_S, makes=(MAKES_NO_TRACE,)))
        if missing:
            args = " ".join(shlex.quote(f"{p.package}={p.version}") for p in missing)
            # Only a package that was not installed at all is bootstrap's (reset --purge-packages); one at
            # another version was the host's before and is only moved to the pin.
            makes = tuple(MAKES_PACKAGE + p.package for p in missing
                          if (found := state.packages.get(p.package)) is None or not found.installed)
            makes += tuple(MAKES_APT + p.package for p in missing)
            asked = ctx.options.allow_downgrade and self._downgrades(ctx, state)
            install = f"{INSTALL} {DOWNGRADE}" if asked else INSTALL
            changes.append(Change.run(host, f"{install} {args}", env=APT_ENV, timeout_s=600 + APT_LOCK_WAIT_S,
                                      summary="install " + ", ".join(f"{p.package} {p.upstream}" for p in missing),
                                      makes=makes, cannot_undo="undo installs and removes no packages ('clusterctl "
                                      "reset --purge-packages' purges those bootstrap installed)"))
        unheld = [p.package for p in pins if p.package not in state.holds]
        if unheld:
            names = " ".join(shlex.quote(n) for n in unheld)
            changes.append(Change.run(host, f"apt-mark hold {names}", summary="hold " + ", ".join(unheld),
                                      undo=f"apt-mark unhold {names}",
                                      makes=tuple(MAKES_APT + n for n in unheld)))
        return changes

    @staticmethod
    def _installed(state: PackageFacts, wanted: Pin) -> bool:
        found = state.packages.get(wanted.package)
        return found is not None and found.installed and wanted.matches(found.version)

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        state = self.check(ctx)
        pins = wanted_packages(ctx.host.stack, ctx.inventory.bootstrap, gpus=ctx.host.gpus)
        out: list[Finding] = []
        wrong = [p for p in pins if not self._installed(state, p)]
        if wrong:
            seen = ", ".join(f"{p.package} {getattr(state.packages.get(p.package), 'version', '') or 'missing'} "
                             f"(want {p.version})" for p in wrong)
            out.append(Finding(Severity.ERROR, "PACKAGE_NOT_PINNED", f"not at the pinned version: {seen}",
                               host=ctx.host.name))
        unheld = [p.package for p in pins if p.package not in state.holds]
        if unheld:
            out.append(Finding(Severity.ERROR, "PACKAGE_NOT_HELD", f"not held: {', '.join(unheld)}",
                               host=ctx.host.name))
        return out
