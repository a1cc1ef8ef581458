"""``FleetBaseline``: the fleet side of every comparison (peer groups, majorities), built once per survey.

Asked per host, it made a 1,000-host survey quadratic in hosts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from itertools import combinations
from typing import Any

from clusterctl.survey.checks.host import (
    MadeOnce,
    PairExpectation,
    PeerGroup,
    SurveyedHost,
    active_lanes,
    card_ports,
    gpu_has_near_nic,
    majority,
    peer_group,
    usual_gpu_count,
    usual_link_rates,
    usual_pcie_width,
    usually_active,
)
from clusterctl.survey.topology import HostTopology


class FleetBaseline:
    """What the fleet looks like, for the checks to compare each host with.

    Built once per survey from every surveyed host. Each value is computed on first use and
    kept per peer group (or port, stack field), so judging n hosts costs O(n) rather than
    recomputing fleet-wide majorities for every host.
    """

    def __init__(self, fleet: Sequence[SurveyedHost]) -> None:
        self.reachable: tuple[SurveyedHost, ...] = tuple(s for s in fleet if s.facts is not None)
        # "Other hosts" leaves a host out by identity: two hosts may hold equal facts.
        self._times_in_fleet: Counter[int] = Counter(id(s) for s in self.reachable)
        self._readers: Counter[str] = Counter(name for s in self.reachable if s.facts is not None
                                              for name in s.facts.values)
        self._workers = tuple(s for s in self.reachable if not s.gpu_only_control_plane)
        self._groups: dict[PeerGroup, list[SurveyedHost]] = {}
        for s in self.reachable:
            self._groups.setdefault(peer_group(s), []).append(s)
        devices = [d for s in self.reachable for d in (s.facts.rdma if s.facts else None) or ()]
        self._ports_active = usually_active(devices)
        self._port_rates = usual_link_rates(card_ports(devices))
        #: Each value asked for so far, by what it is and whose (peer group, port, stack field...).
        self._kept = MadeOnce()

    # --- reachability --------------------------------------------------------------

    def others_reachable(self, state: SurveyedHost) -> int:
        """Surveyed hosts other than ``state``."""
        return len(self.reachable) - self._times_in_fleet[id(state)]

    def others_reading(self, state: SurveyedHost, fact: str) -> int:
        """Surveyed hosts other than ``state`` that could read ``fact``."""
        own = self._times_in_fleet[id(state)] if state.facts is not None and fact in state.facts.values else 0
        return self._readers[fact] - own

    # --- GPUs ----------------------------------------------------------------------

    @cached_property
    def gpu_model(self) -> str | None:
        """The GPU model most workers have."""
        return majority(s.gpu_model for s in self._workers if s.gpu_model)

    def gpu_count(self, model: str | None) -> int | None:
        """The GPU count most workers with ``model`` have (all workers when the model is unknown)."""
        return self._kept.get(("gpu_count", model), lambda: usual_gpu_count(
            ((s.gpu_model, s.gpu_count) for s in self._workers if s.gpu_count is not None), model))

    def hardware_peers(self, state: SurveyedHost) -> list[SurveyedHost]:
        """Hosts with the same GPU model and count (``state`` included): whose NVLink/PCIe to compare with."""
        return self._groups.get(peer_group(state), [])

    def nvlinks(self, state: SurveyedHost, topology: HostTopology) -> PairExpectation:
        """Per GPU pair, the NVLink count of most hardware peers whose GPUs are numbered alike."""
        def expectation() -> PairExpectation:
            peers = [p.topology for p in self.hardware_peers(state)
                     if p.topology is not None and p.topology.gpu_indices == topology.gpu_indices]
            return {(a, b): majority(p.nvlinks(a, b) for p in peers) for a, b in combinations(topology.gpu_indices, 2)}

        return self._kept.get(("nvlinks", peer_group(state), topology.gpu_indices), expectation)

    def active_lanes(self, state: SurveyedHost) -> int | None:
        """The active NVLink lane count per GPU of most GPUs on hardware peers."""
        return self._kept.get(("lanes", peer_group(state)), lambda: majority(
            active_lanes(status) for p in self.hardware_peers(state) if p.facts and p.facts.nvlink
            for status in p.facts.nvlink))

    def pcie(self, state: SurveyedHost) -> tuple[int | None, int | None]:
        """PCIe (width, generation) most GPUs of the hardware peers run at."""
        def width_and_generation() -> tuple[int | None, int | None]:
            gpus = [g for p in self.hardware_peers(state) for g in p.gpus or ()]
            return (usual_pcie_width(g.pcie_width_current for g in gpus),
                    majority((g.pcie_gen_current for g in gpus if g.pcie_gen_current), minimum=2))

        return self._kept.get(("pcie", peer_group(state)), width_and_generation)

    def peers_have_near_nic(self, state: SurveyedHost, gpu_index: int) -> bool:
        """Whether most hardware peers have a NIC on the PCIe switch of GPU ``gpu_index``."""
        return self._kept.get(("near_nic", peer_group(state), gpu_index), lambda: majority(
            gpu_has_near_nic(p.topology, gpu_index) for p in self.hardware_peers(state) if p.topology) is True)

    # --- NICs ----------------------------------------------------------------------

    def port_active(self, key: str) -> bool | None:
        """Whether the port ``key`` (``mlx5_0/1``) is active on most hosts that have it."""
        return self._ports_active.get(key)

    def port_rate(self, key: str, card: str | None) -> float | None:
        """The rate the port ``key`` of this ``card`` (``card_of``) runs at on most hosts where it is active: a
        200G card is not a slow 400G one."""
        return self._port_rates.get((key, card))

    # --- software stack ------------------------------------------------------------

    def stack_value(self, attribute: str) -> Any:
        """The value of the ``SoftwareStack`` field most hosts that report it share."""
        def value() -> Any:
            stacks = [s.facts.stack for s in self.reachable if s.facts is not None and s.facts.stack is not None]
            return majority(getattr(s, attribute) for s in stacks if getattr(s, attribute))

        return self._kept.get(("stack", attribute), value)
