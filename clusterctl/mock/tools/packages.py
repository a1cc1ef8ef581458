"""The Debian package database of a mock host, shared by ``apt-get``, ``dpkg-query`` and ``apt-mark``.

The repository is the profile's ``machine.packages.repository``::

    repository:
      kubeadm:                                # name -> versions (oldest first), or a mapping:
        versions: ["1.30.1-1.1", "1.30.2-1.1"]
        source: pkgs.k8s.io/core:/stable:/v1.30   # only after a sources.list(.d) file names it
                                                 # and `apt-get update` ran since
        units: [kubelet]                      # systemd units the package ships
      containerd: ["1.6.20~ds1-1+deb12u3"]
      kubelet:                                # a list: one entry per source (pkgs.k8s.io has
        - {versions: ["1.36.2-1.1"], source: pkgs.k8s.io/core:/stable:/v1.36/deb}   # one per minor)
        - {versions: ["1.37.2-1.1"], source: pkgs.k8s.io/core:/stable:/v1.37/deb}

Installed packages live in ``host.json`` → ``packages``: ``{name: {"version": V}}``; holds
in ``holds``. Installing a package also writes its files into the tree (a stub executable
per program, the unit file, and for Debian's ``containerd`` its packaged config.toml), so
``test -x /usr/bin/kubeadm`` and ``cat /etc/containerd/config.toml`` agree with dpkg.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from clusterctl.mock.tools.base import ToolContext


@dataclass(frozen=True)
class Available:
    name: str
    versions: tuple[str, ...]
    source: str | None
    units: tuple[str, ...]
    programs: tuple[str, ...]
    #: (source, versions) per source, for a package more than one repository serves.
    channels: tuple[tuple[str | None, tuple[str, ...]], ...] = ()


#: Systemd units and programs that well-known packages ship (Debian and upstream repositories).
KNOWN_PACKAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "containerd": (("containerd",), ("containerd", "ctr", "containerd-shim-runc-v2")),
    "containerd.io": (("containerd",), ("containerd", "ctr", "containerd-shim-runc-v2")),
    "kubelet": (("kubelet",), ("kubelet",)),
    "kubeadm": ((), ("kubeadm",)),
    "kubectl": ((), ("kubectl",)),
    "cri-tools": ((), ("crictl",)),
    "kubernetes-cni": ((), ()),
    "nvidia-container-toolkit": ((), ("nvidia-ctk", "nvidia-container-runtime")),
    "nvidia-container-toolkit-base": ((), ("nvidia-ctk", "nvidia-container-runtime")),
    "docker-ce": (("docker",), ("dockerd",)),
    "openssh-server": (("ssh",), ("sshd",)),
    "chrony": (("chrony",), ("chronyd",)),
    "helm": ((), ("helm",)),
}

#: Configuration files packages ship: package -> {path: recording in recordings/packages/}.
PACKAGED_FILES: dict[str, dict[str, str]] = {
    "containerd": {"/etc/containerd/config.toml": "debian-containerd-config.toml"},
}


def _channels(spec: Any) -> list[dict[str, Any]]:
    """A repository entry as its sources: a mapping is one, a list of mappings several ([]: a bare list of
    versions, or one version)."""
    if isinstance(spec, list) and spec and all(isinstance(s, dict) for s in spec):
        return [dict(s) for s in spec]
    return [dict(spec)] if isinstance(spec, dict) else []


def all_sources(ctx: ToolContext) -> list[str]:
    """Every source any package of the repository comes from (what ``apt-get update`` may find)."""
    raw = (ctx.machine.get("packages") or {}).get("repository") or {}
    return list(dict.fromkeys(str(channel["source"]) for spec in raw.values() for channel in _channels(spec)
                              if channel.get("source")))


def offered(ctx: ToolContext, source: str) -> dict[str, list[str]]:
    """Package -> versions the repository serves from ``source`` (an apt ``Packages`` index's content)."""
    raw = (ctx.machine.get("packages") or {}).get("repository") or {}
    found: dict[str, list[str]] = {}
    for name, spec in raw.items():
        for channel in _channels(spec):
            if str(channel.get("source") or "") == source:
                found.setdefault(str(name), []).extend(str(v) for v in channel.get("versions") or [])
    return found


def repository(ctx: ToolContext) -> dict[str, Available]:
    raw = (ctx.machine.get("packages") or {}).get("repository") or {}
    found: dict[str, Available] = {}
    for name, spec in raw.items():
        known_units, known_programs = KNOWN_PACKAGES.get(str(name), ((), ()))
        channels = _channels(spec)
        if channels:
            first = channels[0]
            found[str(name)] = Available(
                str(name), tuple(str(v) for c in channels for v in c.get("versions") or []),
                str(first["source"]) if first.get("source") else None,
                tuple(str(u) for u in first.get("units", known_units)),
                tuple(str(p) for p in first.get("programs", known_programs)),
                # one mapping: its one source is the package's own (``source``), no channels
                tuple((str(c["source"]) if c.get("source") else None,
                       tuple(str(v) for v in c.get("versions") or [])) for c in channels) if isinstance(spec, list)
                else (),
            )
        else:
            versions = tuple(str(v) for v in (spec if isinstance(spec, list) else [spec]))
            found[str(name)] = Available(str(name), versions, None, known_units, known_programs)
    return found


def package(repo: dict[str, Available], name: str) -> Available:
    """The repository's package ``name``, else what is known of it (an installed package the repository lacks)."""
    return repo.get(name) or Available(name, (), None, *KNOWN_PACKAGES.get(name, ((), ())))


def visible(ctx: ToolContext, package: Available) -> bool:
    """Whether apt can see the package: no source needed, or a source configured and updated since it had it."""
    return (not package.channels and package.source is None) or bool(versions_seen(ctx, package))


def versions_seen(ctx: ToolContext, package: Available) -> tuple[str, ...]:
    """The versions apt offers: those of the package's sources that are configured and updated,
    as the lists of the last ``apt-get update`` name them (a version the repository gained since
    is not offered until the next update, as on a real host)."""
    data = ctx.host.read()
    updated = data.get("apt_updated") or []
    lists = data.get("apt_lists") or {}

    def listed(source: str | None, versions: tuple[str, ...]) -> tuple[str, ...]:
        if source is None:
            return versions
        if source not in updated:
            return ()
        known = lists.get(source)
        if not isinstance(known, dict):  # state written before the lists were kept
            return versions
        return tuple(v for v in versions if v in (known.get(package.name) or ()))

    if not package.channels:
        return listed(package.source, package.versions)
    return tuple(v for source, versions in package.channels for v in listed(source, versions))


def configured_sources(ctx: ToolContext) -> list[str]:
    """Every sources.list(.d) entry's text, to find which repository sources are configured."""
    paths = ["/etc/apt/sources.list", *ctx.fs.glob("/etc/apt/sources.list.d/*")]
    return [data.decode(errors="replace") for path in paths if (data := ctx.fs.read(path))]


def installed(ctx: ToolContext) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in ctx.host.section("packages").items() if isinstance(v, dict)}


def holds(ctx: ToolContext) -> list[str]:
    return [str(h) for h in ctx.host.read().get("holds") or []]


def install_files(ctx: ToolContext, package: Available, version: str) -> None:
    """Put the package's programs, unit files and packaged config into the tree."""
    for program in package.programs:
        stub = f"#!/bin/sh\n# {program} from {package.name} {version} (mock)\n"
        ctx.fs.write(f"/usr/bin/{program}", stub.encode(), mode=0o755)
    for unit in package.units:
        ctx.fs.write(f"/lib/systemd/system/{unit}.service",
                     f"[Unit]\nDescription={unit} (mock, from {package.name} {version})\n".encode())
    for path, recording in PACKAGED_FILES.get(package.name, {}).items():
        if ctx.fs.read(path) is None:
            folder = resources.files("clusterctl.mock").joinpath("recordings").joinpath("packages")
            data = folder.joinpath(recording).read_bytes()
            ctx.fs.write(path, data)


def remove_files(ctx: ToolContext, package: Available, *, purge: bool) -> None:
    for program in package.programs:
        ctx.fs.remove(f"/usr/bin/{program}")
    for unit in package.units:
        ctx.fs.remove(f"/lib/systemd/system/{unit}.service")
    if purge:
        for path in PACKAGED_FILES.get(package.name, {}):
            ctx.fs.remove(path)
