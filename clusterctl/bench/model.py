"""Data the bench commands produce: link results, findings (``clusterctl.findings.Finding``), matrices."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterctl.facts.perftest import PerftestResult
from clusterctl.findings import Finding, Severity


def bench_finding(severity: Severity, code: str, about: str, message: str, *, about_kind: str = "subject",
                  fix: str = "", **evidence: Any) -> Finding:
    """A bench finding about ``about``: a link ``a/hca <-> b/hca``, a rack, ``host/hca`` (``subject``),
    a host (``about_kind="host"``) or a log file (``about_kind="file"``); ``evidence`` the figures behind it."""
    where: dict[str, Any] = {about_kind if about_kind in ("host", "file") else "subject": about}
    return Finding(severity, code, message, fix=fix, evidence=evidence, **where)


def judged_rate(line_rate_gbps: float | None, bidirectional: bool) -> float | None:
    """The rate a perftest bandwidth is judged against: a bidirectional run (-b) adds both directions,
    so twice the line rate."""
    return line_rate_gbps * (2 if bidirectional else 1) if line_rate_gbps else None


@dataclass(frozen=True)
class HcaInfo:
    """An RDMA device to test on a host, as the survey or ``ibv_devinfo -v`` saw it."""

    name: str
    #: ``InfiniBand`` or ``Ethernet`` (RoCE).
    link_layer: str = "InfiniBand"
    rate_gbps: float | None = None
    #: RoCE v2 GID index to pass as ``-x``; ``None`` for InfiniBand or when unknown.
    gid_index: int | None = None


@dataclass(frozen=True)
class LinkResult:
    """One perftest run between a server endpoint and a client endpoint."""

    round: int
    server: str
    client: str
    server_hca: str
    client_hca: str
    port: int
    test: str
    #: Bandwidth in Gb/s (bandwidth tests), the lower of what both sides report.
    gbps: float | None = None
    #: Typical latency in microseconds (latency tests).
    latency_us: float | None = None
    #: Why the test failed, ``None`` when it produced a figure.
    error: str | None = None
    #: What the client's banner said: a ``-b`` run, and the ``Link type`` (``IB`` / ``Ethernet``).
    bidirectional: bool = False
    link_type: str | None = None
    #: Line rate the link is judged against and the fraction it must reach.
    expected_gbps: float | None = None
    min_fraction: float | None = None
    same_rack: bool | None = None
    server_command: str = ""
    client_command: str = ""
    server_output: str = field(default="", repr=False)
    client_output: str = field(default="", repr=False)
    #: Each side's output as ``parse_perftest`` read it (``None``: none, or one it could not read).
    client_result: PerftestResult | None = field(default=None, repr=False, compare=False)
    server_result: PerftestResult | None = field(default=None, repr=False, compare=False)
    #: Why the server's output could not be read (the parser names the line): the figure is then the client's alone.
    server_parse_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def endpoints(self) -> tuple[str, str]:
        return (f"{self.server}/{self.server_hca}", f"{self.client}/{self.client_hca}")

    @property
    def judged_gbps(self) -> float | None:
        return judged_rate(self.expected_gbps, self.bidirectional)

    @property
    def fraction(self) -> float | None:
        rate = self.judged_gbps
        return None if self.gbps is None or rate is None else self.gbps / rate

    @property
    def slow(self) -> bool:
        """Failed, or below the fraction of line rate its placement requires (the JSON's ``slow``, and
        ``LINK_SLOW``'s test)."""
        if self.error is not None:
            return True
        frac = self.fraction
        return frac is not None and self.min_fraction is not None and frac < self.min_fraction


@dataclass(frozen=True)
class Matrix:
    """A symmetric host x host (or endpoint x endpoint) table of the worst figure per pair."""

    nodes: tuple[str, ...]
    #: ``(a, b)`` with a before b in ``nodes`` -> value; missing = not tested; ``None`` = failed.
    cells: dict[tuple[str, str], float | None]
    unit: str = "Gb/s"

    @property
    def cell_meaning(self) -> str:
        """What one cell's number is, for the table's and the heat map's titles."""
        per_hca = any("/" in n for n in self.nodes)
        tests = "tests of that HCA pair" if per_hca else "tests between the two hosts (every HCA pair)"
        worst = "highest latency in us" if self.unit == "us" else "lowest bandwidth in Gb/s"
        return f"each cell: the {worst} of the {tests}; 'fail': a test failed; '·': not tested"

    def get(self, a: str, b: str) -> float | None:
        return self.cells.get(_pair_key(self.nodes, a, b))

    def tested(self, a: str, b: str) -> bool:
        return _pair_key(self.nodes, a, b) in self.cells


def _pair_key(nodes: tuple[str, ...], a: str, b: str) -> tuple[str, str]:
    """A pair's cell: its two nodes in ``nodes`` order."""
    return (a, b) if nodes.index(a) <= nodes.index(b) else (b, a)


def build_matrix(results: list[LinkResult], *, by_hca: bool = False, latency: bool = False) -> Matrix:
    """The worst (lowest bandwidth, highest latency) result per pair; failures are ``None``."""
    nodes = tuple(sorted({n for r in results for n in (r.endpoints if by_hca else (r.server, r.client))}))
    cells: dict[tuple[str, str], float | None] = {}
    for r in results:
        key = _pair_key(nodes, *(r.endpoints if by_hca else (r.server, r.client)))
        value = None if r.error is not None else r.latency_us if latency else r.gbps
        old = cells.get(key, value)
        # A failure stays a failure; otherwise the worst figure of the pair counts.
        cells[key] = None if old is None or value is None else (max if latency else min)(old, value)
    return Matrix(nodes=nodes, cells=cells, unit="us" if latency else "Gb/s")
