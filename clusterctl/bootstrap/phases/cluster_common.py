"""What the cluster phases share: settings of the run, the first control plane, kubectl reads.

``ctx.shared`` (``RunData``) fields filled here and by the control-plane phase:

* ``cluster_settings``: the run's ``ClusterSettings`` (built once from the inventory: ``ctx.settings()``);
* ``survey``: the saved survey given with ``--survey`` (``None`` when there is none);
* ``join``: ``JoinMaterial``: the run's join token and certificate key (``Secret``) and the CA
  hash, made on the first control plane and read by the joining hosts.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterctl.changes import MAKES_IN_CLUSTER, STAYS_IN_CLUSTER, Change, ChangeKind, make_folders
from clusterctl.errors import UsageError
from clusterctl.facts.kube import ADMIN_KUBECONFIG, kubectl
from clusterctl.saved_survey import SavedSurvey, load_saved_survey
from clusterctl.transport.base import CommandResult

if TYPE_CHECKING:
    from clusterctl.bootstrap.phase import PhaseContext
    from clusterctl.inventory.model import Host

def survey(ctx: PhaseContext) -> SavedSurvey | None:
    shared = ctx.shared
    with shared.lock:
        if not shared.survey_read:
            if ctx.options.survey:
                shared.survey = load_saved_survey(ctx.options.survey)
            shared.survey_read = True
        return shared.survey


def first_cp(ctx: PhaseContext) -> Host:
    host = ctx.inventory.first_control_plane
    if host is None:
        raise UsageError("no host has the control-plane role.", field="hosts")
    return host


def is_first_cp(ctx: PhaseContext) -> bool:
    return ctx.host.name == first_cp(ctx).name


def run_hosts(ctx: PhaseContext) -> list[str]:
    """Names of the hosts in this run (``-l``/``--only`` applied), in inventory order."""
    names = ctx.options.hosts
    return list(names) if names else [h.name for h in ctx.inventory.hosts]


def runtime_class(ctx: PhaseContext) -> bool:
    """Pods ask for the nvidia runtime by RuntimeClass (containerd's default stays runc)."""
    return ctx.inventory.bootstrap.runtime == "runtimeclass"


def exists(ctx: PhaseContext, path: str) -> bool:
    return ctx.reader.run(f"test -e {shlex.quote(path)}", sudo=True).exit_code == 0


def has_cluster(ctx: PhaseContext) -> bool:
    """This host runs the cluster: kubeadm's admin.conf, which every kubectl and helm call here uses, is there."""
    return exists(ctx, ADMIN_KUBECONFIG)


def apply_manifest(host: str, path: str, summary: str, *, makes: tuple[str, ...] = (),
                   timeout_s: float | None = None) -> Change:
    """``kubectl apply -f PATH`` of a manifest a phase wrote on the host: what it makes lives in the
    cluster's API (reset takes it away with the cluster)."""
    return Change.run(host, kubectl(f"apply -f {shlex.quote(path)}"), summary=summary, timeout_s=timeout_s,
                      makes=(MAKES_IN_CLUSTER, *makes), cannot_undo=STAYS_IN_CLUSTER)


def with_folders(ctx: PhaseContext, changes: list[Change], folders: Sequence[str] = ()) -> list[Change]:
    """``changes`` preceded by the making of the folders its file writes (and ``folders``) need and the host
    lacks (``changes.make_folders``)."""
    paths = [c.path for c in changes if c.kind is ChangeKind.WRITE_FILE and c.path and not c.is_noop]
    wanted = [*(p.rsplit("/", 1)[0] for p in paths), *folders]
    return make_folders(ctx.reader, ctx.host.name, wanted) + changes if wanted else changes


def api_ready(ctx: PhaseContext) -> bool:
    result = ctx.reader.run(kubectl("get --raw /readyz"), sudo=True, timeout=30)
    return result.ok and result.stdout.strip() == "ok"


def settle_s(ctx: PhaseContext, default: float) -> float:
    """How long to wait for the cluster to converge (CNI pods, NFD's next pass); ``settle_s`` option."""
    return default if ctx.options.settle_s is None else float(ctx.options.settle_s)


def poll(ctx: PhaseContext, command: str, *, within_s: float, every_s: float = 10.0,
         timeout: float | None = None) -> CommandResult:
    """Run ``command`` until it succeeds or ``within_s`` has passed (each run within ``timeout``); the last result."""
    deadline = time.monotonic() + within_s
    while True:
        result = ctx.reader.run(command, sudo=True, timeout=timeout or max(30.0, every_s * 3))
        if result.ok or time.monotonic() + every_s > deadline:
            return result
        time.sleep(every_s)


def object_exists(ctx: PhaseContext, kind_name: str, namespace: str | None = None) -> bool:
    ns = f"-n {shlex.quote(namespace)} " if namespace else ""
    return ctx.reader.run(kubectl(f"get {ns}{shlex.quote(kind_name)} -o name"), sudo=True,
                             timeout=60).exit_code == 0
