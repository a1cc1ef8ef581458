"""One judge for a perftest link: a log that ``bench ib`` reads from a live run (mock hosts answering with it) and
the same log saved and given to ``bench report`` get the same findings, worded alike (``judge_link``). Before,
``bench report`` judged saved logs itself: ``PERFTEST_FAILED`` where a live run says ``LINK_FAILED``, its own
``LINK_SLOW`` and ``LATENCY_HIGH`` wording, and live runs were never checked for figures that contradict each
other (``FIGURE_INCONSISTENT``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import clusterctl
from fixture_files import FIXTURES, read_fixture

from clusterctl.bench.ib_bench import run_ib_bench
from clusterctl.bench.logs import report_text
from clusterctl.bench.model import HcaInfo
from clusterctl.bench.perftest_rounds import IBOptions
from clusterctl.findings import Finding
from clusterctl.inventory.model import Fabric, Host

from .conftest import SERVER_PID, Fleet

FABRIC = Fabric(type="ib", rate_gbps=200, latency_warn_us=1.0, latency_error_us=50.0)


def live_findings(tmp_path: Path, test: str, log: str) -> list[Finding]:
    """``bench ib`` between two hosts (racks unknown, as a saved log's are) whose client prints ``log``; the
    server prints nothing, so the figure is the client's alone, as a saved client log's is."""
    (tmp_path / "client.txt").write_text(log)
    rules = [{"regex": rf"^{test} .* > /tmp/clusterctl-bench-\S+\.log 2>&1 < /dev/null & echo \$!$",
              "stdout_text": f"{SERVER_PID}\n"},
             {"regex": r"^cat /tmp/clusterctl-bench-\S+\.log$", "stdout_text": ""},
             {"regex": rf"(^|\s){test} .* \S+$", "stdout": "client.txt"}]
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump({"commands": rules}, sort_keys=False))
    hosts = [Host(name=f"h{i}", address=f"10.0.0.{i}", transport="mock", profile=str(tmp_path), fabric=FABRIC)
             for i in (1, 2)]
    with Fleet(hosts).runner() as runner:
        report = run_ib_bench(runner, hosts, {h.name: [HcaInfo("mlx5_0", rate_gbps=400)] for h in hosts},
                              IBOptions(test=test, settle_s=0, duration_s=5))
    (link,) = report.results
    localised = {d.kind.upper().replace("-", "_") for d in report.diagnoses}
    return [f for f in report.findings if f.code not in localised and f.subject == " <-> ".join(link.endpoints)]


def judged(findings: list[Finding], test: str = "") -> list[tuple[Any, ...]]:
    """Each finding's verdict and words; ``test``: the test a live run ran, which a failed log that names none
    (no banner printed) calls ``perftest``."""
    return sorted((f.severity, f.code, f.message.replace(f"{test} failed:", "perftest failed:") if test else
                   f.message, f.fix, sorted(f.evidence.items())) for f in findings)


@pytest.mark.parametrize(("test", "fixture", "codes"), [
    # 0.48 Gb/s over RoCE on an InfiniBand fabric of 200 Gb/s links.
    ("ib_write_bw", "write_bw-roce-postlist-gbits-client.txt", {"LINK_SLOW", "RECORDING_MISMATCH"}),
    # 392 Gb/s: an NDR recording cannot be a measurement of a 200 Gb/s link.
    ("ib_write_bw", "write_bw-ndr400-gbits-prompt.txt", {"FIGURE_IMPOSSIBLE"}),
    # No banner: the log does not say which test failed.
    ("ib_write_bw", "write_bw-couldnt-connect-client.txt", {"LINK_FAILED"}),
    # MB/sec in the header over figures in Gb/s.
    ("ib_write_bw", "DERIVED-write_bw-ndr400-gbits-figures-mb-sec-header.txt", None),
    ("ib_send_lat", "send_lat-ndr400-percentiles.txt", {"LATENCY_HIGH"}),
])
def test_a_live_link_and_its_saved_log_get_the_same_findings(tmp_path: Path, test: str, fixture: str,
                                                             codes: set[str] | None) -> None:
    log = read_fixture("perftest", fixture)
    live = live_findings(tmp_path, test, log)
    saved = report_text("saved.log", log, rate_gbps=FABRIC.rate_gbps, limits=FABRIC).findings
    assert judged(live, test) == judged(list(saved)) != []
    assert codes is None or {f.code for f in saved} == codes
    assert all(f.file == "saved.log" for f in saved)


def test_the_one_wording() -> None:
    slow = report_text("saved.log", read_fixture("perftest", "write_bw-roce-postlist-gbits-client.txt"),
                       rate_gbps=200, limits=FABRIC).findings
    assert "0.5 Gb/s is 0% of the 200 Gb/s line rate; a link (racks unknown) must reach 90% (180.0 Gb/s)" in [
        f.message for f in slow if f.code == "LINK_SLOW"]
    (late,) = report_text("saved.log", read_fixture("perftest", "send_lat-ndr400-percentiles.txt"),
                          limits=FABRIC).findings
    assert late.message == "typical latency 1.27 us is above 1 us"
    (failed,) = report_text("saved.log", read_fixture("perftest", "write_bw-couldnt-connect-client.txt")).findings
    assert failed.code == "LINK_FAILED" and failed.message.startswith("perftest failed: Couldn't connect")


def test_a_saved_log_without_a_line_rate_skips_the_checks_against_it() -> None:
    log = read_fixture("perftest", "write_bw-roce-postlist-gbits-client.txt")
    assert {f.code for f in report_text("saved.log", log, limits=FABRIC).findings} == {"RECORDING_MISMATCH"}


def test_printed_rounding_is_no_contradiction() -> None:
    """A 4-byte row's 0.0068 Gb/s is printed 0.01 (the demo's 10 Gb/s recording): within rounding, not
    FIGURE_INCONSISTENT (before, both bench report and, now judged alike, bench ib said so)."""
    log = (Path(__file__).resolve().parents[2] / "inventories" / "demo" / "profiles" / "bench-hdr200" /
           "ib_write_bw-10g.txt").read_text()
    assert "FIGURE_INCONSISTENT" not in {f.code for f in report_text("saved.log", log).findings}


def test_with_an_inventory_a_saved_log_is_held_to_its_fabric_rate(tmp_path: Path) -> None:
    """``-i``: the inventory's ``fabric.rate_gbps`` by ``rate_basis``, as a live link is held to it; a port the
    banner puts on another link layer (RoCE on ``--fabric ib``) is not held to the InfiniBand rate."""
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("cluster: lab\ndefaults:\n  fabric: {rate_gbps: 200}\nhosts:\n  gpu-a1: {}\n"
                         "  gpu-a2: {fabric: {rate_gbps: 400}}\n")
    logs = [str(FIXTURES / "perftest" / name) for name in ("write_bw-roce-postlist-gbits-client.txt",
                                                          "write_bw-ndr400-gbits-prompt.txt")]

    def codes(*options: str) -> list[set[str]]:
        result = clusterctl("-i", str(inventory), "bench", "report", "-o", "json", *options, *logs)
        return [{f["code"] for f in entry["findings"]} for entry in json.loads(result.stdout)["files"]]

    assert codes() == [{"LINK_SLOW"}, {"FIGURE_IMPOSSIBLE"}]  # 200 Gb/s: the lowest of the hosts'
    assert codes("--rate-gbps", "400") == [{"LINK_SLOW"}, set()]
    assert codes("--fabric", "ib") == [{"RECORDING_MISMATCH"}, {"FIGURE_IMPOSSIBLE"}]
