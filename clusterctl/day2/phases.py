"""Bootstrap's own phases, run by a day-2 action on some hosts (packages, containerd, reset...).

On connections of their own: a phase reads the host it works on from its transport, and the
action's connections carry the inventory's hosts as they were (an upgrade changes the pins).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterctl.engine.lock import LockInfo
    from clusterctl.engine.run import RunReport
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory


def run_phases(runner: Runner, inventory: Inventory, hosts: Sequence[Host], phases: Sequence[str], *,
               apply: bool, lock: LockInfo | None = None) -> RunReport:
    """Plan (``apply`` False) or run the named bootstrap phases on ``hosts``; failures are in the report.

    ``lock``: the hosts' locks the day-2 action already holds (the phases take none of their own).
    """
    from clusterctl.bootstrap.registry import phase_named
    from clusterctl.bootstrap.run import BootstrapRequest, run_bootstrap, run_options
    from clusterctl.engine.run import RunSettings
    from clusterctl.fanout import Runner as FleetRunner

    chosen = [phase_named(p) for p in phases]
    options = run_options(inventory, hosts, chosen, BootstrapRequest(apply=apply))
    with FleetRunner(runner.connect, parallel=runner.parallel, timeout_s=runner.timeout_s) as own:
        return run_bootstrap(inventory, hosts, own, chosen, RunSettings(apply=apply, options=options, held_lock=lock))
