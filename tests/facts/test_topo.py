from __future__ import annotations

import pytest
from fixture_files import fixture_dir
from refusals import refusal

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


WHOLE = sorted(p.name for p in TOPO.glob("*.txt") if p.name not in
               {"DERIVED-h200-clipped-100-columns.txt", "DERIVED-h200-gpu-rows-only.txt"}
               and not p.name.endswith("gpu-rows-excerpt.txt"))  # a paste cut below the GPU rows


@pytest.mark.parametrize("name", WHOLE)
def test_every_whole_recording_gives_a_full_symmetric_matrix(name: str) -> None:
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
    ("text", "line", "says"),
    [
        ("        GPU0    GPU1\nGPU0     X\nGPU1    NV4      X\n", 2, "1 of 2 cells"),
        ("        GPU0    GPU1\nGPU0     X      BOGUS\nGPU1    NV4      X\n", 2, "'BOGUS' is not a link type"),
        ("        GPU0    GPU1\nGPU0     X      X\nGPU1    NV4      X\n", 2, "'X' off the diagonal"),
    ],
)
def test_a_damaged_row_costs_its_cells_not_the_matrix(text: str, line: int, says: str) -> None:
    # The GPU1 row still has the GPU pair's link: the matrix is symmetric, so it stands.
    matrix = parse_topo(text)
    assert raw(matrix, "GPU0", "GPU1") == "NV4"
    assert matrix.warnings
    assert any(w.line == line and says in w.message for w in matrix.warnings), matrix.warnings


def test_a_second_row_for_the_same_device_is_an_error_naming_its_line() -> None:
    text = "        GPU0    GPU1\nGPU0     X      NV4\nGPU1    NV4      X\nGPU1    NV4      X\n"
    assert refusal(parse_topo, text).line == 4


def test_missing_gpu_block_and_no_header_are_errors() -> None:
    # Neither row has GPU0 -> GPU2: the GPU-to-GPU block, the core of the matrix, is incomplete.
    with pytest.raises(ParseError, match="GPU-to-GPU block is incomplete"):
        parse_topo("        GPU0    GPU1    GPU2\nGPU0     X      NV4\nGPU1    NV4      X      NV4\n")
    with pytest.raises(ParseError, match="no GPU rows"):
        parse_topo("        GPU0    GPU1\n\nLegend:\n")
    with pytest.raises(ParseError, match="no header"):
        parse_topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")


# --- round 2: pasted, clipped and fused outputs (issue 13) -------------------------------------

H200 = [("GPU0", "NIC4", "PIX"), ("GPU2", "NIC0", "PIX"), ("GPU7", "NIC2", "PIX"), ("GPU5", "NIC7", "PIX"),
        ("GPU0", "NIC2", "SYS"), ("GPU4", "NIC0", "SYS"), ("GPU7", "NIC7", "NODE")]


def test_h200_on_epyc_reads_whole_without_warnings() -> None:
    m = topo("h200-epyc9534-8nic-tabs.txt")
    assert (len(m.gpus), len(m.nics), m.warnings) == (8, 8, ())
    for a, b, cell in H200:
        assert raw(m, a, b) == cell
    assert [(g.cpu_affinity, g.numa_affinity) for g in m.gpus[3:5]] == [("0-63,128-191", "0"), ("64-127,192-255", "1")]


def test_markdown_paste_with_a_blank_line_after_every_row_reads_the_same() -> None:
    pasted, recorded = topo("DERIVED-h200-markdown-blank-lines.txt"), topo("h200-epyc9534-8nic-tabs.txt")
    assert pasted == recorded


def test_cells_fused_with_the_affinity_list_are_split_and_said() -> None:
    m = topo("DERIVED-h200-fused-cells.txt")
    recorded = topo("h200-epyc9534-8nic-tabs.txt")
    assert m.links == recorded.links  # "SY", "SYS0-63,...", "N64-127,..." all read back to the recording's cells
    assert [(g.cpu_affinity, g.numa_affinity) for g in m.gpus] == [
        (g.cpu_affinity, g.numa_affinity) for g in recorded.gpus]
    said = {(w.line, w.message.split(" ")[1]) for w in m.warnings}
    assert (2, "GPU0") in said and (9, "GPU7") in said  # the line of each fused cell
    assert any("'64-127,192-2551'" in w.message and w.line == 7 for w in m.warnings)


def test_a_fused_numa_cell_no_other_row_explains_is_left_unknown_not_guessed() -> None:
    text = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tNV4\t0-7\t0\t\tN/A\n"
            "GPU1\tNV4\t X \t8-151\t\tN/A\n")
    m = parse_topo(text)
    assert (m.gpus[1].cpu_affinity, m.gpus[1].numa_affinity) == (None, None)
    assert m.gpus[0].cpu_affinity == "0-7"
    assert any(w.line == 3 and "fused with the NUMA cell" in w.message for w in m.warnings)


def test_terminal_clipped_at_100_columns_keeps_gpu_block_and_nics_from_rows_and_legend() -> None:
    m = topo("DERIVED-h200-clipped-100-columns.txt")
    recorded = topo("h200-epyc9534-8nic-tabs.txt")
    assert [n.device_name for n in m.nics] == [f"mlx5_{i}" for i in range(8)]
    for a, b, cell in H200:  # GPU -> NIC4..7 come from the NIC rows, which kept their GPU cells
        assert raw(m, a, b) == cell
    known = {(link.a, link.b) for link in m.links}
    assert all(recorded.link(a, b) == m.link(a, b) for a, b in known)  # nothing invented
    assert m.link("NIC4", "NIC6") is None  # cut from every row that had it
    assert all(g.cpu_affinity is None and g.numa_affinity is None for g in m.gpus)
    assert any("cut short" in w.message and w.line == 1 for w in m.warnings)
    assert any("NUMA Affinity column was cut off" in w.message for w in m.warnings)


def test_terminal_clipped_inside_the_affinity_column_drops_the_cut_values() -> None:
    m = topo("DERIVED-h200-clipped-140-columns.txt")
    assert m.links == topo("h200-epyc9534-8nic-tabs.txt").links
    assert all(g.cpu_affinity is None for g in m.gpus)  # "0-63" is what was left of "0-63,128-191"
    assert any("'0-63'" in w.message and w.line == 2 for w in m.warnings)


def test_partial_paste_without_nic_rows_or_legend_keeps_the_gpu_facts() -> None:
    m = topo("DERIVED-h200-gpu-rows-only.txt")
    assert (len(m.gpus), len(m.nics)) == (8, 8)
    for a, b, cell in H200:
        assert raw(m, a, b) == cell
    assert raw(m, "NIC4", "GPU0") == "PIX"  # symmetric
    assert m.link("NIC0", "NIC1") is None
    assert [n.device_name for n in m.nics][:2] == ["NIC0", "NIC1"]
    messages = " | ".join(w.message for w in m.warnings)
    assert "no rows for NIC0..NIC7" in messages and "NIC Legend not pasted" in messages
