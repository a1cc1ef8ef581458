"""What ``clusterctl health`` reads on a host, in ONE command per host, and how it is read back.

Level 0 only reads (no agent, nothing written): each probe is one simple command under a
``### <name>`` header, followed by ``@@rc <exit status>`` so that a missing tool (127) or a
hung one (``timeout`` gives 124) is told from a tool that answered. Every probe command runs
under ``timeout`` so a hung ``nvidia-smi`` (the classic sign of a GPU that fell off the bus)
costs its own limit, not the host's whole run. The kernel log goes first: it is the fastest
probe and the one that still answers when the GPU driver hangs.
"""

from __future__ import annotations

import collections
import functools
import re
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clusterctl.errors import ParseError
from clusterctl.facts.base import missing_reason, not_found
from clusterctl.facts.health_model import DcgmDiag, IBCounters, KernelLog, NvidiaSmiQuery, NVLinkErrors, PciDevices
from clusterctl.facts.model import NVLinkStatus, RDMADevices
from clusterctl.facts.nvsmi_query import LOST_GPU
from clusterctl.facts.sections import HEADERS, MARKER, split_sections
from clusterctl.facts.shared import parse_shared
from clusterctl.transport.base import CommandResult

#: The sysfs InfiniBand/RoCE port counters read: errors that show a flapping or dirty link.
IB_COUNTERS: tuple[str, ...] = (
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_rcv_remote_physical_errors",
    "port_xmit_discards", "local_link_integrity_errors", "excessive_buffer_overrun_errors",
)
_RC = re.compile(r"^@@rc (\d+)\s*$")
RC_MISSING = 127
RC_TIMED_OUT = 124


@dataclass(frozen=True)
class Probe:
    """One read: its section name, the tool named in findings, and the command line."""

    name: str
    tool: str
    command: str


def _journal(since_s: int) -> str:
    # No -q: it hides the hint a user outside the journal's groups gets (exit 0, no kernel line), which would
    # pass as "nothing logged"; root's empty window is then '-- No entries --'.
    return f"journalctl -k --no-pager -o short-iso --since=-{int(since_s)}s"


_COUNTER_FILES = " ".join(f"/sys/class/infiniband/*/ports/*/counters/{name}" for name in IB_COUNTERS)


def kernel_log_command(since_s: int) -> str:
    """``journalctl -k`` since ``since_s`` ago, root first; ``dmesg -T`` when there is no journal."""
    journal = _journal(since_s)
    # Without journal files at all (Storage=none, a container) journalctl says so and '-- No entries --', exit 0,
    # as for an empty window: its output is kept until that is ruled out, so dmesg is read then.
    return (f"{{ log=$(sudo -n {journal} 2>&1) || log=$({journal} 2>&1); }} && ! printf '%s\\n' \"$log\" | "
            "grep -q '^No journal files were found' && printf '%s\\n' \"$log\" || sudo -n dmesg -T 2>/dev/null || "
            "dmesg -T 2>&1")


@functools.lru_cache(maxsize=16)
def level0_probes(since_s: int, timeout_s: float) -> tuple[Probe, ...]:
    limit = f"timeout {int(max(timeout_s, 1))}"
    return (
        Probe("now", "date", "date '+%Y-%m-%dT%H:%M:%S%z'"),
        Probe("kernel-log", "journalctl", f"{limit} sh -c {shlex.quote(kernel_log_command(since_s))}"),
        Probe("nvidia-smi-q", "nvidia-smi", f"{limit} nvidia-smi -q 2>&1"),
        Probe("nvlink-s", "nvidia-smi", f"{limit} nvidia-smi nvlink -s 2>&1"),
        Probe("nvlink-e", "nvidia-smi", f"{limit} nvidia-smi nvlink -e 2>&1"),
        Probe("rdma", "ibstat", f"{limit} sh -c {shlex.quote('ibv_devinfo -v 2>/dev/null || ibstat 2>&1')}"),
        Probe("ib-counters", "sysfs", f"grep -H . {_COUNTER_FILES} 2>/dev/null"),
        Probe("lspci", "lspci", f"{limit} lspci -vvv 2>&1"),
    )


def recorded_commands() -> list[str]:
    """The simple commands inside the level-0 probes, as a mock host answers them (``clusterctl record``).

    A replayed host answers each program of the probe line by its own rule, so these are the
    program calls, without the ``timeout``/``sh -c``/``sudo -n`` around them.
    """
    return [_journal(86400), "dmesg -T", "nvidia-smi -q", "nvidia-smi nvlink -s", "nvidia-smi nvlink -e",
            "ibv_devinfo -v", "ibstat", f"grep -H . {_COUNTER_FILES}", "lspci -vvv"]


def probe_command(probes: tuple[Probe, ...]) -> str:
    """The one line run on the host: each probe under its header, its exit status after it."""
    return "; ".join(f"echo '{MARKER} {p.name}'; {p.command}; echo \"@@rc $?\"" for p in probes) + "; true"


@dataclass(frozen=True)
class ProbeOutput:
    name: str
    text: str
    exit_code: int | None


def split_probe_output(text: str) -> dict[str, ProbeOutput]:
    """Cut the one command's output back into the probes' outputs and exit statuses."""
    return {name: _probe_output(name, "\n".join(section.lines), len(section.lines))
            for name, section in split_sections(text, "health probe").items()}


@dataclass(frozen=True)
class ProbeProblem:
    """A probe that gave no usable answer: ``missing`` tool, ``hung`` (timed out), ``failed``, ``unparsable``."""

    probe: str
    tool: str
    kind: str
    reason: str


@dataclass
class HostProbe:
    """What one host's probes gave, parsed; ``None`` for a probe that gave nothing usable."""

    smi: NvidiaSmiQuery | None = None
    nvlink: tuple[NVLinkStatus, ...] | None = None
    nvlink_errors: NVLinkErrors | None = None
    kernel: KernelLog | None = None
    rdma: RDMADevices | None = None
    ib_counters: IBCounters | None = None
    pci: PciDevices | None = None
    dcgm: DcgmDiag | None = None
    #: The host's local time (``date``), to cut a ``dmesg -T`` log at ``--since``.
    now: str | None = None
    #: The kernel log window asked for, as given (``--since 60m``); None for a pasted log (no window).
    since: str | None = None
    problems: list[ProbeProblem] = field(default_factory=list)
    #: Single-host nccl-tests at level 2+ (``bench.nccl_tests.NcclHostRun``).
    nccl: Any = None
    #: Probes whose output was longer than a probe may keep: name -> (bytes printed, bytes dropped).
    cut: dict[str, tuple[int, int]] = field(default_factory=dict)


#: Probe name -> the ``HostProbe`` attribute its parsed output goes to.
_ATTRIBUTE = {"kernel-log": "kernel", "nvidia-smi-q": "smi", "nvlink-s": "nvlink", "nvlink-e": "nvlink_errors",
              "rdma": "rdma", "ib-counters": "ib_counters", "lspci": "pci"}


@functools.cache
def parsers() -> dict[str, Callable[[str], Any]]:
    """``HostProbe`` attribute -> the parser of its tool's output (the live probes' and ``health read``'s)."""
    from clusterctl.facts.dcgmi import parse_dcgmi_diag
    from clusterctl.facts.ib_counters import parse_ib_counters
    from clusterctl.facts.kernel_log import parse_kernel_log
    from clusterctl.facts.lspci import parse_lspci
    from clusterctl.facts.nvlink import parse_nvlink
    from clusterctl.facts.nvlink_errors import parse_nvlink_errors
    from clusterctl.facts.nvsmi_query import parse_nvidia_smi_q
    from clusterctl.facts.rdma import parse_rdma

    return {"kernel": parse_kernel_log, "smi": parse_nvidia_smi_q, "nvlink": parse_nvlink,
            "nvlink_errors": parse_nvlink_errors, "rdma": parse_rdma, "ib_counters": parse_ib_counters,
            "pci": parse_lspci, "dcgm": parse_dcgmi_diag}


def _problem(probe: Probe, output: ProbeOutput) -> ProbeProblem | None:
    """Why a probe's answer is not usable, or ``None`` when it is."""
    code = output.exit_code
    if code == RC_TIMED_OUT:
        return ProbeProblem(probe.name, probe.tool, "hung", f"{probe.tool} did not answer within its time limit")
    # 127: the shell (or ``timeout``) did not find the last program tried; the kernel log tries both of its.
    if code == RC_MISSING:
        tool = "journalctl and dmesg" if probe.name == "kernel-log" else probe.tool
        return ProbeProblem(probe.name, tool, "missing", not_found(tool))
    # nvidia-smi's exit for a GPU it cannot open (15: fallen off the bus) is no failure to read: the other GPUs'
    # blocks are there, and the line that names the lost one (GPU_MISSING).
    failed = code not in (0, None) and not (probe.name == "nvidia-smi-q" and LOST_GPU.search(output.text))
    if not output.text.strip():
        return ProbeProblem(probe.name, probe.tool, "failed", f"exit code {code}" if failed else "no output")
    reason = missing_reason(CommandResult(probe.command, output.text, "", code or 0, 0.0)) if failed else None
    return ProbeProblem(probe.name, probe.tool, "failed", reason) if reason else None


def read_probe_outputs(found: dict[str, ProbeOutput], probes: tuple[Probe, ...]) -> HostProbe:
    """The probes' outputs (``ProbeCollector.outputs``) parsed into a ``HostProbe``; a probe that cannot be
    read is a problem."""
    parse = parsers()
    probe = HostProbe()
    for p in probes:
        output = found.get(p.name)
        if output is None:
            probe.problems.append(ProbeProblem(p.name, p.tool, "failed", "no output (the probe did not run)"))
            continue
        if p.name == "now":
            probe.now = output.text.strip() or None
            continue
        if p.name == "ib-counters" and not output.text.strip():
            continue  # no RDMA device: nothing to count, not a problem
        if p.name == "kernel-log" and output.exit_code == 0 and all(
                line.startswith("-- ") and line.endswith(" --") for line in output.text.strip().splitlines()):
            # Nothing logged in the window: no output, or journalctl's markers alone ('-- No entries --', under
            # systemd before 250 its '-- Logs begin at ... --' header, which no -q hides now).
            probe.kernel = KernelLog((), source="journalctl")
            continue
        trouble = _problem(p, output)
        attribute = _ATTRIBUTE[p.name]
        if trouble is not None and trouble.kind == "failed" and p.name == "kernel-log" and \
                (kernel := parse_shared(parse[attribute], output.text)).unreadable:
            # dmesg refused (kernel.dmesg_restrict) after the shell's "journalctl: not found": the kernel log's
            # reader names the refusal (KERNEL_LOG_UNREADABLE and its fix), not the program tried on the way.
            probe.kernel = kernel
            continue
        if trouble is not None:
            probe.problems.append(trouble)
            continue
        try:
            # Alike hosts print identical outputs (the same nvlink -s on every node): parsed once, as survey does.
            setattr(probe, attribute, parse_shared(parse[attribute], output.text))
        except ParseError as exc:
            probe.problems.append(ProbeProblem(p.name, p.tool, "unparsable", str(exc)))
    return probe


#: What one probe's output may keep while it streams in: its first and its last lines, up to these
#: many bytes. Real outputs are far smaller (nvidia-smi -q of 8 GPUs ~100 kB, lspci -vvv ~500 kB,
#: a busy day of kernel log ~1 MB); a host printing more (a debug loop, a flood of kernel messages)
#: costs at most this much per probe, whatever it prints.
PROBE_HEAD_BYTES = 2 * 1024 * 1024
PROBE_TAIL_BYTES = 1 * 1024 * 1024
#: What the transport itself keeps of the whole output: the collector has what is read.
TRANSPORT_KEEPS = 64 * 1024


_HEADER_OPENING = MARKER + " "
_NEXT_HEADER = "\n" + _HEADER_OPENING
#: The characters other than ``\n`` that ``str.splitlines`` breaks lines at. An output holding one is
#: read the long way (``text()`` then ``split_probe_output``), so that it reads exactly as a pasted one.
_ASCII_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")
_OTHER_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _next_header(text: str, start: int) -> int:
    """Where the next header line after ``start`` (a newline or 0) starts, or -1."""
    found = text.find(_NEXT_HEADER, start)
    return found + 1 if found >= 0 else -1


def _breaks_lines(text: str) -> bool:
    if text.isascii():
        return any(c in text for c in _ASCII_BREAKS)
    return _OTHER_BREAKS.search(text) is not None


class _Section:
    def __init__(self, header: str) -> None:
        self.header = header
        #: The lines kept from the start: blocks of whole lines, each joined by ``\n`` (one block per
        #: chunk that arrived, so a section costs a few strings, not one per line).
        self.head: list[str] = []
        self.head_lines = 0
        self.head_bytes = 0
        #: Once the head is full: the last lines, one string each.
        self.tail: collections.deque[str] = collections.deque()
        self.tail_bytes = 0
        self.total = 0
        self.dropped = 0

    @property
    def lines_kept(self) -> int:
        return self.head_lines + len(self.tail)

    def body(self) -> str:
        """The kept lines joined by ``\\n`` (``""`` for none as for one empty line: see ``lines_kept``)."""
        return "\n".join([*self.head, *self.tail]) if self.tail else "\n".join(self.head)


class ProbeCollector:
    """The probes' output as it streams in (``Transport.run(on_line=...)``), bounded per probe.

    Each probe keeps its first ``PROBE_HEAD_BYTES`` and last ``PROBE_TAIL_BYTES`` of lines (the
    ``@@rc`` status line is the last); what lies between is dropped and counted, so memory per host
    stays bounded whatever a host prints, and the report can say what was not judged.

    A transport's ``LineSplitter`` hands each chunk's complete lines as one text (``add_text``): the
    headers are found by searching that text and the lines between them kept as it is, so the ~3,500
    lines of a host's probes are never made into one string each, and ``outputs()`` hands the probes'
    sections to ``read_probe_outputs`` without joining them into one text to cut apart again.
    """

    def __init__(self, head: int = PROBE_HEAD_BYTES, tail: int = PROBE_TAIL_BYTES) -> None:
        self.head_limit = head
        self.tail_limit = tail
        self.sections: list[_Section] = [_Section("")]
        #: No line break but ``\n`` seen: the sections read the same as the text's ``splitlines``.
        self._plain = True
        self._lock = threading.Lock()

    def __call__(self, stream: str, line: str) -> None:
        """One line (``on_line``)."""
        self.add_text(stream, line)

    def add_text(self, stream: str, text: str) -> None:
        """Whole lines joined by ``\\n``, without the last line's newline (``LineSplitter``'s ``add_text``)."""
        if stream != "stdout":
            return
        with self._lock:
            if self._plain and _breaks_lines(text):
                self._plain = False
            section = self.sections[-1]
            # Where a header line starts (-1: none): the text's start, or just after a newline.
            at = 0 if text.startswith(_HEADER_OPENING) else _next_header(text, 0)
            begin = 0  # where the lines not yet kept start; len(text) + 1 when none are left
            while at >= 0:
                if at > begin:
                    self._keep(section, text[begin:at - 1])
                end = text.find("\n", at)
                section = _Section(text[at:] if end < 0 else text[at:end])
                self.sections.append(section)
                if end < 0:
                    begin = len(text) + 1
                    break
                begin = end + 1
                at = _next_header(text, end)
            if begin <= len(text):
                self._keep(section, text[begin:])

    def _keep(self, section: _Section, run: str) -> None:
        """``run``: one or more whole lines of one section (no header among them), joined by ``\\n``."""
        size = len(run) + 1  # each line and its newline
        if not section.tail and section.head_bytes + size <= self.head_limit:
            section.head.append(run)
            section.head_lines += run.count("\n") + 1
            section.head_bytes += size
            section.total += size
        elif "\n" in run:  # the head is full, or would be: its lines one by one, the first few may still fit
            for line in run.split("\n"):
                self._keep(section, line)
        else:
            section.total += size
            section.tail.append(run)
            section.tail_bytes += size
            while section.tail_bytes > self.tail_limit and len(section.tail) > 1:
                gone = section.tail.popleft()
                section.tail_bytes -= len(gone) + 1
                section.dropped += len(gone) + 1

    def text(self) -> str:
        """The output as the probes printed it, less what was dropped (``cut`` says where)."""
        with self._lock:
            lines = [line for s in self.sections for line in ([s.header] if s.header else []) + [*s.head, *s.tail]]
            return "\n".join(lines) + ("\n" if lines else "")

    def outputs(self) -> dict[str, ProbeOutput]:
        """The probes' outputs, as ``split_probe_output(self.text())`` gives them, without that text.

        The long way (the joined text cut apart) where the sections alone might read otherwise: a
        line before the first header, a header that is not one, a probe twice, a line break other
        than ``\\n``.
        """
        with self._lock:
            sections = self.sections
            names = [HEADERS[MARKER].match(s.header) for s in sections[1:]]
            direct = (self._plain and len(sections) > 1 and not sections[0].lines_kept
                      and all(names) and len({m.group(1) for m in names if m}) == len(names))
            if direct:
                return {match.group(1): _probe_output(match.group(1), section.body(), section.lines_kept)
                        for section, match in zip(sections[1:], names, strict=True) if match}
        return split_probe_output(self.text())

    def cut(self) -> dict[str, tuple[int, int]]:
        """Probe name -> (bytes printed, bytes dropped), for the probes that printed too much."""
        with self._lock:
            return {s.header[len(MARKER) + 1:].strip(): (s.total, s.dropped) for s in self.sections
                    if s.dropped and s.header}


def _probe_output(name: str, body: str, count: int) -> ProbeOutput:
    """``count`` lines joined by ``\\n`` in ``body``, read as ``split_probe_output`` reads a section."""
    while count:  # the blank lines at the end go
        last = body.rfind("\n") + 1
        if body[last:].strip():
            break
        body, count = body[:last - 1] if last else "", count - 1
    code: int | None = None
    if count:
        last = body.rfind("\n") + 1
        match = _RC.match(body[last:])
        if match:
            code = int(match.group(1))
            body, count = body[:last - 1] if last else "", count - 1
    return ProbeOutput(name, body + "\n" if count else "", code)
