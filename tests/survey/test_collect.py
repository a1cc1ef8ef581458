"""Reading facts: a failed command becomes a reason, a compound output with errors still parses."""

from __future__ import annotations

from clusterctl.facts.base import Fact
from clusterctl.inventory.model import Host
from clusterctl.survey.collect import collect_host_facts
from clusterctl.transport.base import CommandResult, Transport


class Canned(Transport):
    def __init__(self, answers: dict[str, tuple[str, str, int]]) -> None:
        super().__init__(Host(name="h"))
        self.answers = answers
        self.asked: list[str] = []

    def run(self, command, *, sudo=False, timeout=None, env=None, stdin=None):  # type: ignore[no-untyped-def]
        self.asked.append(command)
        out, err, code = self.answers.get(command, ("", f"sh: 1: {command.split()[0]}: not found\n", 127))
        return CommandResult(command, out, err, code, 0.0)


def test_missing_tool_is_reported_and_later_facts_still_read() -> None:
    facts = (Fact("first", "absent-tool", str.strip), Fact("second", "echo-ish", str.strip))
    transport = Canned({"echo-ish": ("ok\n", "", 0)})
    result = collect_host_facts(transport, facts)
    assert result.values == {"second": "ok"}
    assert [(m.fact, m.reason) for m in result.missing] == [("first", "absent-tool: command not found")]
    assert transport.asked == ["absent-tool", "echo-ish"]


def test_compound_output_mentioning_a_missing_file_still_parses() -> None:
    text = "### driver\ncat: /proc/driver/nvidia/version: No such file or directory\n### kernel\n6.1.0\n"
    result = collect_host_facts(Canned({"stack": (text, "", 0)}), (Fact("stack", "stack", lambda t: t.count("###")),))
    assert result.values == {"stack": 2} and result.missing == ()


def test_nvml_reader_replaces_the_gpu_command_and_falls_back_when_absent() -> None:
    from clusterctl.facts.model import GPUInfo

    facts = (Fact("gpus", "nvidia-smi --query-gpu", lambda t: "smi"),)
    smi = Canned({"nvidia-smi --query-gpu": ("x", "", 0)})
    via_nvml = collect_host_facts(smi, facts, gpu_reader=lambda: ((GPUInfo(0),), None))
    assert via_nvml.gpu_source == "nvml" and smi.asked == []
    fallback = collect_host_facts(smi, facts, gpu_reader=lambda: (None, "pynvml is not installed"))
    assert fallback.values == {"gpus": "smi"} and fallback.gpu_source == "nvidia-smi"
