"""Parallel-layout advice: TP groups on NVLink, a NIC per rank, PP within racks, DP across."""

from __future__ import annotations

import pytest
from survey_builders import hybrid_cube_mesh, nvswitch, pcie_only

from clusterctl.errors import UsageError
from clusterctl.survey.advice import FIT_FULL, FIT_NONE, FIT_RING, AdviceHost, advise
from clusterctl.survey.topology import build_topology


def host(name: str, matrix=None, rack: str = "a") -> AdviceHost:  # type: ignore[no-untyped-def]
    return AdviceHost(name, rack, build_topology(matrix if matrix is not None else nvswitch()))


def test_tp8_fits_an_nvswitch_host() -> None:
    advice = advise([host("h1")], tp=8)
    assert advice.fits and advice.hosts[0].fit == FIT_FULL
    assert advice.hosts[0].tp_groups == ((0, 1, 2, 3, 4, 5, 6, 7),)


def test_tp8_on_a_host_with_a_broken_pair_says_it_cannot_fit() -> None:
    advice = advise([host("h1"), host("broken", nvswitch(lost=[(2, 3)]))], tp=8)
    assert not advice.fits
    broken = advice.hosts[0]
    assert broken.host == "broken" and broken.fit == FIT_NONE and broken.tp_groups == ()
    assert "cannot fit" in broken.reason and "GPU2-GPU3" in broken.reason
    assert any("broken" in line and "cannot fit" in line for line in advice.explanation)


def test_tp4_works_around_a_broken_pair() -> None:
    advice = advise([host("broken", nvswitch(lost=[(2, 3)]))], tp=4)
    groups = advice.hosts[0].tp_groups
    assert advice.fits and len(groups) == 2
    assert not any({2, 3} <= set(g) for g in groups)


def test_tp4_on_hybrid_cube_mesh_uses_the_all_linked_quads() -> None:
    advice = advise([host("dgx1", hybrid_cube_mesh())], tp=4)
    assert advice.hosts[0].tp_groups == ((0, 1, 2, 3), (4, 5, 6, 7)) and advice.hosts[0].fit == FIT_FULL


def test_tp8_on_hybrid_cube_mesh_rides_nvlink_rings() -> None:
    advice = advise([host("dgx1", hybrid_cube_mesh())], tp=8)
    assert advice.fits and advice.hosts[0].fit == FIT_RING


def test_pcie_only_host_cannot_hold_tp2_on_nvlink() -> None:
    advice = advise([host("ws", pcie_only())], tp=2)
    assert advice.hosts[0].fit == FIT_NONE


def test_a_long_list_of_pairs_without_nvlink_says_how_many_more() -> None:
    (lonely,) = advise([host("h1", nvswitch(lost=[(0, gpu) for gpu in range(1, 8)]))], tp=8).hosts
    assert lonely.reason.endswith("pairs without NVLink: GPU0-GPU1, GPU0-GPU2, GPU0-GPU3, GPU0-GPU4, GPU0-GPU5, "
                                  "GPU0-GPU6 (+1 more)"), lonely.reason


def test_each_rank_gets_the_nic_on_its_pcie_switch() -> None:
    advice = advise([host("h1")], tp=8)
    assert [(r.local_rank, r.gpu, r.nic, r.link) for r in advice.hosts[0].rank_nics][:3] == [
        (0, 0, "mlx5_0", "PIX"), (1, 1, "mlx5_1", "PIX"), (2, 2, "mlx5_2", "PIX")]


def test_ranks_sharing_a_switch_spread_over_its_nics() -> None:
    from pathlib import Path

    from clusterctl.facts.topo import parse_topo

    text = (Path(__file__).resolve().parents[1] / "fixtures/topo/dgx-a100-10nic-user-prompt.txt").read_text()
    advice = advise([AdviceHost("dgx", None, build_topology(parse_topo(text)))], tp=8)
    assert [r.nic for r in advice.hosts[0].rank_nics] == [f"mlx5_{i}" for i in range(8)]


def test_down_nic_is_not_advised() -> None:
    h = AdviceHost("h1", "a", build_topology(nvswitch()), usable_nics={f"mlx5_{i}" for i in range(8)} - {"mlx5_0"})
    rank0 = advise([h], tp=8).hosts[0].rank_nics[0]
    assert rank0.nic in {"mlx5_1", "mlx5_2", "mlx5_3"} and rank0.link == "NODE"


def test_pipeline_stays_in_a_rack_and_data_parallel_goes_across() -> None:
    hosts = [host("b1", rack="b"), host("a1", rack="a"), host("b2", rack="b"), host("a2", rack="a")]
    advice = advise(hosts, tp=8, pp=2)
    assert (advice.dp, advice.world_size) == (2, 32)
    replicas = {}
    for p in advice.placements:
        replicas.setdefault(p.dp_rank, []).append((p.pp_stage, p.host, p.rack))
    assert replicas[0] == [(0, "a1", "a"), (1, "a2", "a")]
    assert replicas[1] == [(0, "b1", "b"), (1, "b2", "b")]
    assert [p.first_global_rank for p in advice.placements] == [0, 8, 16, 24]


def test_world_size_must_be_a_multiple_of_the_model() -> None:
    with pytest.raises(UsageError):
        advise([host("h1"), host("h2")], tp=8, world_size=12)


def test_a_host_that_cannot_hold_tp_gets_no_stage_and_the_world_shrinks() -> None:
    hosts = [host("a1"), host("a2"), host("a3", nvswitch(lost=[(2, 3)])), host("b1", rack="b"),
             host("b2", rack="b"), host("b3", rack="b")]
    advice = advise(hosts, tp=8, pp=2)
    assert "a3" not in {p.host for p in advice.placements}
    # Five hosts fit: two whole replicas of two stages (32 GPUs); the fifth host stays free.
    assert (advice.dp, advice.world_size) == (2, 32)
    assert len(advice.placements) == 4


def test_pipeline_stages_stay_inside_a_rack_when_it_has_room() -> None:
    hosts = [host("a1"), host("a2"), host("a3"), host("b1", rack="b"), host("b2", rack="b"), host("b3", rack="b")]
    advice = advise(hosts, tp=8, pp=2)
    racks_of: dict[int, set[str | None]] = {}
    for p in advice.placements:
        racks_of.setdefault(p.dp_rank, set()).add(p.rack)
    assert advice.dp == 3
    # Racks of three hosts hold one whole replica each; only the leftover pair crosses.
    assert sorted(len(r) for r in racks_of.values()) == [1, 1, 2]
    assert any("cross racks" in line for line in advice.explanation)
