"""The typed values a bootstrap run hands its phases: ``RunOptions`` (fixed for the run) and ``RunData``
(made by one phase, read by later ones).

Both replace the ``dict[str, Any]`` bags phases used to share: a phase reads ``ctx.options.survey``
or ``ctx.shared.join.token`` and mypy knows what it gets. A new cross-phase value is a new field
here, with a comment saying who writes it and who reads it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterctl.bootstrap.containerd_config import CERTS_DIR, CONFIG_PATH, DROPIN_DIR

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from clusterctl.bootstrap.cluster.settings import ClusterSettings
    from clusterctl.bootstrap.reset_journals import ResetJournals
    from clusterctl.findings import Finding
    from clusterctl.saved_survey import SavedSurvey
    from clusterctl.secret import Secret

DEFAULT_CONTAINERD_RESTART = "systemctl restart containerd"


@dataclass(frozen=True)
class ContainerdPaths:
    """Where containerd keeps its files on the hosts, and how it is restarted (tests point these at a
    private containerd)."""

    config: str = CONFIG_PATH
    dropin_dir: str = DROPIN_DIR
    certs_dir: str = CERTS_DIR
    restart: str = DEFAULT_CONTAINERD_RESTART
    #: ``ctr`` with its flags (``ctr --address /run/containerd/containerd.sock``).
    ctr: str = "ctr"
    #: Seconds to wait for containerd to answer after a restart.
    wait_s: float = 20.0


@dataclass(frozen=True)
class RunOptions:
    """Options of one run, resolved from the inventory and the command line; the same for every phase and host."""

    #: Names of the hosts in this run (``-l``/``--only`` applied), in inventory order; empty: every host.
    hosts: tuple[str, ...] = ()
    #: A saved ``clusterctl survey`` report (topology labels, GPU counts for verify, NVLink alert hosts).
    survey: str | None = None
    #: ``clusterctl reset --restore-containerd``: containerd's config back from clusterctl's first backup.
    restore_containerd: bool = False
    #: ``clusterctl reset --force``: also remove what bootstrap did not make (reset lists it otherwise).
    force: bool = False
    #: ``clusterctl reset``: bootstrap's undo journals of this fleet (``bootstrap.reset_journals``), read by
    #: ``bootstrap.run`` before the run; ``None``: not read (a day-2 action planning a node's reset), so the
    #: reset phase goes by known names without saying it found no journal.
    reset_journals: ResetJournals | None = None
    #: ``clusterctl reset --purge-packages``: purge the packages the journals say bootstrap installed.
    purge_packages: bool = False
    #: The run changes hosts (not a plan or dry run): a change that would drop what an earlier
    #: run's survey put there is refused then, and only shown in a plan.
    applying: bool = False
    #: ``bootstrap --without-survey``: accept dropping what an earlier run's survey gave (the
    #: NVLink alert rule's hosts) in a run without ``--survey``.
    without_survey: bool = False
    #: ``bootstrap --allow-downgrade``: install a pin below the version a host runs; without it the
    #: packages phase refuses (``DOWNGRADE_REFUSED``, exit 2) and never passes ``--allow-downgrades``.
    allow_downgrade: bool = False
    #: What the user of the command running the packages phase can do about the downgrades it refuses
    #: (``DOWNGRADE_REFUSED`` findings -> their fix), worded by that command (``upgrade`` has no
    #: ``--allow-downgrade``); ``None``: bootstrap's (move the pin, or ``--allow-downgrade``).
    downgrade_fix: Callable[[Sequence[Finding]], str] | None = None
    #: Seconds to let the cluster converge before verify calls a node broken; ``None``: each phase's default.
    settle_s: float | None = None
    containerd: ContainerdPaths = field(default_factory=ContainerdPaths)


@dataclass
class JoinMaterial:
    """Made on the first control plane during this run (phase control-plane), read by the joining hosts
    (control-plane, join); never saved anywhere."""

    token: Secret | None = None
    certificate_key: Secret | None = None
    ca_hash: str | None = None


@dataclass
class RunData:
    """What the phases of one run share across hosts. Not kept across runs (the progress file holds
    no values): a phase that needs a value another phase makes must make it again when it is absent
    (``kubeadm token create`` on ``--resume``), or fail saying so. Secrets stay ``Secret``s."""

    #: The run's cluster settings, built once from the inventory (``PhaseContext.settings``).
    cluster_settings: ClusterSettings | None = None
    #: The saved survey of ``RunOptions.survey`` once read (``cluster_common.survey``); see ``survey_read``.
    survey: SavedSurvey | None = None
    survey_read: bool = False
    #: The join token, certificate key and CA hash of this run.
    join: JoinMaterial = field(default_factory=JoinMaterial)
    #: Hosts that dropped out of this run (a failed phase or lock), kept by the engine after each
    #: phase: verify reports them as missing at once instead of waiting for them to appear.
    failed_hosts: frozenset[str] = frozenset()
    #: Node name -> the token of its node agent's ServiceAccount (phase node-agent-access fills it).
    node_agent_tokens: dict[str, Secret] = field(default_factory=dict)
    #: Held by phases that fill a field for every host at once (the first host to ask builds it).
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
