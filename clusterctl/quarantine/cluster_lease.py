"""One receiver at a time decides who goes out of service: a ``coordination.k8s.io`` Lease in the cluster.

Two receivers (an HA pair behind one Alertmanager, or a second one started by mistake) each read
the nodes out of service and take one more out: without coordination both read "0 out, cap 1"
and both act. The cap therefore holds through the cluster itself, never through a receiver's
memory: a receiver decides and marks nodes (taint, cordon) only while it holds the Lease
``kube-system/clusterctl-remediate``, and every write to the Lease is a compare-and-swap on its
``resourceVersion`` (``kubectl create`` fails with AlreadyExists, ``kubectl replace`` with
Conflict when another receiver wrote first), as client-go's leader election does it.

A Lease held by another receiver is taken over only when it has not changed for its whole
``leaseDurationSeconds`` as this receiver's own clock measures it (a crashed holder): clocks of
two machines are never compared. A holder stops marking nodes well before its hold could be
taken over (``Hold.allows``), and gives the Lease back (empty holder) when done, and when the
receiver is stopped (Ctrl-C, SIGTERM: ``Marker.stop``), so the next receiver need not wait out
the hold.

The Lease is coordination, like the engine's host lock, not a change to the cluster: it is not
planned, not passed through the gate and not in the undo journal (``clusterctl undo`` has nothing
to take back: a Lease with no holder is the state before the receiver as far as any reader can
tell), and a dry run never writes it.
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clusterctl.cluster_access import Refusal, server_refused
from clusterctl.errors import ClusterctlError
from clusterctl.facts.kube import kubectl

if TYPE_CHECKING:
    from clusterctl.transport.base import CommandResult, Transport

LEASE_NAME = "clusterctl-remediate"
LEASE_NAMESPACE = "kube-system"
#: How long a hold lasts without being given back (a crashed holder's is taken over after this).
DURATION_S = 60
#: A holder starts no write to a node with less than this left of its hold (each write is bounded
#: by its own 60-second timeout below this).
WRITE_MARGIN_S = 40.0
TIMEOUT_S = 30.0


class LeaseBusy(ClusterctlError):
    """Another receiver held the Lease for longer than we could wait."""


class LeaseError(ClusterctlError):
    """The API server's answer was not one the Lease protocol expects (kubectl's error names it)."""


def identity() -> str:
    """This receiver: machine, process and a random part (two processes never share one)."""
    return f"{socket.gethostname()}/pid-{os.getpid()}/{secrets.token_hex(4)}"


@dataclass
class Hold:
    holder: str
    resource_version: str
    taken_at: float
    duration_s: float
    clock: Callable[[], float]

    def allows(self) -> bool:
        """Whether a write may start now: the hold has ``WRITE_MARGIN_S`` left (beyond its takeover time)."""
        return self.clock() - self.taken_at < self.duration_s - WRITE_MARGIN_S


@dataclass
class ClusterLease:
    holder: str = field(default_factory=identity)
    name: str = LEASE_NAME
    namespace: str = LEASE_NAMESPACE
    duration_s: int = DURATION_S
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    #: The last (holder, resourceVersion) seen on the Lease and when this process first saw it.
    _seen: tuple[str, str, float] | None = None

    def _run(self, transport: Transport, args: str, body: dict[str, Any] | None = None, *,
             expected: tuple[Refusal, ...] | None = ()) -> CommandResult:
        """kubectl ``args``; a failure is a ``LeaseError`` but the ``expected`` refusals (None: the caller judges)."""
        stdin = json.dumps(body).encode() if body is not None else None
        result = transport.run(kubectl(args), sudo=True, timeout=TIMEOUT_S, stdin=stdin)
        if result.ok or expected is None or any(server_refused(result, refusal) for refusal in expected):
            return result
        raise LeaseError(f"kubectl {args.split()[0]} lease failed (exit {result.exit_code}): {result.stderr_tail(2)}")

    def _object(self, resource_version: str | None, holder: str | None) -> dict[str, Any]:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # a MicroTime
        spec: dict[str, Any] = {"leaseDurationSeconds": self.duration_s}
        if holder:
            spec.update(holderIdentity=holder, acquireTime=now, renewTime=now)
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace,
                                    "labels": {"app.kubernetes.io/managed-by": "clusterctl"}}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def _held(self, result: CommandResult) -> Hold:
        """The hold a written Lease (``result``: kubectl's answer) gives, from now."""
        try:
            version = str(json.loads(result.stdout)["metadata"]["resourceVersion"])
        except (ValueError, KeyError, TypeError):
            raise LeaseError(f"kubectl answered without the Lease's resourceVersion: {result.stdout[:200]!r}") \
                from None
        return Hold(self.holder, version, self.clock(), self.duration_s, self.clock)

    def _try(self, transport: Transport) -> Hold | str:
        """One attempt: the hold, or who holds the Lease now."""
        got = self._run(transport, f"get lease {self.name} -n {self.namespace} -o json", expected=("NotFound",))
        if not got.ok:  # NotFound
            made = self._run(transport, "create -f - -o json", self._object(None, self.holder),
                             expected=("AlreadyExists",))
            return self._held(made) if made.ok else "another receiver (it was created meanwhile)"
        try:
            lease = json.loads(got.stdout)
            spec = lease.get("spec") or {}
            current = str(spec.get("holderIdentity") or "")
            version = str(lease["metadata"]["resourceVersion"])
            # The holder's own duration: what it promised to give the Lease back (or write it again) within.
            duration = float(spec.get("leaseDurationSeconds") or self.duration_s)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise LeaseError(f"kubectl get lease answered what is not a Lease: {got.stdout[:200]!r}") from None
        now = self.clock()
        if self._seen is None or self._seen[:2] != (current, version):
            self._seen = (current, version, now)
        free = not current or current == self.holder or now - self._seen[2] >= duration
        if not free:
            return current
        taken = self._run(transport, "replace -f - -o json", self._object(version, self.holder),
                          expected=("Conflict", "NotFound"))
        return self._held(taken) if taken.ok else "another receiver (it wrote the Lease meanwhile)"

    def acquire(self, transport: Transport, wait_s: float, *, stopping: Callable[[], bool] | None = None) -> Hold:
        """The Lease, waiting up to ``wait_s`` while another receiver holds it (no longer once ``stopping()``)."""
        deadline = self.clock() + wait_s
        pause = 0.1
        while True:
            outcome = self._try(transport)
            if isinstance(outcome, Hold):
                return outcome
            if stopping is not None and stopping():
                raise LeaseBusy(f"the receiver is stopping: it no longer waits for the Lease {self.namespace}/"
                                f"{self.name} ({outcome} holds it)")
            if self.clock() >= deadline:
                raise LeaseBusy(f"the Lease {self.namespace}/{self.name} is held by {outcome} (waited "
                                f"{wait_s:g} s)")
            self.sleep(pause)
            pause = min(pause * 2, 1.0)

    def release(self, transport: Transport, hold: Hold) -> bool:
        """Give the Lease back; False when another receiver took it over meanwhile (nothing written)."""
        return self._run(transport, "replace -f - -o json", self._object(hold.resource_version, None), expected=None).ok
