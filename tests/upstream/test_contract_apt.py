"""The simulated apt-get answers the upgrade's install line as the real apt-get does.

``clusterctl upgrade`` installs ``kubelet=X-*`` without ``--allow-downgrades``: on a node that runs
a newer kubelet, apt must refuse (exit 100, "Packages were downgraded and -y was used without
--allow-downgrades."), never downgrade it. The real apt-get of this machine (Debian's ``apt``)
runs in simulation mode (``APT::Get::Simulate``) against a private root: its own dpkg status
file, sources and lists, no lock, so nothing of the machine changes; apt checks these refusals
before it would simulate or install anything (apt-private/private-install.cc).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from contract import Answer, RealHost, SimulatedHost
from real_tools import system_tool

from clusterctl.day2.upgrade import INSTALL

VERSIONS = ["1.36.2-1.1", "1.36.3-1.1", "1.37.0-1.1"]
LINE = f"{INSTALL} 'kubelet=1.36.3-*'"


def _status(version: str, state: str) -> bytes:
    return (f"Package: kubelet\nStatus: {state} ok installed\nPriority: optional\nSection: admin\n"
            f"Installed-Size: 1\nMaintainer: t <t@example.com>\nArchitecture: amd64\nVersion: {version}\n"
            "Description: kubelet\n\n").encode()


def _index(versions: list[str]) -> bytes:
    return "".join(f"Package: kubelet\nVersion: {v}\nArchitecture: amd64\nMaintainer: t <t@example.com>\n"
                   f"Installed-Size: 1\nFilename: kubelet_{v}_amd64.deb\nSize: 1\nSHA256: {'0' * 64}\n"
                   "Description: kubelet\n\n" for v in versions).encode()


#: apt's directories and files all under {root}; simulation only, no dpkg lock, the file: source read as root.
APT_CONF = b"""Dir "{root}/";
Dir::State::status "{root}/var/lib/dpkg/status";
Dir::Etc "{root}/etc/apt/";
Dir::Log "{root}/var/log/apt/";
APT::Get::Simulate "true";
APT::Architecture "amd64";
APT::Sandbox::User "root";
Debug::NoLocking "true";
"""


class Pair:
    def __init__(self, folder: Path, installed: str, *, held: bool, versions: list[str] = VERSIONS) -> None:
        self.sim = SimulatedHost(folder / "sim", {"kubelet": installed}, repository={"kubelet": versions})
        if held:
            assert self.sim.run("apt-mark hold kubelet").exit_code == 0
        apt_get = system_tool("apt-get", "apt")
        real = folder / "real"
        wrapper = real / "apt-get"
        wrapper.parent.mkdir(parents=True)
        wrapper.write_text(f'#!/bin/dash\nAPT_CONFIG={real / "root" / "apt.conf"} exec {apt_get} "$@"\n')
        wrapper.chmod(0o755)
        self.real = RealHost(real, {"apt-get": wrapper}, {
            "{root}/apt.conf": APT_CONF, "{root}/repo/Packages": _index(versions),
            "{root}/etc/apt/sources.list": b"deb [trusted=yes] file:{root}/repo ./\n",
            "{root}/var/lib/dpkg/status": _status(installed, "hold" if held else "install")})
        for folder_name in ("etc/apt/apt.conf.d", "etc/apt/preferences.d", "etc/apt/sources.list.d",
                            "var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/log/apt"):
            (self.real.root / folder_name).mkdir(parents=True, exist_ok=True)
        updated = self.real.run("apt-get update")
        assert updated.exit_code == 0, updated.output

    def run(self, line: str) -> tuple[Answer, Answer]:
        sim, real = self.sim.run(line), self.real.run(line)
        assert sim.exit_code == real.exit_code, f"{line}: exit {sim.exit_code} simulated, {real.exit_code} real\n" \
            f"simulated: {sim.output}\nreal: {real.output}"
        return sim, real


@pytest.mark.parametrize("held", [False, True], ids=["unheld", "held"])
def test_a_newer_kubelet_is_not_downgraded_by_the_upgrades_line(tmp_path: Path, held: bool) -> None:
    """Unheld as after the line's ``apt-mark unhold``; held too: apt names the downgrade first."""
    pair = Pair(tmp_path, "1.37.0-1.1", held=held)
    assert "--allow-downgrades" not in LINE
    sim, real = pair.run(LINE)
    assert sim.exit_code == 100
    refusal = "E: Packages were downgraded and -y was used without --allow-downgrades.\n"
    assert sim.stderr == real.stderr == refusal
    for answer in (sim, real):
        assert "The following packages will be DOWNGRADED:\n  kubelet\n" in answer.stdout


def test_an_older_kubelet_is_upgraded_by_the_same_line(tmp_path: Path) -> None:
    pair = Pair(tmp_path, "1.36.2-1.1", held=False)
    sim, real = pair.run(LINE)
    assert sim.exit_code == 0 and sim.stderr == real.stderr == ""
    for answer in (sim, real):
        assert "1 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n" in answer.stdout


#: (installed, the repository's versions, the install line's pin): versions whose order the simulator's
#: own approximate sort key (gone: it now orders by ``clusterctl.debian_version``) had the wrong way round.
DEBIAN_ORDER = [
    ("1.36.3-1.1", ["1.36.3-1.1~bpo12+1", "1.36.3-1.1"], "1.36.3-1.1~bpo12+1"),  # a tilde at the end: older
    ("2.1.5+dfsg-1", ["2.1.5-1", "2.1.5+dfsg-1"], "2.1.5-1"),  # the end of a part before '+': older
    ("1.36.3a-1", ["1.36.3+b1-1", "1.36.3a-1"], "1.36.3+b1-1"),  # letters before '+': newer
]


@pytest.mark.parametrize(("installed", "versions", "wanted"), DEBIAN_ORDER, ids=[c[2] for c in DEBIAN_ORDER])
def test_the_simulator_orders_versions_as_apt_does(tmp_path: Path, installed: str, versions: list[str],
                                                   wanted: str) -> None:
    pair = Pair(tmp_path, installed, held=False, versions=versions)
    sim, real = pair.run(f"{INSTALL} 'kubelet={wanted}'")
    assert sim.stderr == real.stderr
    summaries = [[line for line in answer.stdout.splitlines() if " upgraded, " in line or "DOWNGRADED" in line]
                 for answer in (sim, real)]
    assert summaries[0] == summaries[1] != [], f"simulated: {sim.stdout}\nreal: {real.stdout}"


@pytest.mark.parametrize("line", ["dpkg-query -W -s containerd", "dpkg-query --status --show containerd",
                                  "dpkg-query -W -W containerd", "dpkg-query -f '' containerd",
                                  "dpkg-query containerd"])
def test_dpkg_query_refuses_conflicting_or_missing_actions_as_the_real_one_does(line: str, tmp_path: Path) -> None:
    """dpkg-query reads its actions before anything else: two (even the same twice) or none is exit 2."""
    sim = SimulatedHost(tmp_path / "sim", {"containerd": "1.6.20~ds1-1+deb12u3"})
    real = RealHost(tmp_path / "real", {"dpkg-query": system_tool("dpkg-query", "dpkg")})
    assert sim.run(line) == real.run(line)
