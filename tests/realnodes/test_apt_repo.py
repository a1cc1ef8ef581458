"""The site's apt repository (``apt_repo.py``): several versions of a package side by side, signed
so that apt verifies it, and apt on an air-gapped node installing pinned versions from it."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import apt_repo
import debs
import pytest
from nodes import HOST_PACKAGES_REMOVED, RealNodes
from real_tools import find_tool
from realnode_site import cni_deb, cri_tools_deb, debs_folder, skip_unless_possible
from toolset import KUBERNETES_DEMO_MINOR, KUBERNETES_NEWEST

TOOLS = ("dpkg-deb", "dpkg-scanpackages", "apt-ftparchive", "gpg", "gpgv")


def _needs_tools() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"the site's apt repository needs {', '.join(missing)} (.ci/run installs them)")


def _probe(version: str, folder: Path) -> Path:
    return debs.build(debs.Package("realnodes-probe", version, "A package of the apt repository's test",
                                   files={"/usr/share/realnodes-probe/version": version + "\n"}), folder)


def _verifies(repo: apt_repo.AptRepository, signed: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    keyring = tmp_path / "keyring.gpg"
    subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "--output", str(keyring), str(repo.key_file)],
                   check=True, capture_output=True)
    return subprocess.run(["gpgv", "--keyring", str(keyring), str(signed)], capture_output=True, text=True,
                          check=False)


def test_the_repository_keeps_every_version_and_is_signed(tmp_path: Path) -> None:
    _needs_tools()
    first = apt_repo.build([_probe("1.0-1", tmp_path / "debs"), _probe("1.1-1", tmp_path / "debs")],
                           tmp_path / "apt")
    assert first.packages == {"realnodes-probe": ["1.0-1", "1.1-1"]}
    assert _verifies(first, first.folder / "InRelease", tmp_path).returncode == 0
    # A later build adds a version, keeps the ones there and signs with the same key.
    key = first.key_file.read_text()
    grown = apt_repo.build([_probe("2.0-1", tmp_path / "debs")], tmp_path / "apt")
    assert sorted(grown.packages["realnodes-probe"]) == ["1.0-1", "1.1-1", "2.0-1"]
    assert grown.key_file.read_text() == key
    assert _verifies(grown, grown.folder / "InRelease", tmp_path).returncode == 0
    # The signature covers the index: a Packages file changed after signing no longer matches Release,
    # and a changed Release fails the signature.
    release = (grown.folder / "InRelease").read_text()
    (tmp_path / "tampered").write_text(release.replace("Label: site", "Label: other"))
    assert _verifies(grown, tmp_path / "tampered", tmp_path).returncode != 0
    assert key.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----") and "PRIVATE" not in key
    assert not list(grown.folder.rglob("*.key")) and not (grown.folder / "private-keys-v1.d").exists()
    assert grown.bootstrap_settings() == {
        "apt_repos": [{"name": "kubernetes", "url": apt_repo.URL, "suites": ["/"], "key_file": str(grown.key_file)}],
        "apt_repos_only": True}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RealNodes, apt_repo.AptRepository]]:
    """Two bare nodes, air-gapped, and the site's repository holding pkgs.k8s.io's packages of two
    Kubernetes minors (kubeadm), their dependencies and one foreign repository's key."""
    skip_unless_possible()
    _needs_tools()
    with RealNodes(2) as nodes:
        kubelet, kubectl = (find_tool(name, KUBERNETES_NEWEST) for name in ("kubelet", "kubectl"))
        packages = debs.kubernetes_packages(KUBERNETES_NEWEST, kubelet, find_tool("kubeadm", KUBERNETES_NEWEST),
                                            kubectl)
        older = debs.kubernetes_packages(KUBERNETES_DEMO_MINOR, kubelet,
                                         find_tool("kubeadm", KUBERNETES_DEMO_MINOR), kubectl)[1]
        built = [debs.build(p, debs_folder()) for p in [*packages, older]]
        repo = apt_repo.build([*built, cri_tools_deb(), cni_deb()], nodes.root / "apt")
        apt_repo.serve(nodes, repo)
        apt_repo.air_gap(nodes)
        for node in nodes.nodes:  # a fresh machine has none of the host's own kubectl and containerd
            nodes.sh(node.name, f"dpkg --purge --force-depends {' '.join(HOST_PACKAGES_REMOVED)} >/dev/null 2>&1; true")
        yield nodes, repo


def _source(nodes: RealNodes, node: str, key: Path) -> None:
    """The deb822 source clusterctl's packages phase writes for ``apt_repos`` (its own keyring)."""
    text = f"Types: deb\nURIs: {apt_repo.URL}\nSuites: /\nSigned-By: /etc/apt/keyrings/site.asc\n"
    nodes.sh(node, f"install -d /etc/apt/keyrings && printf %s {shlex.quote(key.read_text())} > "
                   f"/etc/apt/keyrings/site.asc && printf %s {shlex.quote(text)} > "
                   "/etc/apt/sources.list.d/site.sources")


def test_apt_installs_and_upgrades_pinned_versions_from_the_site(
        served: tuple[RealNodes, apt_repo.AptRepository]) -> None:
    nodes, repo = served
    assert repo.packages["kubeadm"] == sorted(repo.packages["kubeadm"])
    assert set(repo.packages["kubeadm"]) == {f"{KUBERNETES_DEMO_MINOR}-1.1", f"{KUBERNETES_NEWEST}-1.1"}
    _source(nodes, "rn1", repo.key_file)
    apt = "DEBIAN_FRONTEND=noninteractive apt-get -q"
    nodes.sh("rn1", f"{apt} update", timeout=300)
    nodes.sh("rn1", f"{apt} install -y kubeadm={KUBERNETES_DEMO_MINOR}-1.1", timeout=600)
    assert nodes.sh("rn1", "kubeadm version -o short").stdout.strip() == f"v{KUBERNETES_DEMO_MINOR}"
    # Its dependencies came from the site too (the node had none of them).
    got = nodes.sh("rn1", "dpkg-query -W -f '${Package} ${Version}\\n' kubelet kubectl cri-tools kubernetes-cni")
    assert sorted(got.stdout.split("\n")[:-1]) == sorted(f"{name} {repo.packages[name][0]}" for name in (
        "cri-tools", "kubectl", "kubelet", "kubernetes-cni"))
    nodes.sh("rn1", f"{apt} install -y kubeadm={KUBERNETES_NEWEST}-1.1", timeout=600)
    assert nodes.sh("rn1", "kubeadm version -o short").stdout.strip() == f"v{KUBERNETES_NEWEST}"


def test_apt_refuses_the_site_repository_signed_by_another_key(
        served: tuple[RealNodes, apt_repo.AptRepository], tmp_path: Path) -> None:
    nodes, _repo = served
    other = apt_repo.build([_probe("1.0-1", tmp_path / "debs")], tmp_path / "other")
    _source(nodes, "rn2", other.key_file)
    update = nodes.sh("rn2", "apt-get -q update", timeout=300, check=False)
    assert "NO_PUBKEY" in update.stdout + update.stderr or "not signed" in update.stdout + update.stderr, update
    refused = nodes.sh("rn2", "DEBIAN_FRONTEND=noninteractive apt-get -q install -y kubectl", timeout=300,
                       check=False)
    assert refused.returncode != 0
    assert nodes.sh("rn2", "command -v kubectl || echo none", check=False).stdout.strip() == "none"
