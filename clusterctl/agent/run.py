"""One run of the node health agent: probe this host, judge it, publish conditions and metrics.

Everything goes through the host's ``Transport`` (``LocalTransport`` on a real node: the agent runs
there), so the same code runs on a node and on a mock host: the probes are ``clusterctl health``'s
(``health.run.probe_host``), the judging is ``health.run.judge`` on this host alone, the
NodeConditions go through ``kubectl`` with the agent's own kubeconfig (the node's ServiceAccount,
allowed nothing but ``get``/``patch`` of its own ``nodes/status``), the metrics file is written
atomically (``Transport.put``: a scrape never reads half a file).
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from clusterctl.agent import conditions as cond
from clusterctl.agent import metrics
from clusterctl.fanout.outcomes import failure_from
from clusterctl.findings import Finding, Severity
from clusterctl.health.checks import HostInput
from clusterctl.health.model import HealthOptions, HostHealth, verdict_of
from clusterctl.inventory.model import Fabric
from clusterctl.transport.base import FailureKind, Transport, TransportError
from clusterctl.utc import utc_stamp

#: Each kubectl call's own limit: an API server that does not answer costs this, not the timer's.
KUBECTL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class AgentOptions:
    #: The Kubernetes node this host is (the inventory name bootstrap registered it under).
    node: str
    #: The agent's kubeconfig; ``None``: no Kubernetes here (a Slurm-only host), metrics only.
    kubeconfig: str | None = None
    #: node-exporter's textfile collector folder; ``None``: no metrics file.
    textfile_dir: str | None = "/var/lib/prometheus/node-exporter"
    #: Kernel log window: an Xid older than this no longer counts (``journalctl -k`` keeps to this boot).
    since: str = "1h"
    probe_timeout_s: float = 30.0
    #: What a port's rate is held to: the inventory's fabric of this host, as bootstrap wrote it.
    fabric: Fabric = field(default_factory=Fabric)


@dataclass
class AgentRun:
    health: HostHealth
    conditions: list[dict[str, str]] = field(default_factory=list)
    #: Whether the conditions reached the API server (``None``: no kubeconfig, not asked).
    published: bool | None = None
    #: What went wrong publishing, one line each (the run still writes what it can).
    problems: list[str] = field(default_factory=list)
    duration_s: float = 0.0


def _kubectl(transport: Transport, options: AgentOptions, args: str, *, what: str) -> str:
    """``kubectl ARGS`` with the agent's kubeconfig: its output, or ``PublishError`` (``could not WHAT: ...``)."""
    line = f"kubectl --kubeconfig {shlex.quote(str(options.kubeconfig))} --request-timeout=20s {args}"
    result = transport.run(line, timeout=KUBECTL_TIMEOUT_S)
    if not result.ok:
        raise PublishError(f"could not {what}: {result.stderr_tail(2) or result.stdout[-200:]}")
    return result.stdout


def read_conditions(transport: Transport, options: AgentOptions) -> list[dict[str, Any]]:
    """The node's conditions as the API server has them (``get`` on ``nodes/status``)."""
    out = _kubectl(transport, options, f"get node {shlex.quote(options.node)} --subresource=status -o json",
                   what=f"read node {options.node}")
    try:
        node = json.loads(out)
    except json.JSONDecodeError as exc:
        raise PublishError(f"kubectl get node {options.node} printed no JSON ({exc})") from exc
    found = (node.get("status") or {}).get("conditions") if isinstance(node, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def patch_conditions(transport: Transport, options: AgentOptions, conditions: list[dict[str, str]]) -> None:
    """A strategic merge patch of ``nodes/status``: conditions merge by ``type``, the kubelet's stay."""
    body = json.dumps({"status": {"conditions": conditions}}, separators=(",", ":"), sort_keys=True)
    _kubectl(transport, options, f"patch node {shlex.quote(options.node)} --subresource=status --type=strategic "
             f"-p {shlex.quote(body)}", what=f"patch node {options.node}'s status")


class PublishError(Exception):
    pass


def check_host(transport: Transport, node: str, options: HealthOptions, fabric: Fabric, *,
               source: str = "node-agent", within: float | None = None) -> HostHealth:
    """``clusterctl health`` level 0 on this one host, judged alone (no fleet to compare with).

    The node agent's and Slurm's health check both: the probes read as ``clusterctl health`` reads
    them (its kernel log window, each probe's output bounded), so both decide alike on one host.
    ``within``: the whole check's bound (Slurm's deadline). A check that cannot finish is, as for
    NHC's watchdog, a failed check, not a pass (a hung ``nvidia-smi`` is a GPU off the bus); one that
    could not run for another reason is ``HOST_UNREACHABLE``, saying why, as in the fleet run.
    """
    from clusterctl.health.run import judge, probe_host

    try:
        item = HostInput(node, probe_host(transport, options, within), fabric=fabric)
    except TransportError as exc:
        if exc.kind is FailureKind.TIMED_OUT:
            finding = Finding(Severity.ERROR, "PROBE_HUNG", f"the health check did not finish in time ({exc})",
                              host=node, fix="A hung nvidia-smi usually means a GPU or its driver stopped answering: "
                                             "check the kernel log for Xid 79, then reset or reboot the node.")
            verdict, reason = verdict_of([finding])
            return HostHealth(node, verdict, reason, (finding,))
        item = HostInput(node, None, failure_from(exc).describe(), fabric)
    return judge([item], level=0, since=options.since, source=source).hosts[0]


def run_once(transport: Transport, options: AgentOptions) -> AgentRun:
    """Probe, judge, publish. Never raises for a publishing failure: it is in ``problems`` and the metrics."""
    started = time.monotonic()
    health = check_host(transport, options.node, HealthOptions(since=options.since,
                                                              probe_timeout_s=options.probe_timeout_s), options.fabric)
    run = AgentRun(health)
    if options.kubeconfig:
        try:
            current = read_conditions(transport, options)
            run.conditions = cond.conditions(health.findings, utc_stamp(time.time()), current)
            patch_conditions(transport, options, run.conditions)
            run.published = True
        except (PublishError, TransportError) as exc:
            run.published = False
            run.problems.append(str(exc))
    run.duration_s = time.monotonic() - started
    if options.textfile_dir:
        figures = metrics.RunFigures(options.node, time.time(), run.duration_s, run.published)
        path = f"{options.textfile_dir.rstrip('/')}/{metrics.TEXTFILE_NAME}"
        try:
            transport.run(f"mkdir -p {shlex.quote(options.textfile_dir)}", timeout=KUBECTL_TIMEOUT_S)
            # No backup: a copy per minute would fill the folder; a half-written file is never seen (rename).
            transport.put(path, metrics.render(health.findings, figures), mode=0o644, backup=False)
        except TransportError as exc:
            run.problems.append(f"could not write {path}: {exc}")
    return run
