"""The air-gapped site's apt repository: the site's .debs indexed and signed with the usual Debian
tools, served over HTTP from the control namespace, named in the inventory as ``bootstrap.apt_repos``.

A flat repository as pkgs.k8s.io's (``Suites: /``): ``pool/`` holds every .deb given (several
versions of one package side by side: a cluster brought up at one minor and upgraded to the next
finds both), ``Packages`` comes from ``dpkg-scanpackages --multiversion`` (dpkg-dev),
``Release`` from ``apt-ftparchive release`` (apt-utils), and ``InRelease``/``Release.gpg`` are
signed with a throwaway key made with ``gpg`` for this repository (its public half, ``key.asc``,
is what the inventory's ``apt_repos[].key_file`` names: apt on the nodes verifies every index
against it and refuses anything else).

    repo = apt_repo.build(debs, apt_repo.folder_of(nodes))  # again with more debs: same key, new index
    apt_repo.serve(nodes, repo)                             # http://10.250.0.254:8081/ on the control ns
    write_inventory(nodes, path)                            # names it (served_settings) from then on
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nodes import CONTROL_ADDRESS, RealNodes

PORT = 8081
URL = f"http://{CONTROL_ADDRESS}:{PORT}/"
#: The apt source's name in the inventory (``/etc/apt/sources.list.d/clusterctl-kubernetes.sources``):
#: it replaces the upstream ``kubernetes`` source, where ``upgrade plan`` looks for the next kubeadm.
SOURCE_NAME = "kubernetes"
KEY_UID = "clusterctl real-node tier apt repository <noreply@example.invalid>"


@dataclass(frozen=True)
class AptRepository:
    #: What is served: ``pool/*.deb``, ``Packages``, ``Packages.gz``, ``Release``, ``InRelease``, ``Release.gpg``.
    folder: Path
    #: The repository's public key (ASCII-armoured), on the control machine.
    key_file: Path
    #: Package name -> the Debian versions the index lists, as ``dpkg-scanpackages`` wrote them.
    packages: dict[str, list[str]] = field(default_factory=dict)

    def bootstrap_settings(self, url: str = URL) -> dict[str, object]:
        """The inventory's ``bootstrap`` settings that make this the hosts' only package source."""
        return {"apt_repos": [{"name": SOURCE_NAME, "url": url, "suites": ["/"], "key_file": str(self.key_file)}],
                "apt_repos_only": True}


def _run(argv: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
                            env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()[-2000:]}")
    return result.stdout


def _gpg(home: Path, *args: str) -> str:
    return _run(["gpg", "--homedir", str(home), "--batch", "--yes", "--quiet", *args])


def _signing_key(home: Path, key_file: Path) -> None:
    """A throwaway ed25519 signing key without a passphrase, made once per repository folder."""
    if key_file.exists():
        return
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    _gpg(home, "--passphrase", "", "--quick-gen-key", KEY_UID, "ed25519", "sign", "never")
    key_file.write_text(_gpg(home, "--armor", "--export", KEY_UID))


def build(debs: Sequence[Path], folder: Path) -> AptRepository:
    """The repository in ``folder`` (created, or grown: debs already in its pool stay, so a later
    call adds versions) with ``debs`` in it, indexed and signed."""
    pool = folder / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    for deb in debs:
        target = pool / deb.name
        if not target.exists() or target.stat().st_size != deb.stat().st_size:
            shutil.copyfile(deb, target)
    # The key lives beside the served folder, never in it.
    home = folder.parent / f".{folder.name}-gnupg"
    key_file = folder.parent / f"{folder.name}-key.asc"
    _signing_key(home, key_file)
    packages = _run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"], cwd=folder)
    (folder / "Packages").write_text(packages)
    _run(["gzip", "-9nkf", "Packages"], cwd=folder)
    release = _run(["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=clusterctl-realnodes",
                    "-o", "APT::FTPArchive::Release::Label=site", "release", "."], cwd=folder)
    for name in ("Release", "InRelease", "Release.gpg"):
        (folder / name).unlink(missing_ok=True)
    (folder / "Release").write_text(release)
    try:
        _gpg(home, "--local-user", KEY_UID, "--clearsign", "--output", str(folder / "InRelease"),
             str(folder / "Release"))
        _gpg(home, "--local-user", KEY_UID, "--armor", "--detach-sign", "--output", str(folder / "Release.gpg"),
             str(folder / "Release"))
    finally:
        # gpg leaves an agent running for the key: stop it (it is this process's, not the tier's).
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], capture_output=True,
                       timeout=60, check=False)
    return AptRepository(folder, key_file, listed_versions(packages))


def listed_versions(packages: str) -> dict[str, list[str]]:
    """``Packages`` -> package name -> its versions, in the index's order."""
    out: dict[str, list[str]] = {}
    for stanza in packages.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        if "Package" in fields and "Version" in fields:
            out.setdefault(fields["Package"], []).append(fields["Version"])
    return out


def folder_of(nodes: RealNodes) -> Path:
    """Where the nodes' site keeps its repository (under the tier's state folder, removed with it)."""
    return nodes.root / "apt"


def served_settings(nodes: RealNodes) -> dict[str, object]:
    """The inventory's ``bootstrap`` settings for the repository ``serve`` serves to these nodes;
    {} while none is."""
    folder = folder_of(nodes)
    key_file = folder.parent / f"{folder.name}-key.asc"
    if not (folder / ".served").exists() or not key_file.exists():
        return {}
    return AptRepository(folder, key_file).bootstrap_settings()


def serve(nodes: RealNodes, repo: AptRepository) -> str:
    """The repository over HTTP on the control namespace (what the nodes reach as the site's
    package mirror), until the nodes go down; returns its URL."""
    nodes.start_in_control([sys.executable, "-m", "http.server", "--bind", CONTROL_ADDRESS,
                            "--directory", str(repo.folder), str(PORT)], repo.folder.parent / "apt-http.log")
    wait = ("import time, urllib.request\nd = time.monotonic() + 60\nwhile True:\n try:\n"
            f"  urllib.request.urlopen('{URL}InRelease', timeout=2); break\n"
            " except Exception:\n  assert time.monotonic() < d, 'the apt repository did not answer'; time.sleep(0.2)\n")
    subprocess.run(nodes.in_control([sys.executable, "-c", wait]), check=True, timeout=120)
    (repo.folder / ".served").touch()
    return URL


#: The host's own apt sources, which a node sees through its ``/etc`` overlay: on the air-gapped
#: nodes they are moved aside (in the node's upper folder only), so the site's repository is the
#: only one apt reads, as on a machine whose sources all point at the site.
HOST_SOURCES = "/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources"
#: Where they go (outside ``sources.list.d``, so apt neither reads them nor warns about their names).
AIRGAPPED = "/etc/apt/sources-airgapped"


def air_gap(nodes: RealNodes) -> None:
    """No apt source on the nodes but what clusterctl writes; the lists read from them gone too."""
    for node in nodes.nodes:
        nodes.sh(node.name, f"mkdir -p {AIRGAPPED}; for f in {HOST_SOURCES}; do "
                            f"[ -e \"$f\" ] && mv \"$f\" {AIRGAPPED}/; done; rm -rf /var/lib/apt/lists/*; true")
