"""Run one task on many hosts at once, with a bound, per-host deadlines and a result for each.

- ``outcomes``: what a run returns (``HostOutcome``, ``FleetResult``, ``Failure``).
- ``pool``: the connections of a run, reused across its tasks, bounded in number.
- ``time_budget``: a host's time limit applied to every call its task makes.
- ``scheduler``: ``Runner``, the bounded worker threads and the deadline watch.

Time limits: ``Runner(timeout_s=...)`` (``--timeout``) is each host's budget for one
``run_task``; ``run_task(..., timeout_s=...)`` sets another budget for one task (a bootstrap
phase that runs ``kubeadm init`` for minutes); ``transport.run(cmd, timeout=...)`` limits one
command within that budget. Whichever ends first stops the command *on the host* (its
process group gets SIGTERM, then SIGKILL) and the host is reported as timed out.

Ctrl-C (and SIGTERM under the CLI): ``run_task`` (and ``run_command``) raise
``FleetInterrupted``, a ``clusterctl.errors.Interrupted`` (a ``BaseException``)
carrying ``finished`` (a ``FleetResult`` of the hosts that ended
before the interrupt), ``running`` (hosts that were still working: their commands were
stopped on the host where the connection allowed it) and ``waiting`` (never started). It is raised
within about ``INTERRUPT_WAIT_S`` seconds; no worker thread outlives the run beyond that.
The CLI prints what finished from it.
"""

from clusterctl.fanout.outcomes import FleetResult, HostOutcome
from clusterctl.fanout.scheduler import FleetInterrupted, Progress, Runner

__all__ = ["FleetInterrupted", "FleetResult", "HostOutcome", "Progress", "Runner"]
