"""Which apt sources the packages phase writes, and which packages at which versions.

Upstream defaults (from the stack pin):

* Kubernetes: ``https://pkgs.k8s.io/core:/stable:/v<minor>/deb/`` suite ``/``, key ``Release.key``
  there (kubernetes.io "Installing kubeadm");
* NVIDIA Container Toolkit: ``https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)``
  suite ``/``, key ``https://nvidia.github.io/libnvidia-container/gpgkey`` (NVIDIA's install guide);
* containerd.io: ``https://download.docker.com/linux/<debian|ubuntu>`` suite ``<codename>`` as
  ``facts.node.apt_base`` reads them (a derivative gets its base's), component ``stable``, key
  ``.../gpg`` (Docker's install guide); the only source keyed on the distribution; left out when
  ``bootstrap.containerd_package`` is the distribution's ``containerd``.

``bootstrap.mirror`` (air-gapped sites) rewrites ``https://HOST/PATH`` to ``<mirror>/HOST/PATH``
for sources and keys; keys may instead come from files on the control machine
(``apt_repos[].key_file``), which is the only way that needs no network on the host at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from clusterctl.bootstrap.matrix import parse_version
from clusterctl.debian_version import compare_debian_versions
from clusterctl.inventory.model import AptRepo, BootstrapConfig, StackPin
from clusterctl.templating import render

SOURCES_DIR = "/etc/apt/sources.list.d"
KEYRING_DIR = "/etc/apt/keyrings"


@dataclass(frozen=True)
class Pin:
    package: str
    #: The apt version argument: an exact Debian version or ``1.36.2-*``.
    version: str
    #: The upstream version the installed one must start with.
    upstream: str

    def matches(self, installed: str) -> bool:
        if "*" not in self.version:
            return installed == self.version
        return installed.startswith(self.version[:-1])

    def downgrades(self, installed: str) -> bool:
        """Installing this pin would move ``installed`` to an older version (what ``apt-get`` refuses
        without ``--allow-downgrades``): ``1.36.2-*`` over ``1.36.3-1.1``."""
        if self.matches(installed):
            return False
        if "*" in self.version:
            return compare_debian_versions(self.upstream, upstream_part(installed)) < 0
        return compare_debian_versions(self.version, installed) < 0


def upstream_part(version: str) -> str:
    """``1:1.36.3-1.1`` -> ``1.36.3``: a Debian version without its epoch and revision."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


def pin(package: str, version: str) -> Pin:
    """``1.36.2`` -> ``1.36.2-*`` (upstream packages' Debian revision); a full Debian version is exact."""
    if "-" in version or "~" in version or ":" in version:
        return Pin(package, version, version)
    return Pin(package, f"{version}-*", version)


#: The NVIDIA Container Toolkit's packages (NVIDIA's install guide), on hosts with GPUs only.
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                    "libnvidia-container1")


def wanted_packages(stack: StackPin, settings: BootstrapConfig, *, gpus: bool = True) -> list[Pin]:
    """The packages and versions a host gets; a host without GPUs (inventory ``gpus: false``) gets no
    NVIDIA Container Toolkit."""
    pins: list[Pin] = []
    if stack.containerd:
        pins.append(pin(settings.containerd_package, stack.containerd))
    if stack.kubernetes:
        pins += [pin(name, stack.kubernetes) for name in ("kubelet", "kubeadm", "kubectl")]
    if gpus:
        pins += [pin(name, settings.nvidia_container_toolkit) for name in TOOLKIT_PACKAGES]
    return pins


def default_repos(stack: StackPin, settings: BootstrapConfig, os_base: str | None, codename: str | None, *,
                  gpus: bool = True) -> list[AptRepo]:
    repos: list[AptRepo] = []
    version = parse_version(stack.kubernetes or "")
    if version:
        base = f"https://pkgs.k8s.io/core:/stable:/v{version[0]}.{version[1]}/deb/"
        repos.append(AptRepo("kubernetes", base, ("/",), (), None, base + "Release.key"))
    if gpus:
        repos.append(AptRepo("nvidia-container-toolkit",
                             "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)", ("/",), (), None,
                             "https://nvidia.github.io/libnvidia-container/gpgkey"))
    if settings.containerd_package == "containerd.io":
        distro = os_base or "debian"
        # No codename: the packages phase refuses the host (OS_UNSUPPORTED) before it writes this source.
        repos.append(AptRepo("docker", f"https://download.docker.com/linux/{distro}", (codename or "<codename>",),
                             ("stable",), None, f"https://download.docker.com/linux/{distro}/gpg"))
    return repos


def with_mirror(url: str, mirror: str | None) -> str:
    if not mirror:
        return url
    match = re.match(r"^https?://([^/]+)(/.*)?$", url)
    if not match:
        return url
    return f"{mirror.rstrip('/')}/{match.group(1)}{match.group(2) or '/'}"


def chosen_repos(stack: StackPin, settings: BootstrapConfig, os_base: str | None, codename: str | None, *,
                 gpus: bool = True) -> list[AptRepo]:
    """Defaults (unless ``apt_repos_only``; NVIDIA's only for hosts with GPUs), replaced by name or
    extended by ``apt_repos``, mirrored."""
    defaults = [] if settings.apt_repos_only else default_repos(stack, settings, os_base, codename, gpus=gpus)
    repos = {r.name: r for r in defaults}
    for repo in settings.apt_repos:
        repos[repo.name] = repo
    return [replace(repo, url=with_mirror(repo.url, settings.mirror),
                    key_url=with_mirror(repo.key_url, settings.mirror) if repo.key_url else None)
            for repo in repos.values()]


def packages_index_url(repo: AptRepo, arch: str = "amd64") -> str:
    """Where apt reads the package list of ``repo`` (its first suite and component), as sources.list(5)
    lays it out: a flat repository (a suite ending in ``/``: pkgs.k8s.io, NVIDIA's) at
    ``URI/SUITE/Packages``, any other at ``URI/dists/SUITE/COMPONENT/binary-ARCH/Packages`` (Docker's,
    a site's reprepro or aptly mirror). ``$(ARCH)`` in the URI is the host's architecture."""
    base = repo.url.replace("$(ARCH)", arch).rstrip("/")
    suite = repo.suites[0] if repo.suites else "/"
    if suite.endswith("/"):
        return "/".join(part for part in (base, suite.strip("/"), "Packages") if part)
    return f"{base}/dists/{suite}/{(repo.components or ('main',))[0]}/binary-{arch}/Packages"


def sources_path(repo: AptRepo) -> str:
    return f"{SOURCES_DIR}/clusterctl-{repo.name}.sources"


def keyring_name(repo: AptRepo, key: bytes | None = None) -> str:
    armored = key is None or key.lstrip().startswith(b"-----BEGIN PGP")
    return f"clusterctl-{repo.name}.{'asc' if armored else 'gpg'}"


def render_sources(repo: AptRepo, keyring: str) -> str:
    return render("bootstrap/apt/repo.sources.j2", description=f"apt source '{repo.name}'", url=repo.url,
                  suites=list(repo.suites), components=list(repo.components), keyring=keyring)
