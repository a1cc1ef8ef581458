"""Debian's version order, the one copy the packages phase and the simulated apt-get share, is dpkg's.

Every pair below was checked with ``dpkg --compare-versions`` (dpkg 1.21.22, Debian 12) when it was
written; the test also asks this machine's dpkg where there is one. The pairs marked "simulator" are
those the simulated apt-get's own approximate sort key (gone) ordered the other way round.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from clusterctl.debian_version import compare_debian_versions, debian_version_key

#: (older, newer) as dpkg orders them.
ORDERED = [
    ("1.36.2-1.1", "1.36.3-1.1"), ("1.36.9-1.1", "1.36.10-1.1"), ("1.0", "1.0-1"), ("2.0", "1:0.1"),
    ("1.17.8-1", "1.17.10-1"), ("1.7.28~ds1-1", "1.7.28-1"), ("1.0-1", "1.0-1+deb12u1"), ("1.2", "1.a"),
    ("1.0~rc1-1", "1.0-1"), ("1.0.0~beta", "1.0.0~beta1"), ("1.0-1", "1.0-1ubuntu1"),
    # simulator: a tilde at the end sorts before the end itself
    ("1.0~rc1", "1.0"), ("1.0~~", "1.0~"), ("1.36.3-1.1~bpo12+1", "1.36.3-1.1"),
    # simulator: letters sort before every other character; the end before all but '~'
    ("1.0a", "1.0+b1"), ("1.0a", "1.0."), ("2.1.5-1", "2.1.5+dfsg-1"),
]
#: Pairs dpkg holds equal (simulator: '1.0' and '1.0-0', a missing revision being revision 0).
EQUAL = [("1.0", "1.0-0"), ("0:1.0", "1.0"), ("1.36.3-1.1", "1.36.3-1.1")]


@pytest.mark.parametrize(("older", "newer"), ORDERED)
def test_versions_order_as_dpkg_orders_them(older: str, newer: str) -> None:
    assert (compare_debian_versions(older, newer), compare_debian_versions(newer, older)) == (-1, 1)
    assert compare_debian_versions(newer, newer) == 0
    assert max([newer, older], key=debian_version_key) == max([older, newer], key=debian_version_key) == newer


@pytest.mark.parametrize(("left", "right"), EQUAL)
def test_versions_dpkg_holds_equal_compare_equal(left: str, right: str) -> None:
    assert compare_debian_versions(left, right) == compare_debian_versions(right, left) == 0


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="no dpkg on this machine: the table above was checked with it")
def test_the_table_is_what_this_machines_dpkg_says() -> None:
    def dpkg(left: str, relation: str, right: str) -> bool:
        return subprocess.run(["dpkg", "--compare-versions", left, relation, right], check=False).returncode == 0

    assert [pair for pair in ORDERED if not dpkg(pair[0], "lt", pair[1])] == []
    assert [pair for pair in EQUAL if not dpkg(pair[0], "eq", pair[1])] == []
