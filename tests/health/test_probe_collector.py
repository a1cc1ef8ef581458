"""The probe collector hands each probe's section to ``read_probe_outputs`` straight from what it kept, and
what it hands on must be what cutting its joined text apart gives: the same outputs and exit statuses,
or the same error, whatever the host printed and however the transport's chunks cut it."""

from __future__ import annotations

import random

import pytest

from clusterctl.errors import ParseError
from clusterctl.health.probe import ProbeCollector, ProbeOutput, split_probe_output
from clusterctl.transport.output import LineSplitter

#: Lines a host's probes print, the awkward ones among them: blank and space-only lines, status
#: lines, headers that are not headers, carriage returns and other characters that split a line.
LINES = ["### now", "### kernel-log", "### nvidia-smi-q", "### rdma", "@@rc 0", "@@rc 127", "@@rc 124 ", "", "  ",
         "GPU 00000000:07:00.0", "    Product Name : NVIDIA A100-SXM4-80GB", "###", "### two words", "#### deep",
         "x ### not a header", "with\rcarriage return", "form\x0cfeed", "caf\u00e9 \u2028 separator", "\t",
         "@@rc", "@@rc 0 trailing"]


def _outcome(read: object) -> object:
    try:
        return read() if callable(read) else read
    except ParseError as exc:
        return ("ParseError", str(exc))


def _stream(lines: list[str], rng: random.Random, collector: ProbeCollector) -> None:
    data = ("\n".join(lines) + ("\n" if rng.random() < 0.8 else "")).encode()
    splitter = LineSplitter("stdout", collector)
    at = 0
    while at < len(data):  # chunks cut anywhere, as SSH windows cut them
        step = rng.choice([1, 3, 17, 200, 4096, len(data)])
        splitter.add(data[at:at + step])
        at += step
    splitter.flush()


@pytest.mark.parametrize("seed", range(300))
def test_the_sections_handed_on_are_those_the_joined_text_gives(seed: int) -> None:
    rng = random.Random(seed)
    plain = seed % 3 != 0  # two runs in three without the characters that force the long way
    # Plain: no character that splits a line but the newline, and no header among a probe's lines.
    pool = [line for line in LINES if line.isascii() and "\r" not in line and "\x0c" not in line
            and not line.startswith("### ")] if plain else LINES
    headers = ["### now", "### kernel-log", "### nvidia-smi-q", "### rdma"]
    lines: list[str] = []
    for name in rng.sample(headers, rng.randint(1, 4)):
        lines.append(name)
        lines.extend(rng.choice(pool) for _ in range(rng.randint(0, 30)))
    if seed % 7 == 0:
        lines.insert(0, rng.choice(["", "stray", " "]))
    if seed % 11 == 0:
        lines.append(rng.choice(headers))  # a probe twice
    collector = ProbeCollector(head=rng.choice([40, 200, 10_000]), tail=rng.choice([20, 100, 10_000]))
    _stream(lines, rng, collector)
    assert _outcome(collector.outputs) == _outcome(lambda: split_probe_output(collector.text()))


def test_a_usual_probe_output_reads_with_its_status() -> None:
    collector = ProbeCollector()
    collector.add_text("stdout", "### now\n2026-12-06T05:00:00+0000\n@@rc 0\n### nvidia-smi-q\nGPU 0\n\n@@rc 3")
    collector.add_text("stdout", "### rdma\n@@rc 127")
    collector.add_text("stderr", "### ignored\nnoise")
    assert collector.outputs() == {
        "now": ProbeOutput("now", "2026-12-06T05:00:00+0000\n", 0),
        "nvidia-smi-q": ProbeOutput("nvidia-smi-q", "GPU 0\n\n", 3),
        "rdma": ProbeOutput("rdma", "", 127),
    }


def test_a_probe_printing_past_its_head_keeps_its_tail_and_status() -> None:
    collector = ProbeCollector(head=30, tail=20)
    collector.add_text("stdout", "### lspci\n" + "\n".join(f"line {i:03d}" for i in range(100)) + "\n@@rc 0")
    found = collector.outputs()["lspci"]
    assert found.exit_code == 0
    assert found.text.startswith("line 000\nline 001\n") and found.text.endswith("line 099\n")
    assert "line 050" not in found.text
    assert collector.cut()["lspci"][1] > 0
