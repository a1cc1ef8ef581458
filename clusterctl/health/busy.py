"""Before the invasive checks (``dcgmi diag -r 2`` and up, nccl-tests): is anything using the GPUs?

Level 2 and 3 take the GPUs for minutes (DCGM's memory and stress tests, nccl-tests' all-reduce
over every GPU): beside a running job they slow it or kill it, and the job spoils the results.
So a host is left out of them when one of its GPUs has a compute process (``nvidia-smi
--query-compute-apps``, ``facts/compute_apps.py``) or its Kubernetes node runs a pod asking for
``nvidia.com/gpu`` (or a MIG instance) that no DaemonSet owns (a DaemonSet's GPU pod, dcgm-exporter's or the device
plugin's, is the node's own machinery), unless the host is out of service (its node cordoned, as
``clusterctl quarantine`` leaves it) or the run says ``--force``. What cannot be read counts as
busy (a host is tested only when it is known to be idle), except a control plane where no cluster
answers (not bootstrapped, API server down): no pod can hold a GPU then, the processes decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterctl.cluster_access import no_cluster_here, read_node, read_pods, reason
from clusterctl.errors import ParseError
from clusterctl.facts.compute_apps import COMMAND as COMPUTE_APPS
from clusterctl.facts.compute_apps import parse_compute_apps
from clusterctl.health.checks import HostInput
from clusterctl.terminal_text import one_line
from clusterctl.transport.base import FailureKind, Transport, TransportError
from clusterctl.wording import first_few, plural

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory


@dataclass
class GpuUse:
    host: str
    #: ``GPU 3: pid 40170 python3, 185 MiB``: one line per compute process.
    processes: list[str] = field(default_factory=list)
    #: ``default/trainer-0 (8 GPUs, ReplicaSet trainer-5d9f)``: pods holding GPUs, DaemonSets' left out.
    pods: list[str] = field(default_factory=list)
    #: Why the GPUs' use is not known (then the host counts as busy).
    unknown: list[str] = field(default_factory=list)
    #: Cordoned (quarantined): no new work, the invasive checks may run.
    out_of_service: bool = False

    @property
    def busy(self) -> bool:
        return bool(self.processes or self.pods or self.unknown)

    def describe(self) -> str:
        return first_few([*self.processes, *(f"pod {p}" for p in self.pods), *self.unknown], 6)


def _processes(runner: Runner, hosts: Sequence[Host], inputs: Sequence[HostInput], uses: dict[str, GpuUse]) -> None:
    def task(transport: Transport) -> tuple[int, str]:
        result = transport.run(COMPUTE_APPS, timeout=60)
        return result.exit_code, result.stdout

    by_uuid = {i.name: {g.uuid: g.index for g in i.gpus if g.uuid} for i in inputs}
    for outcome in runner.run_task(list(hosts), task, label="health: GPU processes").outcomes:
        use = uses[outcome.host.name]
        if not outcome.ok or outcome.value is None or outcome.value[0] != 0:
            use.unknown.append("the GPUs' processes could not be read (nvidia-smi --query-compute-apps)")
            continue
        try:
            apps = parse_compute_apps(outcome.value[1])
        except ParseError as exc:
            use.unknown.append(f"nvidia-smi --query-compute-apps: {exc}")
            continue
        index = by_uuid.get(outcome.host.name, {})
        for app in apps:
            gpu = index.get(app.gpu_uuid or "")
            where = f"GPU {gpu}" if gpu is not None else (app.gpu_uuid or "a GPU")
            use.processes.append(f"{where}: {app.describe()}")


@dataclass(frozen=True)
class _NodeAnswer:
    """What the control plane says of one host's node: cordoned, the pods holding its GPUs, or why not known."""

    cordoned: bool = False
    holding: tuple[str, ...] = ()
    unknown: str | None = None


def _node_answer(transport: Transport, host: str, cp: str) -> _NodeAnswer | None:
    """One host's node and the pods bound to it, read through the control plane ``cp``; None when the
    host is no node of the cluster. A node or pod list the control plane answers but cannot be read,
    or a kubectl that fails for this node, is that host's failed read (counted busy); only a failure
    that means no cluster runs there (``cluster_access.no_cluster_here``) raises."""
    node = None
    try:
        node = read_node(transport, host)
        if node is None:
            return None
        listed = read_pods(transport, host)
    except TransportError as exc:
        if exc.kind is not FailureKind.COMMAND_FAILED or no_cluster_here(exc):
            raise
        if node is not None:  # the pods could not be read
            return _NodeAnswer(node.unschedulable, unknown=exc.message)
        return _NodeAnswer(unknown=f"its node could not be read through {cp} ({one_line(exc.message)})")
    holding = tuple(f"{p.ref} ({plural(p.gpus, 'GPU')}, "
                    f"{p.controller_kind or 'no controller'} {p.controller_name}".rstrip() + ")"
                    for p in listed if p.gpus and p.controller_kind != "DaemonSet" and not p.finished)
    return _NodeAnswer(node.unschedulable, holding)


def _pods(runner: Runner, hosts: Sequence[Host], cluster: Inventory, uses: dict[str, GpuUse]) -> None:
    cp = cluster.first_control_plane
    if cp is None:
        return  # no Kubernetes here (a Slurm-only cluster): the processes say it all

    def task(transport: Transport) -> dict[str, _NodeAnswer | None]:
        # Only a kubectl failure that means no cluster answers there (not bootstrapped, API server
        # down: no_cluster_here) ends the task; one node's failed read is that host's.
        return {host.name: _node_answer(transport, host.name, cp.name) for host in hosts}

    (outcome,) = runner.run_task([cp], task, label="health: GPU pods").outcomes
    if outcome.failure is not None and outcome.failure.kind is FailureKind.COMMAND_FAILED \
            and no_cluster_here(outcome.failure):
        return  # no cluster runs there: no pod can hold a GPU, the processes say it all
    if not outcome.ok or outcome.value is None:
        for host in hosts:
            uses[host.name].unknown.append(f"the node's pods could not be read through {cp.name} "
                                           f"({reason(outcome.failure)})")
        return
    for name, answer in outcome.value.items():
        if answer is None:
            continue  # not a node of the cluster
        uses[name].out_of_service = answer.cordoned
        uses[name].pods += answer.holding
        if answer.unknown is not None:
            uses[name].unknown.append(answer.unknown)


def gpu_use(runner: Runner, hosts: Sequence[Host], inputs: Sequence[HostInput],
            cluster: Inventory | None = None) -> dict[str, GpuUse]:
    """What uses each host's GPUs now; never raises for a host (what cannot be read is ``unknown``)."""
    uses = {h.name: GpuUse(h.name) for h in hosts}
    if not hosts:
        return uses
    _processes(runner, hosts, inputs, uses)
    if cluster is not None:
        _pods(runner, hosts, cluster, uses)
    return uses
