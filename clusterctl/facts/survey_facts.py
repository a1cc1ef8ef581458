"""The facts ``clusterctl survey`` reads from every host, in the order it runs them.

Topology first: it is what most checks need and it also proves nvidia-smi works, so a
broken driver shows up once at the top of a host's report.
"""

from __future__ import annotations

from typing import Any

from clusterctl.facts.base import Fact
from clusterctl.facts.gpus import GPUS
from clusterctl.facts.netdev import IPV4_ADDRS, NETDEV
from clusterctl.facts.nvlink import NVLINK
from clusterctl.facts.rdma import RDMA
from clusterctl.facts.stack import STACK
from clusterctl.facts.topo import TOPOLOGY

SURVEY_FACTS: tuple[Fact[Any], ...] = (TOPOLOGY, GPUS, NVLINK, RDMA, STACK, NETDEV, IPV4_ADDRS)
