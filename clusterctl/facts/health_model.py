"""Typed data the health parsers return (``clusterctl health``). Pure data: no parsing or I/O here.

Kept beside ``facts/model.py`` rather than in it: these types are read only by the health
check, and a module of their own keeps them together with their field notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterctl.facts.model import ParseResult

# --- nvidia-smi -q ---------------------------------------------------------------------


@dataclass(frozen=True)
class EccCounts:
    """ECC error counts of one GPU; ``None`` where the GPU or driver reports ``N/A``.

    Ampere and newer split SRAM and DRAM; older GPUs report single-bit (correctable) and
    double-bit (uncorrectable) totals. Both are summed into the same four numbers.
    """

    volatile_correctable: int | None = None
    volatile_uncorrectable: int | None = None
    aggregate_correctable: int | None = None
    aggregate_uncorrectable: int | None = None


@dataclass(frozen=True)
class GpuHealth:
    """What ``nvidia-smi -q`` says about one GPU that bears on its health."""

    #: Position in the output (nvidia-smi lists GPUs in PCI order, which is its index order). In an output of
    #: GPUs selected with ``-i`` it is the position among those printed only: ``index_known`` is then False.
    index: int
    bus_id: str
    #: 1-based line of the ``GPU 00000000:07:00.0`` header in the input.
    line: int
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    persistence_mode: bool | None = None
    #: ``Enabled``/``Disabled`` (``None``: no MIG on this GPU).
    mig_mode: str | None = None
    ecc_mode: str | None = None
    ecc: EccCounts = field(default_factory=EccCounts)
    #: Retired pages (pre-Ampere page retirement): single-bit, double-bit, pending.
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    #: Row remapper (Ampere and newer).
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    #: Clock event (throttle) reasons reported ``Active``, as nvidia-smi names them.
    clock_events_active: tuple[str, ...] = ()
    temperature_c: float | None = None
    #: Absolute slowdown / shutdown temperatures (older drivers) ...
    slowdown_temp_c: float | None = None
    shutdown_temp_c: float | None = None
    #: ... or, on drivers that print ``GPU T.Limit Temp``, the margin to the slowdown limit.
    t_limit_margin_c: float | None = None
    memory_temperature_c: float | None = None
    memory_max_operating_temp_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replays: int | None = None
    reset_required: bool | None = None
    drain_and_reset_recommended: bool | None = None
    #: ``GPU Recovery Action`` (575+ drivers, where GPU Reset Status is deprecated): ``None`` (printed so: nothing
    #: to do), ``Reset``, ``Reboot``, ``Drain P2P``, ``Drain and Reset``.
    recovery_action: str | None = None
    #: NVLink fabric (NVSwitch systems, GB200): ``Completed`` / ``Success`` when ready.
    fabric_state: str | None = None
    fabric_status: str | None = None
    #: ``Fabric / Health`` (580+ drivers; NVML's GPU fabric health): ``Summary`` ``Healthy``, ``Unhealthy`` or
    #: ``Limited Capacity``; ``Bandwidth`` ``Full`` or ``Degraded``; the fault conditions as printed (``True`` /
    #: ``False``; ``Incorrect Configuration`` names the fault, ``None`` when there is none). ``None``: ``N/A``.
    fabric_health_summary: str | None = None
    fabric_bandwidth: str | None = None
    fabric_route_recovery_in_progress: str | None = None
    fabric_route_unhealthy: str | None = None
    fabric_access_timeout_recovery: str | None = None
    fabric_incorrect_configuration: str | None = None
    #: ``Channel Repair Pending`` / ``TPC Repair Pending`` under ``ECC Errors`` (580+ drivers, NVML's repair status).
    channel_repair_pending: bool | None = None
    tpc_repair_pending: bool | None = None
    #: False where the output shows a selection of the host's GPUs (``-i``): ``index`` is no nvidia-smi index.
    index_known: bool = True
    #: ``Minor Number`` (``/dev/nvidiaN``): the GPU's own number where the output shows a selection
    #: of GPUs (``nvidia-smi -q -i N``), whose first block is not GPU 0.
    minor_number: int | None = None
    #: What a person wrote after a value (``Pending : Yes  <-- here``): ``line N: <key>: <text>``.
    #: The value itself is read from the leading word; the rest is kept here, never lost.
    notes: tuple[str, ...] = ()
    #: Keys (``Remapped Rows/Pending``) that were printed with a value the reader could not read:
    #: such a fact is unknown, and the health check never takes it for a good one.
    unread: tuple[str, ...] = ()


@dataclass(frozen=True)
class NvidiaSmiQuery(ParseResult):
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[GpuHealth, ...]
    #: The GPUs nvidia-smi could not open, a line each instead of a block: ``0000:34:00.0: Unknown Error``.
    lost_gpus: tuple[str, ...] = ()
    #: ``Attached GPUs`` as printed (``None`` when the line was not in the input).
    attached_gpus: int | None = None


# --- kernel log ------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelEvent:
    """One line of the kernel log that matters to GPU health."""

    #: ``xid`` (NVRM Xid), ``sxid`` (NVSwitch SXid) or ``fallen-off-bus`` (no Xid on the line).
    kind: str
    #: 1-based line in the input.
    line: int
    #: The log line as printed (trimmed), the evidence shown to users.
    text: str
    #: The line's timestamp as printed (ISO from journalctl, ``[Tue Dec 1 10:00:00 2026]`` from dmesg -T).
    timestamp: str | None = None
    #: PCI address of the GPU or NVSwitch (``0000:07:00``), lower case.
    pci: str | None = None
    #: The Xid / SXid number.
    code: int | None = None
    #: What followed the code on the line (``pid=..., name=..., <message>``).
    message: str = ""


@dataclass(frozen=True)
class KernelLog(ParseResult):
    events: tuple[KernelEvent, ...]
    #: ``journalctl``, ``dmesg`` or ``unknown`` (a paste), from the lines' timestamp format.
    source: str = "unknown"
    #: Why the log could not be read (permission denied), when the output says so.
    unreadable: str | None = None
    lines: int = 0


# --- nvidia-smi nvlink -e --------------------------------------------------------------


@dataclass(frozen=True)
class NVLinkErrorCounters:
    gpu_index: int
    link: int
    #: Error counter name as nvidia-smi prints it (``Replay Errors``, ``CRC Errors``, ``Symbol Errors``...) -> value.
    counters: dict[str, int]
    gpu_name: str | None = None
    line: int | None = None
    #: Not errors (``nvlink_errors._NOT_ERRORS``): ``Tx packets``, ``FEC Errors - 0``, ``Effective BER`` (a float)...
    statistics: dict[str, int | float] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counters.values())


@dataclass(frozen=True)
class NVLinkErrors(ParseResult):
    links: tuple[NVLinkErrorCounters, ...]


# --- InfiniBand port counters -----------------------------------------------------------


@dataclass(frozen=True)
class IBPortCounters:
    hca: str
    port: int
    #: sysfs counter name (``symbol_error``, ``link_downed``...) -> value. perfquery names are mapped to these.
    counters: dict[str, int]
    line: int | None = None


@dataclass(frozen=True)
class IBCounters(ParseResult):
    ports: tuple[IBPortCounters, ...]
    #: ``sysfs`` or ``perfquery``.
    source: str = "sysfs"


# --- lspci -vvv ------------------------------------------------------------------------


@dataclass(frozen=True)
class PciLink:
    speed_gts: float | None
    width: int | None


@dataclass(frozen=True)
class PciDevice:
    #: ``0000:3b:00.0`` (domain added when lspci left it out).
    address: str
    #: ``PCI bridge``, ``3D controller``, ``Infiniband controller``...
    device_class: str
    description: str
    line: int
    link_cap: PciLink | None = None
    link_status: PciLink | None = None
    #: ``LnkSta`` said ``(downgraded)`` for speed / width.
    speed_downgraded: bool = False
    width_downgraded: bool = False
    #: ACSCtl flags: name -> enabled (``ReqRedir`` -> True), when lspci could read the capability.
    acs_control: dict[str, bool] | None = None
    #: ``Root Port``, ``Downstream Port``, ``Upstream Port``, ``Endpoint``... from the Express capability.
    port_type: str | None = None
    #: Bridges: secondary and subordinate bus numbers (the buses behind it).
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    #: ``Capabilities: <access denied>`` (lspci run without root).
    access_denied: bool = False

    @property
    def bus(self) -> int:
        return int(self.address.split(":")[1], 16)

    @property
    def is_bridge(self) -> bool:
        return self.secondary_bus is not None

    @property
    def is_gpu(self) -> bool:
        return "NVIDIA" in self.description and self.device_class in ("3D controller", "VGA compatible controller")

    @property
    def is_nic(self) -> bool:
        return self.device_class in ("Infiniband controller", "Ethernet controller", "Network controller")

    @property
    def acs_redirects(self) -> bool:
        """ACS makes peer-to-peer requests or completions go up to the root complex."""
        flags = self.acs_control or {}
        return any(flags.get(flag) for flag in ("ReqRedir", "CmpltRedir"))


@dataclass(frozen=True)
class PciDevices(ParseResult):
    devices: tuple[PciDevice, ...]


# --- dcgmi diag ------------------------------------------------------------------------


@dataclass(frozen=True)
class DcgmResult:
    """One test's result for one GPU (``gpu`` ``None``: for the whole test / host)."""

    category: str
    test: str
    #: ``Pass``, ``Fail``, ``Warn``, ``Skip``, ``Not Run``...
    status: str
    gpu: int | None = None
    info: str = ""
    line: int | None = None

    @property
    def name(self) -> str:
        """``test@GPUn``, or the test alone for a whole-host result: how the health report names the result."""
        return f"{self.test}@GPU{self.gpu}" if self.gpu is not None else self.test


@dataclass(frozen=True)
class DcgmDiag(ParseResult):
    results: tuple[DcgmResult, ...]
    dcgm_version: str | None = None
    driver_version: str | None = None
    #: ``text`` or ``json``.
    format: str = "text"
    #: ``GPU Device IDs Detected`` (PCI device ids such as ``2330``, one per GPU of the run).
    gpu_device_ids: tuple[str, ...] = ()
    #: Every other metadata row of the run as printed (``Diag Run Time`` ...): name -> value.
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def skipped(self) -> tuple[DcgmResult, ...]:
        return tuple(r for r in self.results if r.status.lower() in ("skip", "not run"))

    @property
    def failed(self) -> tuple[DcgmResult, ...]:
        return tuple(r for r in self.results if r.status.lower().startswith("fail"))
