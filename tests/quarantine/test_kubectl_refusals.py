"""Which refusal the API server answered, read as kubectl writes it (``cluster_access.server_refused``): exit 1 and
kubectl's last stderr line ``Error from server (REASON): ...``, the one decision behind a read's NotFound and the
remediation receivers' Lease (created meanwhile by another receiver, written meanwhile). Lines as real kubectl
prints them (kubernetes/kubernetes#95972 for the Conflict of a ``replace -f -``)."""

from __future__ import annotations

import json

import pytest

from clusterctl.cluster_access import server_refused
from clusterctl.quarantine.cluster_lease import ClusterLease, LeaseError
from clusterctl.transport.base import CommandResult

ALREADY = ('Error from server (AlreadyExists): error when creating "STDIN": leases.coordination.k8s.io '
           '"clusterctl-remediate" already exists')
CONFLICT = ('Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on pods '
            '"e2e-test-httpd-pod": the object has been modified; please apply your changes to the latest version '
            'and try again')
NOT_FOUND = 'Error from server (NotFound): nodes "gpu-a9" not found'
NOT_SERVED = "Error from server (NotFound): the server could not find the requested resource"
BUDGET = "Error from server (TooManyRequests): Cannot evict pod as it would violate the pod's disruption budget."
#: An admission webhook's refusal that quotes another reason in its message: the server said InternalError.
WEBHOOK = ('Error from server (InternalError): error when replacing "STDIN": Internal error occurred: failed calling '
           'webhook "leases.example.com": the webhook answered "(Conflict) retry later"')


def failed(stderr: str, exit_code: int = 1) -> CommandResult:
    return CommandResult("kubectl", "", stderr + "\n", exit_code, 0.1)


@pytest.mark.parametrize(("stderr", "reason", "said"), [
    (ALREADY, "AlreadyExists", True), (CONFLICT, "Conflict", True), (NOT_FOUND, "NotFound", True),
    (ALREADY, "Conflict", False), (NOT_SERVED, "NotFound", False), (WEBHOOK, "Conflict", False),
    (BUDGET, "TooManyRequests", True), (WEBHOOK.replace("Conflict", "TooManyRequests"), "TooManyRequests", False),
    (f"{CONFLICT}\nerror: exit status 1", "Conflict", False),  # the server's line is not kubectl's last
])
def test_the_reason_is_the_servers_on_kubectls_last_line(stderr: str, reason: str, said: bool) -> None:
    assert server_refused(failed(stderr), reason) is said  # type: ignore[arg-type]
    assert not server_refused(failed(stderr, exit_code=255), reason)  # type: ignore[arg-type]  # ssh's, not kubectl's


class _ControlPlane:
    """kubectl on a control plane where no Lease is yet (get: NotFound) or a free one, answering writes ``write``."""

    def __init__(self, write: str, *, lease: bool) -> None:
        self.write, self.lease = write, lease

    def run(self, command: str, **_: object) -> CommandResult:
        if " get lease " in command:
            if not self.lease:
                return failed('Error from server (NotFound): leases.coordination.k8s.io "clusterctl-remediate" '
                              'not found')
            lease = {"metadata": {"resourceVersion": "7"}, "spec": {"holderIdentity": ""}}
            return CommandResult(command, json.dumps(lease), "", 0, 0.1)
        return failed(self.write)


@pytest.mark.parametrize(("write", "lease", "holder"), [
    (ALREADY, False, "another receiver (it was created meanwhile)"),
    (CONFLICT, True, "another receiver (it wrote the Lease meanwhile)"),
])
def test_another_receivers_write_meanwhile_is_waited_for(write: str, lease: bool, holder: str) -> None:
    assert ClusterLease(holder="me")._try(_ControlPlane(write, lease=lease)) == holder  # type: ignore[arg-type]


def test_a_refusal_that_only_quotes_conflict_is_the_leases_error() -> None:
    with pytest.raises(LeaseError, match="kubectl replace lease failed"):
        ClusterLease(holder="me")._try(_ControlPlane(WEBHOOK, lease=True))  # type: ignore[arg-type]
