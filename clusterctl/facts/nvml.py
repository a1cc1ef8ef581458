"""GPU facts read through NVML (``pynvml``, from the nvidia-ml-py package) on the local host.

Used when clusterctl runs on the GPU host itself: it is faster than nvidia-smi and needs no
parsing. pynvml is imported inside the function (heavy, and absent on most laptops). A field
the GPU does not support comes back as ``None``, like ``[N/A]`` in nvidia-smi's CSV.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from clusterctl.facts.model import GPUInfo

T = TypeVar("T")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_gpus_via_nvml() -> tuple[tuple[GPUInfo, ...] | None, str | None]:
    """``(gpus, None)`` when NVML answered, ``(None, reason)`` when it is unavailable."""
    try:
        import pynvml
    except ImportError:
        return None, "pynvml is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return None, f"NVML is unavailable: {error}"
    except OSError as error:  # libnvidia-ml.so missing on some pynvml versions
        return None, f"NVML library could not be loaded: {error}"
    try:
        return tuple(_read_gpu(pynvml, index) for index in range(pynvml.nvmlDeviceGetCount())), None
    except pynvml.NVMLError as error:
        return None, f"NVML failed while listing GPUs: {error}"
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _read_gpu(pynvml: Any, index: int) -> GPUInfo:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)

    def optional(read: Callable[[], T]) -> T | None:
        try:
            return read()
        except pynvml.NVMLError:
            return None

    ecc = optional(lambda: pynvml.nvmlDeviceGetEccMode(handle))
    power_mw = optional(lambda: pynvml.nvmlDeviceGetPowerManagementLimit(handle))
    memory = optional(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle))
    persistence = optional(lambda: pynvml.nvmlDeviceGetPersistenceMode(handle))
    pci = optional(lambda: pynvml.nvmlDeviceGetPciInfo(handle))
    return GPUInfo(
        index=index,
        name=optional(lambda: _text(pynvml.nvmlDeviceGetName(handle))),
        uuid=optional(lambda: _text(pynvml.nvmlDeviceGetUUID(handle))),
        pci_bus_id=_text(pci.busId) if pci is not None else None,
        memory_total_mib=memory.total // (1024 * 1024) if memory is not None else None,
        driver_version=optional(lambda: _text(pynvml.nvmlSystemGetDriverVersion())),
        persistence_mode=bool(persistence) if persistence is not None else None,
        # nvmlDeviceGetEccMode returns (current, pending).
        ecc_mode=bool(ecc[0]) if ecc is not None else None,
        ecc_errors_uncorrected=optional(lambda: int(pynvml.nvmlDeviceGetTotalEccErrors(
            handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC))),
        power_limit_w=power_mw / 1000.0 if power_mw is not None else None,
        pcie_gen_current=optional(lambda: int(pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle))),
        pcie_gen_max=optional(lambda: int(pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle))),
        pcie_width_current=optional(lambda: int(pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle))),
        pcie_width_max=optional(lambda: int(pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle))),
    )
