"""bench commands end to end on the demo inventory (mock hosts) and on saved logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl
from fixture_files import FIXTURES as FIXTURES_ROOT

DEMO = str(Path(__file__).resolve().parents[2] / "inventories" / "demo.yaml")
FIXTURES = FIXTURES_ROOT


def test_dry_run_prints_rounds_and_commands() -> None:
    result = clusterctl("-i", DEMO, "bench", "ib", "--dry-run", "--hca", "mlx5_0", "-o", "json")
    plan = json.loads(result.stdout)
    assert result.exit_code == 0 and len(plan["rounds"]) == 5
    first = plan["rounds"][0]["tests"][0]
    # The client runs under coreutils timeout so that a hung one cannot outlive its round.
    assert first["client_command"].startswith("timeout -k 5 ")
    assert " ib_write_bw -d mlx5_0 -p 18515 " in first["client_command"]
    assert first["server_command"].endswith("& echo $!")


def test_a_host_the_saved_survey_lacks_is_named_as_a_live_run_names_it(tmp_path: Path) -> None:
    # The survey covers gpu-a1 and gpu-a2: the other hosts' HCAs come from the inventory (no RoCE GID index),
    # which bench ib said for a host ibv_devinfo could not read but not for one the saved survey lacks.
    saved = tmp_path / "part.json"
    clusterctl("-i", DEMO, "-l", "gpu-a1,gpu-a2", "survey", "--save", str(saved))
    result = clusterctl("-i", DEMO, "bench", "ib", "--dry-run", "--survey", str(saved), "-o", "json")
    warned = " ".join(result.stderr.split())
    assert result.exit_code == 0 and json.loads(result.stdout)["rounds"]
    assert f"warning: gpu-b3: HCAs from the inventory (not in the saved survey {saved})" in warned
    assert "gpu-a1:" not in warned and "gpu-a2:" not in warned


@pytest.mark.parametrize("refused", [("ib", "--pattern", "bogus"), ("ib", "--survey", "missing.json"),
                                     ("nccl", "--op", "bogus")])
def test_a_refused_run_gives_its_results_folder_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     refused: tuple[str, ...]) -> None:
    # Before, a typo left an empty clusterctl-results/bench-* behind, and the folder --results-dir named
    # refused the corrected run: "already holds the results of another run".
    monkeypatch.chdir(tmp_path)
    assert clusterctl("-i", DEMO, "bench", *refused).exit_code == 2
    assert not (tmp_path / "clusterctl-results").exists() or not any((tmp_path / "clusterctl-results").iterdir())
    named = tmp_path / "runs" / "before"
    assert clusterctl("-i", DEMO, "bench", *refused, "--results-dir", str(named)).exit_code == 2
    again = clusterctl("-i", DEMO, "bench", refused[0], "--results-dir", str(named), "-o", "json")
    assert again.exit_code == 1 and json.loads(again.stdout)["results_dir"] == str(named)


def test_demo_names_gpu_b3_mlx5_2_and_keeps_results(tmp_path: Path) -> None:
    # Brackets in the folder's name are text, not rich markup: the printed path copies back whole.
    results = tmp_path / "run[bold]1[/]"
    plot = tmp_path / "matrix.svg"
    result = clusterctl("-i", DEMO, "bench", "ib", "-o", "json", "--results-dir", str(results), "--plot", str(plot))
    payload = json.loads(result.stdout)
    assert result.exit_code == 1
    assert [(d["kind"], d["subject"]) for d in payload["diagnoses"]] == [("slow-hca", "gpu-b3/mlx5_2")]
    assert (results / "results.json").is_file() and any((results / "raw").iterdir())
    assert "<svg" in plot.read_text() and "gpu-b3" in plot.read_text()
    second = tmp_path / "run[bold]2[/]"
    table = clusterctl("-i", DEMO, "bench", "ib", "--results-dir", str(second))
    assert f"results: {second}\n" in table.stderr


def test_compare_shows_slower_links(tmp_path: Path) -> None:
    before = {"links": [{"server": "a", "server_hca": "mlx5_0", "client": "b", "client_hca": "mlx5_0", "gbps": 190.0}]}
    after = {"links": [{"server": "a", "server_hca": "mlx5_0", "client": "b", "client_hca": "mlx5_0", "gbps": 95.0}]}
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    (tmp_path / "A" / "results.json").write_text(json.dumps(before))
    (tmp_path / "B" / "results.json").write_text(json.dumps(after))
    result = clusterctl("bench", "compare", str(tmp_path / "A"), str(tmp_path / "B"), "-o", "json")
    (change,) = json.loads(result.stdout)["changes"]
    assert result.exit_code == 0 and change["verdict"] == "slower" and change["after"] == 95.0


def test_compare_warns_that_a_bidirectional_run_is_not_one_direction(tmp_path: Path) -> None:
    link = {"server": "a", "server_hca": "mlx5_0", "client": "b", "client_hca": "mlx5_0", "test": "ib_write_bw"}
    for name, figures in (("A", {"gbps": 190.0}), ("B", {"gbps": 380.0, "bidirectional": True})):
        (tmp_path / name).mkdir()
        run = {"test": "ib_write_bw", "links": [{**link, **figures}]}
        (tmp_path / name / "results.json").write_text(json.dumps(run))
    result = clusterctl("bench", "compare", str(tmp_path / "A"), str(tmp_path / "B"), "-o", "json")
    assert "different things (ib_write_bw vs ib_write_bw -b)" in json.loads(result.stdout)["warning"]


def test_report_on_saved_logs() -> None:
    result = clusterctl("bench", "report", "-o", "json", "--rate-gbps", "200",
                        str(FIXTURES / "nccl-tests" / "all_reduce-h100-2node-mpirun.txt"),
                        str(FIXTURES / "perftest" / "write_bw-couldnt-connect-client.txt"),
                        str(FIXTURES / "perftest" / "read_lat-client-cpufreq-warning-mlx4.txt"))
    files = json.loads(result.stdout)["files"]
    assert result.exit_code == 1
    assert files[0]["tool"] == "nccl-tests" and files[0]["test"] == "all_reduce_perf"
    assert files[0]["avg_busbw_gbs"] == 76.0414 and files[0]["rows"][-1]["size_bytes"] == 8589934592
    assert files[1]["findings"][0]["code"] == "LINK_FAILED"
    assert files[2]["latency"][0]["t_typical_us"] == 1.79 and files[2]["findings"] == []


def test_report_judges_logs_by_the_inventory_s_fabric_thresholds(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("cluster: lab\ndefaults:\n  fabric: {within_rack_min: 0.99, latency_warn_us: 1.2}\n"
                         "hosts:\n  gpu-a1: {}\n  gpu-a2: {fabric: {within_rack_min: 0.95}}\n")
    logs = [str(FIXTURES / "perftest" / name) for name in ("write_bw-hdr200-ib-a-sweep-client.txt",
                                                          "send_lat-ndr400-percentiles.txt")]

    def codes(*options: str, report: tuple[str, ...] = ()) -> list[list[str]]:
        result = clusterctl(*options, "bench", "report", "-o", "json", "--rate-gbps", "200", *report, *logs)
        return [[f["code"] for f in file["findings"]] for file in json.loads(result.stdout)["files"]]

    # 196.8 of 200 Gb/s (98%) and a typical 1.27 us latency pass the defaults (90%, 15 us)...
    assert codes() == [[], []]
    # ...not a site's inventory that wants 99% within a rack and warns from 1.2 us.
    assert codes("-i", str(inventory)) == [["LINK_SLOW"], ["LATENCY_HIGH"]]
    assert codes("-i", str(inventory), "-l", "gpu-a2") == [[], ["LATENCY_HIGH"]]
    assert codes("-i", str(inventory), report=("--min-fraction", "0.9")) == [[], ["LATENCY_HIGH"]]
    help_text = clusterctl("bench", "report", "--help").stdout
    assert "inventory's fabric within_rack_min" in " ".join(help_text.split())


def test_nccl_on_demo_hosts(tmp_path: Path) -> None:
    result = clusterctl("-i", DEMO, "bench", "nccl", "-o", "json", "--results-dir", str(tmp_path / "n"), "--env",
                        "NCCL_ALGO=Ring")
    payload = json.loads(result.stdout)
    # Every demo host answers with the real 8x A100 NVSwitch run: plausible on the healthy hosts,
    # but not on gpu-a3, whose GPU3 has no NVLink (its topology cannot give that figure).
    assert [r["busbw_gbs"] for r in payload["runs"]] == [232.44] * 6
    assert payload["median_busbw_gbs"] == 232.44 and result.exit_code == 1
    assert [(f["code"], f["host"]) for f in payload["findings"]] == [("FIGURE_IMPOSSIBLE", "gpu-a3")]


def test_demo_ib_recordings_are_coherent_with_the_fabric(tmp_path: Path) -> None:
    result = clusterctl("-i", DEMO, "bench", "ib", "-o", "json", "--results-dir", str(tmp_path / "r"))
    codes = {f["code"] for f in json.loads(result.stdout)["findings"]}
    assert "FIGURE_IMPOSSIBLE" not in codes and "RECORDING_MISMATCH" not in codes
    assert result.exit_code == 1  # gpu-b3/mlx5_2 is slow: the only problem the demo fabric has
    assert codes <= {"LINK_SLOW", "SLOW_HCA"}


def test_report_text_shows_latency_figures_and_what_it_could_not_read() -> None:
    result = clusterctl("bench", "report", str(FIXTURES / "perftest" / "send_lat-ndr400-percentiles.txt"),
                        str(FIXTURES / "nccl-tests" / "DERIVED-all_reduce-a100-row-cut-by-cuda-error.txt"))
    assert result.exit_code == 1
    assert "typical 1.27 us, avg 1.27 us, p99 1.37 us at 2 B" in result.stdout
    assert "no figure" not in result.stdout.split("\n")[0]
    assert "read in part: line 44: the row for 1073741824 bytes was cut by an error" in result.stdout


def test_report_flags_figures_that_cannot_be_true_and_other_machines() -> None:
    result = clusterctl("bench", "report", "-o", "json", "--rate-gbps", "200", "--fabric", "ib", "--gpus-per-host",
                        "8", str(FIXTURES / "perftest" / "write_bw-ndr400-gbits-prompt.txt"),
                        str(FIXTURES / "perftest" / "write_bw-bidir-a-sweep-gbits-indented.txt"),
                        str(FIXTURES / "nccl-tests" / "all_reduce-rtx4090-4gpu-single-process.txt"),
                        str(FIXTURES / "perftest" / "write_bw-hdr200-ib-a-sweep-client.txt"),
                        str(FIXTURES / "nccl-tests" / "all_reduce-a100-8gpu-nvswitch-single-node.txt"))
    files = json.loads(result.stdout)["files"]
    codes = [[f["code"] for f in entry["findings"]] for entry in files]
    assert result.exit_code == 1
    # The bidirectional RoCE sweep: another fabric, and 204.6 Gb/s is half of what -b on 200G should reach.
    assert codes == [["FIGURE_IMPOSSIBLE"], ["RECORDING_MISMATCH", "LINK_SLOW"], ["RECORDING_MISMATCH"], [], []]
    assert files[0]["parse_warnings"] == [] and files[0]["printed_unit"] == "Gb/sec"


def test_ranks_behind_an_authors_elision_are_no_rank_count_mismatch() -> None:
    """GB300 logs that name ranks 0, 1, '...', 6, 7 (4 GPUs a host): 2 ranks read on a host is what the paste
    shows, not what ran; a host with more ranks than GPUs is still another machine."""
    elided = [str(FIXTURES / "nccl-tests" / name) for name in (
        "all_reduce-gb300-2node-ranks-elided-truncated-comment.txt",
        "alltoall-gb300-32node-ranks-elided-in-place-wrong-na.txt")]
    result = clusterctl("bench", "report", "-o", "json", "--gpus-per-host", "4", *elided)
    files = json.loads(result.stdout)["files"]
    assert [[f["code"] for f in entry["findings"]] for entry in files] == [[], []], result.stdout
    assert all("the ranks and rows there are unknown" in entry["parse_warnings"][0]["message"] for entry in files)
    more = clusterctl("bench", "report", "-o", "json", "--gpus-per-host", "1", elided[0])
    (finding,) = json.loads(more.stdout)["files"][0]["findings"]
    assert finding["code"] == "RECORDING_MISMATCH" and "2 rank(s) on GPU-205 where the host has 1 GPUs" in \
        finding["message"]


def test_report_on_a_healthy_newer_perftest_in_mib_per_second() -> None:
    result = clusterctl("bench", "report", "-o", "json", "--rate-gbps", "400",
                        str(FIXTURES / "perftest" / "send_bw-ndr400-mib-sec-lockfree-prompt.txt"))
    (entry,) = json.loads(result.stdout)["files"]
    assert result.exit_code == 0 and entry["findings"] == [] and entry["printed_unit"] == "MiB/sec"
    assert round(entry["peak_gbps"], 1) == 390.5


TUNED = {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "=enp226s0", "NCCL_CROSS_NIC": "0"}


@pytest.mark.parametrize("name", ["nccl.conf", "nccl.sh", "nccl-configmap.yaml", "nccl-slurm.sh"])
def test_env_file_takes_tune_nccls_own_files_and_exports_only_nccl_variables(
    tmp_path: Path, name: str
) -> None:
    from clusterctl.nccl.tune.derive import TunedSetting, Tuning
    from clusterctl.nccl.tune.render import render_files
    from clusterctl.writable import write_files

    tuning = Tuning(hosts=("gpu-a1",), nccl_version="2.18.3", fabric="ib",
                    settings=tuple(TunedSetting(k, v, "tuned") for k, v in TUNED.items()))
    write_files(render_files(tuning, fmt="all", nodes=1, ranks=8), tmp_path / "tuned")
    result = clusterctl("-i", DEMO, "-l", "gpu-a1", "bench", "nccl", "-o", "json", "--results-dir",
                        str(tmp_path / "n"), "--env-file", str(tmp_path / "tuned" / name))
    payload = json.loads(result.stdout)
    # The ConfigMap's apiVersion/kind/metadata/data, Slurm's comments and profile.d's exports
    # are not NCCL settings: exactly the tuned variables reach the run, with their values.
    assert result.exit_code == 0 and payload["env"] == TUNED


def test_env_pairs_override_the_file_and_computed_values_are_refused(
    tmp_path: Path
) -> None:
    conf = tmp_path / "job.sh"
    conf.write_text("export NCCL_DEBUG=INFO\nexport NCCL_IB_HCA=$HCAS\n")
    result = clusterctl("-i", DEMO, "-l", "gpu-a1", "bench", "nccl", "--env-file", str(conf))
    assert result.exit_code == 2
    conf.write_text("export NCCL_DEBUG=INFO\nNCCL_ALGO=Tree\n")
    result = clusterctl("-i", DEMO, "-l", "gpu-a1", "bench", "nccl", "-o", "json", "--results-dir",
                        str(tmp_path / "n"), "--env-file", str(conf), "--env", "NCCL_ALGO=Ring")
    assert result.exit_code == 0 and json.loads(result.stdout)["env"] == {"NCCL_DEBUG": "INFO", "NCCL_ALGO": "Ring"}


def test_an_env_file_is_read_as_nccl_lint_reads_a_file_named_to_it(tmp_path: Path) -> None:
    # Before, a folder was "no such settings file" (it is there), and /dev/zero was never read to its limit.
    folder = clusterctl("-i", DEMO, "bench", "nccl", "--env-file", str(tmp_path))
    linted = clusterctl("nccl", "lint", str(tmp_path))
    assert folder.exit_code == 2 and "is a folder, not a file" in folder.stderr and folder.stderr in linted.stderr
    endless = clusterctl("-i", DEMO, "bench", "nccl", "--env-file", "/dev/zero")
    assert endless.exit_code == 2 and "/dev/zero" in endless.stderr and "limit" in endless.stderr


def test_compare_lists_what_moved_and_counts_what_did_not(tmp_path: Path) -> None:
    links = [{"server": f"h{i}", "server_hca": "mlx5_0", "client": f"h{i + 1}", "client_hca": "mlx5_0",
              "gbps": 190.0} for i in range(120)]
    slower = [dict(link, gbps=95.0) if i == 7 else link for i, link in enumerate(links)]
    for name, data in (("A", links), ("B", links), ("C", slower)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps({"links": data}))
    same = clusterctl("bench", "compare", str(tmp_path / "A"), str(tmp_path / "B"))
    assert same.exit_code == 0
    assert same.stdout.strip() == "120 figures compared: 120 unchanged (within 5%)"
    moved = clusterctl("bench", "compare", str(tmp_path / "A"), str(tmp_path / "C"))
    assert "h7/mlx5_0" in moved.stdout and "slower" in moved.stdout
    assert "unchanged" not in moved.stdout.split("figures compared")[0]  # no row for a link that held
    assert moved.stdout.rstrip().endswith("120 figures compared: 1 slower, 119 unchanged (within 5%, not listed)")


def test_fabric_is_refused_in_the_words_of_the_inventorys_fabric_type() -> None:
    # bench report said "--fabric must be ib, roce or ethernet", nccl lint "--fabric takes one of ...".
    log = str(FIXTURES / "perftest" / "write_bw-ndr400-gbits-prompt.txt")
    for command in (["bench", "report", log], ["nccl", "lint", str(FIXTURES / "nccl-settings" / "nccl.conf")]):
        refused = clusterctl(*command, "--fabric", "infiniband")
        assert refused.exit_code == 2
        assert "field '--fabric': unknown fabric type 'infiniband'. Write 'ib' for infiniband." in refused.stderr
