"""Every fact health's probes read reaches ``health -o json``: the host's ``facts``.

``health read`` puts each parser's whole result in ``readings`` (test_health_read_round4.py); a live
``health`` run keeps the host's ``facts`` instead, keyed for ``health compare``. Here each field of each
parsed recording is changed in turn, and the host's facts must change with it.
"""

from __future__ import annotations

from typing import Any

import pytest
from fixture_files import read_fixture
from json_holds import assert_reached_but, demo_json

from clusterctl.health.probe import HostProbe, parsers
from clusterctl.health.summary import host_facts

#: Recordings by ``HostProbe`` attribute (fixture folder, file): between them every field holds a value.
RECORDINGS = {
    "smi": [("nvidia-smi-q", "gpud-535.183.01-8xh100-sxm.txt"),
            ("nvidia-smi-q", "DERIVED-a10-remap-pending-arrow-note.txt")],
    "kernel": [("kernel-log", "gpud-dmesg-iso-xid48-63-94-h100.log"),
               ("kernel-log", "DERIVED-dmesg-fallen-off-bus-first-line-elided-570.log")],
    "nvlink": [("nvlink", "gb200-nvml-mock-issue-elided.txt")],
    "nvlink_errors": [("nvlink-e", "brev-535.161.08-8xa100-40gb-loop-banners.txt"),
                      ("nvlink-e", "DERIVED-b300-595.91.07-healthy-blackwell-counters.txt")],
    "rdma": [("ibv_devinfo", "mlx4-ddr-20g-root-prompt-ompi-users-2010.txt"),
             ("ibstat", "socket-direct-cx6-ibp2s0f0.txt")],
    "ib_counters": [("ib-counters", "gpud-sysfs-h100-grep-H.txt")],
    "pci": [("lspci", "gpud-lspci-vvv-8xh100.txt")],
    "dcgm": [("dcgmi", "dcgm253-4.2.3-570.148.08-l40s-clipped.txt"), ("dcgmi", "dcgm139-3x-json-skips-clipped.json")],
}

_WHERE = ("where in the tool's output the value was read, for naming lines in warnings and notes: a live run "
          "keeps no output for it to point into (health read's readings keep it, with the file)")
#: Fields that are not facts of the host, and why.
NOT_FACTS = {
    "GpuHealth.line": _WHERE, "KernelEvent.line": _WHERE, "NVLinkErrorCounters.line": _WHERE,
    "IBPortCounters.line": _WHERE, "PciDevice.line": _WHERE, "DcgmResult.line": _WHERE,
    "KernelEvent.message": "the rest of the log line after the Xid: kernel_events keeps each group's last line "
                           "whole ('last')",
    "NVLinkErrorCounters.gpu_name": "the GPU's name as nvlink -e heads its counters: facts.gpus holds it from "
                                    "nvidia-smi -q",
}


@pytest.mark.parametrize("attribute", sorted(RECORDINGS))
def test_every_field_a_health_probe_reads_reaches_the_hosts_facts(attribute: str) -> None:
    parse = parsers()[attribute]
    parsed = [parse(read_fixture(tool, name)) for tool, name in RECORDINGS[attribute]]

    def facts(value: Any) -> dict[str, Any]:
        return host_facts(HostProbe(**{attribute: value}))

    assert_reached_but(NOT_FACTS, parsed, facts)


def test_demo_health_json_carries_what_nvidia_smi_q_says_beside_the_verdict() -> None:
    from clirun import REPO_ROOT

    from clusterctl.facts.nvsmi_query import parse_nvidia_smi_q

    data = demo_json("health", "health.schema.json")
    facts = next(h["facts"] for h in data["hosts"] if h["host"] == "gpu-a1")
    smi = parse_nvidia_smi_q((REPO_ROOT / "inventories/demo/profiles/dgx-a100/nvidia-smi-q.txt").read_text())
    assert (facts["cuda"], facts["attached_gpus"]) == (smi.cuda_version, smi.attached_gpus) == ("12.2", 8)
    read = [(g.power_draw_w, g.memory_temperature_c, g.serial) for g in smi.gpus]
    assert [(g["power_draw_w"], g["memory_temperature_c"], g["serial"]) for g in facts["gpus"].values()] == read
    assert all(None not in gpu for gpu in read)
