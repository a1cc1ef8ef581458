"""``lint_settings`` on real-world settings files (tests/fixtures/nccl-settings/README.md)."""

from __future__ import annotations

from fixture_files import fixture_dir, read_settings_file

from clusterctl.findings import Finding
from clusterctl.nccl.lint import lint_settings
from clusterctl.nccl.sources import Setting

FIXTURES = fixture_dir("nccl-settings")


def lint(name: str, **kwargs: object) -> list[tuple[int, str, str, str]]:
    findings = lint_settings(read_settings_file(FIXTURES / name), **kwargs)  # type: ignore[arg-type]
    return [(f.line, f.severity, f.code, f.message) for f in findings]


def by_code(findings: list[tuple[int, str, str, str]], code: str) -> list[tuple[int, str, str, str]]:
    return [f for f in findings if f[2] == code]


def test_flagai_script_removed_variable_and_bad_debug_level() -> None:
    assert lint("flagai-run_multi.sh", nccl_version="2.21.5") == [
        (2, "info", "DEFAULT_VALUE", "NCCL_IB_DISABLE=0 is NCCL's default; setting it changes nothing"),
        (3, "error", "NOT_IN_VERSION",
         "NCCL_IB_CUDA_SUPPORT is not read by NCCL 2.21.5: it was removed in 2.4 (replaced by NCCL_NET_GDR_LEVEL)"),
        (6, "error", "INVALID_VALUE",
         "NCCL_DEBUG=debug is not one of VERSION, WARN, INFO, ABORT, TRACE; NCCL does not recognise it"),
    ]


def test_removed_variable_without_a_version_is_a_warning() -> None:
    [finding] = by_code(lint("flagai-run_multi.sh"), "NOT_IN_VERSION")
    assert finding == (3, "warning", "NOT_IN_VERSION",
                       "NCCL_IB_CUDA_SUPPORT was removed in NCCL 2.4 (replaced by NCCL_NET_GDR_LEVEL); "
                       "NCCL 2.4 and later ignore it")


def test_frontier_exports_wrong_family_and_the_script_s_own_variable() -> None:
    assert lint("sc24-export_frontier_vars.sh") == [
        (5, "error", "INVALID_VALUE",
         "NCCL_SOCKET_FAMILY=ipv4 is not one of AF_INET, AF_INET6 (case matters); NCCL does not recognise it"),
        # The script's own variable: `mkdir -p $NCCL_TEMP_DIR` on line 9 reads it back (issue 25).
        (8, "info", "NOT_NCCL",
         "NCCL_TEMP_DIR is not read by NCCL or a known plugin; the file reads it back itself (line 9), "
         "so it is taken for the script's own variable"),
        (11, "info", "DEFAULT_VALUE", "NCCL_DMABUF_ENABLE=1 is NCCL's default; setting it changes nothing"),
        (12, "info", "LEGACY_VALUE",
         "NCCL_NET_GDR_LEVEL=3 is a legacy numeric level, read as PHB; "
         "what each number means changed between NCCL releases"),
    ]


def test_timeout_that_does_not_exist_and_pytorch_old_name() -> None:
    findings = lint_settings(read_settings_file(FIXTURES / "elvin-ma-run.sh"))
    assert [(f.line, f.code, f.fix) for f in findings] == [
        (6, "UNKNOWN_VARIABLE", "did you mean NCCL_IB_TIMEOUT?"),
        (8, "PYTORCH_OLD_NAME", "rename it to TORCH_NCCL_BLOCKING_WAIT"),
    ]
    assert findings[1].message == (
        "NCCL_BLOCKING_WAIT is read by PyTorch's ProcessGroupNCCL, not libnccl; PyTorch renamed it "
        "TORCH_NCCL_BLOCKING_WAIT (PyTorch 2.2) and reads the old name only with a deprecation warning")


def test_kubernetes_pytorchjob_debug_in_production_and_defaults() -> None:
    assert lint("oci-pytorchjob-etcd.yaml", nccl_version="2.21.5", fabric="roce") == [
        (29, "warning", "DEBUG_IN_PRODUCTION",
         "NCCL_DEBUG=INFO logs every rank's initialisation (and more) to stdout; "
         "it slows start-up and floods job logs"),
        (31, "info", "DEFAULT_VALUE", "NCCL_IB_SPLIT_DATA_ON_QPS=0 is NCCL's default; setting it changes nothing"),
        (41, "info", "DEFAULT_VALUE", "NCCL_IB_SL=0 is NCCL's default; setting it changes nothing"),
    ]


def test_split_data_default_changed_in_2_20() -> None:
    assert by_code(lint("oci-pytorchjob-etcd.yaml", nccl_version="2.19.4"), "DEFAULT_VALUE") == [
        (41, "info", "DEFAULT_VALUE", "NCCL_IB_SL=0 is NCCL's default; setting it changes nothing")]


def test_clean_real_slurm_script_has_no_findings() -> None:
    assert lint("coreweave-nccl-test-distributed-h100-64.slurm", nccl_version="2.21.5", fabric="ib") == []
    assert lint("nccl.conf", nccl_version="2.21.5") == []


def test_derived_slurm_script_catches_each_problem() -> None:
    assert lint("derived-h100-64-broken.slurm", nccl_version="2.21.5-1", fabric="ib") == [
        (14, "error", "HARMFUL",
         "NCCL_IB_DISABLE=1 turns off NCCL's IB verbs transport, which carries both InfiniBand and RoCE: "
         "on this InfiniBand fabric NCCL falls back to TCP sockets"),
        (15, "error", "INVALID_VALUE",
         "NCCL_BUFFSIZE=4M is read as 4: NCCL parses numbers with strtoll, which stops at 'M'"),
        (15, "error", "INVALID_VALUE", "NCCL_NTHREADS=8 is not a multiple of 32: NCCL replaces it with 512"),
        (16, "warning", "PYTORCH_OLD_NAME",
         "NCCL_ASYNC_ERROR_HANDLING is read by PyTorch's ProcessGroupNCCL, not libnccl; PyTorch renamed it "
         "TORCH_NCCL_ASYNC_ERROR_HANDLING (PyTorch 2.2) and reads the old name only with a deprecation warning"),
        (17, "warning", "DUPLICATE", "NCCL_IB_HCA is set again (first on line 13) (same value)"),
        (19, "error", "INVALID_VALUE",
         "NCCL_ALGO=Rings: 'Rings' is not an algorithm NCCL knows "
         "(Ring, Tree, CollnetDirect, CollnetChain, NVLS, NVLSTree, PAT)"),
        (19, "error", "NOT_IN_VERSION",
         "NCCL_TREE_THRESHOLD is not read by NCCL 2.21.5: it was removed in 2.5 (replaced by NCCL_ALGO)"),
    ]


def test_ib_disable_is_fine_on_ethernet_and_suspicious_next_to_ib_settings() -> None:
    assert by_code(lint("derived-h100-64-broken.slurm", fabric="ethernet"), "HARMFUL") == []
    assert by_code(lint("derived-h100-64-broken.slurm"), "HARMFUL") == [
        (14, "warning", "HARMFUL", "NCCL_IB_DISABLE=1 turns off the IB/RoCE transport, so NCCL_IB_HCA has no "
                                   "effect and NCCL uses TCP sockets between hosts")]


def test_derived_manifest_configmap_and_deployment() -> None:
    assert lint("derived-configmap-and-deployment.yaml", nccl_version="2.21.5", nvlink=True) == [
        (6, "error", "UNKNOWN_VARIABLE",
         "NCCL_SOCKET_TIMEOUT is not an NCCL variable: no NCCL release reads it, so it has no effect"),
        (7, "error", "INVALID_VALUE", "NCCL_IB_RETRY_CNT=10 is outside the accepted range 0-7"),
        (8, "warning", "PYTORCH_OLD_NAME",
         "NCCL_BLOCKING_WAIT is read by PyTorch's ProcessGroupNCCL, not libnccl; PyTorch renamed it "
         "TORCH_NCCL_BLOCKING_WAIT (PyTorch 2.2) and reads the old name only with a deprecation warning"),
        (21, "error", "HARMFUL",
         "NCCL_P2P_DISABLE=1 disables GPU peer-to-peer over NVLink/PCIe on these NVLink hosts for every "
         "communicator; intra-host traffic takes a slower path"),
        (23, "error", "INVALID_VALUE", "NCCL_IB_TIMEOUT=50 is outside the accepted range 0-31"),
        (25, "warning", "DEPRECATED",
         "NCCL_MAX_NCHANNELS is deprecated in favour of NCCL_MAX_CTAS "
         "(deprecated in 2.17; when both set the lower value wins)"),
        (25, "warning", "HARMFUL",
         "NCCL_MAX_NCHANNELS=2 caps every collective at 2 channel(s); multi-NIC and NVLink hosts need more "
         "to reach full bandwidth"),
    ]


def s(name: str, value: str, line: int = 1) -> Setting:
    return Setting(name, value, "job.env", line)


def test_too_new_for_the_release() -> None:
    [f] = lint_settings([s("NCCL_RAS_ENABLE", "0")], nccl_version="2.21.5")
    assert (f.code, f.severity, f.message) == (
        "NOT_IN_VERSION", "error", "NCCL_RAS_ENABLE is not read by NCCL 2.21.5: it first appears in the 2.24 series")
    assert lint_settings([s("NCCL_RAS_ENABLE", "0")], nccl_version="2.24.3+cuda12.6") == []


def test_deprecated_only_where_the_replacement_is_read() -> None:
    # NCCL_MIN_CTAS came in 2.17: on 2.16 NCCL_MIN_NCHANNELS is the only name, and "use NCCL_MIN_CTAS" would be wrong
    assert lint_settings([s("NCCL_MIN_NCHANNELS", "16")], nccl_version="2.16.5") == []
    [f] = lint_settings([s("NCCL_MIN_NCHANNELS", "16")], nccl_version="2.17.1")
    assert (f.code, f.fix) == ("DEPRECATED", "use NCCL_MIN_CTAS")
    [f] = lint_settings([s("NCCL_MIN_NCHANNELS", "16")])
    assert f.code == "DEPRECATED"


def test_not_nccl_names_say_who_reads_them() -> None:
    findings = lint_settings([s("NCCL_SHARP_DISABLE", "1"), s("NCCL_TESTS_SPLIT", "MOD 8", 2)])
    assert [(f.code, f.severity, f.message) for f in findings] == [
        ("PLUGIN_VARIABLE", "info", "NCCL_SHARP_DISABLE is read by NVIDIA's nccl-rdma-sharp-plugins (IBext, UCX, "
                                    "SHARP/CollNet), not by libnccl (Mellanox/nccl-rdma-sharp-plugins: "
                                    "src/sharp_plugin.c)"),
        ("NOT_NCCL", "info", "NCCL_TESTS_SPLIT is read by the nccl-tests benchmarks, not libnccl"),
    ]


def test_typo_gets_did_you_mean_and_new_torch_names_are_clean() -> None:
    [typo] = lint_settings([s("NCCL_NSOCS_PERTHREAD", "4")])
    assert (typo.code, typo.fix) == ("UNKNOWN_VARIABLE", "did you mean NCCL_NSOCKS_PERTHREAD?")
    assert lint_settings([s("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")]) == []


def test_socket_threads_times_sockets_limit() -> None:
    findings = lint_settings([s("NCCL_SOCKET_NTHREADS", "16"), s("NCCL_NSOCKS_PERTHREAD", "16", 2)])
    assert [(f.line, f.message) for f in findings] == [
        (2, "NCCL_SOCKET_NTHREADS * NCCL_NSOCKS_PERTHREAD = 16 * 16 = 256 exceeds 64")]


def test_findings_are_plain_data_for_json() -> None:
    [f] = lint_settings([s("NCCL_BUFFSIZE", "4M")])
    assert isinstance(f, Finding) and f.file == "job.env" and f.line == 1 and f.subject == "NCCL_BUFFSIZE"
