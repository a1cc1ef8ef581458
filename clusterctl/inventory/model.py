"""The inventory as clusterctl sees it, whatever file format it was read from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ROLES: tuple[str, ...] = ("control-plane", "worker")
FabricType = Literal["ib", "roce", "ethernet"]
FABRIC_TYPES: tuple[str, ...] = ("ib", "roce", "ethernet")
TransportKind = Literal["ssh", "local", "mock"]
TRANSPORT_KINDS: tuple[str, ...] = ("ssh", "local", "mock")


@dataclass(frozen=True)
class Fabric:
    """What the host's RDMA/ethernet fabric should be."""

    type: FabricType | None = None
    #: Expected per-port line rate in Gb/s (200 for HDR, 400 for NDR).
    rate_gbps: float | None = None
    #: HCA device names expected on the host (mlx5_0, ...); empty = whatever is there.
    hcas: tuple[str, ...] = ()
    #: Fraction of line rate that a link within one rack must reach.
    within_rack_min: float = 0.9
    #: Fraction of line rate that a link across racks must reach.
    across_racks_min: float = 0.6
    #: Latency thresholds in microseconds.
    latency_warn_us: float = 15.0
    latency_error_us: float = 50.0
    #: Whether NIC i of every host connects to switch rail i (NCCL_CROSS_NIC=0 then keeps rings on
    #: one rail); None = not known.
    rail_optimized: bool | None = None


@dataclass(frozen=True)
class StackPin:
    """Versions the host must run; ``None`` means not pinned."""

    driver: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    kubernetes: str | None = None
    containerd: str | None = None

    def pinned(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class SSHOptions:
    key_file: str | None = None
    #: ProxyJump spec: ``[user@]host[:port]``, comma-separated for a chain.
    jump_host: str | None = None
    #: Extra ssh_config-style options (e.g. ``{"ConnectTimeout": "5"}``).
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Host:
    """One machine of the inventory, fully resolved (defaults and group vars applied)."""

    name: str
    #: Address to connect to; ``None`` means "reach it by its name" as Ansible does.
    address: str | None = None
    port: int | None = None
    user: str | None = None
    roles: tuple[str, ...] = ("worker",)
    rack: str | None = None
    groups: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    fabric: Fabric = field(default_factory=Fabric)
    ssh: SSHOptions = field(default_factory=SSHOptions)
    transport: TransportKind = "ssh"
    #: For ``transport: mock``: folder of the recorded profile (absolute path after loading).
    profile: str | None = None
    #: For ``transport: mock``: the mock cluster's state folder (files, services, packages that
    #: last between runs); absolute after loading. See ``clusterctl.inventory.mock_state`` for the default.
    mock_state: str | None = None
    stack: StackPin = field(default_factory=StackPin)
    #: The host has NVIDIA GPUs (the default). ``gpus: false`` (``clusterctl_gpus``) marks a
    #: control-plane or CPU-only node: bootstrap installs no NVIDIA Container Toolkit there, asks
    #: for no driver or GPUs, and leaves the NVIDIA phases out ("the host has no GPUs").
    gpus: bool = True
    #: Free-form variables (Ansible host/group vars that clusterctl does not interpret).
    vars: tuple[tuple[str, Any], ...] = ()
    #: Where the host was defined, for error messages: ``file:line``.
    source: str | None = None

    @property
    def connect_address(self) -> str:
        return self.address or self.name

    @property
    def is_control_plane(self) -> bool:
        return "control-plane" in self.roles


RuntimeMode = Literal["default", "runtimeclass"]
RUNTIME_MODES: tuple[str, ...] = ("default", "runtimeclass")


@dataclass(frozen=True)
class AptRepo:
    """One apt source for bootstrap's packages phase (deb822 ``.sources`` file on the host)."""

    name: str
    #: ``URIs:``; with ``bootstrap.mirror`` set, upstream hosts are rewritten to the mirror.
    url: str
    suites: tuple[str, ...] = ("/",)
    components: tuple[str, ...] = ()
    #: ASCII-armoured or binary OpenPGP key on the CONTROL machine, copied to the host.
    key_file: str | None = None
    #: Where the host fetches the key when no ``key_file`` is given (upstream default repos).
    key_url: str | None = None


@dataclass(frozen=True)
class BootstrapConfig:
    """What ``clusterctl bootstrap`` needs beyond the stack pin (inventory section ``bootstrap:``)."""

    #: Replace the upstream repositories' hosts by this base URL (air-gapped sites).
    mirror: str | None = None
    #: Extra or replacement apt sources; empty: upstream defaults from the stack pin.
    apt_repos: tuple[AptRepo, ...] = ()
    #: Use only ``apt_repos`` (no upstream default repositories at all).
    apt_repos_only: bool = False
    #: NVIDIA Container Toolkit version to install and hold.
    nvidia_container_toolkit: str = "1.20.2"
    #: The containerd package: ``containerd.io`` (Docker's repository) or ``containerd`` (distribution).
    containerd_package: str = "containerd.io"
    #: ``default``: the nvidia runtime is containerd's default; ``runtimeclass``: pods ask for it.
    runtime: RuntimeMode = "default"
    #: Generate a CDI spec with ``nvidia-ctk cdi generate`` and enable CDI in containerd.
    cdi: bool = False
    pod_subnet: str = "10.244.0.0/16"
    service_subnet: str = "10.96.0.0/12"
    #: ``host:port`` of the API server load balancer; default: the first control-plane host.
    control_plane_endpoint: str | None = None
    #: Override of the pause image; default: the one the pinned kubeadm expects.
    sandbox_image: str | None = None
    #: Hosts still on cgroup v1: kubelet 1.35+ refuses them unless its ``failCgroupV1`` is false, and
    #: kubeadm's SystemVerification preflight fails unless skipped (both needed, kubeadm says so).
    allow_cgroup_v1: bool = False
    #: Registry host -> mirror endpoints, written as ``certs.d/<host>/hosts.toml``.
    registry_mirrors: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Free space preflight wants under /var/lib (images, etcd, logs).
    min_var_lib_gib: float = 20.0
    #: Cluster phases: CNI choice, version and air-gap mirrors (checked by ``clusterctl.inventory.cluster_sections``).
    network: dict[str, Any] | None = field(default=None, hash=False)
    #: GPU add-ons: ``mode`` (device-plugin or gpu-operator), chart pins and archives, image registry.
    addons: dict[str, Any] | None = field(default=None, hash=False)
    #: Alert rules: PrometheusRule namespace and labels, temperature thresholds.
    alerts: dict[str, Any] | None = field(default=None, hash=False)
    #: Registry serving the control-plane images (kubeadm ``imageRepository``), air-gapped sites.
    image_repository: str | None = None
    #: A saved ``clusterctl survey --save`` report (absolute path on the control machine); ``--survey`` wins.
    survey: str | None = None
    #: Where ``file:line`` of the section is, for messages.
    source: str | None = None


#: The escalation chain's steps, in the order they escalate (``clusterctl.heal``).
HEAL_STEPS: tuple[str, ...] = ("restart-app", "reset-gpu", "reboot", "power-cycle")


@dataclass(frozen=True)
class HealConfig:
    """The self-healing chain's settings (inventory ``quarantine.heal``); defaults in ``clusterctl.heal.chain``."""

    #: Consecutive passes of the release gate (health and a one-host NCCL test) before a host returns.
    passes: int = 2
    #: Seconds between two passes.
    pass_interval_s: float = 2.0
    #: Health level the release gate runs.
    level: int = 1
    #: A host quarantined this many times within ``flap_window_s`` stays out for a person.
    flap_count: int = 3
    flap_window_s: float = 24 * 3600.0
    #: Finding code or alert name -> its chain of steps (over the defaults from the Xid catalogue).
    chains: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Step -> how long it may take (the host back and Ready included), seconds.
    timeouts: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class QuarantineConfig:
    """The policy of ``health --quarantine`` and ``remediate serve`` (inventory section ``quarantine:``).

    ``None`` fields take the defaults of ``clusterctl.quarantine.policy``.
    """

    #: A host count (``"3"``) or a share of the fleet (``"10%"``); None: 10%, at least one host.
    max_unavailable: str | None = None
    quarantine_codes: frozenset[str] | None = None
    drain_codes: frozenset[str] | None = None
    ignore_codes: frozenset[str] = frozenset()
    #: Alert name -> ``drain``, ``quarantine`` or ``report`` (over the receiver's defaults).
    alerts: dict[str, str] = field(default_factory=dict)
    #: The escalation chain after a quarantine (``clusterctl heal``, ``remediate serve --heal``).
    heal: HealConfig = field(default_factory=HealConfig)


@dataclass(frozen=True)
class BmcConfig:
    """How to reach the BMCs of the hosts one entry of the inventory's ``bmc:`` section names (Redfish).

    The password itself is never held here: only where to read it (a file or an environment
    variable), read when a power action needs it (``clusterctl.bmc.credentials``).
    """

    #: The host name or ``fnmatch`` pattern (``gpu-a*``) the entry is written under.
    pattern: str
    #: ``https://bmc-a1.mgmt`` or ``bmc-a1.mgmt[:port]`` (https assumed); ``{host}`` is the host's name.
    address: str
    username: str
    password_file: str | None = None
    password_env: str | None = None
    #: The Redfish ComputerSystem (``/redfish/v1/Systems/1``, or its name); None: the BMC's only one.
    system: str | None = None
    verify_tls: bool = True
    #: A CA bundle that signed the BMCs' certificates (absolute after loading).
    ca_file: str | None = None
    #: Each request to the BMC (connect and read).
    timeout_s: float = 10.0
    #: How long a power change may take to be reported by the BMC.
    power_timeout_s: float = 300.0
    #: ``file:line`` of the entry, for messages.
    source: str | None = None


@dataclass(frozen=True)
class Inventory:
    name: str
    hosts: tuple[Host, ...]
    #: group name -> host names, in inventory order.
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    source: str | None = None
    #: ``clusterctl`` or ``ansible-ini`` or ``ansible-yaml``.
    format: str = "clusterctl"
    #: Settings of ``clusterctl bootstrap`` (defaults when the inventory has no ``bootstrap:``).
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)
    #: The quarantine policy (defaults when the inventory has no ``quarantine:``).
    quarantine: QuarantineConfig = field(default_factory=QuarantineConfig)
    #: The hosts' BMCs (section ``bmc:``), in the order written: an exact host name wins over patterns.
    bmc: tuple[BmcConfig, ...] = ()

    @property
    def control_planes(self) -> list[Host]:
        return [h for h in self.hosts if h.is_control_plane]

    @property
    def first_control_plane(self) -> Host | None:
        """The host bootstrap and every day-2 command reach the cluster through: the first control-plane
        host in inventory order; ``None``: none (a Slurm-only cluster)."""
        return next(iter(self.control_planes), None)

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)
