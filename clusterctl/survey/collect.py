"""Reading every survey fact of a host in one fan-out task.

One task per host, one connection, the fact commands in sequence: a 1,000-host survey
costs 1,000 tasks, not 6,000. The commands stay separate (rather than one script with
section markers) so each keeps its own exit status and stderr, which is what
``missing_reason`` needs to say *why* a fact is missing, and so mock profiles can answer
each tool's command line as recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact, Missing, missing_reason
from clusterctl.facts.model import (
    GPUInfo,
    NetDevice,
    NVLinkStatus,
    ParseWarning,
    RDMADevice,
    SoftwareStack,
    TopoMatrix,
    warnings_of,
)
from clusterctl.facts.shared import parse_shared
from clusterctl.transport.base import Transport

if TYPE_CHECKING:
    from clusterctl.fanout import FleetResult, Runner
    from clusterctl.inventory.model import Host

T = TypeVar("T")

#: Per-fact command limit: a hung nvidia-smi must not eat the host's whole deadline.
FACT_TIMEOUT_S = 30.0


class FactView(Generic[T]):
    """``HostFacts.<fact>``: the parsed fact if it was read (and is a ``kind``), else ``None``."""

    def __init__(self, name: str, kind: type[T]) -> None:
        self.name, self.kind = name, kind

    @overload
    def __get__(self, facts: None, owner: type) -> FactView[T]: ...

    @overload
    def __get__(self, facts: HostFacts, owner: type) -> T | None: ...

    def __get__(self, facts: HostFacts | None, owner: type) -> FactView[T] | T | None:
        if facts is None:
            return self
        value = facts.values.get(self.name)
        return value if isinstance(value, self.kind) else None


@dataclass(frozen=True)
class HostFacts:
    """What one host told us: parsed facts by name, and the ones we could not read."""

    values: dict[str, Any] = field(default_factory=dict)
    missing: tuple[Missing, ...] = ()
    #: Where the GPU facts came from: ``nvidia-smi`` or ``nvml``.
    gpu_source: str = "nvidia-smi"

    @property
    def warnings(self) -> dict[str, tuple[ParseWarning, ...]]:
        """Fact name -> what its parser could not read (only facts read partly)."""
        found = {name: warnings_of(value) for name, value in self.values.items()}
        return {name: w for name, w in found.items() if w}

    topology = FactView[TopoMatrix]("topology", TopoMatrix)
    gpus = FactView[tuple[GPUInfo, ...]]("gpus", tuple)
    nvlink = FactView[tuple[NVLinkStatus, ...]]("nvlink", tuple)
    rdma = FactView[tuple[RDMADevice, ...]]("rdma", tuple)
    stack = FactView[SoftwareStack]("stack", SoftwareStack)
    netdev = FactView[tuple[NetDevice, ...]]("netdev", tuple)
    #: Interface -> its IPv4 addresses (``ip -o -4 addr show``).
    ipv4 = FactView[dict[str, tuple[str, ...]]]("ipv4", dict)

def survey_facts() -> tuple[Fact[Any], ...]:
    from clusterctl.facts.survey_facts import SURVEY_FACTS

    return SURVEY_FACTS


def read_fact(transport: Transport, fact: Fact[Any]) -> tuple[Any, Missing | None]:
    """Run one fact's command and parse it; a failure becomes a ``Missing`` with the reason.

    When the command cannot give the fact, its fallbacks are tried in order (``ibstat`` for
    ``ibv_devinfo``); the reason kept is the first command's, which is the one users expect.
    """
    value, lost = _read_one(transport, fact)
    for fallback in fact.fallbacks if lost is not None else ():
        other, other_lost = _read_one(transport, fallback)
        if other_lost is None:
            return other, None
    return value, lost


def _read_one(transport: Transport, fact: Fact[Any]) -> tuple[Any, Missing | None]:
    result = transport.run(fact.command, sudo=fact.sudo, timeout=FACT_TIMEOUT_S)
    # A command that exited 0 is parsed even if its output mentions "No such file": compound
    # facts (the stack) print each absent tool's error and still carry the rest.
    if result.exit_code == 0 and result.stdout.strip():
        try:
            # Identical outputs (a fleet's alike hosts) are parsed once: parsers are pure.
            return parse_shared(fact.parse, result.stdout), None
        except ParseError as exc:
            return None, Missing(fact.name, missing_reason(result) or str(exc))
    return None, Missing(fact.name, missing_reason(result) or "no output")


GPUReader = Callable[[], "tuple[tuple[GPUInfo, ...] | None, str | None]"]


def collect_host_facts(transport: Transport, facts: Sequence[Fact[Any]] | None = None, *,
                       gpu_reader: GPUReader | None = None) -> HostFacts:
    """Read ``facts`` on one host, in order, going on past any that fail.

    ``gpu_reader`` (``--local``: NVML) replaces the ``gpus`` command when it answers; when it
    cannot (no pynvml, no driver), the nvidia-smi command is used as usual.
    """
    values: dict[str, Any] = {}
    missing: list[Missing] = []
    source = "nvidia-smi"
    # One command after another, nothing waited on between them (see ``Transport.burst``).
    with transport.burst():
        for fact in facts if facts is not None else survey_facts():
            if fact.name == "gpus" and gpu_reader is not None:
                gpus, _why = gpu_reader()
                if gpus is not None:
                    values["gpus"] = gpus
                    source = "nvml"
                    continue
            value, lost = read_fact(transport, fact)
            if lost is not None:
                missing.append(lost)
            else:
                values[fact.name] = value
    return HostFacts(values=values, missing=tuple(missing), gpu_source=source)


def collect_fleet(runner: Runner, hosts: Sequence[Host], *,
                  gpu_reader: GPUReader | None = None) -> FleetResult[HostFacts]:
    return runner.run_task(hosts, partial(collect_host_facts, gpu_reader=gpu_reader), label="survey")
