"""Values as NCCL reads them: strtoll numbers, ranges, enums, lists with ^ / = prefixes."""

from __future__ import annotations

import pytest

from clusterctl.nccl.grammar import strtoll
from clusterctl.nccl.knowledge import knowledge_base
from clusterctl.nccl.versions import NcclVersion

KB = knowledge_base()


def messages(name: str, value: str, version: NcclVersion | None = None) -> list[str]:
    info = KB.variable(name)
    assert info is not None
    return [p.message for p in info.validate(value, version)]


@pytest.mark.parametrize(("text", "expected"), [
    ("4194304", (4194304, "")), ("0x10", (16, "")), ("010", (8, "")), ("4M", (4, "M")), ("abc", (0, "abc")),
    (" -2", (-2, "")),
])
def test_strtoll_reads_like_c(text: str, expected: tuple[int, str]) -> None:
    assert strtoll(text) == expected


def test_unit_suffix_is_read_as_the_bare_number() -> None:
    info = KB.variable("NCCL_BUFFSIZE")
    assert info is not None
    [problem] = info.validate("4M")
    assert problem.message == "NCCL_BUFFSIZE=4M is read as 4: NCCL parses numbers with strtoll, which stops at 'M'"
    assert problem.fix == "write the number in full: NCCL_BUFFSIZE=4194304"
    assert info.validate("0x400000") == []


@pytest.mark.parametrize(("value", "expected"), [
    ("8", "NCCL_NTHREADS=8 is not a multiple of 32: NCCL replaces it with 512"),
    ("1024", "NCCL_NTHREADS=1024 is above 512: NCCL replaces it with 512"),
    ("32", "NCCL_NTHREADS=32 is below 64: NCCL replaces it with 64"),
])
def test_nthreads_out_of_rule_is_replaced(value: str, expected: str) -> None:
    assert messages("NCCL_NTHREADS", value) == [expected]
    assert messages("NCCL_NTHREADS", "256") == []


def test_ranges_of_ib_settings() -> None:
    assert messages("NCCL_IB_TIMEOUT", "50") == ["NCCL_IB_TIMEOUT=50 is outside the accepted range 0-31"]
    assert messages("NCCL_IB_RETRY_CNT", "10") == ["NCCL_IB_RETRY_CNT=10 is outside the accepted range 0-7"]
    assert messages("NCCL_IB_SL", "16") == ["NCCL_IB_SL=16 is outside the accepted range 0-15"]
    assert messages("NCCL_IB_TC", "106") == []


def test_channel_maximum_depends_on_the_release() -> None:
    assert messages("NCCL_MAX_NCHANNELS", "64", NcclVersion(2, 25, 1)) == []
    assert messages("NCCL_MAX_NCHANNELS", "64", NcclVersion(2, 21, 5)) == [
        "NCCL_MAX_NCHANNELS=64 is outside the accepted range 1-32 for NCCL 2.21.5"]


def test_booleans_written_as_words_read_as_zero() -> None:
    assert messages("NCCL_P2P_DISABLE", "true") == [
        "NCCL_P2P_DISABLE=true is not 0 or 1: NCCL reads it with strtoll as 0"]


def test_debug_levels_are_case_insensitive_but_closed() -> None:
    assert messages("NCCL_DEBUG", "info") == []
    assert messages("NCCL_DEBUG", "debug") == [
        "NCCL_DEBUG=debug is not one of VERSION, WARN, INFO, ABORT, TRACE; NCCL does not recognise it"]


def test_socket_family_is_case_sensitive() -> None:
    assert messages("NCCL_SOCKET_FAMILY", "AF_INET6") == []
    assert messages("NCCL_SOCKET_FAMILY", "ipv4") == [
        "NCCL_SOCKET_FAMILY=ipv4 is not one of AF_INET, AF_INET6 (case matters); NCCL does not recognise it"]


def test_algo_grammar_with_exclusion_and_per_collective_form() -> None:
    assert messages("NCCL_ALGO", "^Tree,nvls") == []
    assert messages("NCCL_ALGO", "allreduce:tree,ring;broadcast:ring", NcclVersion(2, 24, 3)) == []
    assert messages("NCCL_ALGO", "allreduce:tree,ring;broadcast:ring", NcclVersion(2, 21, 5)) == [
        "NCCL_ALGO=allreduce:tree,ring;broadcast:ring uses the per-collective form, which NCCL reads only from "
        "2.24 on (this is 2.21.5)"]
    [bad] = KB.variable("NCCL_ALGO").validate("Rings")  # type: ignore[union-attr]
    assert bad.fix.endswith("(did you mean Ring?)")
    assert messages("NCCL_ALGO", "Collnet", NcclVersion(2, 18, 3)) == [
        "NCCL_ALGO=Collnet: 'Collnet' is read only by NCCL 2.5-2.13"]


def test_proto_grammar() -> None:
    assert messages("NCCL_PROTO", "^LL128") == []
    assert messages("NCCL_PROTO", "ucp") == [
        "NCCL_PROTO=ucp: 'ucp' is not a protocol NCCL knows (LL, LL128, Simple)"]


def test_hca_and_ifname_lists() -> None:
    assert messages("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1") == []
    assert messages("NCCL_IB_HCA", "^mlx5_2") == []
    assert messages("NCCL_IB_HCA", "mlx5_2:1,mlx5_2:1") == [
        "NCCL_IB_HCA=mlx5_2:1,mlx5_2:1 lists mlx5_2:1 more than once"]
    assert messages("NCCL_IB_HCA", "mlx5_0:one") == [
        "NCCL_IB_HCA=mlx5_0:one: 'mlx5_0:one' is not <device>[:<port>] (e.g. mlx5_0:1)"]
    assert messages("NCCL_SOCKET_IFNAME", "^docker0,lo") == []
    assert messages("NCCL_SOCKET_IFNAME", "eth0,^docker") == [
        "NCCL_SOCKET_IFNAME=eth0,^docker: '^' only works at the start of the whole list, not before docker"]


def test_levels_accept_names_and_flag_legacy_numbers() -> None:
    assert messages("NCCL_P2P_LEVEL", "NVL") == []
    # src/graph/paths.cc ncclGetLevel: any topoPathTypeStr name up to SYS, for both variables
    assert messages("NCCL_NET_GDR_LEVEL", "NVL") == []
    assert messages("NCCL_NET_GDR_LEVEL", "5") == [
        "NCCL_NET_GDR_LEVEL=5 is a legacy numeric level, read as SYS; "
        "what each number means changed between NCCL releases"]
