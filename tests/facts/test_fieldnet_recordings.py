"""Real outputs from public issues the readers had not seen (the "fieldnet" round): `ibdev2netdev | column -t`,
AWS EFA devices, ConnectX-5/6 Dx/7 in ibstat and plain ibv_devinfo, a SUSE root prompt, and lspci's
`Speed unknown` of a link that is down. Sources in each fixture folder's README."""

from __future__ import annotations

import pytest
from fixture_files import read_fixture

from clusterctl.errors import ParseError
from clusterctl.facts.ib_counters import parse_ib_counters
from clusterctl.facts.lspci import parse_lspci
from clusterctl.facts.netdev import parse_ibdev2netdev
from clusterctl.facts.rdma import link_rate, parse_rdma


def test_ibdev2netdev_piped_through_column_t_with_notes_reads_every_port() -> None:
    devices = parse_ibdev2netdev(read_fixture("ibdev2netdev", "column-t-annotated-cx7-ib-cx6-eth.txt"))
    assert devices.warnings == ()
    assert len(devices) == 12
    by_hca = {d.hca: d for d in devices}
    assert (by_hca["mlx5_1"].name, by_hca["mlx5_1"].up) == ("enp27s0f0np0", True)
    assert (by_hca["mlx5_10"].name, by_hca["mlx5_10"].port, by_hca["mlx5_10"].up) == ("ibp204s0", 1, False)
    assert sorted(d.hca for d in devices if d.up) == ["mlx5_1", "mlx5_7"]


def test_efa_ibstat_with_empty_fields_and_a_suse_prompt() -> None:
    devices = parse_rdma(read_fixture("ibstat", "efa-0-flat-indent-empty-ca-type.txt"))
    assert devices.warnings == ()  # 'ip-172-30-4-150:~ # ibstat' is a prompt, not an unreadable line
    (efa,) = devices
    (port,) = efa.ports
    assert (efa.hca, efa.ca_type, efa.fw_version) == ("efa_0", None, None)  # printed empty: no value, not ""
    assert (port.state, port.phys_state, port.rate_gbps, port.link_layer) == ("PORT_ACTIVE", "LinkUp", 100.0, "Unknown")
    assert link_rate(port) == 100.0


def test_efa_ibv_devinfo_link_layer_as_printed_and_no_rate_without_v() -> None:
    (old,) = parse_rdma(read_fixture("ibv_devinfo", "efa-0-link-layer-infiniband-tabs.txt"))
    (new,) = parse_rdma(read_fixture("ibv_devinfo", "efa-rdmap16s27-link-layer-unspecified.txt"))
    # rdma-core before PR 884 printed EFA's link layer as InfiniBand; later ones print Unspecified.
    assert [(d.hca, d.ports[0].link_layer) for d in (old, new)] == [("efa_0", "InfiniBand"),
                                                                    ("rdmap16s27", "Unspecified")]
    assert all(d.ports[0].state == "PORT_ACTIVE" and d.ports[0].rate_gbps is None for d in (old, new))
    assert old.node_guid == "0000:0000:0000:0000" and old.fw_version == "0.0.0.0"


def test_plain_ibv_devinfo_recordings_port_down_and_roce_bond() -> None:
    down = parse_rdma(read_fixture("ibv_devinfo", "plain-cx7-port-down-container-prompt-excerpt.txt"))
    assert down.warnings == ()
    (cx7,) = down
    assert (cx7.hca, cx7.board_id, cx7.fw_version) == ("mlx5_0", "MT_0000000838", "28.39.2048")
    assert (cx7.ports[0].state, cx7.ports[0].link_layer, link_rate(cx7.ports[0])) == ("PORT_DOWN", "InfiniBand", None)
    (bond,) = parse_rdma(read_fixture("ibv_devinfo", "plain-cx5-bond-roce-tabs-mtu-1024.txt"))
    assert (bond.hca, bond.ports[0].state, bond.ports[0].link_layer) == ("mlx5_bond_0", "PORT_ACTIVE", "Ethernet")


def test_ibstat_ndr_400_roce_100_and_a_partial_output_ended_by_ibpanic() -> None:
    (ndr,) = parse_rdma(read_fixture("ibstat", "cx7-ndr-400-ib-first-ca-excerpt.txt"))
    assert (ndr.ca_type, ndr.ports[0].rate_gbps, ndr.ports[0].link_layer) == ("MT4129", 400.0, "InfiniBand")
    roce = parse_rdma(read_fixture("ibstat", "cx6dx-roce-2port-ethernet-rate-100.txt"))
    assert [(d.hca, d.ca_type, d.ports[0].link_layer, link_rate(d.ports[0])) for d in roce] == [
        ("mlx5_0", "MT4125", "Ethernet", 100.0), ("mlx5_1", "MT4125", "Ethernet", 100.0)]
    partial = parse_rdma(read_fixture("ibstat", "gpud-partial-elided-ibpanic-mlx5_8.txt"))
    assert [d.hca for d in partial] == ["mlx5_7"] and partial[0].ports[0].rate_gbps == 200.0
    # The author's '...' for a value is no card model nor firmware: unknown, each line named.
    assert (partial[0].ca_type, partial[0].fw_version, partial[0].node_guid) == (None, None, None)
    assert {w.line for w in partial.warnings if "left out of the paste" in w.message} == {4, 6, 8, 9, 17, 18}
    # The '...' line above the first device: devices may be missing from the paste.
    assert any(w.line is None and "leaves lines out" in w.message for w in partial.warnings)
    ibpanic = partial.warnings[-1]  # the device ibstat could not read is named, not dropped
    assert "mlx5_8" in ibpanic.message and ibpanic.line == 20


def test_lspci_speed_unknown_link_keeps_its_width() -> None:
    (port,) = parse_lspci(read_fixture("lspci", "pmc-sierra-downstream-port-empty-slot-speed-unknown.txt")).devices
    assert port.port_type == "Downstream Port"
    assert port.link_cap is not None and (port.link_cap.speed_gts, port.link_cap.width) == (16.0, 16)
    # An empty slot: the link is down, 'Speed unknown, Width x0'; read, not dropped.
    assert port.link_status is not None and (port.link_status.speed_gts, port.link_status.width) == (None, 0)
    assert not port.width_downgraded and port.acs_control and not any(port.acs_control.values())


def test_lspci_link_down_marked_downgraded_reads_as_a_downgraded_width() -> None:
    # The LnkSta line is real (an OpenShift worker's `lspci -vvv | grep downgraded`, see the lspci README); the
    # device header above it is a hand-made stand-in, as grep left none.
    text = ("3b:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
            "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported\n"
            "\t\tLnkSta:\tSpeed unknown (downgraded), Width x0 (downgraded)\n")
    (gpu,) = parse_lspci(text).devices
    assert gpu.link_status is not None and gpu.link_status.width == 0 and gpu.link_status.speed_gts is None
    assert gpu.speed_downgraded and gpu.width_downgraded


def test_perfquery_extended_keeps_the_lid_and_reads_hex_selectors_as_output() -> None:
    counters = parse_ib_counters(read_fixture("ib-counters", "perfquery-x-extended-rhel75-lid10.txt"))
    (port,) = counters.ports
    assert (counters.source, port.hca, port.port) == ("perfquery", "lid-10", 1)  # was 'lid-?': the LID was lost
    assert port.counters["link_downed"] == 0 and port.counters["VL15_dropped"] == 0 and port.counters["QP1Dropped"] == 0
    assert "CounterSelect" not in port.counters and "CounterSelect2" not in port.counters
    # 'CounterSelect:....0x0000' is perfquery's own line, not an unreadable one; only the '# perfquery' prompt
    # line (kept, as the next line starts with '#' too) is named.
    assert [w.line for w in counters.warnings] == [1]


def test_a_hex_value_on_a_row_other_than_a_selector_is_a_named_line_not_a_crash() -> None:
    """Only the selectors are printed in hex; a hex value on another row (an edited paste, a field perfquery
    added) costs that row, with a warning naming it, instead of stopping the whole read."""
    text = read_fixture("ib-counters", "perfquery-x-extended-rhel75-lid10.txt").replace(
        "PortRcvData:.....................0", "PortRcvData:.....................0x1f")
    counters = parse_ib_counters(text)
    (port,) = counters.ports
    assert "PortRcvData" not in port.counters and port.counters["PortXmitData"] == 0
    assert [w.line for w in counters.warnings] == [1, 6] and "0x1f" in counters.warnings[1].message


def test_perfquery_header_wrapped_by_a_mail_client_costs_one_named_line() -> None:
    counters = parse_ib_counters(read_fixture("ib-counters", "perfquery-e-x-header-wrapped-by-mail-excerpt.txt"))
    (port,) = counters.ports
    assert (port.hca, port.port) == ("lid-21", 1)
    assert port.counters["PortRcvData"] == 2341975277576 and port.counters["symbol_error"] == 0
    assert [(w.line, "0x0000000)" in w.message) for w in counters.warnings] == [(2, True)]


def test_brev_perfquery_lid_is_read_too() -> None:
    (port,) = parse_ib_counters(read_fixture("ib-counters", "brev-perfquery-cx6-hdr.txt")).ports
    assert (port.hca, port.port) == ("lid-1", 0)


def test_ibstat_hdr_port_and_a_disabled_port_at_rate_10() -> None:
    devices = parse_rdma(read_fixture("ibstat", "cx6-hdr-200-and-disabled-port-rate-10-tabs-excerpt.txt"))
    assert devices.warnings == ()
    up, down = devices
    assert (up.hca, up.ca_type, up.ports[0].rate_gbps, link_rate(up.ports[0])) == ("mlx5_4", "MT4123", 200.0, 200.0)
    assert (down.ports[0].state, down.ports[0].phys_state, down.ports[0].rate_gbps) == ("PORT_DOWN", "Disabled", 10.0)
    assert link_rate(down.ports[0]) is None  # a down port's 'Rate: 10' is no speed


def test_ibdev2netdev_v_of_an_azure_sriov_vf_with_a_hyperv_pci_domain() -> None:
    devices = parse_ibdev2netdev(read_fixture("ibdev2netdev", "v-azure-nc24rs-v3-cx3-vf-hyperv-domain.txt"))
    assert devices.warnings == ()
    (vf,) = devices
    # The IB port is ACTIVE; the IPoIB interface on it is Down, which is what 'up' says.
    assert (vf.hca, vf.port, vf.name, vf.up) == ("mlx4_0", 1, "ib0", False)


def test_ibstatus_output_is_refused_naming_the_outputs_to_paste_instead() -> None:
    """A real ``ibstatus`` paste where ibstat / ibv_devinfo is read: not "no 'hca_id' device block", but what
    it is and which command's output to paste, on the line that shows it."""
    with pytest.raises(ParseError) as refused:
        parse_rdma(read_fixture("ibstatus", "4x-edr-4-hca-ucx-guide.txt"))
    assert refused.value.line == 1 and "ibstatus output" in refused.value.reason
    assert "ibstat or ibv_devinfo -v" in refused.value.reason and "hca_id" not in refused.value.reason
