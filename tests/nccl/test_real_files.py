"""nccl lint on real settings files (sources in tests/fixtures/nccl-settings/README.md).

Each class of the round-2 issue is shown on a real file where one exists: plugin variables
reported as info with the plugin that reads them, every format read with findings on the
physical line they are written on, and nothing refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import clusterctl
from fixture_files import fixture_dir, read_settings_file

from clusterctl.nccl.lint import Finding, lint_settings
from clusterctl.nccl.sources import read_settings

FIXTURES = fixture_dir("nccl-settings")


def findings(name: str, **kwargs: object) -> list[Finding]:
    return lint_settings(read_settings_file(FIXTURES / name), **kwargs)  # type: ignore[arg-type]


def problems(name: str) -> list[tuple[int, str, str, str]]:
    """Everything but the plugin notes: (line, severity, code, variable)."""
    return [(f.line, f.severity, f.code, f.subject) for f in findings(name) if f.code != "PLUGIN_VARIABLE"]


def plugin_notes(name: str) -> dict[str, tuple[int, str]]:
    return {f.subject: (f.line, f.message) for f in findings(name) if f.code == "PLUGIN_VARIABLE"}


# -- plugins -----------------------------------------------------------------------------------


def test_google_tcpxo_profile_plugin_variables_are_info_not_unknown() -> None:
    # Google's own recommended TCPXO environment: every NCCL_FASTRAK_*, the shim and the tuner
    # variables are known, with the plugin that reads them and the source file
    notes = plugin_notes("tcpxo-nccl-env-profile.sh")
    assert set(notes) == {
        "NCCL_FASTRAK_IFNAME", "NCCL_FASTRAK_CTRL_DEV", "NCCL_FASTRAK_NUM_FLOWS", "NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL",
        "NCCL_FASTRAK_USE_SNAP", "NCCL_FASTRAK_USE_LLCM", "NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING",
        "NCCL_TUNER_CONFIG_PATH", "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE",
        "NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS"}
    assert notes["NCCL_FASTRAK_NUM_FLOWS"] == (57, (
        "NCCL_FASTRAK_NUM_FLOWS is read by Google's GPUDirect-TCPXO (FasTrak) network plugin, not by libnccl "
        "(google/nccl-plugin-gpudirect-tcpxo: tcpdirect_plugin/fastrak_offload/const_params.h)"))
    # the gIB/TCPXO tuner's variable is not "corrected" to NCCL's example tuner's NCCL_TUNER_CONFIG_FILE
    assert notes["NCCL_TUNER_CONFIG_PATH"] == (66, (
        "NCCL_TUNER_CONFIG_PATH is read by Google's tuner plugin libnccl-tuner.so, not by libnccl "
        "(google/nccl-plugin-gpudirect-tcpxo: tcpxo_scripts/nccl-env-profile.sh)"))
    # what is left is a real finding: NCCL_MIN_NCHANNELS was renamed NCCL_MIN_CTAS in 2.17
    assert problems("tcpxo-nccl-env-profile.sh") == [(52, "warning", "DEPRECATED", "NCCL_MIN_NCHANNELS")]


def test_gke_tcpx_configmap_script_plugin_variables() -> None:
    notes = plugin_notes("gke-tcpx-nccl-config.yaml")
    assert set(notes) == {
        "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "NCCL_GPUDIRECTTCPX_CTRL_DEV", "NCCL_DYNAMIC_CHUNK_SIZE",
        "NCCL_GPUDIRECTTCPX_TX_BINDINGS", "NCCL_GPUDIRECTTCPX_RX_BINDINGS",
        "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS"}
    assert notes["NCCL_DYNAMIC_CHUNK_SIZE"] == (45, (
        "NCCL_DYNAMIC_CHUNK_SIZE is read by Google's GPUDirect-TCPX network plugin, not by libnccl "
        "(google/nccl-plugin-gpudirecttcpx: src/net_tcpx.cc)"))
    assert problems("gke-tcpx-nccl-config.yaml") == [(49, "info", "DEFAULT_VALUE", "NCCL_BUFFSIZE")]


def test_aws_mpijob_efa_settings_are_the_plugins_not_unknown() -> None:
    notes = plugin_notes("aws-nccl-tests-mpijob.yaml")
    assert notes["FI_PROVIDER"][0] == 40
    assert notes["FI_PROVIDER"][1].startswith(
        "FI_PROVIDER is a libfabric setting that AWS's aws-ofi-nccl network plugin (libfabric, EFA) documents, "
        "not an NCCL variable (aws/aws-ofi-nccl: doc/efa-env-var.md")
    assert notes["FI_EFA_FORK_SAFE"][0] == 42
    assert problems("aws-nccl-tests-mpijob.yaml") == [(44, "warning", "DEBUG_IN_PRODUCTION", "NCCL_DEBUG")]


def test_plugin_values_are_checked_as_the_plugin_reads_them() -> None:
    from clusterctl.nccl.sources import Setting

    def check(name: str, value: str) -> list[tuple[str, str]]:
        return [(f.severity, f.message) for f in lint_settings([Setting(name, value, "f", 1)])
                if f.code != "PLUGIN_VARIABLE"]

    # tcpdirect_plugin/fastrak_offload/const_params.h: NUM_FLOWS in [1, 8]; params.cc keeps the default otherwise
    assert check("NCCL_FASTRAK_NUM_FLOWS", "16") == [
        ("warning", "NCCL_FASTRAK_NUM_FLOWS=16 is outside 1-8: the TCPXO plugin ignores it and keeps its default (2)")]
    # include/nccl_ofi_param_impl.h: enum words compared with strcasecmp, a bad one is EINVAL
    assert check("OFI_NCCL_PROTOCOL", "rdma") == []
    assert check("OFI_NCCL_PROTOCOL", "rma") == [
        ("error", "OFI_NCCL_PROTOCOL=rma is not one of SENDRECV, RDMA: aws-ofi-nccl fails to initialise (EINVAL)")]
    assert check("OFI_NCCL_DISABLE_DMABUF", "true") == []


def test_a_name_under_a_plugin_prefix_is_a_typo_of_that_plugin() -> None:
    from clusterctl.nccl.sources import Setting

    [f] = lint_settings([Setting("NCCL_FASTRAK_NUM_FLOW", "2", "f", 1)])
    assert (f.severity, f.code, f.fix) == ("error", "UNKNOWN_VARIABLE", "did you mean NCCL_FASTRAK_NUM_FLOWS?")
    assert f.message == ("NCCL_FASTRAK_NUM_FLOW is not a variable Google's GPUDirect-TCPXO (FasTrak) network "
                         "plugin reads (google/nccl-plugin-gpudirect-tcpxo), and libnccl does not read it either")
    # a name nobody reads is still an error with a did-you-mean
    [g] = lint_settings([Setting("NCCL_SOKCET_NTHREADS", "4", "f", 1)])
    assert (g.severity, g.fix) == ("error", "did you mean NCCL_SOCKET_NTHREADS?")


# -- formats -----------------------------------------------------------------------------------


def test_dockerfile_env_both_forms_and_build_args() -> None:
    settings = read_settings_file(FIXTURES / "aws-nccl-tests.Dockerfile")
    # 'ENV A=1 \\ B=2' over five lines: NCCL_SOCKET_IFNAME is on line 131, where it is written
    assert [(s.name, s.value, s.line) for s in settings if s.origin != "build-arg"] == [
        ("NCCL_SOCKET_IFNAME", "^docker,lo,veth_def_agent,eth", 131)]
    # ARG NCCL_VERSION=v2.23.4-1 is a build argument, never seen by NCCL: no "unknown variable"
    assert findings("aws-nccl-tests.Dockerfile") == []


def test_dockerfile_legacy_env_run_heredoc_and_exec_cmd() -> None:
    # hand-made from the patterns above: ENV NAME value, a RUN heredoc writing /etc/nccl.conf, CMD exec form
    text = ("FROM nvcr.io/nvidia/pytorch:24.05-py3\n"
            "ENV NCCL_DEBUG WARN\n"
            "# comment inside nothing\n"
            "RUN <<EOF cat > /etc/nccl.conf\n"
            "NCCL_IB_HCA==mlx5_0:1\n"
            "NCCL_NET_GDR_LEVEL=pix\n"
            "EOF\n"
            "RUN echo \"NCCL_SOCKET_IFNAME=eth0\" >> /etc/nccl.conf\n"
            "CMD [\"bash\", \"-c\", \"NCCL_ALGO=Ring torchrun train.py\"]\n")
    settings = read_settings(text, name="Dockerfile")
    assert [(s.name, s.value, s.line) for s in settings] == [
        ("NCCL_DEBUG", "WARN", 2), ("NCCL_IB_HCA", "=mlx5_0:1", 5), ("NCCL_NET_GDR_LEVEL", "pix", 6),
        ("NCCL_SOCKET_IFNAME", "eth0", 8), ("NCCL_ALGO", "Ring", 9)]


def test_mpijob_block_args_with_mpirun_x_name_passthrough() -> None:
    settings = read_settings_file(FIXTURES / "gke-tcpxo-mpi-nccl-test.yaml")
    exported = {s.name: s.line for s in settings if s.origin == ""}
    forwarded = {s.name: s.line for s in settings if s.origin == "passthrough"}
    assert exported["NCCL_DEBUG"] == 40 and exported["NCCL_NET_GDR_LEVEL"] == 62
    # '-x NCCL_DEBUG \\' inside the block scalar: each on its own physical line
    assert forwarded["NCCL_DEBUG_SUBSYS"] == 72 and forwarded["NCCL_DEBUG"] == 73
    assert forwarded["NCCL_TESTS_SPLIT_MASK"] == 96
    # forwarding a variable set above is not a duplicate; the real problems remain
    assert problems("gke-tcpxo-mpi-nccl-test.yaml") == [
        (39, "warning", "INVALID_VALUE", "NCCL_DEBUG_SUBSYS"),
        (40, "warning", "DEBUG_IN_PRODUCTION", "NCCL_DEBUG"),
        (55, "warning", "DEPRECATED", "NCCL_MIN_NCHANNELS"),
        (63, "info", "NOT_NCCL", "NCCL_TESTS_SPLIT_MASK")]
    # src/debug.cc: VERSION is a level of NCCL_DEBUG, not a subsystem of NCCL_DEBUG_SUBSYS
    [subsys] = [f for f in findings("gke-tcpxo-mpi-nccl-test.yaml") if f.subject == "NCCL_DEBUG_SUBSYS"]
    assert "'VERSION' is not one NCCL knows" in subsys.message


def test_mpijob_exec_form_args_one_word_per_item() -> None:
    settings = read_settings_file(FIXTURES / "aws-nccl-tests-mpijob.yaml")
    assert [(s.name, s.value, s.line) for s in settings] == [
        ("FI_PROVIDER", "efa", 40), ("FI_EFA_FORK_SAFE", "1", 42), ("NCCL_DEBUG", "INFO", 44),
        ("NCCL_BUFFSIZE", "8388608", 46), ("NCCL_P2P_NET_CHUNKSIZE", "524288", 48),
        ("NCCL_TUNER_PLUGIN", "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu/libnccl-ofi-tuner.so", 50)]


def test_mpirun_x_with_values_on_continued_lines() -> None:
    settings = read_settings_file(FIXTURES / "tcpxo-run-nccl-fastrak.sh")
    lines = {s.name: s.line for s in settings}
    assert lines["NCCL_FASTRAK_CTRL_DEV"] == 40 and lines["NCCL_BUFFSIZE"] == 56
    assert lines["NCCL_TESTS_SPLIT_MASK"] == 63
    assert problems("tcpxo-run-nccl-fastrak.sh") == [
        (59, "warning", "DEBUG_IN_PRODUCTION", "NCCL_DEBUG"), (63, "info", "NOT_NCCL", "NCCL_TESTS_SPLIT_MASK")]


def test_docker_run_e_on_a_continued_line() -> None:
    settings = read_settings_file(FIXTURES / "bert-launch_docker_dist.sh")
    assert [(s.name, s.value, s.line) for s in settings] == [
        ("NCCL_DEBUG", "INFO", 4), ("NCCL_SOCKET_IFNAME", "^br,lo", 4)]
    text = "docker run --rm -e NCCL_DEBUG -e NCCL_IB_HCA=mlx5 --env=NCCL_ALGO=Tree img\n"
    found = read_settings(text, "shell")
    assert [(s.name, s.value, s.origin) for s in found] == [
        ("NCCL_DEBUG", "", "passthrough"), ("NCCL_IB_HCA", "mlx5", ""), ("NCCL_ALGO", "Tree", "")]


def test_srun_export_both_spellings() -> None:
    text = "srun --export ALL,NCCL_IB_TIMEOUT=22 ./a.out\nsrun --export=NCCL_IB_SL=1 ./b.out\n"
    assert [(s.name, s.value, s.line) for s in read_settings(text, "slurm")] == [
        ("NCCL_IB_TIMEOUT", "22", 1), ("NCCL_IB_SL", "1", 2)]


def test_container_args_inline_settings_and_configmap_heredoc() -> None:
    # hand-made: a Job whose args run 'NCCL_X=... cmd' and a ConfigMap script that writes nccl.conf
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: run}\ndata:\n  run.sh: |\n"
            "    cat > /etc/nccl.conf <<'EOF'\n    NCCL_IB_GID_INDEX=3\n    EOF\n"
            "    torchrun train.py\n---\n"
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
            "      containers:\n      - name: c\n        command: [\"bash\", \"-c\"]\n        args:\n"
            "        - NCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA=mlx5 torchrun train.py\n")
    assert [(s.name, s.value, s.line) for s in read_settings(text, "k8s")] == [
        ("NCCL_IB_GID_INDEX", "3", 7), ("NCCL_SOCKET_IFNAME", "eth0", 21), ("NCCL_IB_HCA", "mlx5", 21)]


@pytest.mark.parametrize("name", ["aws-nccl-tests.Dockerfile", "aws-nccl-tests-mpijob.yaml",
                                  "gke-tcpxo-mpi-nccl-test.yaml", "gke-tcpx-nccl-config.yaml",
                                  "tcpxo-nccl-env-profile.sh", "tcpxo-run-nccl-fastrak.sh",
                                  "bert-launch_docker_dist.sh"])
def test_no_real_file_is_refused(name: str) -> None:
    run = clusterctl("nccl", "lint", FIXTURES / name)
    out, err = run.stdout, run.stderr
    assert run.exit_code in (0, 1), err
    assert "Traceback" not in out + err and "cannot read" not in err


def test_a_file_that_cannot_be_read_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "settings.conf"
    bad.write_text("NCCL_DEBUG=WARN\nthis line is not a setting\n")
    run = clusterctl("nccl", "lint", bad)
    err = run.stderr
    assert run.exit_code == 2
    assert "settings.conf:2: cannot read it as env: expected NAME=VALUE" in " ".join(err.split())


def test_pretrain_script_check_disable_removed_names_and_if_else_arms() -> None:
    found = findings("pretrain-net-type-excerpt.sh")
    [check] = [f for f in found if f.subject == "NCCL_CHECK_DISABLE" and f.line == 11]
    # the closest name was removed in 2.2: the fix never sends the user to it as if it were alive
    assert (check.severity, check.code) == ("error", "UNKNOWN_VARIABLE")
    assert check.fix == ("remove NCCL_CHECK_DISABLE: the closest name, NCCL_CHECKS_DISABLE, was removed in NCCL 2.2 "
                         "and replaced by NCCL_CHECK_POINTERS")
    [hca] = [f for f in found if f.subject == "NCCL_IB_HCA"]
    assert (hca.line, hca.message) == (9, "NCCL_IB_HCA=mlx5_2:1,mlx5_2:1 lists mlx5_2:1 more than once")
    # the same names in the if and the else arm can never both run: no DUPLICATE false alarms
    assert [f for f in found if f.code == "DUPLICATE"] == []
    assert {(f.line, f.subject) for f in found if f.code == "NOT_IN_VERSION"} == {
        (13, "NCCL_LL_THRESHOLD"), (14, "NCCL_IB_CUDA_SUPPORT"), (21, "NCCL_LL_THRESHOLD"),
        (22, "NCCL_IB_CUDA_SUPPORT")}
    # a real second assignment outside the arms is still one
    text = "export NCCL_IB_SL=3\nif [ -n \"$X\" ]; then export NCCL_IB_SL=5; fi\nexport NCCL_IB_SL=4\n"
    dupes = [f.line for f in lint_settings(read_settings(text, "shell")) if f.code == "DUPLICATE"]
    assert dupes == [2, 3]
