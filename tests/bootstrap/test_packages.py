"""The packages phase: parsers on recorded outputs, sources (upstream, mirror, key files), pins, holds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from clusterctl.bootstrap.apt_sources import chosen_repos, pin, sources_path, wanted_packages, with_mirror
from clusterctl.bootstrap.phase import PhaseContext
from clusterctl.bootstrap.phases.packages import Packages
from clusterctl.changes import ChangeKind
from clusterctl.facts.packages import (
    InstalledPackage,
    PackageFacts,
    parse_dpkg_query,
    parse_packages_probe,
    parse_showhold,
)
from clusterctl.inventory.model import AptRepo, BootstrapConfig, Host, Inventory, StackPin
from clusterctl.transport.local import LocalTransport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "apt"
STACK = StackPin(kubernetes="1.36.2", containerd="2.2.1")


def test_dpkg_query_and_showhold_from_recorded_outputs() -> None:
    found = parse_dpkg_query((FIXTURES / "dpkg-query-debian12.txt").read_text())
    assert set(found) == {"containerd", "openssh-server"}
    assert found["containerd"].version == "1.6.20~ds1-1+deb12u3" and found["containerd"].installed
    assert parse_showhold((FIXTURES / "apt-mark-showhold-kube.txt").read_text()) == {"kubeadm", "kubectl", "kubelet"}


def test_a_host_without_apt_mark_holds_nothing() -> None:
    """The shell's words for a missing program are the facts package's one rule (``absent_reason``)."""
    for said in ("sh: 1: apt-mark: not found", "bash: line 1: apt-mark: command not found", ""):
        assert parse_packages_probe(f"@@clusterctl@@ holds\n{said}\n").holds == frozenset(), said


def test_pins_follow_upstream_revisions_or_exact_debian_versions() -> None:
    assert pin("kubeadm", "1.36.2").version == "1.36.2-*"
    assert pin("kubeadm", "1.36.2").matches("1.36.2-1.1") and not pin("kubeadm", "1.36.2").matches("1.36.20-1.1")
    exact = pin("containerd", "1.6.20~ds1-1+deb12u3")
    assert exact.version == "1.6.20~ds1-1+deb12u3" and exact.matches("1.6.20~ds1-1+deb12u3")
    names = [p.package for p in wanted_packages(STACK, BootstrapConfig())]
    assert names[:4] == ["containerd.io", "kubelet", "kubeadm", "kubectl"] and "nvidia-container-toolkit" in names


def test_air_gapped_mirror_and_own_repositories() -> None:
    assert with_mirror("https://pkgs.k8s.io/core:/stable:/v1.36/deb/", "https://mirror.lan/apt") == \
        "https://mirror.lan/apt/pkgs.k8s.io/core:/stable:/v1.36/deb/"
    repos = chosen_repos(STACK, BootstrapConfig(mirror="https://mirror.lan/apt"), "ubuntu", "jammy")
    assert [r.name for r in repos] == ["kubernetes", "nvidia-container-toolkit", "docker"]
    assert all(r.url.startswith("https://mirror.lan/apt/") for r in repos)
    assert all((r.key_url or "").startswith("https://mirror.lan/apt/") for r in repos)
    own = AptRepo("kubernetes", "https://repo.lan/k8s", ("stable",), ("main",), key_file="/keys/k8s.asc")
    only = chosen_repos(STACK, BootstrapConfig(apt_repos=(own,), apt_repos_only=True), "ubuntu", "jammy")
    assert only == [own]


def ctx(settings: BootstrapConfig) -> PhaseContext:
    host = Host(name="n1", transport="local", stack=STACK)
    return PhaseContext(host, LocalTransport(host), Inventory(name="lab", hosts=(host,), bootstrap=settings))


FRESH = PackageFacts("ubuntu", "ubuntu", "jammy", "amd64", {}, frozenset(), {}, frozenset())


def test_fresh_host_then_nothing_to_do(tmp_path: Path) -> None:
    key = tmp_path / "k8s.asc"
    key.write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\nabc\n-----END PGP PUBLIC KEY BLOCK-----\n")
    settings = BootstrapConfig(apt_repos=(AptRepo("kubernetes", "https://pkgs.k8s.io/core:/stable:/v1.36/deb/",
                                                  ("/",), (), key_file=str(key)),))
    changes = [c for c in Packages().plan(ctx(settings), FRESH) if not c.is_noop]
    commands = [c.command or "" for c in changes if c.kind is ChangeKind.RUN_COMMAND]
    # The keyring folder is made first, only where the host (this machine, read) lacks it.
    made = [] if Path("/etc/apt/keyrings").is_dir() else ["mkdir -m 0755 /etc/apt/keyrings"]
    assert [c for c in commands if c.startswith("mkdir")] == commands[:len(made)] == made
    assert not any("pkgs.k8s.io" in c for c in commands if c.startswith("curl"))  # the key came from the file
    assert any(c.startswith("curl -fsSL --retry 3 https://nvidia.github.io/libnvidia-container/gpgkey")
               for c in commands)
    install = next(c for c in commands if c.startswith("apt-get install"))
    assert "'kubeadm=1.36.2-*'" in install and "'containerd.io=2.2.1-*'" in install
    assert commands[-1].startswith("apt-mark hold containerd.io kubelet kubeadm kubectl")
    written = {c.path: c.content for c in changes if c.kind is ChangeKind.WRITE_FILE}
    assert written["/etc/apt/keyrings/clusterctl-kubernetes.asc"] == key.read_bytes()
    docker = (written["/etc/apt/sources.list.d/clusterctl-docker.sources"] or b"").decode()
    assert "URIs: https://download.docker.com/linux/ubuntu\nSuites: jammy\nComponents: stable\n" in docker
    # The host once everything is there: no change at all.
    versions = {"containerd.io": "2.2.1-1~ubuntu.22.04~jammy", "kubelet": "1.36.2-1.1", "kubeadm": "1.36.2-1.1",
                "kubectl": "1.36.2-1.1"}
    toolkit = f"{settings.nvidia_container_toolkit}-1"  # the pinned NVIDIA Container Toolkit
    installed = {p.package: InstalledPackage(p.package, versions.get(p.package, toolkit), "ii")
                 for p in wanted_packages(STACK, settings)}
    files: dict[str, str | None] = {path: (data or b"").decode() for path, data in written.items()}
    done = replace(FRESH, packages=installed, holds=frozenset(installed), files=files,
                   keyrings=frozenset(p.rsplit("/", 1)[1] for p in written if p.startswith("/etc/apt/keyrings/")) |
                   {"clusterctl-nvidia-container-toolkit.asc", "clusterctl-docker.asc"})
    assert [c for c in Packages().plan(ctx(settings), done) if not c.is_noop] == []
    assert sources_path(settings.apt_repos[0]) == "/etc/apt/sources.list.d/clusterctl-kubernetes.sources"


def test_kubernetes_that_the_pinned_containerd_does_not_support_is_refused() -> None:
    host = Host(name="n1", transport="local", stack=StackPin(kubernetes="1.36.2", containerd="1.7.28"))
    context = PhaseContext(host, LocalTransport(host), Inventory(name="lab", hosts=(host,)))
    (finding,) = Packages().findings(context, FRESH)
    assert finding.code == "CONTAINERD_KUBERNETES_MISMATCH"
    assert finding.message == ("Kubernetes 1.36 needs containerd 2.3.0+ or 2.2.0+; containerd 1.7.28 is pinned")


def test_kubernetes_1_34_checks_containerd_against_its_own_row() -> None:
    def findings(containerd: str) -> list[str]:
        host = Host(name="n1", transport="local", stack=StackPin(kubernetes="1.34.3", containerd=containerd))
        context = PhaseContext(host, LocalTransport(host), Inventory(name="lab", hosts=(host,)))
        return [f.message for f in Packages().findings(context, FRESH) if f.code == "CONTAINERD_KUBERNETES_MISMATCH"]

    # containerd's table: 1.34 -> 2.1.3+, 2.0.6+, 1.7.28+, 1.6.39+
    assert findings("2.1.3") == [] and findings("1.6.39") == []
    assert findings("1.6.38") == ["Kubernetes 1.34 needs containerd 2.1.3+ or 2.0.6+ or 1.7.28+ or 1.6.39+; "
                                  "containerd 1.6.38 is pinned"]


def test_a_pin_below_the_installed_version_is_a_downgrade_and_the_same_upstream_is_not() -> None:
    from clusterctl.bootstrap.apt_sources import pin

    kubelet = pin("kubelet", "1.36.2")
    assert kubelet.downgrades("1.36.3-1.1") and kubelet.downgrades("1.37.0-1.1")
    assert not kubelet.downgrades("1.36.2-1.1") and not kubelet.downgrades("1.36.1-1.1")
    exact = pin("containerd.io", "2.3.7-1")
    assert exact.downgrades("2.3.7-2") and not exact.downgrades("2.3.6-1")


def test_a_held_package_is_installed_as_real_dpkg_query_says_hi() -> None:
    # Found on the real nodes: after 'apt-mark hold' dpkg-query gives 'hi', and the packages phase's
    # verify called every held package "not at the pinned version".
    found = parse_dpkg_query((FIXTURES / "dpkg-query-held-debian12.txt").read_text())
    assert found["runc"].status == "hi" and found["runc"].installed
    assert found["containerd"].installed and "nosuch-package" not in found
    assert not InstalledPackage("x", "1.0", "rc").installed and not InstalledPackage("x", "1.0", "un").installed


def test_the_upgrades_packages_phase_refreshes_apts_lists_for_a_source_other_than_kubernetes() -> None:
    """The upgrade's kubeadm phase writes the Kubernetes source and reads apt's lists again, before the node's
    packages phase writes any other: a source changed or missing there (NVIDIA's, Docker's) needs its own
    refresh before the install, the Kubernetes one alone none."""
    from clusterctl.day2.upgrade import NodePackages

    settings = BootstrapConfig()
    written = {c.path: (c.content or b"").decode() for c in Packages().plan(ctx(settings), FRESH)
               if c.kind is ChangeKind.WRITE_FILE and c.path}
    installed = {p.package: InstalledPackage(p.package, f"{p.upstream}-1", "ii")
                 for p in wanted_packages(STACK, settings)}
    keyrings = frozenset(f"clusterctl-{name}.asc" for name in ("kubernetes", "nvidia-container-toolkit", "docker"))
    done = replace(FRESH, packages=installed, holds=frozenset(installed), files=dict(written), keyrings=keyrings)
    assert [c for c in NodePackages().plan(ctx(settings), done) if not c.is_noop] == []

    def refreshed(source: str) -> list[str]:
        files = {path: None if path.endswith(f"clusterctl-{source}.sources") else text
                 for path, text in written.items()}
        changes = [c for c in NodePackages().plan(ctx(settings), replace(done, files=files)) if not c.is_noop]
        return [c.path or c.command or "" for c in changes]

    assert refreshed("kubernetes") == []  # the kubeadm phase's, with its refresh
    for source in ("nvidia-container-toolkit", "docker"):
        path, update = refreshed(source)
        assert path.endswith(f"clusterctl-{source}.sources") and update.startswith("apt-get update"), source


def test_a_host_whose_os_release_is_not_read_is_refused_for_dockers_source_not_given_suite_stable() -> None:
    """Docker's repository has no suite ``stable``: without the host's VERSION_CODENAME there is no source to
    write, so the packages phase refuses the host (OS_UNSUPPORTED), as it refuses an OS with no release of
    Docker's; with the distribution's containerd (no Docker source) nothing is refused."""
    import pytest

    from clusterctl.errors import UsageError

    unknown = replace(FRESH, os_id=None, apt_base=None, codename=None)
    (refused,) = Packages().findings(ctx(BootstrapConfig()), unknown)
    assert (refused.code, refused.host) == ("OS_UNSUPPORTED", "n1") and "no VERSION_CODENAME" in refused.message
    assert "containerd_package: containerd" in refused.fix
    with pytest.raises(UsageError, match=r"^n1: no /etc/os-release read .*no VERSION_CODENAME"):
        Packages().plan(ctx(BootstrapConfig()), unknown)
    own = BootstrapConfig(containerd_package="containerd")
    assert Packages().findings(ctx(own), unknown) == []
    assert not [c for c in Packages().plan(ctx(own), unknown) if "docker" in (c.path or "")]
