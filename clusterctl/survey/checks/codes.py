"""Survey finding codes: what each means and the fix to try. Stable: scripts key on them."""

from __future__ import annotations

from typing import Any

from clusterctl.findings import Finding, Severity

#: Every code a finding can have, with what it means and the fix to try. Stable: scripts key on them.
CODES: dict[str, tuple[str, str]] = {
    "HOST_UNREACHABLE": ("host could not be surveyed", "Check the address, SSH access and host key: "
                         "clusterctl -l HOST exec -- true"),
    "FACT_MISSING": ("a fact could not be read", "Run the command on the host by hand; install the tool or fix "
                     "the driver it needs."),
    "FACT_PARTIAL": ("a fact was read only in part", "The tool's output had parts clusterctl could not read (see "
                     "the warnings and their line numbers); run the command on the host and compare, and report "
                     "the output if it is a format clusterctl should know."),
    "GPU_COUNT_DIFFERS": ("fewer/more GPUs than peers", "A GPU fell off the bus or is not seen by the driver: "
                          "check dmesg for Xid 79, reseat or replace the GPU."),
    "GPU_MODEL_DIFFERS": ("GPU model differs from peers", "Survey mixed fleets per group (-l GROUP), or fix the "
                          "inventory grouping."),
    "NVLINK_MISSING": ("GPU pair without NVLink where peers have it", "Reset the GPUs / reboot; if it persists, "
                       "the NVLink bridge, baseboard or NVSwitch needs service (run nvidia-smi nvlink -s)."),
    "NVLINK_FEWER_LINKS": ("fewer NVLinks between a GPU pair than peers", "Check nvidia-smi nvlink -s and "
                           "-e (error counters); reboot, then service the baseboard."),
    "NVLINK_LANE_INACTIVE": ("NVLink lanes inactive", "Check nvidia-smi nvlink -e; a reboot or GPU reset may "
                             "retrain the lanes, else service the GPU."),
    "PCIE_DOWNTRAINED": ("PCIe link below its width/generation", "Reseat the GPU or riser, check BIOS PCIe "
                         "settings; re-check generation under load (idle GPUs downclock it)."),
    "PERSISTENCE_OFF": ("persistence mode off", "Enable nvidia-persistenced (systemctl enable --now "
                        "nvidia-persistenced) or run nvidia-smi -pm 1."),
    "ECC_ERRORS": ("uncorrected ECC errors", "Drain the host; check nvidia-smi -q -d ECC,PAGE_RETIREMENT and "
                   "reset the GPU; replace it if errors recur."),
    "NIC_DOWN": ("NIC port down or absent", "Check cable and switch port (ibstat, ibv_devinfo); for RoCE check "
                 "the link and the switch configuration."),
    "NIC_SLOW": ("NIC slower than expected", "Check the cable/transceiver and switch port speed (ibstat); a "
                 "port trained at a lower width or speed needs reseating or a new cable."),
    "GPU_NO_NEAR_NIC": ("GPU without a NIC on its PCIe switch", "GPUDirect RDMA will cross the host bridge: "
                        "expect lower inter-node bandwidth; check NIC placement."),
    "NIC_NUMA_MISMATCH": ("GPU's nearest NIC on the other NUMA node", "Traffic crosses the CPU interconnect: "
                          "move the NIC, or pin ranks to NICs on their own socket."),
    "TOPO_NO_NICS": ("topology matrix names no NICs while the host has RDMA devices", "GPU-NIC paths are unknown, "
                     "not absent: read each NIC's PCIe place (lspci -tv, /sys/class/infiniband/*/device/numa_node) "
                     "or run nvidia-smi topo -m from another driver, and set the inventory's fabric HCAs."),
    "STACK_PIN_MISMATCH": ("version differs from the inventory's stack pin", "Install the pinned version, "
                           "or update the pin in the inventory."),
    "STACK_DRIFT": ("version differs from the fleet majority", "Align the host with its peers (same "
                    "packages), or pin the version in the inventory."),
}
#: The findings that say a host lost NVLink / a NIC port (survey's table, bootstrap's topology labels).
NVLINK_LOSS_CODES = frozenset({"NVLINK_MISSING", "NVLINK_FEWER_LINKS", "NVLINK_LANE_INACTIVE"})
NIC_LOSS_CODES = frozenset({"NIC_DOWN", "NIC_SLOW"})


def finding(severity: Severity, code: str, host: str, message: str, **evidence: Any) -> Finding:
    return Finding(severity, code, message, host=host, fix=CODES[code][1], evidence=evidence)


