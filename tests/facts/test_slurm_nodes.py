"""``scontrol show node`` (both layouts) on recorded real output: state, flags, drain reason and its stamp."""

from __future__ import annotations

import pytest
from fixture_files import read_fixture
from refusals import refusal

from clusterctl.errors import ParseError
from clusterctl.facts.slurm import REASON_LIMIT, drain_reason, node_from, parse_node, parse_nodes, show_command


def test_a_node_drained_by_a_site_health_check_is_drained_but_not_clusterctls() -> None:
    (node,) = parse_nodes(read_fixture("scontrol", "unige-bamboo-show-node-health-drained.txt"))
    assert (node.name, node.state, node.base, node.flags) == ("gpu010", "IDLE+DRAIN", "IDLE", ("DRAIN",))
    assert node.reason == "health_ps___blocked" and node.reason_user == "root"
    assert node.reason_time == "2026-04-29T03:06:18"
    assert node.drained and not node.drained_by_clusterctl
    assert node.partitions == ("private-kalousis-gpu", "shared-gpu")
    assert node.field("OS") == "Linux 5.14.0-570.58.1.el9_6.x86_64 #1 SMP PREEMPT_DYNAMIC Fri Oct 31 13:55:05 UTC 2025"
    assert node.field("Gres") == "gpu:nvidia_geforce_rtx_5090:4(S:0-3),VramPerGpu:no_consume:32G"
    assert node.field("AllocTRES") == ""


def test_the_one_line_layout_reads_the_same() -> None:
    multi = parse_nodes(read_fixture("scontrol", "unige-bamboo-show-node-health-drained.txt"))
    one = parse_nodes(read_fixture("scontrol", "unige-bamboo-show-node-oneliner.txt"))
    assert one == multi


def test_several_nodes_and_clusterctls_own_reason() -> None:
    nodes = parse_nodes(read_fixture("scontrol", "unige-bamboo-show-node-two-nodes.txt"))
    assert [n.name for n in nodes] == ["gpu010", "gpu009"] and nodes[1].reason_time == "2026-04-29T03:00:18"
    ours = parse_node(read_fixture("scontrol", "unige-bamboo-show-node-clusterctl-drained.txt"), "gpu010")
    assert ours is not None and ours.drained_by_clusterctl
    assert ours.reason == "clusterctl: GPU_XID: GPU 3: Xid 79 (GPU has fallen off the bus)"
    assert parse_node(read_fixture("scontrol", "unige-bamboo-show-node-two-nodes.txt"), "gpu011") is None


def test_states_with_flags_and_suffixes() -> None:
    (node,) = parse_nodes("NodeName=n1 State=MIXED+DRAIN* Reason=Kill task failed [root@2025-01-01T00:00:00]\n")
    assert node.base == "MIXED" and node.flags == ("DRAIN",) and node.drained and node.drain_set
    (down,) = parse_nodes("NodeName=n2 State=DOWN+NOT_RESPONDING Reason=Not responding [slurm@2025-01-01T00:00:00]\n")
    assert down.drained and not down.drain_set and down.reason_user == "slurm"  # Slurm may return it: drain it
    (idle,) = parse_nodes("NodeName=n3 State=IDLE\n")
    assert not idle.drained and idle.reason == ""


def test_what_is_not_scontrol_output_names_its_line() -> None:
    assert refusal(parse_nodes, "NodeName=n1 State=IDLE\nsegmentation fault\n").line == 2
    with pytest.raises(ParseError):
        parse_nodes("NodeName=n1 Arch=x86_64\n")  # no State=


def test_a_command_result_gives_the_node_or_none_never_a_guess() -> None:
    from clusterctl.transport.base import CommandResult

    text = read_fixture("scontrol", "unige-bamboo-show-node-oneliner.txt")
    answered = CommandResult(show_command("gpu010"), text, "", 0, 0.1)
    node = node_from(answered, "gpu010")
    assert node is not None and node.state == "IDLE+DRAIN"
    assert node_from(answered, "gpu011") is None  # Slurm listed another node
    unknown = CommandResult(show_command("gpu011"), "", "Node gpu011 not found\n", 1, 0.1)
    assert node_from(unknown, "gpu011") is None
    assert node_from(CommandResult(show_command("gpu010"), "State=IDLE\n", "", 0, 0.1), "gpu010") is None  # unreadable


def test_a_cloud_nodes_fields_after_its_reason_stay_fields_in_both_layouts() -> None:
    (multi,) = parse_nodes(read_fixture("scontrol", "pcluster-24.11-idle-cloud-blank-line.txt"))
    (one,) = parse_nodes(read_fixture("scontrol", "pcluster-24.11-idle-cloud-oneliner.txt"))
    for node in (multi, one):
        assert (node.base, node.flags, node.drained) == ("IDLE", ("CLOUD",), False)
        assert (node.reason, node.reason_user, node.reason_time) == ("Node start up", "root", "2026-03-11T11:05:51")
        assert (node.field("InstanceId"), node.field("InstanceType")) == ("i-0cba89ff05359cd2f", "g7e.8xlarge")
        assert node.field("Gres") == "gpu:rtxproserver6000:1" and node.field("Version") == "24.11.7"
    assert one.fields == multi.fields


def test_a_reason_with_brackets_and_keys_typed_in_it_ends_at_slurms_own_stamp() -> None:
    # scontrol prints Reason=<text> [<user>@<time>]: the LAST [x@y] is the stamp, a [x@y] or Key= before it is text.
    for name in ("pcluster-24.11-reason-typed-brackets.txt", "pcluster-24.11-reason-typed-brackets-oneliner.txt"):
        (node,) = parse_nodes(read_fixture("scontrol", name))
        assert node.reason == "GPU 3 Xid=79 again after reseat [ticket INC-4711@servicedesk] RMA=pending"
        assert (node.reason_user, node.reason_time) == ("root", "2026-03-11T11:05:51")
        assert node.field("Xid") is None and node.field("RMA") is None
        assert (node.field("InstanceId"), node.field("InstanceType")) == ("i-0cba89ff05359cd2f", "g7e.8xlarge")

@pytest.mark.parametrize(("variant", "second_line"), [("", "RMA=pending, ticket INC-4711"),
                                                      ("-typed-brackets", "RMA=pending [ticket INC-4711@servicedesk]")])
def test_a_reason_of_two_lines_is_kept_whole_in_both_layouts(variant: str, second_line: str) -> None:
    # scontrol prints a reason's next lines under it, indented ("-o": after the stamp, 8 spaces before each);
    # Slurm's stamp closes the first line, a [x@y] typed in a next line is the reason's text.
    read = [parse_nodes(read_fixture("scontrol", f"pcluster-24.11-reason-two-lines{variant}{layout}.txt"))
            for layout in ("", "-oneliner")]
    for (node,) in read:
        assert node.reason == f"GPU 3 Xid=79 again after reseat\n{second_line}"
        assert (node.reason_user, node.reason_time) == ("root", "2026-03-11T11:05:51")
        assert node.field("RMA") is None and node.field("InstanceType") == "g7e.8xlarge"
    assert read[0] == read[1]

def test_down_drain_and_power_saving_states_of_older_slurms() -> None:
    (down,) = parse_nodes(read_fixture("scontrol", "slurm21.08-down-drain-not-responding.txt"))
    assert (down.base, down.flags, down.drained, down.drained_by_clusterctl) == ("DOWN", ("DRAIN",), True, False)
    assert (down.reason, down.reason_user, down.field("Gres")) == ("Not responding", "slurm", "(null)")
    asleep, booting = parse_nodes(read_fixture("scontrol", "slurm22.05-dynamic-powered-down-two-nodes.txt"))
    assert asleep.flags == ("DYNAMIC_NORM", "POWERED_DOWN") and not asleep.drained and asleep.reason == ""
    assert booting.flags == ("CLOUD", "DYNAMIC_NORM", "NOT_RESPONDING", "POWERING_UP") and not booting.drained
    assert booting.field("Arch") is None and booting.field("CPULoad") == "N/A"


def test_an_h100_node_keeps_its_gres_and_allocation() -> None:
    (node,) = parse_nodes(read_fixture("scontrol", "slurm23.11-h100-mixed-corespec.txt"))
    assert (node.state, node.drained, node.partitions) == ("MIXED", False, ("dev",))
    assert node.field("Gres") == "gpu:H100:8(S:0-1)" and node.field("CPUSpecList") == "52-55,108-111"
    assert node.field("AllocTRES") == "cpu=9,mem=320G,gres/gpu=2"
    assert node.to_json()["fields"]["CfgTRES"] == "cpu=104,mem=1900000M,billing=104,gres/gpu=8"


def test_a_drain_reason_is_clusterctls_one_printable_line_within_the_limit() -> None:
    assert drain_reason("GPU_XID: GPU 3:\n\tXid 79\x1b[31m  fell off the bus") == \
        "clusterctl: GPU_XID: GPU 3: Xid 79 [31m fell off the bus"
    long = drain_reason("x" * 500)
    assert len(long) == REASON_LIMIT and long.startswith("clusterctl: xxx") and long.endswith("...")


def test_four_nodes_of_slurm_17_with_lines_of_spaces_between_them() -> None:
    nodes = parse_nodes(read_fixture("scontrol", "slurm17.11-four-nodes-gresdrain-blank-lines.txt"))
    assert [(n.name, n.state, n.drained) for n in nodes] == [
        ("cortex-01", "ALLOCATED", False), ("dumfries-002", "ALLOCATED", False), ("oxygen-04", "IDLE+DRAIN", True),
        ("cricket", "IDLE", False)]
    drained = nodes[2]
    assert (drained.reason, drained.reason_user, drained.reason_time) == ("memory issues?", "root",
                                                                          "2019-01-29T10:42:12")
    assert not drained.drained_by_clusterctl and drained.partitions == ("short", "medium", "long", "killable")
    # Values keep their spaces but not the trailing blank scontrol prints; a node without Version= has none.
    assert nodes[0].field("OS") == "Linux 4.14.61-aufs-1 #1 SMP Tue Aug 7 18:13:22 IDT 2018"
    assert (nodes[0].field("GresUsed"), nodes[2].field("Gres")) == ("gpu:m60:8(IDX:0-7)", "(null)")
    assert nodes[3].field("NodeHostName") == "cricket" and nodes[3].field("Version") is None


def test_a_drain_reason_in_another_script_and_a_drained_node_with_jobs() -> None:
    nodes = parse_nodes(read_fixture("scontrol", "slurm25.05-four-nodes-drain-reason-non-ascii.txt"))
    assert [n.name for n in nodes if n.drained] == ["server5"]
    server5 = parse_node(read_fixture("scontrol", "slurm25.05-four-nodes-drain-reason-non-ascii.txt"), "server5")
    assert server5 is not None and (server5.reason, server5.reason_user) == ("维护中", "root")
    assert server5.to_json()["reason"] == "维护中" and server5.field("ResumeAfterTime") == "None"
    (busy,) = parse_nodes(read_fixture("scontrol", "slurm20.02-mixed-drain-psu.txt"))
    assert (busy.base, busy.flags, busy.drain_set) == ("MIXED", ("DRAIN",), True)
    assert (busy.reason, busy.reason_time) == ("deep power-off required for PSU", "2020-07-17T13:21:02")
    assert busy.field("AllocTRES") == "cpu=2,mem=1G" and busy.field("Gres") == "gpu:tesla:4(S:0-1)"


def test_a_real_one_line_listing_of_ten_nodes_down_and_drained() -> None:
    """``scontrol -o show node`` as clusterctl runs it (Slurm 16.05): ``DOWN*`` nodes, one ``DOWN*+DRAIN``, an NHC
    reason with nothing after its colon, nodes without ``Version=`` (two blanks where it would be)."""
    text = read_fixture("scontrol", "slurm16.05-oneliner-ten-nodes-down-nhc.txt")
    nodes = parse_nodes(text)
    assert len(nodes) == 10 and [n.name for n in nodes if not n.drained] == ["datamover1", "r1n03", "r1n04"]
    mover = parse_node(text, "datamover2")
    assert mover is not None and (mover.base, mover.flags, mover.drain_set) == ("DOWN", ("DRAIN",), True)
    assert (mover.reason, mover.reason_user, mover.reason_time) == ("Not responding", "root", "2017-06-29T08:00:07")
    lm2 = parse_node(text, "lm2")
    assert lm2 is not None and (lm2.reason, lm2.reason_time, lm2.drain_set) == ("NHC:", "2017-08-07T11:01:52", False)
    assert (lm2.field("NodeHostName"), lm2.field("Version"), lm2.field("FreeMem")) == ("lm2", None, "N/A")
    assert nodes[-1].field("AllocTRES") == "cpu=32,mem=125G" and nodes[-1].partitions == ("batch", "cpu", "test")
