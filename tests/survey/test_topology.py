"""The topology model: NVLink domains, shape, and GPU/NIC locality, on built and real matrices."""

from __future__ import annotations

import pytest
from fixture_files import fixture_dir
from survey_builders import hybrid_cube_mesh, nvswitch, pcie_only

from clusterctl.facts.topo import parse_topo
from clusterctl.survey.topology import Shape, build_topology

FIXTURES = fixture_dir("topo")


def real(name: str):  # type: ignore[no-untyped-def]
    return build_topology(parse_topo((FIXTURES / name).read_text()))


def test_nvswitch_host_is_one_domain_of_eight() -> None:
    topo = build_topology(nvswitch())
    assert topo.shape is Shape.NVSWITCH
    assert topo.nvlink_domains == ((0, 1, 2, 3, 4, 5, 6, 7),)


def test_hybrid_cube_mesh_is_recognised_and_is_one_domain() -> None:
    topo = build_topology(hybrid_cube_mesh())
    assert topo.shape is Shape.HYBRID_CUBE_MESH
    assert topo.nvlink_domains == ((0, 1, 2, 3, 4, 5, 6, 7),)


def test_pcie_only_host_has_no_nvlink_domain() -> None:
    topo = build_topology(pcie_only())
    assert topo.shape is Shape.PCIE_ONLY
    assert topo.nvlink_domains == ()


def test_lost_pair_makes_the_mesh_partial_but_keeps_one_domain() -> None:
    topo = build_topology(nvswitch(lost=[(2, 3)]))
    assert topo.shape is Shape.PARTIAL_NVLINK
    assert topo.nvlinks(2, 3) == 0 and topo.nvlinks(2, 4) == 18
    assert topo.nvlink_domains == ((0, 1, 2, 3, 4, 5, 6, 7),)


def test_gpu_isolated_from_nvlink_splits_it_from_the_domain() -> None:
    matrix = nvswitch(lost=[(3, b) for b in range(4, 8)] + [(a, 3) for a in range(3)])
    topo = build_topology(matrix)
    assert topo.nvlink_domains == ((0, 1, 2, 4, 5, 6, 7),)


def test_each_gpu_knows_its_nearest_nic_and_numa_and_each_nic_its_gpus() -> None:
    topo = build_topology(nvswitch())
    gpu5 = topo.gpus[5]
    assert (gpu5.nearest_nics, gpu5.nic_link, gpu5.numa_node) == (("mlx5_5",), "PIX", "1")
    nic = topo.nic("mlx5_2")
    assert nic is not None and nic.nearest_gpus == (2,) and nic.numa_node == "0"


@pytest.mark.parametrize(
    ("fixture", "shape", "domains"),
    [
        ("hgx-h100-8gpu-8nic.txt", Shape.NVSWITCH, ((0, 1, 2, 3, 4, 5, 6, 7),)),
        ("dgx1-v100-hybrid-cube-mesh.txt", Shape.HYBRID_CUBE_MESH, ((0, 1, 2, 3, 4, 5, 6, 7),)),
        ("pcie-4gpu-soc-phb-mlx5.txt", Shape.PCIE_ONLY, ()),
        ("4gpu-nv3-4mlx5-tabs.txt", Shape.PARTIAL_NVLINK, ((0, 1), (2, 3))),
        ("single-gpu.txt", Shape.SINGLE_GPU, ()),
        ("derived-hgx-h100-gpu2-gpu3-nvlink-lost.txt", Shape.PARTIAL_NVLINK, ((0, 1, 2, 3, 4, 5, 6, 7),)),
    ],
)
def test_real_matrices(fixture: str, shape: Shape, domains: tuple[tuple[int, ...], ...]) -> None:
    topo = real(fixture)
    assert topo.shape is shape
    assert topo.nvlink_domains == domains


def test_dgx_a100_storage_nics_have_no_gpus_and_pairs_share_compute_nics() -> None:
    topo = real("dgx-a100-10nic-user-prompt.txt")
    assert topo.gpus[0].nearest_nics == ("mlx5_0", "mlx5_1") and topo.gpus[0].nic_link == "PXB"
    assert topo.gpus[0].numa_node == "3"
    storage = topo.nic("mlx5_8")
    assert storage is not None and storage.nearest_gpus == () and storage.numa_node is None
    assert topo.nic("mlx5_4").nearest_gpus == (4, 5)  # type: ignore[union-attr]


def test_old_driver_hca_columns_are_nics() -> None:
    topo = real("dgx1-v100-hybrid-cube-mesh.txt")
    assert [n.name for n in topo.nics] == ["mlx5_0"]
    assert topo.nic("mlx5_0").nearest_gpus == (2, 3)  # type: ignore[union-attr]
