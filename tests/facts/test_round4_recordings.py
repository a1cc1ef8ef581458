"""Round 4 of real pastes (issue #36) for the shared readers: topology rows with an empty CPU Affinity
cell, and prompt or command lines on the first line of a paste."""

from __future__ import annotations

from fixture_files import read_fixture

from clusterctl.facts.clean import clean
from clusterctl.facts.nvlink import parse_nvlink
from clusterctl.facts.rdma import parse_rdma
from clusterctl.facts.topo import parse_topo


def test_empty_cpu_affinity_cells_of_a_cgroup_limited_job_are_read_by_position() -> None:
    matrix = parse_topo(read_fixture("topo", "DERIVED-rtx4090-8gpu-cgroup-empty-cpu-affinity-tabs.txt"))
    by_label = {d.label: d for d in matrix.devices}
    assert (by_label["GPU0"].cpu_affinity, by_label["GPU0"].numa_affinity) == ("0-55,112-167", "0")
    for label in ("GPU4", "GPU5", "GPU6", "GPU7"):
        # Not CPU '1' and no NUMA node: the cell is empty and the NUMA node is 1.
        assert (by_label[label].cpu_affinity, by_label[label].numa_affinity) == (None, "1"), label
    assert not any("affinity" in w.message for w in matrix.warnings)
    assert matrix.link("GPU6", "NIC0") is not None and matrix.link("GPU6", "NIC0").kind == "PHB"


def test_empty_cpu_affinity_cells_of_a_space_aligned_matrix_are_read_by_column() -> None:
    matrix = parse_topo(read_fixture("topo", "DERIVED-hgx-h100-cgroup-empty-cpu-affinity-spaces.txt"))
    assert [(d.cpu_affinity, d.numa_affinity) for d in matrix.gpus] == [("0-47,96-143", "0")] * 4 + [(None, "1")] * 4
    assert matrix.warnings == ()


def test_the_original_tab_separated_matrix_still_reads_every_affinity() -> None:
    matrix = parse_topo(read_fixture("topo", "rtx4090-8gpu-2nic-tabs.txt"))
    assert [d.cpu_affinity for d in matrix.gpus] == ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4
    assert [d.numa_affinity for d in matrix.gpus] == ["0"] * 4 + ["1"] * 4


def test_root_prompt_hash_command_on_the_first_line_is_a_prompt() -> None:
    devices = parse_rdma(read_fixture("ibv_devinfo", "mlx4-ddr-20g-root-prompt-ompi-users-2010.txt"))
    assert devices.warnings == ()
    assert [p.rate_gbps for p in devices[0].ports] == [20.0, 10.0]
    assert "1 shell prompt line" in clean("# ibv_devinfo -v\nhca_id:\tmlx4_0\n").removed


def test_a_bare_command_echoed_on_the_first_line_is_not_output() -> None:
    statuses = parse_nvlink(read_fixture("nvlink", "gb200-nvml-mock-issue-elided.txt"))
    assert [len(s.lanes) for s in statuses] == [18, 2]
    assert any("leaves lines out" in w.message for w in statuses.warnings)


def test_comment_lines_that_look_like_a_prompt_stay_data() -> None:
    # perfquery's own first line and nccl-tests' banner start with '# ' too: they are output.
    assert clean("# Port counters: Lid 1 port 1\nPortSelect:......1\n").lines[0].text == "# Port counters: Lid 1 port 1"
    assert clean("# nThread 1 nGpus 8 minBytes 8\nx\n").lines[0].text.startswith("# nThread")
    assert clean("[gpu6000 ~]# nvidia-smi -q\nGPU 00000000:01:00.0\n").lines[0].text == "GPU 00000000:01:00.0"
