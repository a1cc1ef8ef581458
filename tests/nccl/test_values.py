"""Values as NCCL reads them: strtoll numbers, ranges, enums, lists with ^ / = prefixes."""

from __future__ import annotations

import pytest

from clusterctl.nccl.grammar import strtoll
from clusterctl.nccl.knowledge import knowledge_base
from clusterctl.nccl.lint import value_problems
from clusterctl.nccl.versions import NcclVersion

KB = knowledge_base()


def messages(name: str, value: str, version: NcclVersion | None = None) -> list[str]:
    info = KB.variable(name)
    assert info is not None
    return [p.message for p in value_problems(info, value, version)]


@pytest.mark.parametrize(("text", "expected"), [
    ("4194304", (4194304, "")), ("0x10", (16, "")), ("010", (8, "")), ("4M", (4, "M")), ("abc", (0, "abc")),
    (" -2", (-2, "")),
])
def test_strtoll_reads_like_c(text: str, expected: tuple[int, str]) -> None:
    assert strtoll(text) == expected


def test_unit_suffix_is_read_as_the_bare_number() -> None:
    info = KB.variable("NCCL_BUFFSIZE")
    assert info is not None
    [problem] = value_problems(info, "4M")
    assert problem.message == "NCCL_BUFFSIZE=4M is read as 4: NCCL parses numbers with strtoll, which stops at 'M'"
    assert problem.fix == "write the number in full: NCCL_BUFFSIZE=4194304"
    assert value_problems(info, "0x400000") == []


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
    [bad] = value_problems(KB.variable("NCCL_ALGO"), "Rings")  # type: ignore[arg-type]
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


# -- checked against NCCL's parsing code (NVIDIA/nccl @ 5067397c and its release tags) ---------


def test_level_names_are_case_sensitive_like_strcmp() -> None:
    # src/graph/paths.cc ncclGetLevel: strcmp(str, topoPathTypeStr[i]) -- "pix" matches nothing and
    # NCCL keeps its own choice (it does not start with a digit, so it is no legacy number either)
    assert messages("NCCL_NET_GDR_LEVEL", "pix") == [
        "NCCL_NET_GDR_LEVEL=pix is ignored: NCCL compares level names case-sensitively (strcmp), so 'pix' "
        "matches no level and NCCL keeps its own choice"]
    assert messages("NCCL_P2P_LEVEL", "PIX") == []


@pytest.mark.parametrize(("level", "first", "before"), [
    ("NVB", NcclVersion(2, 8, 3), NcclVersion(2, 7, 8)),    # src/graph/topo.cc topoPathTypeStr, by tag
    ("PXN", NcclVersion(2, 12, 7), NcclVersion(2, 11, 4)),
    ("C2C", NcclVersion(2, 26, 2), NcclVersion(2, 25, 1)),
    ("P2C", NcclVersion(2, 27, 3), NcclVersion(2, 26, 6)),
])
def test_level_names_exist_only_from_the_release_that_has_them(level: str, first: NcclVersion,
                                                              before: NcclVersion) -> None:
    assert messages("NCCL_P2P_LEVEL", level, first) == []
    assert messages("NCCL_NET_GDR_LEVEL", level, before) == [
        f"NCCL_NET_GDR_LEVEL={level}: NCCL knows the level {level} only from {first.major}.{first.minor} on "
        f"(this is {before}); it ignores the value and keeps its own choice"]


def test_legacy_numbers_map_through_levels_old_to_new() -> None:
    # src/graph/paths.cc: levelsOldToNew[] = {LOC, PIX, PXB, PHB, SYS, SYS}; larger numbers clamp to 5
    assert messages("NCCL_P2P_LEVEL", "2")[0].startswith("NCCL_P2P_LEVEL=2 is a legacy numeric level, read as PXB")
    assert messages("NCCL_P2P_LEVEL", "9")[0].startswith("NCCL_P2P_LEVEL=9 is a legacy numeric level, read as SYS")


def test_ib_addr_range_is_one_cidr() -> None:
    # src/transport/net_ib/connect.cc envIbAddrRange: split at the first '/', inet_pton the address,
    # strtol the mask ("8,192.168.0.0/16" -> 8); no '/' or a bad address -> the range is ignored
    assert messages("NCCL_IB_ADDR_RANGE", "10.0.0.0/8") == []
    assert messages("NCCL_IB_ADDR_RANGE", "10.0.0.0/8,192.168.0.0/16") == [
        "NCCL_IB_ADDR_RANGE=10.0.0.0/8,192.168.0.0/16 lists more than one range; NCCL reads only one CIDR: "
        "it uses 10.0.0.0/8 and silently drops the rest"]
    assert messages("NCCL_IB_ADDR_RANGE", "10.0.0.0") == [
        "NCCL_IB_ADDR_RANGE=10.0.0.0 has no '/mask': NCCL ignores the range and considers every GID"]
    assert messages("NCCL_IB_ADDR_RANGE", "10.0.0.0/40") == [
        "NCCL_IB_ADDR_RANGE=10.0.0.0/40: a /40 mask is invalid for IPv4; NCCL ignores the range"]
    assert messages("NCCL_IB_ADDR_RANGE", "fd00::/64") == []


def test_socket_threads_times_sockets_per_thread_limit() -> None:
    # src/transport/net_socket.cc: MAX_THREADS 16, MAX_SOCKETS 64 (nSocksPerThread * nThreads)
    from clusterctl.nccl.lint import lint_settings
    from clusterctl.nccl.sources import Setting

    ok = [Setting("NCCL_SOCKET_NTHREADS", "16", "f", 1), Setting("NCCL_NSOCKS_PERTHREAD", "4", "f", 2)]
    assert lint_settings(ok) == []
    too_many = [Setting("NCCL_SOCKET_NTHREADS", "8", "f", 1), Setting("NCCL_NSOCKS_PERTHREAD", "16", "f", 2)]
    assert [f.message for f in lint_settings(too_many)] == [
        "NCCL_SOCKET_NTHREADS * NCCL_NSOCKS_PERTHREAD = 8 * 16 = 128 exceeds 64"]
    assert messages("NCCL_SOCKET_NTHREADS", "17") == ["NCCL_SOCKET_NTHREADS=17 is outside the accepted range 1-16"]


def test_debug_subsystems_by_release() -> None:
    # src/debug.cc by tag: BOOTSTRAP and REG appear in 2.21, RAS in 2.24; VERSION is a level, not a subsystem
    assert messages("NCCL_DEBUG_SUBSYS", "INIT,NET,BOOTSTRAP", NcclVersion(2, 21, 5)) == []
    assert messages("NCCL_DEBUG_SUBSYS", "INIT,RAS", NcclVersion(2, 21, 5)) == [
        "NCCL_DEBUG_SUBSYS=INIT,RAS: 'RAS' is a subsystem only from NCCL 2.24 on (this is 2.21.5); NCCL ignores it"]
    assert messages("NCCL_DEBUG_SUBSYS", "init,version")[0].startswith(
        "NCCL_DEBUG_SUBSYS=init,version: 'version' is not one NCCL knows")
