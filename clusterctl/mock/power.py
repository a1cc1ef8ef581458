"""A mock host's power: off (every command fails as an unreachable host would, its node goes NotReady)
and on again (a boot: what the kernel logged since the last boot is gone, a broken part's fault comes back).
``systemctl reboot`` on a mock host is a boot at once (``boot``).

Faults: a line in the kernel log since boot (``KERNEL_LOG_SINCE_BOOT``), or the state value ``fault``
(``clusterctl mock set fault=xid-79``: the demo's profiles answer ``journalctl -k`` with an Xid 79);
``hardware_fault=xid-79`` makes it come back at every boot.

The state is the host's ``values`` (``power: off``; ``boot`` switches it on again), so every process
that uses the host sees it. What drives it is outside the simulator: a BMC emulator's power changes (the tests' and the
benchmark's link to sushy-tools' fake driver), or a test directly.
"""

from __future__ import annotations

from clusterctl.mock.state import HostState

#: Kernel messages logged since the host booted: the demo profiles append it to ``journalctl -k``.
KERNEL_LOG_SINCE_BOOT = "/run/clusterctl-mock/kmsg"
#: Changes at every boot, as on Linux: what tells a remediation the host really restarted.
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def powered_off(state: HostState) -> bool:
    return state.values().get("power") == "off"


def boot(state: HostState) -> None:
    """The host starts (again): a new boot id, the kernel log since boot empty, the injected ``fault`` value
    gone unless ``hardware_fault`` keeps it (the part is still broken), each GPU's persistence mode (``pmN``)
    back to the profile's."""
    import uuid

    state.fs.remove("/run/clusterctl-mock", recursive=True)
    state.fs.write(BOOT_ID, (str(uuid.uuid4()) + "\n").encode())
    with state.edit() as data:
        values = data.setdefault("values", {})
        values.pop("power", None)
        values.pop("fault", None)
        for key in [k for k in values if k.startswith("pm") and k[2:].isdigit()]:
            values.pop(key)  # 'nvidia-smi -pm 0' lasts until the boot: nvidia-persistenced turns it on again
        if values.get("hardware_fault"):
            values["fault"] = values["hardware_fault"]
        values["boots"] = str(int(values.get("boots", "0") or 0) + 1)
