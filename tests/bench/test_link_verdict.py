"""One verdict per link: the JSON's ``slow`` and the ``LINK_SLOW`` finding say the same thing."""

from __future__ import annotations

import pytest

from clusterctl.bench.judge import judge_link
from clusterctl.bench.model import LinkResult
from clusterctl.bench.payload import link_record
from clusterctl.inventory.model import Host


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
    codes = [f.code for f in judge_link(result, Host("gpu-a1"))]
    assert link_record(result)["slow"] is slow
    assert ("LINK_SLOW" in codes) is slow


def test_a_slow_bidirectional_link_is_named_against_both_directions() -> None:
    (finding,) = judge_link(link(300.0, bidirectional=True), Host("gpu-a1"))
    assert "75% of the 400 Gb/s line rate (both directions)" in finding.message
    assert "must reach 90% (360.0 Gb/s)" in finding.message
