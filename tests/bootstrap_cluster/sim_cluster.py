"""A simulated GPU cluster for the cluster phases: mock hosts over the simulated kubeadm/kubectl/helm.

Each host replays the demo's DGX A100 recordings (``nvidia-smi -L`` and the rest) with the
Kubernetes packages installed; all hosts share one mock cluster state folder, so what
``kubeadm init`` does on one host is what ``kubeadm join`` finds on another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from clusterctl.bootstrap.phase import Phase, PhaseContext
from clusterctl.bootstrap.registry import phase_named
from clusterctl.bootstrap.run import run_bootstrap
from clusterctl.bootstrap.run_data import RunOptions
from clusterctl.changes import Change, Gate, GateRecord
from clusterctl.engine.progress import ProgressStore
from clusterctl.engine.run import RunReport, RunSettings
from clusterctl.fanout import Runner
from clusterctl.inventory.model import BootstrapConfig, Host, Inventory, StackPin
from clusterctl.mock.machine import MockMachine
from clusterctl.mock.profile import load_profile
from clusterctl.mock.transport import MockTransport

REPO = Path(__file__).resolve().parents[2]
DEMO_SURVEY = Path(__file__).parent / "fixtures" / "demo-survey.json"
CLUSTER_PHASES = ("control-plane", "join", "network", "gpu-addons", "topology-labels", "alert-rules", "verify")

PROFILE = f"""\
extends: {REPO / "inventories" / "demo" / "profiles" / "dgx-a100"}
machine:
  packages:
    installed:
      kubeadm: "1.36.2-1.1"
      kubelet: "1.36.2-1.1"
      kubectl: "1.36.2-1.1"
      helm: "3.19.0-1"
      containerd: "1.7.24-0ubuntu1~22.04.2"
"""


class SimHost(MockTransport):
    """A mock host whose one transport serves every run of a test (closing it keeps it usable)."""

    def close(self) -> None:
        pass


@dataclass
class SimCluster:
    root: Path
    names: list[str]
    control_planes: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)

    def __post_init__(self) -> None:
        profile_dir = self.root / "profile"
        profile_dir.mkdir(parents=True, exist_ok=True)
        (profile_dir / "profile.yaml").write_text(PROFILE)
        self.profile = load_profile(str(profile_dir))
        self.state = self.root / "state"
        self.hosts_by_name: dict[str, Host] = {}
        self.transports: dict[str, SimHost] = {}
        for index, name in enumerate(self.names):
            self.add_host(name, control_plane=index < self.control_planes)

    def add_host(self, name: str, *, control_plane: bool = False) -> None:
        roles = ("control-plane", "worker") if control_plane else ("worker",)
        rack = "a" if name.startswith("gpu-a") else "b"
        host = Host(name, address=f"10.0.{len(self.hosts_by_name)}.1", roles=roles, rack=rack, transport="mock",
                    stack=StackPin(kubernetes="1.36.2", containerd="1.7.24"))
        self.hosts_by_name[name] = host
        self.transports[name] = SimHost(host, self.profile, state_folder=self.state)

    @property
    def inventory(self) -> Inventory:
        return Inventory("sim", tuple(self.hosts_by_name.values()), bootstrap=self.bootstrap)

    def machine(self, name: str) -> MockMachine:
        return self.transports[name].machine

    def file(self, name: str, path: str) -> bytes | None:
        return self.machine(name).host.fs.read(path)

    def kube(self) -> dict[str, Any]:
        data = self.machine(self.names[0]).cluster.read().get("kubernetes")
        return data if isinstance(data, dict) else {}

    def run(self, phases: Sequence[str | Phase[Any]] = CLUSTER_PHASES, *, apply: bool = True,
            hosts: Sequence[str] | None = None, resume: bool = False,
            survey: Path | None = DEMO_SURVEY, **options: Any) -> RunReport:
        chosen: list[Phase[Any]] = [phase_named(p) if isinstance(p, str) else p for p in phases]
        selected = [self.hosts_by_name[n] for n in (hosts or list(self.hosts_by_name))]
        run_options = RunOptions(hosts=tuple(h.name for h in selected), survey=str(survey) if survey else None,
                                 **{"applying": apply, **self.options, **options})
        path = self.root / "progress.json"
        store = ((ProgressStore.load if resume else ProgressStore)(path, "sim")) if apply else None
        settings = RunSettings(apply=apply, resume=resume, progress=store, options=run_options)
        with Runner(lambda host, _t: self.transports[host.name], parallel=8, timeout_s=30) as runner:
            return run_bootstrap(self.inventory, selected, runner, chosen, settings)


class AdvanceClock(Phase[None]):
    """Test phase: an hour passes on the simulated cluster between two phases of one run (a join token
    made before it has expired after it)."""

    name: ClassVar[str] = "advance-clock"
    description: ClassVar[str] = "test only"
    once_per_cluster: ClassVar[bool] = True

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim

    def check(self, ctx: PhaseContext) -> None:
        return None

    def plan(self, ctx: PhaseContext, state: None) -> list[Change]:
        return [Change.run(ctx.host.name, "true", summary="an hour passes")]

    def apply(self, ctx: PhaseContext, gate: Gate, changes: Sequence[Change]) -> list[GateRecord]:
        with self.sim.machine(ctx.host.name).cluster.edit() as data:
            data["kubernetes"]["clock_offset_s"] = 3600
        return []
