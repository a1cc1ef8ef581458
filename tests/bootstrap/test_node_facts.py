"""Preflight's node facts parsed from recorded real outputs (tests/fixtures/node/README.md)."""

from __future__ import annotations

import pytest
from fixture_files import read_fixture
from refusals import refusal

from clusterctl.facts.node import (
    parse_df,
    parse_meminfo,
    parse_node,
    parse_os_release,
    parse_proc_swaps,
    parse_ss_listening,
)


def read(name: str) -> str:
    return read_fixture("node", name)


def test_swaps_none_one_and_several() -> None:
    assert parse_proc_swaps(read("proc-swaps-none.txt")) == ()
    (swap,) = parse_proc_swaps(read("proc-swaps-swapfile-ubuntu.txt"))
    assert (swap.name, swap.kind, swap.size_kib) == ("/swapfile", "file", 67108860)
    assert [s.name for s in parse_proc_swaps(read("proc-swaps-three-areas.txt"))] == ["/dev/dm-1", "/dev/sdb3",
                                                                                       "/dev/dm-7"]


def test_listening_sockets_keep_the_process_names() -> None:
    sockets = parse_ss_listening(read("ss-Htlnp-debian12-python-on-10250.txt"))
    assert [(s.address, s.port, s.processes) for s in sockets] == [
        ("0.0.0.0", 2024, ()), ("127.0.0.1", 10250, ("python3",))]


def test_df_meminfo_os_release() -> None:
    disk = parse_df(read("df-Pk-var-lib-debian12.txt"))
    assert disk.mounted_on == "/" and disk.available_kib > 0
    assert parse_meminfo(read("meminfo-debian12.txt"))["MemTotal"] == 24684092
    assert parse_os_release(read("os-release-debian12.txt"))["ID"] == "debian"


def test_whole_probe_of_a_host_without_gpu_or_systemd() -> None:
    facts = parse_node(read("node-probe-debian12-no-gpu.txt"))
    assert (facts.os_id, facts.os_version_id, facts.cpus, facts.swaps) == ("debian", "12", 2, ())
    assert facts.nvidia_driver is None and facts.gpus is None and facts.time_synced is None
    assert set(facts.missing) == {"product-uuid", "timesync", "nvidia-driver", "gpus"}
    assert "No such file" in facts.missing["nvidia-driver"]


@pytest.mark.parametrize("text, line", [
    ("### hostname\nvm\n### cpus\nmany\n", 4),
    ("### swaps\nFilename Type Size Used Priority\n/swapfile file big 0 -2\n", 3),
    ("### listening\nLISTEN 0 128 nowhere 0.0.0.0:*\n", 2),
    ("garbage first\n### hostname\nvm\n", 1),
    # A section that should hold one line is named at its own first line, however far down it is.
    ("### hostname\nvm\n### cpus\n2\n### kernel\n6.1.0\n6.1.1\n", 6),
    ("### hostname\nvm\n### cpus\n2\n### timesync\nmaybe\n", 6),
])
def test_bad_output_names_the_line(text: str, line: int) -> None:
    assert refusal(parse_node, text).line == line


@pytest.mark.parametrize("name, os_id, base, codename", [
    ("os-release-ubuntu-24.04.4.txt", "ubuntu", "ubuntu", "noble"),
    ("os-release-ubuntu-20.04.6.txt", "ubuntu", "ubuntu", "focal"),
    ("os-release-debian-13.4.txt", "debian", "debian", "trixie"),
    ("os-release-ubuntu-22.04.4.txt", "ubuntu", "ubuntu", "jammy"),
    # Debian testing names its coming release (and no VERSION_ID): Docker's trixie suite.
    ("os-release-debian-trixie-sid.txt", "debian", "debian", "trixie"),
    # Ubuntu's derivatives: Ubuntu's archives and release (UBUNTU_CODENAME), not Debian's, nor their own
    # VERSION_CODENAME (Mint's "xia", "ulyssa").
    ("os-release-linuxmint-22.1.txt", "linuxmint", "ubuntu", "noble"),
    ("os-release-linuxmint-20.1.txt", "linuxmint", "ubuntu", "focal"),
    ("os-release-pop-22.04.txt", "pop", "ubuntu", "jammy"),
    # A Debian derivative: Debian's archives at DEBIAN_CODENAME (LMDE's own "faye" is no Debian release).
    ("os-release-lmde-6.txt", "linuxmint", "debian", "bookworm"),
    ("os-release-rhel-9.3.txt", "rhel", None, None),
    ("os-release-rocky-9.7.txt", "rocky", None, None),
    ("os-release-amazon-linux-2023.txt", "amzn", None, None),
    # Debian derivatives naming no Debian release: their own codename is no suite of Docker's linux/debian.
    ("os-release-kali-2023.3.txt", "kali", "debian", None),
    ("os-release-devuan-6-excalibur.txt", "devuan", "debian", None),
])
def test_real_os_releases_and_the_one_decision_on_them(name: str, os_id: str, base: str | None,
                                                       codename: str | None) -> None:
    from dataclasses import replace

    from clusterctl.bootstrap.apt_sources import chosen_repos
    from clusterctl.bootstrap.phase import PhaseContext
    from clusterctl.bootstrap.phases.packages import Packages
    from clusterctl.bootstrap.phases.preflight import Preflight
    from clusterctl.facts.packages import parse_packages_probe
    from clusterctl.inventory.model import Host, Inventory, StackPin
    from clusterctl.transport.local import LocalTransport

    facts = parse_node(f"### os-release\n{read(name)}")
    assert (facts.os_id, facts.os_apt_base, facts.os_codename) == (os_id, base, codename)
    # The packages phase reads the same os-release the same way, and Docker's source follows from it.
    packages = parse_packages_probe(f"@@clusterctl@@ os-release\n{read(name)}")
    assert (packages.os_id, packages.apt_base, packages.codename) == (os_id, base, codename)
    host = Host(name="n1", transport="local", stack=StackPin(kubernetes="1.36.2", containerd="2.2.1"))
    context = PhaseContext(host, LocalTransport(host), Inventory(name="lab", hosts=(host,)))
    refused = [f for f in Preflight().findings(context, facts) if f.code.startswith("OS_")]
    again = [f for f in Packages().findings(context, packages) if f.code.startswith("OS_")]
    if codename:
        assert refused == again == []
        docker = {r.name: r for r in chosen_repos(host.stack, context.inventory.bootstrap, base, codename)}["docker"]
        assert (docker.url, docker.suites) == (f"https://download.docker.com/linux/{base}", (codename,))
        return
    # Refused before anything changes, by the same decision in both phases, in one paragraph naming what it read.
    why = ("bootstrap installs packages with apt (Debian or Ubuntu)" if base is None else
           f"its /etc/os-release names no Debian release (no DEBIAN_CODENAME, and the VERSION_CODENAME of {os_id} "
           "is its own), so Docker's apt source of containerd.io (download.docker.com/linux/debian) has no suite "
           "for it")
    assert [(f.code, f.message) for f in refused] == [("OS_UNSUPPORTED", f"{facts.os_pretty}: {why}")]
    assert [(f.code, f.message) for f in again] == [("OS_UNSUPPORTED", f"{os_id}: {why}")]
    assert replace(refused[0], message=again[0].message) == again[0]
    if base:  # the distribution's own containerd needs no Docker source, so no suite: not refused then
        own = replace(context, inventory=replace(context.inventory, bootstrap=replace(
            context.inventory.bootstrap, containerd_package="containerd")))
        assert "containerd_package: containerd" in refused[0].fix and Packages().findings(own, packages) == []
