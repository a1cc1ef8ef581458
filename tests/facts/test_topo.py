from __future__ import annotations

import pytest
from fixture_files import fixture_dir

from clusterctl.errors import ParseError
from clusterctl.facts.model import TopoMatrix
from clusterctl.facts.topo import TOPOLOGY, parse_topo

TOPO = fixture_dir("topo")


def topo(name: str) -> TopoMatrix:
    return parse_topo((TOPO / name).read_text())


def raw(matrix: TopoMatrix, a: str, b: str) -> str:
    link = matrix.link(a, b)
    assert link is not None
    return link.raw


def test_command_is_the_plain_matrix() -> None:
    assert TOPOLOGY.command == "nvidia-smi topo -m"


@pytest.mark.parametrize("name", sorted(p.name for p in TOPO.glob("*.txt")))
def test_every_recording_gives_a_full_symmetric_matrix(name: str) -> None:
    matrix = topo(name)
    labels = [d.label for d in matrix.devices]
    assert len(matrix.links) == len(labels) ** 2
    for a in labels:
        assert raw(matrix, a, a) == "X"
        for b in labels:
            assert raw(matrix, a, b) == raw(matrix, b, a)


def test_hgx_h100_nvswitch_with_nic_legend_and_gpu_numa_id() -> None:
    m = topo("hgx-h100-8gpu-8nic.txt")
    assert (len(m.gpus), len(m.nics)) == (8, 8)
    link = m.link("GPU0", "GPU7")
    assert link is not None and (link.kind, link.nvlinks) == ("NV", 18)
    assert [n.device_name for n in m.nics] == [f"mlx5_{i}" for i in range(8)]
    assert raw(m, "GPU3", "NIC3") == "PIX" and raw(m, "GPU3", "NIC4") == "SYS"
    gpu4 = m.gpus[4]
    assert (gpu4.cpu_affinity, gpu4.numa_affinity, gpu4.gpu_numa_id) == ("48-95,144-191", "1", None)
    assert m.nics[0].cpu_affinity is None
    assert "X    = Self" in m.legend


def test_dgx1_v100_hybrid_cube_mesh_mixes_nv1_and_nv2() -> None:
    m = topo("dgx1-v100-hybrid-cube-mesh.txt")
    assert raw(m, "GPU0", "GPU1") == "NV1"
    assert raw(m, "GPU0", "GPU3") == "NV2"
    assert raw(m, "GPU0", "GPU5") == "SYS"
    assert [n.device_name for n in m.nics] == ["mlx5_0"]  # old driver: HCA name is the label
    assert raw(m, "GPU2", "mlx5_0") == "PIX"
    assert m.gpus[7].cpu_affinity == "12-23,36-47" and m.gpus[7].numa_affinity is None


def test_dgx_a100_prompt_line_and_ten_nics() -> None:
    m = topo("dgx-a100-10nic-user-prompt.txt")
    assert (len(m.gpus), len(m.nics)) == (8, 10)
    assert {raw(m, "GPU0", f"GPU{i}") for i in range(1, 8)} == {"NV12"}
    assert m.nics[9].device_name == "mlx5_9"
    assert raw(m, "NIC8", "NIC9") == "PIX"
    assert m.gpus[4].cpu_affinity == "112-127,240-255" and m.gpus[4].numa_affinity == "7"


def test_run_together_columns_are_split_back() -> None:
    # Driver quirk: "NIC7NIC8" in the header, "SYSSYS"/"PXBSYS" in rows.
    m = topo("a100-sxm4-runtogether-columns.txt")
    assert len(m.nics) == 10
    assert raw(m, "GPU6", "NIC7") == "PXB" and raw(m, "GPU6", "NIC8") == "SYS"
    assert raw(m, "NIC9", "NIC8") == "PIX"
    assert m.gpus[6].cpu_affinity == "40-47,104-111"


def test_numa_affinity_without_gpu_numa_id_column() -> None:
    m = topo("a100-8nic-roce-no-gpu-numa-id.txt")
    assert m.gpus[5].numa_affinity == "1" and m.gpus[5].gpu_numa_id is None
    assert m.nics[7].device_name == "mlx5_7"


def test_old_soc_outputs_keep_soc_kind() -> None:
    m = topo("p100-nvlink-soc-mlx5-dollar-prompt.txt")
    assert raw(m, "GPU0", "GPU1") == "NV2"
    soc = m.link("GPU0", "GPU2")
    assert soc is not None and soc.kind == "SOC"
    assert raw(m, "mlx5_0", "mlx5_1") == "PIX"
    pcie = topo("pcie-4gpu-soc-phb-mlx5.txt")
    assert raw(pcie, "GPU0", "GPU1") == "PIX" and raw(pcie, "GPU2", "mlx5_0") == "PHB"
    assert pcie.gpus[2].cpu_affinity == "8-15"


def test_tab_separated_with_empty_cell_before_gpu_numa_id() -> None:
    m = topo("rtx4090-8gpu-2nic-tabs.txt")
    assert (len(m.gpus), len(m.nics)) == (8, 2)
    assert raw(m, "GPU6", "NIC0") == "PHB" and raw(m, "NIC0", "NIC1") == "PIX"
    assert m.gpus[4].numa_affinity == "1" and m.gpus[4].cpu_affinity == "56-111,168-223"
    assert m.nics[0].device_name == "NIC0"  # no legend recorded: the label stands in


def test_tab_separated_old_mlx5_columns_with_trailing_tab() -> None:
    m = topo("4gpu-nv3-4mlx5-tabs.txt")
    assert raw(m, "GPU0", "GPU1") == "NV3" and raw(m, "GPU1", "mlx5_1") == "NODE"
    assert m.gpus[3].cpu_affinity == "64-127"


def test_single_gpu_and_two_gpu_pcie() -> None:
    one = topo("single-gpu.txt")
    assert len(one.devices) == 1 and one.gpus[0].cpu_affinity == "0-31,64-95"
    two = topo("gtx1080ti-2gpu-phb-numa-na.txt")
    assert raw(two, "GPU0", "GPU1") == "PHB" and two.gpus[0].numa_affinity is None


def test_derived_lost_nvlink_pair_is_visible() -> None:
    m = topo("derived-hgx-h100-gpu2-gpu3-nvlink-lost.txt")
    lost = m.link("GPU2", "GPU3")
    assert lost is not None and (lost.kind, lost.nvlinks) == ("NODE", 0)
    assert raw(m, "GPU2", "GPU4") == "NV18"


def test_ansi_underlined_header_parses() -> None:
    header = "\t\x1b[4mGPU0\x1b[0m\t\x1b[4mGPU1\x1b[0m\t\x1b[4mCPU Affinity\x1b[0m\n"
    text = header + "GPU0\t X \tNV4\t0-7\nGPU1\tNV4\t X \t0-7\n"
    assert raw(parse_topo(text), "GPU1", "GPU0") == "NV4"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("        GPU0    GPU1\nGPU0     X\nGPU1    NV4      X\n", 2),
        ("        GPU0    GPU1\nGPU0     X      BOGUS\nGPU1    NV4      X\n", 2),
        ("        GPU0    GPU1\nGPU0     X      X\nGPU1    NV4      X\n", 2),
        ("        GPU0    GPU1\nGPU0     X      NV4\nGPU1    NV4      X\nGPU1    NV4      X\n", 4),
    ],
)
def test_bad_rows_name_their_line(text: str, line: int) -> None:
    with pytest.raises(ParseError) as error:
        parse_topo(text)
    assert error.value.line == line


def test_missing_row_and_no_header_are_errors() -> None:
    with pytest.raises(ParseError, match="no matrix row for GPU1"):
        parse_topo("        GPU0    GPU1\nGPU0     X      NV4\n\nLegend:\n")
    with pytest.raises(ParseError, match="no header"):
        parse_topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
