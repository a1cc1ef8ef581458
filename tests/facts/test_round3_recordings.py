"""Round 3 of reading real output (issue 25): outputs kept inside another file (comment blocks), pastes
with prompts and elisions for every reader, and what a reader says when it still refuses. Every
fixture's source is in the README beside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from refusals import refusal

from clusterctl.errors import ParseError
from clusterctl.facts.clean import clean, clean_lines, is_prompt, seen
from clusterctl.facts.nccl_info import parse_nccl_info
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.nvlink import parse_nvlink
from clusterctl.facts.topo import parse_topo

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def read(folder: str, name: str) -> str:
    return (FIXTURES / folder / name).read_text()


def gpu_links(text: str) -> dict[tuple[str, str], str]:
    matrix = parse_topo(text)
    return {(link.a, link.b): link.raw for link in matrix.links if link.a.startswith("GPU") and link.a != link.b}


# --- comment blocks -----------------------------------------------------------------------------


def test_topo_mp_kept_as_a_comment_block_in_a_launch_script() -> None:
    matrix = parse_topo(read("topo", "a100-4gpu-2nic-topo-mp-comment-block-launch-script.txt"))
    assert [d.label for d in matrix.devices] == ["GPU0", "GPU1", "GPU2", "GPU3", "mlx5_0", "mlx5_1"]
    gpu1 = next(d for d in matrix.devices if d.label == "GPU1")
    assert (gpu1.cpu_affinity, gpu1.numa_affinity) == ("16-31,144-159", "1")
    nic = {(link.a, link.b): link.raw for link in matrix.links}
    assert nic[("GPU1", "mlx5_0")] == "PIX" and nic[("GPU2", "mlx5_1")] == "PIX" and nic[("GPU0", "mlx5_0")] == "SYS"
    assert matrix.warnings == ()


def test_the_same_block_inside_the_whole_script_is_found_and_read() -> None:
    whole = read("topo", "DERIVED-a100-4gpu-topo-mp-comment-block-inside-script.txt")
    block = read("topo", "a100-4gpu-2nic-topo-mp-comment-block-launch-script.txt")
    inside, alone = parse_topo(whole), parse_topo(block)
    assert inside.devices == alone.devices and inside.links == alone.links


@pytest.mark.parametrize("name, links", [
    ("rtx4090-4gpu-readme-hash-comment.txt", {("GPU0", "GPU1"): "SYS", ("GPU2", "GPU3"): "SYS"}),
    ("4gpu-nv4-go-source-slash-comment.txt", {("GPU0", "GPU1"): "NV4", ("GPU2", "GPU3"): "NV4",
                                              ("GPU0", "GPU2"): "SYS"}),
])
def test_matrix_behind_hash_or_slash_comments(name: str, links: dict[tuple[str, str], str]) -> None:
    found = gpu_links(read("topo", name))
    assert {pair: found[pair] for pair in links} == links
    assert len({d for pair in found for d in pair}) == 4


def test_cleaning_says_it_removed_a_comment_prefix() -> None:
    cleaned = clean(read("topo", "rtx4090-4gpu-readme-hash-comment.txt"))
    assert cleaned.removed == ("a '# ' comment prefix on every line",)
    assert cleaned.lines[3].text.split()[:3] == ["GPU0", "X", "SYS"] and cleaned.lines[3].number == 4


def test_quoted_reply_of_a_comment_block_peels_both() -> None:
    text = "".join(f"> {line}\n" for line in read("topo", "rtx4090-4gpu-readme-hash-comment.txt").splitlines())
    assert gpu_links(text) == gpu_links(read("topo", "rtx4090-4gpu-readme-hash-comment.txt"))
    assert clean(text).removed == ("a '> ' quote prefix on every line", "a '# ' comment prefix on every line")


def test_a_refusal_says_what_every_line_starts_with() -> None:
    # The 4090 block behind a prefix the cleaning does not take for a comment (a Markdown table cell).
    text = "".join(f"| {line[2:]}\n" for line in read("topo", "rtx4090-4gpu-readme-hash-comment.txt").splitlines())
    with pytest.raises(ParseError) as refused:
        parse_topo(text)
    assert "no header line starting with 'GPU0'" in str(refused.value)
    assert "every line starts with '| '" in str(refused.value)


def test_a_refusal_of_something_else_names_its_first_line() -> None:
    assert seen("$ nvidia-smi topo -m\nNVIDIA-SMI has failed\n") == (
        "the first data line (line 2) is 'NVIDIA-SMI has failed' (after removing 1 shell prompt line)")
    assert seen("\n\n") == "the input is empty"
    assert seen("```\n$ ibstat\n```\n").startswith("nothing is left after removing 1 shell prompt line")


def test_a_refusal_inside_a_longer_text_points_at_the_comment_block() -> None:
    text = "#!/bin/bash\nset -eu\n# one\n# two\n# three\nsrun ./train\n"
    assert seen(text).startswith("lines 3-5 are a '#' comment block inside a longer text")


# --- prompts and elisions, for every reader -------------------------------------------------------


@pytest.mark.parametrize("line", ["~/nccl-tests$ ./build/all_reduce_perf -g 8", "sh-4.4# ibstat",
                                  "bash-5.1$ nvidia-smi nvlink -s"])
def test_prompts_of_clipped_pastes_and_bare_shells(line: str) -> None:
    assert is_prompt(line)


@pytest.mark.parametrize("line", ["#  Rank  0 Group  0 Pid 2999911 on lab device  0", "  Link 0: 26.562 GB/s",
                                  "export LD_LIBRARY_PATH=$NCCL_HOME/lib:$LD_LIBRARY_PATH", "100%"])
def test_data_lines_with_dollar_hash_or_percent_are_not_prompts(line: str) -> None:
    assert not is_prompt(line)


def test_nvlink_status_with_a_prompt_line_and_an_elision() -> None:
    (gpu,) = parse_nvlink(read("nvlink", "h100-gpu0-dollar-prompt-elided.txt"))
    assert (gpu.gpu_index, gpu.gpu_name) == (0, "NVIDIA H100 80GB HBM3")
    assert [(lane.link, lane.speed_gbps) for lane in gpu.lanes] == [(0, 26.562), (1, 26.562), (17, 26.562)]


def test_nvlink_on_a_host_without_nvlink_in_a_fenced_paste() -> None:
    assert parse_nvlink(read("nvlink", "cmp170hx-no-nvlink-dollar-prompt-fenced.txt")) == ()


def test_nvlink_all_links_inactive_alone_is_not_taken_for_no_nvlink() -> None:
    assert refusal(parse_nvlink, "Unable to retrieve NVLink information as all links are inActive\n").line == 1


def test_cleaning_keeps_line_numbers_through_prefix_and_elision() -> None:
    lines = clean_lines("// $ nvidia-smi nvlink -s\n// GPU 0: X\n//   ...\n//   Link 0: 1 GB/s\n")
    assert [(line.number, line.text) for line in lines] == [(2, "GPU 0: X"), (4, "  Link 0: 1 GB/s")]


# --- nccl-tests logs that lost their '#' markers, tag prefixes, NCCL INFO lines ------------------


@pytest.mark.parametrize("name, avg, last_busbw, wrong", [
    ("all_reduce-a3high-tcpx-2node-no-hash-markers.txt", 40.6043, 50.17, 0),
    ("all_reduce-a3mega-tcpxo-2node-no-hash-markers-wrong-na.txt", 146.948, 188.54, None),
])
def test_nccl_tests_log_without_hash_markers_is_read_by_its_columns(
        name: str, avg: float, last_busbw: float, wrong: int | None) -> None:
    result = parse_nccl_tests(read("nccl-tests", name))
    assert result.failure() is None
    assert len(result.rows) == 11 and result.rows[0].size_bytes == 8388608
    assert result.avg_busbw_gbs == avg and result.out_of_bounds == 0
    assert result.largest_busbw_gbs == last_busbw and result.rows[-1].out_of_place.wrong == wrong
    assert (result.n_threads, result.n_gpus, result.max_bytes) == (1, 1, 8589934592)


def test_suffixed_binary_keeps_its_name_under_tag_output() -> None:
    result = parse_nccl_tests(read("nccl-tests", "all_gather_perf_mpi-rtx5090-2rank-tag-output.txt"))
    assert result.test == "all_gather_perf_mpi" and result.collective == "all_gather"


def test_nccl_info_lines_say_which_nics_were_listed_used_and_how_fast() -> None:
    result = parse_nccl_tests(read("nccl-tests", "gather-a100-2node-1nic-nccl-info-topology-excerpt.txt"))
    net = result.net
    assert net.network == "IB" and net.nranks == 2 and net.channels == 2
    assert [(n.name, n.link, n.gbs) for n in net.listed()] == [("mlx5_0", "RoCE", 3.125), ("mlx5_2", "IB", 25.0)]
    assert [n.name for n in net.used_nics()] == ["mlx5_2"]
    # The '...' the excerpt holds is an elision, not a row; the rows on both sides are read.
    assert len(result.rows) == 14 and result.hosts == ("n013", "n014") and result.largest_busbw_gbs == 10.91


def test_nccl_info_speed_lines_of_newer_nccl() -> None:
    net = parse_nccl_info([
        "h1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.4.19<0>",
        "h1:1:2 [0] NCCL INFO NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000 context=0x1",
        "h1:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
    ])
    assert [(n.name, n.gbs) for n in net.listed()] == [("mlx5_0", 50.0), ("mlx5_1", None)]
    assert (net.nranks, net.nnodes, net.hosts) == (16, 2, ("h1",))
