"""Every setting tune-nccl derives, on InfiniBand, RoCE and Ethernet-only hosts, with its reason
checked against what NCCL's source does (the file is named next to each rule), and every
rendered file linting clean.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from clusterctl.nccl.tune.derive import Tuning, derive_settings
from clusterctl.nccl.tune.render import render_files
from clusterctl.nccl.tune.run import lint_rendered

#: What each reason must say, and the NCCL source behaviour that makes it true.
SOURCE_RULES: dict[str, tuple[str, ...]] = {
    # src/transport/net_ib/init.cc (searchExact = userIbEnv[0] == '=', then matchIfList in src/misc/utils.cc): '='
    # makes the HCA names exact; without it "mlx5_1" would also match mlx5_10 ... mlx5_19 (prefixes)
    "NCCL_IB_HCA": ("exact names", "GPU order"),
    # src/misc/socket.cc (ncclFindInterfaces): with NCCL_SOCKET_IFNAME unset NCCL tries "ib" interfaces first
    "NCCL_SOCKET_IFNAME": ("carries the inventory address", "NCCL would prefer ib*"),
    # src/transport/net_ib.cc @ v2.18.3: NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", 0); -1 (dynamic) from 2.21
    "NCCL_IB_GID_INDEX": ("would use index 0",),
    # src/transport/net_ib.cc @ v2.21.5: NCCL_PARAM(IbRoceVersionNum, "IB_ROCE_VERSION_NUM", 2)
    "NCCL_IB_ROCE_VERSION_NUM": ("NCCL looks for RoCE v2",),
    # src/transport/net_ib.cc @ v2.21.5: NCCL_IB_ADDR_FAMILY defaults to AF_INET
    "NCCL_IB_ADDR_FAMILY": ("NCCL looks for AF_INET",),
    # src/transport/net_socket.cc: one helper thread/socket per peer unless AWS (0x1d0f) or GCP (0x1ae0)
    # NICs; MAX_SOCKETS 64; env.rst: 4 for generic 100G networks
    "NCCL_SOCKET_NTHREADS": ("net_socket.cc", "env.rst suggests 4"),
    "NCCL_NSOCKS_PERTHREAD": ("within NCCL's limit of 64", "MAX_SOCKETS"),
    # src/graph/search.cc NCCL_PARAM(CrossNic, "CROSS_NIC", 2); env.rst: depends on a rail-optimised fabric
    "NCCL_CROSS_NIC": ("fabric.rail_optimized", "stay on one rail"),
}


def _check(tuning: Tuning) -> None:
    assert "NCCL_IB_DISABLE" not in {s.name for s in tuning.settings}  # a debugging setting, never derived
    assert "NCCL_NET_GDR_LEVEL" not in {s.name for s in tuning.settings}  # measured by the sweep, not derived
    for host in (None, *tuning.host_overrides):
        for setting in tuning.for_host(host) if host else tuning.settings:
            assert setting.name in SOURCE_RULES, f"{setting.name} has no source rule in this test"
            for phrase in SOURCE_RULES[setting.name]:
                assert phrase in setting.reason, (setting.name, setting.reason)
    assert lint_rendered(render_files(tuning, fmt="all"), tuning) == []


def test_infiniband_hosts(make_hgx: Any) -> None:
    hosts = [replace(make_hgx("gpu-1", "10.0.0.11"), rail_optimized=True),
             replace(make_hgx("gpu-2", "10.0.0.12", down=(3,)), rail_optimized=True)]
    tuning = derive_settings(hosts)
    assert tuning.fabric == "ib"
    assert {"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"} <= {s.name for s in tuning.settings}
    _check(tuning)


@pytest.mark.parametrize("nccl,gid_index,gids,expected", [
    ("2.18.3", 3, (), "NCCL_IB_GID_INDEX"),
    ("2.21.5", None, ((0, "fe80:0000:0000:0000:0a00:27ff:fe00:0001", "RoCE v1"),), "NCCL_IB_ROCE_VERSION_NUM"),
    ("2.21.5", None, ((3, "fe80:0000:0000:0000:0a00:27ff:fe00:0001", "RoCE v2"),), "NCCL_IB_ADDR_FAMILY"),
])
def test_roce_hosts(make_roce_host: Any, nccl: str, gid_index: int | None, gids: tuple[tuple[int, str, str], ...],
                    expected: str) -> None:
    tuning = derive_settings([make_roce_host(nccl, gid_index, gids)])
    assert tuning.fabric == "roce"
    assert expected in {s.name for s in tuning.settings}
    _check(tuning)


def test_ethernet_only_hosts(make_hgx: Any) -> None:
    hosts = [replace(make_hgx(f"cpu-{i}", f"10.0.0.{i}"), nics=(), fabric="ethernet", expected_rate_gbps=100.0)
             for i in (1, 2)]
    tuning = derive_settings(hosts)
    assert tuning.fabric == "ethernet"
    assert {s.name for s in tuning.settings} == {"NCCL_SOCKET_IFNAME", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"}
    _check(tuning)
