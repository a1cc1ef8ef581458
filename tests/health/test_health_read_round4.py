"""``health read``: every fact a parser reads reaches ``-o json``, and the real pastes of round 4
(issue #36) read right: skipped DCGM tests, DDR and 10 Gb/s ports, NVLink speeds, an ECC mode that is an
error string, a note after a value, ``nvidia-smi -q -i N``, prompt lines on the first line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fixture_files import fixture_dir, read_fixture
from json_holds import json_holds

from clusterctl.facts.dcgmi import parse_dcgmi_diag
from clusterctl.facts.model import warnings_of
from clusterctl.facts.nvsmi_query import parse_nvidia_smi_q
from clusterctl.health.read import read_outputs
from clusterctl.health.report import report_from_json, report_to_json

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "clusterctl" / "schemas" / "health.schema.json")
                    .read_text())


def _read(*files: tuple[str, str]) -> tuple[dict[str, Any], list[str]]:
    """``health read`` of fixtures, as the JSON ``-o json`` prints, and the notes it prints on stderr."""
    report, notes = read_outputs([(name, read_fixture(tool, name)) for tool, name in files])
    data = json.loads(json.dumps(report_to_json(report)))
    jsonschema.validate(data, SCHEMA)
    return data, notes


def _host(data: dict[str, Any]) -> dict[str, Any]:
    (host,) = data["hosts"]
    return host


# --- every field of every parser's typed result reaches the JSON -------------------------------


#: One recording per reader ``health read`` knows (probe attribute, fixture folder, file).
READERS = [
    ("smi", "nvidia-smi-q", "gpud-535.183.01-8xh100-sxm.txt"),
    ("smi", "nvidia-smi-q", "DERIVED-a10-remap-pending-arrow-note.txt"),
    ("kernel", "kernel-log", "gpud-dmesg-iso-xid48-63-94-h100.log"),
    ("nvlink", "nvlink", "gb200-nvml-mock-issue-elided.txt"),
    ("nvlink_errors", "nvlink-e", "brev-535.161.08-8xa100-40gb-loop-banners.txt"),
    ("rdma", "ibv_devinfo", "mlx4-ddr-20g-root-prompt-ompi-users-2010.txt"),
    ("rdma", "ibstat", "socket-direct-cx6-ibp2s0f0.txt"),
    ("ib_counters", "ib-counters", "gpud-sysfs-h100-grep-H.txt"),
    ("pci", "lspci", "gpud-lspci-vvv-8xh100.txt"),
    ("dcgm", "dcgmi", "dcgm253-4.2.3-570.148.08-l40s-clipped.txt"),
    ("dcgm", "dcgmi", "dcgm139-3x-json-skips-clipped.json"),
]


@pytest.mark.parametrize(("attribute", "tool", "name"), READERS, ids=[f"{t}/{n}" for _, t, n in READERS])
def test_every_field_each_parser_reads_reaches_health_read_json(attribute: str, tool: str, name: str) -> None:
    from clusterctl.health.probe import parsers

    parse = parsers()[attribute]
    parsed = parse(read_fixture(tool, name))
    data, _ = _read((tool, name))
    reading = _host(data)["readings"][attribute]
    assert reading["file"] == name
    assert json_holds(parsed, _result_and_warnings(_host(data), attribute), attribute) > 0
    assert [w for w in _host(data)["facts"].get("parse_warnings", ()) if w["probe"] == attribute] == \
        [{"probe": attribute, **w.to_json()} for w in warnings_of(parsed)]


def _result_and_warnings(host: dict[str, Any], attribute: str) -> Any:
    """A reading's result with the parser's warnings put back from the one place they are said, the host's
    ``facts.parse_warnings`` (a live run has no readings): neither the reading nor its result repeats them."""
    reading = host["readings"][attribute]
    assert "warnings" not in reading
    if not isinstance(reading["result"], dict):  # a tuple-shaped result (ibstat's devices): walked item by item
        return reading["result"]
    assert "warnings" not in reading["result"]
    warnings = [{k: v for k, v in w.items() if k != "probe"} for w in host["facts"].get("parse_warnings", ())
                if w["probe"] == attribute]
    return {**reading["result"], "warnings": warnings}


def test_readings_survive_save_and_compare_round_trip() -> None:
    data, _ = _read(("dcgmi", "dcgm139-3x-json-skips-clipped.json"))
    report = report_from_json(data)
    assert report.hosts[0].readings == _host(data)["readings"]
    assert report_from_json({**data, "schema_version": 1}).hosts[0].verdict.value == "degraded"  # v1 still read


# --- 1. facts the checks did not report -----------------------------------------------------------


def test_skipped_dcgm_tests_reach_the_json_and_are_never_a_pass() -> None:
    data, _ = _read(("dcgmi", "dcgm139-3x-json-skips-clipped.json"))
    host = _host(data)
    statuses = {(r["test"], r["status"]) for r in host["facts"]["dcgm"]["results"]}
    assert statuses == {("PCIe", "Skip"), ("GPU Memory", "Skip"), ("Diagnostic", "Skip"), ("EUD Test", "Skip")}
    # Every test skipped: nothing was tested, so the host is not reported healthy.
    assert host["verdict"] == "degraded" and host["reason"].startswith("DCGM_DIAG_SKIPPED")


def test_dcgm_run_metadata_and_per_gpu_passes_reach_the_json() -> None:
    data, notes = _read(("dcgmi", "dcgm253-4.2.3-570.148.08-l40s-clipped.txt"))
    dcgm = _host(data)["facts"]["dcgm"]
    assert (dcgm["dcgm_version"], dcgm["driver_version"]) == ("4.2.3", "570.148.08")
    assert dcgm["gpu_device_ids"] == ["26b9", "26b9", "26b9", "26b9"]
    assert {(r["test"], r["gpu"], r["status"]) for r in dcgm["results"]} >= {("software", g, "Pass") for g in range(4)}
    assert any("line 17" in n and "memory" in n for n in notes)  # the clipped row is named, not dropped


def test_ddr_port_rate_physical_state_and_link_layer_reach_the_json() -> None:
    data, notes = _read(("ibv_devinfo", "mlx4-ddr-20g-root-prompt-ompi-users-2010.txt"))
    links = _host(data)["facts"]["ib_links"]
    assert links["mlx4_0/1"] == {"port": 1, "state": "PORT_ACTIVE", "phys_state": "LinkUp", "link_layer": "InfiniBand",
                                 "rate_gbps": 20.0, "active_width": "4X", "active_speed": "5.0 Gbps",
                                 "roce_v2_gid_index": None,
                                 "gids": [{"index": 0, "gid": "fe80:0000:0000:0000:0023:7dff:ff94:9079", "type": ""}]}
    assert links["mlx4_0/2"]["phys_state"] == "Polling" and links["mlx4_0/2"]["state"] == "PORT_DOWN"
    assert notes == []  # '# ibv_devinfo -v' on the first line is the root prompt, not an unread line


def test_a_port_at_10_among_100_is_visible_in_the_json() -> None:
    data, _ = _read(("ibstat", "socket-direct-cx6-ibp2s0f0.txt"))
    rates = {port: link["rate_gbps"] for port, link in _host(data)["facts"]["ib_links"].items()}
    assert rates["ibp2s0f0/1"] == 100 and rates["ibp2s0f1/1"] == 10


def test_each_nvlink_speed_reaches_the_json_and_an_elided_paste_is_not_links_down() -> None:
    data, notes = _read(("nvlink", "gb200-nvml-mock-issue-elided.txt"))
    host = _host(data)
    assert host["facts"]["nvlink"]["0"]["speeds_gbps"] == {str(link): 53.125 for link in range(18)}
    assert host["facts"]["nvlink"]["1"] == {"active": 2, "inactive": [], "speeds_gbps": {"0": 53.125, "1": 53.125},
                                            "gpu_name": "NVIDIA GB200",
                                            "uuid": "GPU-39ac7bce-e3d6-b426-008e-fa47897c72d5",
                                            "all_inactive": False}
    # GPU 1's other links were left out with '...': unknown, said so, and not judged as down.
    assert host["verdict"] == "healthy"
    assert any("leaves lines out" in n for n in notes)


def test_ecc_mode_that_is_an_error_string_is_kept_and_reported() -> None:
    data, _ = _read(("nvidia-smi-q", "DERIVED-gpud-535.183.01-8xh100-ecc-mode-unknown-error.txt"))
    host = _host(data)
    gpus = host["facts"]["gpus"]
    assert gpus["00000000:86:00.0"]["ecc_mode"] == "Unknown Error"
    assert gpus["00000000:53:00.0"]["ecc_mode"] == "Enabled"
    assert any(f["code"] == "GPU_ECC_MODE_UNKNOWN" and f["subject"] == "GPU 3" for f in host["findings"])
    assert host["verdict"] != "healthy"


# --- 2. a marker after a value --------------------------------------------------------------------


def test_arrow_after_pending_yes_reads_yes_and_keeps_the_note() -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "DERIVED-a10-remap-pending-arrow-note.txt"))
    (gpu,) = q.gpus
    assert gpu.remap_pending is True and gpu.unread == ()
    assert gpu.notes == ("line 142: Remapped Rows/Pending: <-- this is why the job died",)
    data, notes = _read(("nvidia-smi-q", "DERIVED-a10-remap-pending-arrow-note.txt"))
    host = _host(data)
    assert host["verdict"] == "unhealthy" and host["reason"].startswith("GPU_ROW_REMAP_PENDING")
    assert any("this is why the job died" in n for n in notes)


@pytest.mark.parametrize("written", ["Yes (see Xid 63 above)", "yes, look", "Ja"])
def test_a_value_read_only_in_part_or_not_at_all_never_makes_the_host_healthy(written: str) -> None:
    # The A10 recording with its 'Pending : Yes' line written as a person might (edited here, in the test).
    text = read_fixture("nvidia-smi-q", "gpud-535.129.03-a10-pcie-remap-pending.txt").replace(
        "Pending                           : Yes", f"Pending                           : {written}")
    (gpu,) = parse_nvidia_smi_q(text).gpus
    report, notes = read_outputs([("q.txt", text)])
    assert report.hosts[0].verdict.value != "healthy"
    if written == "Ja":
        assert gpu.remap_pending is None and gpu.unread == ("Remapped Rows/Pending",)
        assert any("line 142" in n and "Remapped Rows/Pending" in n for n in notes)
    else:
        assert gpu.remap_pending is True and gpu.notes and "line 142" in gpu.notes[0]


# --- 3. nvidia-smi -q -i N ------------------------------------------------------------------------


def test_a_recorded_q_i_0_of_an_8_gpu_host_reads_without_a_warning() -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "h800-525.105.17-q-i-0-of-8-gt-prompt.txt"))
    assert (q.attached_gpus, len(q.gpus), q.warnings) == (8, 1, ())  # the '> ' prompt line is no unread line
    (gpu,) = q.gpus
    assert (gpu.name, gpu.bus_id, gpu.minor_number) == ("NVIDIA H800", "00000000:18:00.0", 0)
    assert gpu.ecc_mode == "Disabled"  # 525 spells the section "Ecc Mode"
    data, notes = _read(("nvidia-smi-q", "h800-525.105.17-q-i-0-of-8-gt-prompt.txt"))
    assert notes == [] and _host(data)["facts"]["gpus"]["00000000:18:00.0"]["ecc_mode"] == "Disabled"


def test_one_gpu_selected_with_i_is_not_a_clipped_paste() -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "DERIVED-gpud-535.183.01-h100-q-i-3.txt"))
    assert q.attached_gpus == 8 and len(q.gpus) == 1 and q.warnings == ()
    assert q.gpus[0].bus_id == "00000000:86:00.0" and q.gpus[0].minor_number == 3
    data, notes = _read(("nvidia-smi-q", "DERIVED-gpud-535.183.01-h100-q-i-3.txt"))
    assert notes == [] and _host(data)["verdict"] == "healthy"


def test_a_block_cut_short_is_still_a_clipped_paste() -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.183.01-h100-truncated.txt"))
    assert any("says 8 but 1" in w.message and "ends early" in w.message for w in q.warnings)


# --- 7. prompts on the first line -----------------------------------------------------------------


def test_bracketed_root_prompt_on_the_first_line_is_a_prompt() -> None:
    name = "cubecos312-580.105.06-blackwell-d-memory-performance-clipped.txt"
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", name))
    assert not any("unrecognised line" in w.message for w in q.warnings)


def test_readmes_name_every_new_fixture() -> None:
    for tool in ("nvidia-smi-q", "nvlink", "ibv_devinfo", "topo"):
        readme = (fixture_dir(tool) / "README.md").read_text()
        for path in fixture_dir(tool).iterdir():
            if path.name != "README.md":
                assert f"`{path.name}`" in readme, f"{tool}/{path.name} has no source line in its README"


def test_a_note_after_a_number_is_kept_and_the_number_read() -> None:
    # The A10 recording with a person's note after its uncorrectable remapped rows (edited here, in the test).
    text = read_fixture("nvidia-smi-q", "gpud-535.129.03-a10-pcie-remap-pending.txt").replace(
        "Uncorrectable Error               : 4", "Uncorrectable Error               : 4 (was 2 on Monday)")
    (gpu,) = parse_nvidia_smi_q(text).gpus
    assert gpu.remapped_rows_uncorrectable == 4
    assert gpu.notes == ("line 141: Remapped Rows/Uncorrectable Error: (was 2 on Monday)",)
    # Units are no notes: the real recordings read without any.
    assert not any(g.notes for g in parse_nvidia_smi_q(read_fixture("nvidia-smi-q",
                                                                     "gpud-535.183.01-8xh100-sxm.txt")).gpus)


def test_a_line_inside_the_dcgmi_table_that_is_no_row_is_named() -> None:
    # The DCGM 4.2.3 recording with a person's remark pasted between two rows (edited here, in the test).
    lines = read_fixture("dcgmi", "dcgm253-4.2.3-570.148.08-l40s-clipped.txt").splitlines()
    lines.insert(10, "(GPU2 is the one that crashed)")
    diag = parse_dcgmi_diag("\n".join(lines))
    assert any(w.line == 11 and "inside the result table" in w.message for w in diag.warnings)
    assert diag.gpu_device_ids == ("26b9", "26b9", "26b9", "26b9")


def test_the_command_line_prints_the_same_readings() -> None:
    from clirun import clusterctl

    files = [("ibv_devinfo", "mlx4-ddr-20g-root-prompt-ompi-users-2010.txt"),
             ("dcgmi", "dcgm139-3x-json-skips-clipped.json"), ("nvlink", "gb200-nvml-mock-issue-elided.txt")]
    run = clusterctl("-o", "json", "health", "read", *(str(fixture_dir(t) / n) for t, n in files))
    printed = json.loads(run.stdout)
    jsonschema.validate(printed, SCHEMA)
    host = _host(printed)
    assert set(host["readings"]) == {"rdma", "dcgm", "nvlink"}
    for attribute, (tool, name) in zip(("rdma", "dcgm", "nvlink"), files, strict=True):
        from clusterctl.health.probe import parsers

        parsed = parsers()[attribute](read_fixture(tool, name))
        assert json_holds(parsed, _result_and_warnings(host, attribute), attribute) > 0


def test_the_recorded_pending_remap_with_an_arrow_makes_the_host_unhealthy() -> None:
    """The real paste of issue #36's worst case: 'Pending : Yes   <===' on a GPU whose ECC mode reads
    'Unknown Error', selected with -i from 8; with its kernel log (root prompt first)."""
    name = "kb-550.90.07-d-ecc-row-remapper-i-52-unknown-error-arrow.txt"
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", name))
    (gpu,) = q.gpus
    assert q.warnings == () and q.attached_gpus == 8 and gpu.index_known is False
    assert gpu.remap_pending is True and gpu.notes == ("line 37: Remapped Rows/Pending: <===",)
    assert gpu.ecc_mode == "Unknown Error" and gpu.remapped_rows_uncorrectable == 1
    data, notes = _read(("nvidia-smi-q", name), ("kernel-log", "kb-dmesg-grep-xid-48-63-94-root-prompt.log"))
    host = _host(data)
    assert host["verdict"] == "unhealthy" and host["reason"].startswith("GPU_ROW_REMAP_PENDING")
    codes = {(f["code"], f["subject"]) for f in host["findings"]}
    assert {("GPU_ROW_REMAP_PENDING", "GPU 00000000:52:00.0"), ("GPU_ECC_MODE_UNKNOWN", "GPU 00000000:52:00.0"),
            ("GPU_XID", "GPU 00000000:52:00.0")} <= codes
    remap = next(f for f in host["findings"] if f["code"] == "GPU_ROW_REMAP_PENDING")
    assert "nvidia-smi -r -i 00000000:52:00.0" in remap["fix"]  # the selection's position 0 is no index
    assert host["facts"]["gpus"]["00000000:52:00.0"]["index"] is None
    assert [n for n in notes if "unrecognised" in n or "says 8" in n] == []


def test_the_health_schema_names_every_field_of_an_ib_link() -> None:
    """``ib_links`` records are ``RDMAPort.to_json`` (survey's ports too): the schema lists each field it writes."""
    from clirun import REPO_ROOT

    from clusterctl.facts.model import RDMAPort

    schema = json.loads((REPO_ROOT / "clusterctl" / "schemas" / "health.schema.json").read_text())
    link = schema["$defs"]["facts"]["properties"]["ib_links"]["additionalProperties"]
    assert set(link["properties"]) == set(RDMAPort(1, "PORT_ACTIVE", None, "InfiniBand", 400.0).to_json())


def test_a_gpu_nvidia_smi_q_cannot_open_is_an_error_on_a_host_read_alone() -> None:
    data, notes = _read(("nvidia-smi-q", "DERIVED-app-610.57.04-q-d-temperature-gpu1-lost.txt"))
    (missing,) = [f for f in _host(data)["findings"] if f["code"] == "GPU_MISSING"]
    assert (missing["severity"], missing["message"]) == (
        "error", "nvidia-smi could not open GPU 0000:02:00.0: Unknown Error")
    assert _host(data)["facts"]["lost_gpus"] == ["0000:02:00.0: Unknown Error"] and notes == []


def test_nvidia_smi_q_of_a_host_whose_only_gpu_is_lost_is_read_as_such() -> None:
    # All it prints is the line (as quoted in NVIDIA/open-gpu-kernel-modules#387): no other tool prints it alone.
    report, notes = read_outputs([("q.txt", "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown "
                                            "Error\n")])
    (host,) = report.hosts
    assert [(f.code, f.message) for f in host.findings] == [
        ("GPU_MISSING", "nvidia-smi could not open GPU 0000:0B:00.0: Unknown Error")] and notes == []
