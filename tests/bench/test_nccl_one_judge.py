"""One judge for nccl-tests output: ``bench report`` judges a saved log with ``judge_nccl``, the function that
judges ``bench nccl``'s live runs (before, it had its own failure and plausibility checks and skipped the GPUs'
peak); ``bench nccl --multi-node`` judges the mpirun job against the hosts' inter-node links as ``bench
report`` does (before, it never looked); and a log of several processes is finished only when each closed its
own table with a summary (before, one summary passed them all)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import clusterctl
from fixture_files import FIXTURES, read_fixture

from clusterctl.bench.logs import report_text
from clusterctl.bench.nccl_tests import NcclRun, run_nccl_test
from clusterctl.bench.net_capacity import NCCL_BELOW_LINKS
from clusterctl.changes import Gate
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Fabric, Host
from clusterctl.mock.profile import load_profile
from clusterctl.mock.transport import MockTransport

DEMO_PROFILE = Path(__file__).resolve().parents[2] / "inventories" / "demo" / "profiles" / "dgx-a100"
#: The real 8x A100 NVSwitch log as a run with -e 256M leaves it: 196.3 GB/s at its largest size.
SHORT_A100 = "DERIVED-all_reduce-a100-8gpu-nvswitch-e-256m.txt"
#: Two processes of a binary built without MPI=1 (nccl-tests issue 182), each with its own table.
TWO_TABLES = "DERIVED-all_reduce-non-mpi-build-2node-two-tables.txt"
SECOND_CUT = "DERIVED-all_reduce-non-mpi-build-2node-second-summary-missing.txt"
H100_2NODE = "all_reduce-h100-2node-mpirun.txt"
GATHER_2NODE = "gather-a100-2node-1nic-nccl-info-topology-excerpt.txt"


def test_a_saved_8_gpu_log_below_the_nvswitch_peak_is_flagged_as_a_live_run_is() -> None:
    result = clusterctl("bench", "report", "-o", "json", str(FIXTURES / "nccl-tests" / SHORT_A100))
    (record,) = json.loads(result.stdout)["files"]
    (finding,) = record["findings"]
    assert finding["code"] == "NCCL_BELOW_PEAK" and finding["file"] == str(FIXTURES / "nccl-tests" / SHORT_A100)
    assert "196.3 GB/s is below 90% of the ~235 GB/s expected for 8x A100 on NVSwitch" in finding["message"]


def test_every_process_of_a_several_process_log_must_close_its_table() -> None:
    finished = parse_nccl_tests(read_fixture("nccl-tests", TWO_TABLES))
    assert finished.failure() is None and finished.unfinished_runs == 0 and finished.avg_busbw_gbs == 1.6796
    cut = parse_nccl_tests(read_fixture("nccl-tests", SECOND_CUT))
    assert cut.avg_busbw_gbs == 1.7535 and cut.unfinished_runs == 1
    assert cut.failure() == ("1 of the log's tests (one per process: its own setup line and table) ended without "
                             "an 'Avg bus bandwidth' summary of its own: not every process finished")
    (finding,) = report_text("saved.log", read_fixture("nccl-tests", SECOND_CUT)).findings
    assert finding.code == "NCCL_FAILED" and "1 of the log's tests" in finding.message
    assert report_text("saved.log", read_fixture("nccl-tests", SECOND_CUT)).record["parsed"]["unfinished_runs"] == 1


class KeptHost(MockTransport):
    def close(self) -> None:  # one simulated host for the whole test
        pass


def _single_host(tmp_path: Path, log: str, gpu_list: str | None = None) -> NcclRun:
    """``bench nccl`` on one mock 8x A100 host (nvidia-smi -L counts 8 GPUs, else prints ``gpu_list``) whose test
    prints ``log``."""
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "answer.txt").write_text(log)
    (profile / "L.txt").write_text(gpu_list or (DEMO_PROFILE / "nvidia-smi-L.txt").read_text())
    (profile / "profile.yaml").write_text(f"extends: {DEMO_PROFILE}\ncommands:\n  - regex: '_perf '\n"
                                          "    stdout: answer.txt\n  - match: 'nvidia-smi -L'\n    stdout: L.txt\n")
    host = Host(name="n1", address="10.0.0.1", transport="mock")
    transport = KeptHost(host, load_profile(str(profile)), state_folder=tmp_path / "state")
    with Runner(lambda _h, _t: transport, parallel=1, timeout_s=60) as runner:
        return run_nccl_test(runner, [host], gate=Gate(apply=True))


@pytest.mark.parametrize("fixture", [
    SHORT_A100, "all_reduce-a100-8gpu-nvswitch-single-node.txt", "DERIVED-all_reduce-a100-wrong-1.04858e+06.txt",
    "all_reduce-rtx4090-4gpu-single-process.txt", "alltoall-rtx5090-1gpu-in-place-na.txt", SECOND_CUT,
    "DERIVED-all_reduce-a3mega-16rank-nccl-warn-at-init.txt"])
def test_a_saved_log_gets_the_verdict_its_live_run_got(tmp_path: Path, fixture: str) -> None:
    text = read_fixture("nccl-tests", fixture)
    live = _single_host(tmp_path, text).findings
    saved = report_text("saved.log", text, gpus_per_host=8).findings
    assert [(f.code, f.severity, f.message) for f in saved] == [(f.code, f.severity, f.message) for f in live]
    assert all(f.to_json()["file"] == "saved.log" for f in saved) and all(f.host == "n1" for f in live)


def test_a_gpu_list_line_nvidia_smi_l_cannot_read_is_not_counted_as_a_gpu(tmp_path: Path) -> None:
    # A bus id's line (as nvidia-smi -r prints them) among the 8 GPUs is no ninth GPU: the count is unknown.
    listing = (DEMO_PROFILE / "nvidia-smi-L.txt").read_text() + "GPU 00000000:07:00.0: In use by another client\n"
    (run,) = _single_host(tmp_path, read_fixture("nccl-tests", SHORT_A100), listing).runs
    assert run.host_gpus is None and " -g " not in f"{run.command} "


@pytest.mark.parametrize(("listing", "reason"), [
    ("GPU 00000000:07:00.0: In use by another client\n", "at line 1: expected 'GPU N: name (UUID: ...)'"),
    ("\n", "no output")])
def test_a_host_whose_gpus_cannot_be_counted_is_named_with_the_reason(tmp_path: Path, listing: str,
                                                                      reason: str) -> None:
    # Before, the count was silently unknown: the run went without -g (nccl-tests' one GPU) and nothing said why.
    run = _single_host(tmp_path, read_fixture("nccl-tests", SHORT_A100), listing)
    (finding,) = [f for f in run.findings if f.code == "GPU_COUNT_UNKNOWN"]
    assert finding.host == "n1" and finding.severity.value == "warning" and not run.failed
    assert finding.message.startswith("nvidia-smi -L on n1 gave no GPU count (") and reason in finding.message
    assert "nccl-tests ran without -g, on one GPU" in finding.message


def _multi_node(tmp_path: Path, log: str, fabric: Fabric) -> NcclRun:
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "answer.txt").write_text(log)
    (profile / "profile.yaml").write_text(f"extends: {DEMO_PROFILE}\ncommands:\n  - regex: '^mpirun '\n"
                                          "    stdout: answer.txt\n")
    hosts = [Host(name=n, address=f"10.0.0.{i}", transport="mock", fabric=fabric)
             for i, n in enumerate(("n1", "n2"), 1)]
    loaded = load_profile(str(profile))
    transports = {h.name: KeptHost(h, loaded, state_folder=tmp_path / "state") for h in hosts}
    with Runner(lambda host, _t: transports[host.name], parallel=2, timeout_s=60) as runner:
        return run_nccl_test(runner, hosts, multi_node=True, gpus=8, gate=Gate(apply=True))


RAILS = tuple(f"mlx5_{i}" for i in range(8))


def test_a_multi_node_run_is_judged_against_the_rate_the_inventory_holds_its_rails_to(tmp_path: Path) -> None:
    # The hosts' 8 compute rails run at 200 Gb/s (ibv_devinfo -v); the inventory says they are 800 Gb/s ports:
    # rate_basis holds them to 800, so 328 GB/s is 41% of the 800 GB/s the links should carry.
    run = _multi_node(tmp_path, read_fixture("nccl-tests", H100_2NODE), Fabric(type="ib", rate_gbps=800, hcas=RAILS))
    (finding,) = run.findings
    assert finding.code == NCCL_BELOW_LINKS and finding.host == "n1+n2"
    assert "328.3 GB/s at the largest size is 41% of the 800.0 GB/s" in finding.message
    assert finding.evidence["basis"] == "the hosts' HCAs (ibv_devinfo -v) at the inventory's rate, else their usual one"
    assert run.runs[0].nic_ports == {h: [(rail, 800.0) for rail in RAILS] for h in ("n1", "n2")}


def test_without_an_inventory_rate_the_rails_are_held_to_what_they_run_at(tmp_path: Path) -> None:
    # 8 x 200 Gb/s = 200 GB/s: 328 GB/s is above, which only a two-node tree gives; not judged (net_capacity).
    run = _multi_node(tmp_path, read_fixture("nccl-tests", H100_2NODE), Fabric(type="ib", hcas=RAILS))
    assert run.findings == () and run.runs[0].nic_ports == {h: [(r, 200.0) for r in RAILS] for h in ("n1", "n2")}


def test_a_multi_node_run_whose_log_names_its_one_rail_holds_it_to_the_one_port_rate_rule(tmp_path: Path) -> None:
    text = read_fixture("nccl-tests", GATHER_2NODE) + "# Out of bounds values : 0 OK\n# Avg bus bandwidth : 17.2\n"
    # The log's topology dump says its one used NIC (mlx5_2) carries 25 GB/s: what it trained at. The inventory
    # holds the rails to 400 Gb/s (rate_basis, as survey and health judge them): that is what the run is held to.
    run = _multi_node(tmp_path, text, Fabric(type="ib", rate_gbps=400, hcas=RAILS))
    (finding,) = run.findings
    assert finding.code == NCCL_BELOW_LINKS and (finding.evidence["links_gbs"], finding.evidence["nics_per_node"]) == (
        50.0, 1)
    assert finding.evidence["basis"] == ("the NICs from the log's NCCL INFO lines, their speed from the hosts' HCAs "
                                         "(ibv_devinfo -v) at the inventory's rate, else their usual one")
