"""Run one task on many hosts at once, with a bound, per-host deadlines and a result for each.

- ``outcomes``: what a run returns (``HostOutcome``, ``FleetResult``, ``Failure``).
- ``pool``: the connections of a run, reused across its tasks, bounded in number.
- ``time_budget``: a host's time limit applied to every call its task makes.
- ``scheduler``: ``Runner``, the bounded worker threads and the deadline watch.
"""

from clusterctl.fanout.outcomes import CommandFailed, Failure, FleetResult, HostOutcome, failure_from
from clusterctl.fanout.scheduler import DEFAULT_PARALLEL, DEFAULT_TIMEOUT_S, Progress, Runner, hosts_by_name
from clusterctl.fanout.time_budget import TimeBoxedTransport

__all__ = [
    "DEFAULT_PARALLEL",
    "DEFAULT_TIMEOUT_S",
    "CommandFailed",
    "Failure",
    "FleetResult",
    "HostOutcome",
    "Progress",
    "Runner",
    "TimeBoxedTransport",
    "failure_from",
    "hosts_by_name",
]
