"""``nvidia-smi --query-compute-apps`` on recorded real output, and the GPUs a pod asks for."""

from __future__ import annotations

import json

import pytest
from fixture_files import read_fixture
from refusals import refusal

from clusterctl.facts.compute_apps import parse_compute_apps
from clusterctl.facts.kube_nodes import parse_pods


def test_host_pids_names_and_memory() -> None:
    (app,) = parse_compute_apps(read_fixture("nvidia-smi-compute-apps", "nvidia-docker-1483-host-pid-name-memory.csv"))
    assert (app.pid, app.process_name, app.used_mib, app.gpu_uuid) == (
        40170, "/opt/rh/rh-python38/root/usr/bin/python3", 185, None)


def test_columns_are_read_by_the_header() -> None:
    apps = parse_compute_apps(read_fixture("nvidia-smi-compute-apps", "dcgm-exporter-94-uuid-name.csv"))
    assert [a.gpu_uuid for a in apps] == ["GPU-d0180485-9584-433c-6782-c335d5df2cb3",
                                          "GPU-777ead31-954e-837f-590f-6c4974d8e571",
                                          "GPU-777ead31-954e-837f-590f-6c4974d8e571"]
    assert {a.process_name for a in apps} == {"vgpu"} and all(a.pid is None for a in apps)


def test_an_idle_host_is_the_header_alone() -> None:
    assert parse_compute_apps(read_fixture("nvidia-smi-compute-apps", "idle-header-only.csv")) == ()


def test_odd_values() -> None:
    text = ("gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
            "GPU-1, 7, [Not Found], [N/A]\nGPU-2, 8, chrome --type=gpu-process,--flag, 12 MiB\n"
            # nvidia-smi's other no-value words (an unprivileged container's memory, as --query-gpu prints it).
            "[Unknown Error], 9, python, [Insufficient Permissions]\n")
    apps = parse_compute_apps(text)
    assert apps[0].process_name == "[Not Found]" and apps[0].used_mib is None
    assert apps[1].process_name == "chrome --type=gpu-process,--flag" and apps[1].used_mib == 12
    assert (apps[2].gpu_uuid, apps[2].pid, apps[2].used_mib) == (None, 9, None)


@pytest.mark.parametrize("text,line", [("No devices were found\n", 1), ("pid, process_name\nabc, x\n", 2),
                                       ("pid, used_gpu_memory [MiB]\n5, lots\n", 2), ("", None)])
def test_what_is_not_that_csv_names_its_line(text: str, line: int | None) -> None:
    assert refusal(parse_compute_apps, text).line == line


def test_a_pod_counts_the_gpus_its_containers_ask_for() -> None:
    pod = {"metadata": {"name": "p", "namespace": "d"}, "status": {"phase": "Running"},
           "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "4"}}},
                                   {"name": "b", "resources": {"requests": {"nvidia.com/gpu": 2}}},
                                   {"name": "c"}],
                    "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    (parsed,) = parse_pods(json.dumps({"items": [pod]}))
    assert parsed.gpus == 6


def test_columns_clusterctl_does_not_read_are_passed_over_not_refused() -> None:
    """``timestamp`` and ``gpu_name`` are --query-compute-apps fields too: refusing the header for them lost the
    process list of a GPU host whose operator had asked for them."""
    (app,) = parse_compute_apps(read_fixture("nvidia-smi-compute-apps", "rtx3090-timestamp-gpu-name-dollar-prompt.csv"))
    assert (app.pid, app.process_name, app.used_mib) == (1106871, "/app/llama-server", 23342)


def test_h200_processes_with_one_pid_nvidia_smi_cannot_name() -> None:
    apps = parse_compute_apps(read_fixture("nvidia-smi-compute-apps", "h200-8gpu-four-procs-one-not-found.csv"))
    assert [(a.pid, a.used_mib) for a in apps] == [(1328667, 130004), (1328668, 130044), (1328669, 129984),
                                                   (1758887, 58060)]
    assert apps[-1].gpu_uuid == "GPU-28780eb0-24d5-1f13-59b8-ae5c23617a72" and apps[-1].process_name == "[Not Found]"


def test_windows_memory_printed_without_its_unit() -> None:
    (app,) = parse_compute_apps(read_fixture("nvidia-smi-compute-apps", "windows-ollama-exe-memory-without-unit.csv"))
    assert (app.pid, app.process_name, app.used_mib) == (27220, "ollama.exe", 12497)
