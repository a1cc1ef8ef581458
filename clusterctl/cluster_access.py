"""Reaching the cluster through its control plane, and the one answer when there is none.

Every day-2 command that needs a working control plane (status, quarantine, release, heal, health
--quarantine, upgrade, remove-node, certs) reads it through ``on_control_plane``. When the control
plane answers but no cluster runs there (no kubectl or kubeadm, no admin.conf, an API server that
refuses connections), they all stop the same way: ``NoCluster``, exit 2, one paragraph that says
what could not be done, what the host answered (one line of it) and what to run first. A control
plane that cannot be reached at all (down, wrong key, timed out), or whose read fails for another
reason (a server error, a forbidden read: ``no_cluster_here`` decides), is a failed host instead:
exit 1, in the same shape, naming the command and what it answered. Either way stdout stays empty,
with ``-o json`` too: a script reads the exit status and stderr, never a half report.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeVar, cast

from clusterctl.errors import ClusterctlError, ParseError, UsageError
from clusterctl.facts import kube_nodes
from clusterctl.terminal_text import one_line
from clusterctl.transport.base import CommandResult, FailureKind, Transport, TransportError

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.fanout.outcomes import Failure
    from clusterctl.host_reader import HostReader
    from clusterctl.inventory.model import Host

T = TypeVar("T")

#: What to run first, said once for every command.
FIRST = ("Run 'clusterctl bootstrap' first ('bootstrap plan' shows what it would do), or point -i at the "
         "inventory whose first control-plane host runs the cluster.")

#: Failures that mean the host itself was not reached: not a question of a cluster.
_UNREACHED = (FailureKind.UNREACHABLE, FailureKind.AUTH_FAILED, FailureKind.HOST_KEY_REFUSED, FailureKind.TIMED_OUT)
#: Prefixes the layers below put on a message ("error: ", "RuntimeError: ", "command failed: ").
_PREFIX = re.compile(r"^(?:(?:error|[A-Z][A-Za-z]*Error|command failed(?: \(exit \d+\))?):\s*)+")


#: kubeadm's last stderr line after every error: it says nothing of the error, the line before it does.
KUBEADM_TRACE = "To see the stack trace of this error execute with --v=5 or higher"
#: What ``kubeadm certs check-expiration`` says, in effect, where no cluster was ever set up (or
#: ``kubeadm reset`` removed it): every certificate and CA a ``!MISSING!`` row, exit 0.
NO_CERTIFICATES = "kubeadm lists every certificate and CA as !MISSING! (no kubeadm init here, or kubeadm reset since)"

#: What a control plane answers when no cluster runs there at all: no kubectl (or kubeadm), no admin
#: kubeconfig, no API server static pod, an API server that refuses or does not take connections, no
#: certificate of kubeadm's. Anything else a kubectl call fails with (a server error for one node, a
#: forbidden read) is a failure of that read only.
_NO_CLUSTER = re.compile(
    re.escape(NO_CERTIFICATES) + "|"
    r"\b(?:kubectl|kubeadm)(?:: command)?: not found"
    r"|\b(?:kubectl|kubeadm): command not found"
    r"|(?:stat|open) \S*admin\.conf: no such file or directory"
    r"|\S*/kube-apiserver\.yaml: no such file or directory"
    r"|The connection to the server \S+ was refused"
    r"|Unable to connect to the server"
    r"|dial tcp \S*: connect: connection refused", re.IGNORECASE)


def no_cluster_here(error: TransportError | Failure) -> bool:
    """Whether a failed kubectl read on a control plane means that no cluster runs there (no kubectl,
    no admin.conf, an API server that refuses connections), as against a failure of that one read (a
    server error for one node): the one decision for every caller that reads several nodes and must
    not take one node's failure for "no cluster"."""
    if isinstance(error, UnreadableAnswer):
        return False  # kubectl answered: a cluster is there
    text = error.message if isinstance(error, TransportError) else f"{error.message} {error.stderr_tail or ''}"
    return bool(_NO_CLUSTER.search(text))


class NoCluster(UsageError):
    """The control plane answered, but no working cluster is there: exit 2, with what to run first."""


class ControlPlaneUnreachable(ClusterctlError):
    """The control plane host could not be reached (down, refused the login, timed out): exit 1."""


class ControlPlaneReadFailed(ClusterctlError):
    """The control plane answered, a cluster is there, but this read failed (a server error, a forbidden
    read, an answer that is no list): a failed host, exit 1, named as what it is, not as "no cluster"."""


def command_failed(result: CommandResult) -> TransportError:
    """The error a read on the control plane raises when its command failed: the command's first
    word and the last line of its stderr (``kubectl failed: sh: 1: kubectl: not found``), without
    the tool's own ``error:`` prefix and kubeadm's ``KUBEADM_TRACE`` line after it."""
    tool = result.command.split()[0] if result.command.split() else "the command"
    said = [line for line in result.stderr.strip().splitlines() if line.strip() != KUBEADM_TRACE]
    tail = _PREFIX.sub("", said[-1].strip() if said else "") or f"exit {result.exit_code}"
    error = NotFound if server_refused(result, "NotFound") else TransportError
    return error(FailureKind.COMMAND_FAILED, f"{tool} failed: {tail}")


#: By reason, the rest of kubectl's last line ``Error from server (REASON): ...`` (after ``error when replacing
#: "STDIN": ``) for one object; not NotFound's ``the server could not find the requested resource`` (no object).
#: Any 429 is "try again later" (kubectl drain retries it): an eviction's, that of a PodDisruptionBudget.
_REFUSED = {"NotFound": r'[\w.-]+ "[^"]+" not found', "AlreadyExists": r'[\w.-]+ "[^"]+" already exists',
            "Conflict": r'Operation cannot be fulfilled on [\w.-]+ "[^"]+": .+', "TooManyRequests": ".+"}
Refusal = Literal["NotFound", "AlreadyExists", "Conflict", "TooManyRequests"]


def server_refused(result: CommandResult, reason: Refusal) -> bool:
    """THE decision that kubectl said the API server answered ``reason``: its exit 1 and last stderr line."""
    line = result.stderr.strip().rpartition("\n")[2]
    return result.exit_code == 1 and bool(re.fullmatch(
        rf'Error from server \({reason}\): (?:error when \w+ "[^"]*": )?{_REFUSED[reason]}', line))


class NotFound(TransportError):
    """``command_failed`` of a kubectl that said the object it asked for is not there (``server_refused``)."""


def reason(failure: Failure | None) -> str:
    """What the host answered, in one line, without the prefixes the layers below add."""
    if failure is None:
        return "no answer"
    text = _PREFIX.sub("", failure.message.strip())
    tail = failure.stderr_tail.strip() if failure.stderr_tail else ""
    if tail and tail not in text:
        text = f"{text}: {tail}" if text else tail
    return one_line(_PREFIX.sub("", text)) or failure.kind.value


def not_usable(host: str, what: str, failure: Failure | None) -> ClusterctlError:
    """The one error of a day-2 command whose read of the cluster through ``host`` failed."""
    why = reason(failure)
    if failure is not None and failure.kind in _UNREACHED:
        return ControlPlaneUnreachable(f"cannot {what}: the control plane {host} was not reached "
                                       f"({failure.kind.value}: {why}).")
    if failure is not None and not no_cluster_here(failure):
        # A cluster answered; only this read failed: say what failed (the command, its last stderr line).
        return ControlPlaneReadFailed(f"cannot {what}: the control plane {host} answered, but the read "
                                      f"failed ({why}).")
    return NoCluster(f"no working cluster: cannot {what} through the control plane {host} ({why}).", hint=FIRST)


def on_control_plane(runner: Runner, host: Host, task: Callable[[Transport], T], *, what: str, label: str,
                     timeout_s: float | None = None) -> T:
    """``task`` on the control plane ``host``; its value (None where the task answered None: no such node),
    or ``not_usable``'s error when it failed."""
    (outcome,) = runner.run_task([host], task, label=label, timeout_s=timeout_s).outcomes
    if outcome.failure is not None:
        raise not_usable(host.name, what, outcome.failure)
    return cast(T, outcome.value)


class UnreadableAnswer(TransportError):
    """The control plane's kubectl answered, but not with what the API server writes (a proxy's error
    page, a field of the wrong type): a failed command of that host (``COMMAND_FAILED``) whose message
    is the parser's line and field. Its own type so that a caller reading several nodes can fail the
    one node whose answer it could not read and go on with the others."""

    def __init__(self, exc: ParseError, *, node: str | None = None) -> None:
        text = str(exc)
        # The parser names the node from the answer; an answer with no node in it (an HTML page) is
        # named by the node that was asked for.
        if node is not None and f"node {node}:" not in text:
            text = f"node {node}: {text}"
        super().__init__(FailureKind.COMMAND_FAILED, text)


def read_answer(transport: Transport | HostReader, command: str, parse: Callable[[str], T], *,
                stdout_answers: bool = False, timeout_s: float = 60, node: str | None = None) -> T:
    """``command`` through ``transport``, a control plane, parsed. A failed command is ``command_failed``'s
    ``TransportError``, an answer the parser cannot read an ``UnreadableAnswer`` (its line and field;
    ``node``: the node asked for, named where the answer names none).
    ``stdout_answers``: the command's stdout is its answer whatever its exit code (etcdctl's ``endpoint
    health`` exits 1 when a member is unhealthy), so only an empty one fails."""
    result = transport.run(command, sudo=True, timeout=timeout_s)
    if not (result.stdout.strip() if stdout_answers else result.ok):
        raise command_failed(result)
    try:
        return parse(result.stdout)
    except ParseError as exc:
        raise UnreadableAnswer(exc, node=node) from exc


def read_nodes(transport: Transport | HostReader) -> dict[str, kube_nodes.KubeNode]:
    """The cluster's nodes by name, in the API server's order (``kubectl get nodes -o json``; fails as
    ``read_answer`` does)."""
    return {n.name: n for n in read_answer(transport, kube_nodes.NODES_COMMAND, kube_nodes.parse_nodes)}


def read_node(transport: Transport | HostReader, name: str) -> kube_nodes.KubeNode | None:
    """The node ``name`` as the API server has it (``kubectl get node NAME -o json`` through
    ``transport``, a control plane); None when the cluster has no such node. Fails as ``read_nodes``
    does: ``command_failed``'s ``TransportError``, or an ``UnreadableAnswer`` naming the node."""
    try:
        return read_answer(transport, kube_nodes.node_command(name), kube_nodes.parse_node, node=name)
    except NotFound:
        return None


def read_pods(transport: Transport | HostReader, node: str) -> list[kube_nodes.Pod]:
    """The pods bound to ``node`` (``kubectl get pods --field-selector spec.nodeName=NODE -o json`` through
    ``transport``, a control plane): the one reader of a node's pods (the drain, health's GPU pods). A
    failed or unreadable answer is a ``TransportError`` of one line (the node, the control plane, and
    ``command_failed``'s kubectl line or the parser's) of the failure's own kind (unreachable, timed out...)."""
    try:
        return read_answer(transport, kube_nodes.pods_command(node), kube_nodes.parse_pods)
    except TransportError as exc:
        raise TransportError(exc.kind, f"the pods of node {node} could not be read through "
                                       f"{transport.host.name} ({one_line(exc.message)})") from None


def cluster_nodes(runner: Runner, host: Host) -> dict[str, kube_nodes.KubeNode]:
    """The cluster's nodes by name, as the control plane ``host`` lists them (``read_nodes``)."""
    return on_control_plane(runner, host, read_nodes, what="read the cluster's nodes", label="nodes")
