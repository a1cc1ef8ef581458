"""`bench report` judging a multi-node nccl-tests log against its inter-node links (issue 25): the NICs
and speeds from the log's own NCCL INFO lines, from --rate-gbps, or from a saved survey."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import clusterctl
from fixture_files import FIXTURES

from clusterctl.bench.logs import report_text, saved_survey_ports
from clusterctl.bench.net_capacity import NCCL_BELOW_LINKS

GATHER_2NODE = FIXTURES / "nccl-tests" / "gather-a100-2node-1nic-nccl-info-topology-excerpt.txt"
H100_2NODE = FIXTURES / "nccl-tests" / "all_reduce-h100-2node-mpirun.txt"
DEMO_SURVEY = Path(__file__).parents[1] / "bootstrap_cluster" / "fixtures" / "demo-survey.json"


#: The paste in the issue stops before the run's summary; these are the lines a finished run ends with.
SUMMARY = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 17.2\n"


def test_a_log_whose_links_carry_more_says_so_and_why(tmp_path: Path) -> None:
    finished = tmp_path / "gather.txt"
    finished.write_text(GATHER_2NODE.read_text() + SUMMARY)
    result = clusterctl("bench", "report", "-o", "json", str(finished))
    (record,) = json.loads(result.stdout)["files"]
    (finding,) = record["findings"]
    assert result.exit_code == 0 and finding["code"] == NCCL_BELOW_LINKS and finding["severity"] == "warning"
    # Why: the one NIC the channels used (mlx5_2, 25 GB/s in the log's topology dump), of the two listed.
    assert "10.9 GB/s at the largest size is 44% of the 25.0 GB/s" in finding["message"]
    assert "mlx5_2 25 GB/s" in finding["message"] and "NCCL listed 2 NICs" in finding["message"]
    assert finding["evidence"]["basis"] == "the log's NCCL INFO lines"
    assert record["network"]["nics_used"] == ["mlx5_2"] and record["largest_busbw_gbs"] == 10.91


def test_line_rate_from_the_user_where_the_log_names_nics_but_no_speed() -> None:
    text = GATHER_2NODE.read_text() + SUMMARY
    # The same log without the topology dump's speed lines: the NIC count from the log, the rate from the user.
    without_speed = "\n".join(line for line in text.splitlines() if "NET[" not in line)
    assert report_text("log", without_speed).findings == ()
    (finding,) = report_text("log", without_speed, rate_gbps=200).findings
    assert "from the NICs from the log's NCCL INFO lines, their speed from --rate-gbps 200" in finding.message


def test_a_healthy_two_node_run_against_the_survey_s_rails_is_no_finding() -> None:
    eight_rails = {host: [(f"mlx5_{i}", 400.0) for i in range(8)] for host in ("dgx-06", "dgx-07")}
    report = report_text("log", H100_2NODE.read_text(), survey_ports=eight_rails)
    assert [f.code for f in report.findings] == []
    eight_200g = {host: [(f"mlx5_{i}", 200.0) for i in range(8)] for host in ("dgx-06", "dgx-07")}
    # 328 GB/s against 8 x 200 Gb/s = 200 GB/s: above, which only a two-node tree can give; not judged.
    assert report_text("log", H100_2NODE.read_text(), survey_ports=eight_200g).findings == ()


def test_the_survey_s_rails_judge_a_log_without_nccl_info_lines() -> None:
    eight_800g = {host: [(f"mlx5_{i}", 800.0) for i in range(8)] for host in ("dgx-06", "dgx-07")}
    (finding,) = report_text("log", H100_2NODE.read_text(), survey_ports=eight_800g).findings
    assert finding.code == NCCL_BELOW_LINKS and "328.3 GB/s at the largest size is 41% of the 800.0 GB/s" in (
        finding.message)
    assert "from the saved survey's active RDMA ports; 2 nodes" in finding.message


def test_one_host_logs_are_not_judged_against_network_links() -> None:
    single = (FIXTURES / "nccl-tests" / "all_reduce-a100-8gpu-nvswitch-single-node.txt").read_text()
    assert report_text("log", single, rate_gbps=1).findings == ()


def test_a_log_that_stops_before_its_summary_is_a_failure_not_a_bandwidth() -> None:
    """The paste as the issue has it stops mid-table: no figure of it is judged against the links."""
    result = clusterctl("bench", "report", "-o", "json", str(GATHER_2NODE))
    (record,) = json.loads(result.stdout)["files"]
    assert result.exit_code == 1 and [f["code"] for f in record["findings"]] == ["NCCL_FAILED"]
    assert "the table stops after the 11408506880-byte row" in record["findings"][0]["message"]
    elided, warning = record["parse_warnings"]  # the 72 rows behind the paste's '...' are unknown, and said to be
    assert "the paste leaves lines out (1 '...' elision line)" in elided["message"]
    assert warning["line"] == 102 and "no 'Avg bus bandwidth' summary" in warning["message"]


def test_a_saved_survey_s_links_are_its_active_fabric_ports() -> None:
    """`bench report --survey`: the NICs the survey marks as the fabric's (not mlx5_8, a storage NIC), ports up."""
    assert saved_survey_ports(str(DEMO_SURVEY))["gpu-a1"] == [(f"mlx5_{i}", 200.0) for i in range(8)]
