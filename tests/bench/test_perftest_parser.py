"""perftest parser on recorded real outputs (tests/fixtures/perftest/README.md)."""

from __future__ import annotations

import pytest
from fixture_files import read_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterctl.errors import ParseError
from clusterctl.facts.perftest import MIB_PER_S_TO_GBPS, parse_perftest


def test_roce_post_list_client_in_gbits() -> None:
    result = parse_perftest(read_fixture("perftest", "write_bw-roce-postlist-gbits-client.txt"))
    assert result.test == "ib_write_bw"
    assert result.kind == "bw" and result.side == "client" and result.ok
    assert result.link_type == "Ethernet" and result.gid_index == 2 and result.device == "ib0"
    (row,) = result.bandwidth
    assert (row.size_bytes, row.iterations, row.bw_avg_gbps, row.msg_rate_mpps) == (8, 224958464, 0.48, 7.498617)


def test_bidirectional_size_sweep_keeps_every_row_and_finds_the_plateau() -> None:
    result = parse_perftest(read_fixture("perftest", "write_bw-bidir-a-sweep-gbits-indented.txt"))
    assert result.bidirectional
    assert [r.size_bytes for r in result.bandwidth] == [2**i for i in range(1, 24)]
    assert result.peak_gbps == 204.59
    assert max(r.size_bytes for r in result.bandwidth) == 8388608
    assert result.gid_index == 3


def test_latency_client_skips_cpu_frequency_warning_inside_table() -> None:
    result = parse_perftest(read_fixture("perftest", "read_lat-client-cpufreq-warning-mlx4.txt"))
    assert result.test == "ib_read_lat" and result.kind == "lat" and result.ok
    (row,) = result.latency
    assert (row.t_min_us, row.t_max_us, row.t_typical_us, row.t_avg_us, row.t_stdev_us) == (1.76, 6.12, 1.79, 1.80, 0.06)  # noqa: E501 - recorded line
    assert (row.p99_us, row.p99_9_us) == (1.88, 6.12)
    assert result.typical_latency_us == 1.79


def test_server_side_without_table_is_a_server_result_that_is_not_ok() -> None:
    result = parse_perftest(read_fixture("perftest", "read_lat-server-waiting-mlx4.txt"))
    assert result.side == "server" and result.device == "mlx4_0"
    assert not result.ok and result.latency == ()


def test_failed_connection_is_reported_as_errors() -> None:
    result = parse_perftest(read_fixture("perftest", "write_bw-couldnt-connect-client.txt"))
    assert not result.ok
    assert result.errors[0] == "Couldn't connect to 192.168.125.211:18515"
    assert any("Unable to init the socket connection" in e for e in result.errors)


def test_no_rdma_device_at_all_is_an_error() -> None:
    result = parse_perftest(read_fixture("perftest", "write_bw-no-device-detected.txt"))
    assert not result.ok and not result.bandwidth
    assert "Unable to find the Infiniband/RoCE device" in result.errors


def test_missing_device_message_is_an_error() -> None:
    # Hand-made: the message perftest prints for a wrong -d (no public recording found).
    result = parse_perftest(" IB device mlx5_9 not found\n Unable to find the Infiniband/RoCE device\n")
    assert not result.ok and result.errors[0] == "IB device mlx5_9 not found"


def test_mb_per_sec_is_mebibytes_converted_to_gbits() -> None:
    # Hand-made from the #bytes header of perftest issue #234 with one complete row.
    text = (
        "                    RDMA_Write BW Test\n"
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
        " 65536      100000           0.00               11728.47             0.187655\n"
    )
    result = parse_perftest(text)
    assert result.printed_unit == "MB/sec"
    assert result.bandwidth[0].bw_avg_gbps == pytest.approx(11728.47 * 1048576 * 8 / 1e9, rel=1e-6)
    assert pytest.approx(0.008388608) == MIB_PER_S_TO_GBPS


def test_malformed_row_is_left_out_with_a_warning_naming_its_line() -> None:
    text = read_fixture("perftest", "write_bw-roce-postlist-gbits-client.txt").replace("224958464", "22495x464")
    result = parse_perftest(text)
    assert result.bandwidth == () and not result.ok  # nothing invented from the bad row
    assert [w.line for w in result.warnings] == [18] and "22495x464" in result.warnings[0].message


def test_unrelated_text_raises_parse_error_naming_line_one() -> None:
    with pytest.raises(ParseError) as info:
        parse_perftest("hello world\n")
    assert info.value.line == 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]",
    " 65536      5000             51.05              51.04              0.097356",
    " 2       1000          1.76           6.12         1.79",
    "---------------------------------------------------------------------------------------",
    "                    RDMA_Write BW Test",
    "Couldn't connect to 10.0.0.1:18515",
    " Device         : mlx5_0",
    "12 x",
    "",
]) | st.text(max_size=40), max_size=12))
def test_parser_returns_a_result_or_raises_parse_error(lines: list[str]) -> None:
    text = "\n".join(lines)
    try:
        result = parse_perftest(text)
    except ParseError as exc:
        assert exc.line is not None and 1 <= exc.line <= max(1, len(text.splitlines()))
    else:
        assert result.ok == (not result.errors and bool(result.bandwidth or result.latency))
