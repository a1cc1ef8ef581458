"""The real-node tier: namespaced nodes with a real sshd each (``nodes.py``), reached by clusterctl.

``real_nodes`` brings up two nodes for a test module and always takes them down (the module's
end, an error, an interrupt; a killed run is cleaned up by the nodes' reaper). Where this
machine cannot host such nodes (not root, no network namespaces, no overlayfs) the tier skips
with the exact reason; everything it needs is in Debian's openssh-server, util-linux and iproute2.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nodes import RealNodes, unavailable_reason


def skip_unless_possible() -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"real nodes cannot run on this machine: {reason}")


@pytest.fixture(scope="module")
def real_nodes() -> Iterator[RealNodes]:
    skip_unless_possible()
    with RealNodes(2) as nodes:
        yield nodes
