"""The health parsers on real recorded outputs (sources in each fixture folder's README)."""

from __future__ import annotations

import re

import pytest
from fixture_files import fixture_dir, read_fixture

from clusterctl.errors import ParseError
from clusterctl.facts.dcgmi import parse_dcgmi_diag
from clusterctl.facts.ib_counters import parse_ib_counters
from clusterctl.facts.kernel_log import parse_kernel_log
from clusterctl.facts.lspci import parse_lspci
from clusterctl.facts.nvlink_errors import parse_nvlink_errors
from clusterctl.facts.nvsmi_query import parse_nvidia_smi_q
from clusterctl.facts.rdma import parse_rdma


def test_every_fixture_folder_names_its_sources() -> None:
    for tool in ("nvidia-smi-q", "kernel-log", "nvlink-e", "lspci", "ib-counters", "dcgmi", "ibstatus"):
        folder = fixture_dir(tool)
        readme = (folder / "README.md").read_text()
        for path in folder.iterdir():
            if path.name != "README.md":
                assert f"`{path.name}`" in readme, f"{tool}/{path.name} has no source line in its README"


# --- nvidia-smi -q -------------------------------------------------------------------------


def test_h100_sxm_full_query_reads_every_gpu_and_its_throttle_reasons() -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.161.08-8xh100-sxm.txt"))
    assert q.driver_version == "535.161.08" and len(q.gpus) == 8 and not q.warnings
    first = q.gpus[0]
    assert first.name == "NVIDIA H100 80GB HBM3" and first.bus_id == "00000000:19:00.0"
    assert first.clock_events_active == ("HW Slowdown", "HW Power Brake Slowdown")
    assert (first.pcie_gen_current, first.pcie_width_current, first.power_limit_w) == (5, 16, 700.0)
    assert first.remap_pending is False and first.remap_failure is False
    assert (first.fabric_state, first.fabric_status) == ("Completed", "Success")
    assert first.ecc.volatile_uncorrectable == 0 and first.t_limit_margin_c is not None


def test_a10_pending_row_remap_is_read() -> None:
    (gpu,) = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.129.03-a10-pcie-remap-pending.txt")).gpus
    assert gpu.name == "NVIDIA A10" and gpu.remap_pending is True and gpu.remapped_rows_uncorrectable == 4
    assert (gpu.slowdown_temp_c, gpu.shutdown_temp_c) == (98.0, 101.0)


def test_truncated_output_reads_what_is_there_and_says_gpus_are_missing() -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.183.01-h100-truncated.txt"))
    assert len(q.gpus) == 1 and q.attached_gpus == 8
    assert any("says 8 but 1" in w.message for w in q.warnings)


def test_clipped_a100_paste_keeps_the_remap_and_names_the_clipped_lines() -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "mlengineering-510.73.08-a100-remap-pending-clipped.txt"))
    (gpu,) = q.gpus
    assert gpu.name == "NVIDIA A100-SXM4-80GB" and gpu.remap_pending is True
    assert gpu.remapped_rows_correctable == 1 and gpu.ecc.volatile_correctable == 177
    assert "2 '...' elision lines" in q.warnings[0].message  # the paste's [...] lines, counted by facts.clean


def test_550_era_ecc_keys_are_summed() -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "brev-535.161.08-8xa100-40gb-d-ecc.txt"))
    assert len(q.gpus) == 8
    assert q.gpus[1].ecc.aggregate_correctable == 87 and q.gpus[1].ecc.volatile_uncorrectable == 0


def test_volta_and_consumer_gpus_have_no_row_remapper_or_ecc() -> None:
    (titan,) = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-560.35.03-titan-v.txt")).gpus
    assert titan.remap_pending is None and titan.persistence_mode is False
    rtx = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "gpud-535.154.05-8xrtx4090.txt")).gpus
    assert len(rtx) == 8 and rtx[0].ecc.volatile_uncorrectable is None


@pytest.mark.parametrize("name", ["cubecos312-580.105.06-blackwell-d-memory-performance-clipped.txt",
                                  "eksami1985-550.90.07-h200-d-clock-clipped.txt"])
def test_d_section_outputs_read_with_the_gpus_they_list(name: str) -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", name))
    assert len(q.gpus) == 1 and q.driver_version in ("580.105.06", "550.90.07")
    assert q.gpus[0].clock_events_active == ()


def test_paste_starting_inside_a_gpu_block_uses_the_bus_id_it_shows() -> None:
    q = parse_nvidia_smi_q(read_fixture("nvidia-smi-q", "bart323-throttle-reasons-pcie-gen1-clipped.txt"))
    (gpu,) = q.gpus
    assert gpu.bus_id == "00000000:b1:00.0" and (gpu.pcie_gen_current, gpu.pcie_gen_max) == (1, 4)
    assert "inside a GPU block" in q.warnings[0].message


def test_other_text_is_not_nvidia_smi_q() -> None:
    with pytest.raises(ParseError) as caught:
        parse_nvidia_smi_q("hello\nworld\n")
    assert caught.value.line == 1


# --- kernel log -------------------------------------------------------------------------------


def test_dmesg_T_xid_119_lines_with_gpu_address() -> None:
    log = parse_kernel_log(read_fixture("kernel-log", "gpud-dmesg-T-xid119-h100.log"))
    assert log.source == "dmesg" and {e.code for e in log.events} == {119}
    assert log.events[0].pci == "0000:9b:00" and log.events[0].timestamp == "Sun Feb 23 16:24:18 2025"
    assert "GSP" in log.events[0].message


def test_dbe_then_row_remap_then_contained_errors_in_order() -> None:
    log = parse_kernel_log(read_fixture("kernel-log", "gpud-dmesg-iso-xid48-63-94-h100.log"))
    assert [e.code for e in log.events][:3] == [48, 63, 94]


def test_dmesg_x_facility_prefixes_and_noise_lines() -> None:
    log = parse_kernel_log(read_fixture("kernel-log", "gpud-dmesg-x-iso-xid13-43.log"))
    codes = {e.code for e in log.events}
    assert codes == {13, 43} and log.lines > 600


def test_journal_without_gpu_events_has_none() -> None:
    log = parse_kernel_log(read_fixture("kernel-log", "gpud-journalctl-short-iso-a800.log"))
    assert log.events == () and log.source == "journalctl"


def test_nvswitch_sxid_lines() -> None:
    log = parse_kernel_log(read_fixture("kernel-log", "nvtrust124-dmesg-sxid-h100-nvswitch.log"))
    assert {(e.kind, e.code) for e in log.events} == {("sxid", 22013)} and "Non-fatal" in log.events[0].message
    (one,) = parse_kernel_log(read_fixture("kernel-log", "gpud338-dmesg-x-sxid-12028.log")).events
    assert (one.kind, one.code, one.pci) == ("sxid", 12028, "0000:84:00.0")


def test_gb200_nvlink5_and_follow_up_xids() -> None:
    log = parse_kernel_log(read_fixture("kernel-log", "gpud1160-kmsg-xid144-149-gb200.log"))
    assert [e.code for e in log.events] == [144, 149, 149]
    follow = parse_kernel_log(read_fixture("kernel-log", "ogkm1150-journal-xid45-after-149-590.log"))
    assert {e.code for e in follow.events} == {45} and len({e.pci for e in follow.events}) == 4


def test_fallen_off_the_bus_with_a_prefix_and_row_remap_xid() -> None:
    (xid79,) = parse_kernel_log(read_fixture("kernel-log", "modal-xid79-fallen-off-bus.log")).events
    assert (xid79.code, xid79.pci) == (79, "0000:c6:00")
    (xid63,) = parse_kernel_log(read_fixture("kernel-log", "mlengineering-xid63-row-remap.log")).events
    assert xid63.code == 63


def test_fallen_off_the_bus_without_an_xid_is_its_own_event() -> None:
    (event,) = parse_kernel_log("[ 812.5] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n").events
    assert event.kind == "fallen-off-bus" and event.pci == "0000:3b:00.0"


def test_a_paste_that_leaves_out_the_line_naming_the_fallen_gpu_says_so() -> None:
    log = parse_kernel_log(read_fixture("kernel-log", "DERIVED-dmesg-fallen-off-bus-first-line-elided-570.log"))
    (event,) = log.events
    assert (event.kind, event.pci, event.line) == ("fallen-off-bus", None, 3)
    elided, unnamed = log.warnings
    assert elided.line is None and "1 '...' elision line" in elided.message
    assert unnamed.line == 3 and "names which" in unnamed.message
    # The whole recording names the GPU: no warning.
    whole = read_fixture("kernel-log", "nvsentinel155-dmesg-fallen-off-bus-no-xid-570.log")
    assert parse_kernel_log(whole).warnings == ()


def test_an_xid_line_it_cannot_read_is_named_and_other_lines_are_not() -> None:
    # Hand-made: an Xid line clipped before its code, among lines of a real log (gpud-dmesg-T-xid119-h100.log).
    text = read_fixture("kernel-log", "gpud-dmesg-T-xid119-h100.log") + "[Sun Feb 23 16:30:01 2025] NVRM: Xid (PCI:00\n"
    log = parse_kernel_log(text)
    (warning,) = log.warnings
    assert warning.line == len(text.splitlines()) and warning.message.startswith("an Xid line not read")
    assert [e.code for e in log.events] == [e.code for e in parse_kernel_log(text.rsplit("\n", 2)[0]).events]


@pytest.mark.parametrize("text", ["No journal files were opened due to insufficient permissions.\n",
                                  read_fixture("kernel-log", "journalctl-k-unprivileged-252-debian12.txt"),
                                  read_fixture("kernel-log", "systemd7887-journalctl-hint-236-arch.txt")])
def test_unreadable_journal_is_said(text: str) -> None:
    log = parse_kernel_log(text)
    assert log.unreadable == text.splitlines()[0] and not log.events


# --- nvlink -e -------------------------------------------------------------------------------


def test_a100_loop_output_with_banners() -> None:
    errors = parse_nvlink_errors(read_fixture("nvlink-e", "brev-535.161.08-8xa100-40gb-loop-banners.txt"))
    assert len(errors.links) == 96 and all(link.total == 0 for link in errors.links)
    assert set(errors.links[0].counters) == {"Replay Errors", "Recovery Errors", "CRC Errors"}


def test_clipped_h100_paste_keeps_its_links_and_names_the_clip() -> None:
    errors = parse_nvlink_errors(read_fixture("nvlink-e", "mlengineering-h100-clipped.txt"))
    assert [link.link for link in errors.links] == [0, 1, 17] and "elision" in errors.warnings[0].message


def test_one_line_form_with_annotation_and_gb300() -> None:
    errors = parse_nvlink_errors(read_fixture("nvlink-e", "annotated-bad-link-one-line.txt"))
    bad = [link for link in errors.links if link.total]
    assert len(bad) == 1 and bad[0].counters == {"Replay Errors": 142, "Recovery Errors": 3, "CRC Errors": 891}
    (gb300,) = parse_nvlink_errors(read_fixture("nvlink-e", "gb300-one-link.txt")).links
    assert gb300.gpu_name == "NVIDIA GB300"


# --- lspci -vvv -------------------------------------------------------------------------------


def test_h100_server_bridges_acs_and_downgrades() -> None:
    devices = parse_lspci(read_fixture("lspci", "gpud-lspci-vvv-8xh100.txt")).devices
    assert len([d for d in devices if d.is_gpu]) == 8
    redirecting = [d for d in devices if d.acs_redirects]
    assert [d.port_type for d in redirecting] == ["Downstream Port"] * 4
    mgmt = next(d for d in devices if d.address == "0000:01:00.0")
    assert mgmt.width_downgraded and mgmt.link_status and mgmt.link_status.width == 1


def test_gb200_listing_without_details() -> None:
    devices = parse_lspci(read_fixture("lspci", "gpud-lspci-gb200.txt")).devices
    assert any(d.is_nic for d in devices) and not any(d.acs_control for d in devices)


# --- InfiniBand -------------------------------------------------------------------------------


def test_sysfs_counters_per_port() -> None:
    counters = parse_ib_counters(read_fixture("ib-counters", "gpud-sysfs-h100-grep-H.txt"))
    flapping = next(p for p in counters.ports if p.hca == "mlx5_1")
    assert counters.source == "sysfs" and flapping.counters["link_downed"] == 255 and len(counters.ports) == 9


def test_perfquery_maps_to_sysfs_names() -> None:
    counters = parse_ib_counters(read_fixture("ib-counters", "brev-perfquery-cx6-hdr.txt"))
    (port,) = counters.ports
    assert counters.source == "perfquery" and port.counters["symbol_error"] == 0
    assert port.counters["port_rcv_switch_relay_errors"] == 6


def test_ibstat_with_ports_down() -> None:
    devices = parse_rdma(read_fixture("ib-counters", "gpud-ibstat-h100-some-down.txt"))
    assert any(p.state != "PORT_ACTIVE" for d in devices for p in d.ports)


# --- dcgmi diag -------------------------------------------------------------------------------


def test_dcgm3_text_reads_tests_and_names_the_clipped_row() -> None:
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "dcgm55-3.0.4-r3-text-clipped.txt"))
    assert [r.test for r in diag.results][:2] == ["Denylist", "NVML Library"] and not diag.failed
    assert diag.warnings and diag.warnings[0].line == 17


def test_dcgm3_json_skips() -> None:
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "dcgm139-3x-json-skips-clipped.json"))
    assert diag.format == "json" and {r.status for r in diag.results} == {"Skip"} and diag.results[0].gpu == 0


def test_dcgm_error_row_is_a_failure_of_that_gpu() -> None:
    (result,) = parse_dcgmi_diag(read_fixture("dcgmi", "mlengineering-dcgm-text-error-row.txt")).results
    assert result.status == "Fail" and result.gpu == 3 and "row" in result.info


def test_dcgm4_text_metadata_and_per_gpu_rows() -> None:
    diag = parse_dcgmi_diag(read_fixture("dcgmi", "dcgm253-4.2.3-570.148.08-l40s-clipped.txt"))
    assert (diag.dcgm_version, diag.driver_version) == ("4.2.3", "570.148.08")
    assert sorted(r.gpu for r in diag.results if r.test == "software" and r.gpu is not None) == [0, 1, 2, 3]
    meta = parse_dcgmi_diag(read_fixture("dcgmi", "godcgm97-4.4.1-580.76.05-h100-clipped.txt"))
    assert (meta.dcgm_version, meta.driver_version) == ("4.4.1", "580.76.05")


@pytest.mark.parametrize("body", ['{"test_categories": 1}', '{"test_categories": [{"tests": 3}]}',
                                  '{"test_categories": [{"tests": [{"name": "memory", "results": 3}]}]}',
                                  '{"test_categories": [{"tests": [{"results": [{"status": "Fail", "errors": 3}]}]}]}'])
def test_dcgm_json_with_a_number_where_a_list_belongs_is_refused_not_a_crash(body: str) -> None:
    with pytest.raises(ParseError, match="not a list"):
        parse_dcgmi_diag('{"DCGM Diagnostic": ' + body + "}")


@pytest.mark.parametrize(("body", "said"), [
    ('{"test_categories": [3]}', "an item of 'test_categories' is a number, not an object"),
    ('{"test_categories": [{"tests": ["memory"]}]}', "an item of 'tests' is text, not an object"),
    ('{"test_categories": [{"tests": [{"name": "memory", "results": [7]}]}]}', "an item of 'results' is a number"),
    ('{"test_categories": [{"tests": [{"test_summary": "Fail"}]}]}', "'test_summary' is text, not an object"),
    ('{"test_categories": []}, "metadata": 5', "'metadata' is a number, not an object"),
    ('{"test_categories": []}, "entity_groups": [[0]]', "an item of 'entity_groups' is a list, not an object"),
    ('{"test_categories": 0}', "'test_categories' is a number, not a list"),
    ('{"test_categories": []}, "GPU Device IDs": {"0": "2330"}', "'GPU Device IDs' is an object, not a list")])
def test_dcgm_json_of_the_wrong_type_anywhere_is_refused_by_health_read_naming_the_field(body: str, said: str) -> None:
    """A test that was a string read as "all checks passed"; each such value is now refused, naming its field."""
    from clusterctl.errors import UsageError
    from clusterctl.health.read import read_outputs

    with pytest.raises(UsageError, match="dcgmi diag output could not be read: " + re.escape(said)):
        read_outputs([("diag.json", '{"DCGM Diagnostic": ' + body + "}")])


def test_a_dcgm_gpu_id_of_a_digit_int_cannot_read_is_no_gpu_not_a_crash() -> None:
    text = '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "m", "results": [{"entity_id": "²"}]}]}]}}'
    assert parse_dcgmi_diag(text).results[0].gpu is None


def test_a_dcgm_json_pasted_under_its_command_line_names_the_broken_line_of_the_paste() -> None:
    for prompt in ("$ ", "[root@gpu01 ~]# "):
        text = f'\n{prompt}dcgmi diag -r 1 -j\n{{\n  "DCGM Diagnostic": {{\n    "test_categories": [,]\n  }}\n}}\n'
        with pytest.raises(ParseError, match="not JSON") as caught:
            parse_dcgmi_diag(text)
        assert (caught.value.line, caught.value.text) == (5, '    "test_categories": [,]'), prompt


def test_dcgm3_json_names_its_gpus_device_ids_at_the_top() -> None:
    """DCGM 3.1-3.3 write ``"GPU Device IDs"`` (a list) beside the diagnostic, not under it
    (``Diag::HelperJsonBuildOutput`` in NVIDIA/DCGM 3.3.8); the serials are an object by GPU index."""
    text = ('{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "GPU Memory", '
            '"results": [{"gpu_id": "0", "status": "Pass"}, {"gpu_id": "1", "status": "Pass"}]}]}]}, '
            '"version": "3.3.1", "Driver Version Detected": "545.23.08", "GPU Device IDs": ["2330", "2330"], '
            '"GPU Device Serials": {"0": "1652922013555", "1": "1652922013556"}}')
    diag = parse_dcgmi_diag(text)
    assert (diag.dcgm_version, diag.driver_version, diag.gpu_device_ids) == ("3.3.1", "545.23.08", ("2330", "2330"))


def test_dcgm4_json_shape() -> None:
    text = ('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", '
            '"results": [{"entity_group": "GPU", "entity_id": 1, "status": "Fail", "info": "bad"}], '
            '"test_summary": {"status": "Fail"}}]}]}, "metadata": {"DCGM Version": "4.1.1"}}')
    diag = parse_dcgmi_diag(text)
    assert diag.dcgm_version == "4.1.1" and [(r.test, r.gpu, r.status) for r in diag.failed] == [("memory", 1, "Fail")]
