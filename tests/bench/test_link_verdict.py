"""One verdict per link: the JSON's ``slow`` and the ``LINK_SLOW`` finding say the same thing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clusterctl.bench.ib_bench import IBBenchReport
from clusterctl.bench.judge import judge_link
from clusterctl.bench.model import LinkResult
from clusterctl.bench.payload import link_record
from clusterctl.inventory.model import Fabric


def link(gbps: float, *, bidirectional: bool) -> LinkResult:
    return LinkResult(1, "gpu-a1", "gpu-a2", "mlx5_0", "mlx5_0", 18515, "ib_write_bw", gbps=gbps,
                      bidirectional=bidirectional, expected_gbps=200.0, min_fraction=0.9, same_rack=True)


@pytest.mark.parametrize(("gbps", "bidirectional", "slow"), [
    (300.0, True, True),    # -b adds both directions: 75% of 400 Gb/s (the JSON used to say not slow)
    (390.0, True, False),
    (150.0, False, True),
    (195.0, False, False),
])
def test_the_json_and_the_findings_agree_on_a_slow_link(gbps: float, bidirectional: bool, slow: bool) -> None:
    result = link(gbps, bidirectional=bidirectional)
    codes = [f.code for f in judge_link(result, Fabric())]
    assert link_record(result)["slow"] is slow
    assert ("LINK_SLOW" in codes) is slow


def test_a_slow_bidirectional_link_is_named_against_both_directions() -> None:
    (finding,) = judge_link(link(300.0, bidirectional=True), Fabric())
    assert "75% of the 400 Gb/s line rate (both directions)" in finding.message
    assert "must reach 90% (360.0 Gb/s)" in finding.message


def test_the_json_says_a_link_was_bidirectional_and_what_it_was_judged_against() -> None:
    record = link_record(link(300.0, bidirectional=True))
    assert (record["bidirectional"], record["expected_gbps"], record["judged_gbps"]) == (True, 200.0, 400.0)
    assert link_record(link(195.0, bidirectional=False))["judged_gbps"] == 200.0


def test_the_matrix_turns_green_at_the_judged_rate_of_a_bidirectional_run() -> None:
    report = IBBenchReport("ib_write_bw", "all-pairs", (), (), results=(link(300.0, bidirectional=True),))
    # 300 Gb/s of a -b run on a 200 Gb/s link is slow: the colour scale must not call it green past 200.
    assert report.good_gbps == 400.0
    assert replace(report, test="ib_write_lat").good_gbps is None
