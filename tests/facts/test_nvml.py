from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from clusterctl.facts.nvml import probe_gpus_via_nvml


class FakeNVMLError(Exception):
    pass


def fake_pynvml(*, init_fails: bool = False) -> types.ModuleType:
    module: Any = types.ModuleType("pynvml")
    module.NVMLError = FakeNVMLError
    module.NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    module.NVML_VOLATILE_ECC = 0
    state = {"shutdown": False}
    module.state = state

    def init() -> None:
        if init_fails:
            raise FakeNVMLError("Driver Not Loaded")

    def unsupported(*_args: object) -> None:
        raise FakeNVMLError("Not Supported")

    module.nvmlInit = init
    module.nvmlShutdown = lambda: state.update(shutdown=True)
    module.nvmlDeviceGetCount = lambda: 2
    module.nvmlDeviceGetHandleByIndex = lambda i: i
    module.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    module.nvmlDeviceGetUUID = lambda h: f"GPU-{h}"
    module.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=f"00000000:1{h}:00.0")
    module.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=81559 * 1024 * 1024)
    module.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    module.nvmlDeviceGetPersistenceMode = lambda h: 1
    module.nvmlDeviceGetEccMode = lambda h: (1, 1) if h == 0 else unsupported()
    module.nvmlDeviceGetTotalEccErrors = lambda h, kind, counter: 0
    module.nvmlDeviceGetPowerManagementLimit = lambda h: 700000
    module.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 5
    module.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 5
    module.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 16
    module.nvmlDeviceGetMaxPcieLinkWidth = lambda h: 16
    return module


def test_reads_every_gpu_and_unsupported_fields_become_none(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", module)
    gpus, reason = probe_gpus_via_nvml()
    assert gpus is not None and len(gpus) == 2 and reason is None
    first, second = gpus
    assert (first.name, first.uuid, first.pci_bus_id) == (
        "NVIDIA H100 80GB HBM3",
        "GPU-0",
        "00000000:10:00.0",
    )
    assert (first.memory_total_mib, first.power_limit_w, first.ecc_mode) == (81559, 700.0, True)
    assert (first.persistence_mode, first.pcie_gen_current, first.pcie_width_max) == (True, 5, 16)
    assert second.ecc_mode is None
    assert module.state["shutdown"]


def test_unavailable_nvml_gives_none_and_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    gpus, reason = probe_gpus_via_nvml()
    assert gpus is None and reason == "NVML is unavailable: Driver Not Loaded"


def test_missing_pynvml_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert probe_gpus_via_nvml() == (None, "pynvml is not installed (pip install nvidia-ml-py)")
