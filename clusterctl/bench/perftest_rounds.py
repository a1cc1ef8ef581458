"""Run perftest (``ib_write_bw`` / ``ib_write_lat``) between host pairs, round by round.

Each round: start every server in the background on its host (``... > LOG 2>&1 & echo $!``
prints the server's PID), wait a moment, run every client in the foreground, then, in a
``finally`` that also runs on failure, timeout and Ctrl-C, read each server's log and kill
exactly that PID. Nothing is ever killed by name. Every test of a round uses its own TCP
port (``-p``), so concurrent tests never talk to the wrong server.
"""

from __future__ import annotations

import math
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from clusterctl.bench.judge import line_rate, placement
from clusterctl.bench.model import HcaInfo, LinkResult
from clusterctl.bench.schedule import Round
from clusterctl.errors import ParseError, UsageError
from clusterctl.facts.perftest import parse_perftest
from clusterctl.fanout import Runner
from clusterctl.inventory.fabric import rdma_link_layer
from clusterctl.inventory.model import Host
from clusterctl.survey.checks.host import usual_link_rates
from clusterctl.transport.base import CommandResult, FailureKind, Transport, TransportError

BW_TESTS: tuple[str, ...] = ("ib_write_bw", "ib_read_bw", "ib_send_bw")
LAT_TESTS: tuple[str, ...] = ("ib_write_lat", "ib_read_lat", "ib_send_lat")
_PID = re.compile(r"^\s*(\d+)\s*$")


@dataclass(frozen=True)
class IBOptions:
    test: str = "ib_write_bw"
    #: Restrict to these HCAs (same name on both ends); empty = every active HCA, paired by position.
    hcas: tuple[str, ...] = ()
    #: Message size; ``None`` = 1 MiB for bandwidth (past the plateau), 2 bytes for latency.
    size_bytes: int | None = None
    #: Seconds each bandwidth test runs (``-D``).
    duration_s: int = 5
    #: Queue pairs (``-q``); several are needed to fill 400G links.
    qps: int | None = None
    #: Latency iterations (``-n``).
    iterations: int = 1000
    base_port: int = 18515
    sudo: bool = False
    #: Pause between starting the servers and the clients.
    settle_s: float = 1.0
    #: Limit for a client run; ``None`` = duration + 30 s.
    client_timeout_s: float | None = None

    @property
    def latency(self) -> bool:
        return self.test in LAT_TESTS

    def validate(self) -> None:
        if self.test not in BW_TESTS + LAT_TESTS:
            raise UsageError(f"unknown perftest {self.test!r}; choose one of {', '.join(BW_TESTS + LAT_TESTS)}")
        if not 1024 <= self.base_port <= 65000:
            raise UsageError(f"--port must be between 1024 and 65000, got {self.base_port}")


@dataclass(frozen=True)
class PlannedTest:
    round: int
    server: Host
    client: Host
    server_hca: HcaInfo
    client_hca: HcaInfo
    port: int
    #: Unique per test: names the server's log file so cleanup touches only this test's files.
    marker: str
    server_command: str
    client_command: str
    line_rate_gbps: float | None = None


def server_log_path(marker: str) -> str:
    """The server's log on its host, named by the test's marker so cleanup touches only this test's files."""
    return f"/tmp/clusterctl-bench-{marker}.log"


def perftest_args(opts: IBOptions, hca: HcaInfo, port: int) -> list[str]:
    args = [opts.test, "-d", hca.name]
    if hca.link_layer == "Ethernet" and hca.gid_index is not None:
        args += ["-x", str(hca.gid_index)]
    args += ["-p", str(port), "-F"]
    if opts.latency:
        args += ["-s", str(opts.size_bytes or 2), "-n", str(opts.iterations)]
    else:
        args += ["-s", str(opts.size_bytes or 1048576), "-D", str(opts.duration_s)]
        if opts.qps:
            args += ["-q", str(opts.qps)]
        args.append("--report_gbits")
    return args


def _sudo(opts: IBOptions, line: str) -> str:
    return "sudo -n " + line if opts.sudo else line


def server_start_command(opts: IBOptions, hca: HcaInfo, port: int, log_path: str) -> str:
    """Backgrounded server; its PID (``$!``, the perftest process itself) is the only output."""
    line = " ".join(shlex.quote(a) for a in perftest_args(opts, hca, port))
    return f"{_sudo(opts, line)} > {shlex.quote(log_path)} 2>&1 < /dev/null & echo $!"


def client_limit_s(opts: IBOptions) -> float:
    return opts.client_timeout_s or (opts.duration_s + 30.0)


def client_command(opts: IBOptions, hca: HcaInfo, port: int, server_address: str) -> str:
    """The client in the foreground, under coreutils ``timeout``.

    Closing the SSH channel of a hung client does not stop it on the host; ``timeout``
    does, so a client that never connects cannot linger there after the round.
    """
    limit = max(1, math.ceil(client_limit_s(opts)))
    args = ["timeout", "-k", "5", str(limit), *perftest_args(opts, hca, port), server_address]
    return _sudo(opts, " ".join(shlex.quote(a) for a in args))


def plan_tests(
    rounds: Sequence[Round],
    hosts: Mapping[str, Host],
    hcas: Mapping[str, Sequence[HcaInfo]],
    opts: IBOptions,
    *,
    run_id: str,
) -> list[PlannedTest]:
    """One test per HCA pair per host pair, HCAs matched by position (rail i to rail i)."""
    planned: list[PlannedTest] = []
    usual = usual_link_rates(((h.name, None), h.rate_gbps) for found in hcas.values() for h in found)
    for index, members in enumerate(rounds, start=1):
        port = opts.base_port
        for server_name, client_name in members:
            server, client = hosts[server_name], hosts[client_name]
            for s_hca, c_hca in zip(_select(hcas, server, opts), _select(hcas, client, opts), strict=False):
                # The log name says which HCA served which client: whoever reads /tmp on the
                # server (or a mock profile) can tell the tests apart.
                marker = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{run_id}-r{index}-p{port}-{s_hca.name}-{client.name}")
                planned.append(PlannedTest(
                    round=index, server=server, client=client, server_hca=s_hca, client_hca=c_hca, port=port,
                    marker=marker,
                    server_command=server_start_command(opts, s_hca, port, server_log_path(marker)),
                    client_command=client_command(opts, c_hca, port, bench_address(server)),
                    line_rate_gbps=line_rate([(server, s_hca), (client, c_hca)], usual),
                ))
                port += 1
    return planned


def bench_address(host: Host) -> str:
    """Where clients reach the host's perftest server: ``vars.bench_address`` (e.g. its IPoIB or
    RoCE address when SSH goes over a management network), else its SSH address."""
    value = dict(host.vars).get("bench_address")
    return str(value) if value else host.connect_address


def _select(hcas: Mapping[str, Sequence[HcaInfo]], host: Host, opts: IBOptions) -> list[HcaInfo]:
    found = list(hcas.get(host.name, ()))
    if not opts.hcas:
        return found
    by_name = {h.name: h for h in found}
    return [by_name.get(name, HcaInfo(name=name, link_layer=rdma_link_layer(host.fabric.type))) for name in opts.hcas]


@dataclass
class _Started:
    pid: int | None = None
    error: str | None = None
    server_output: str = ""


def _run_many(transport: Transport, commands: Sequence[str], timeout: float) -> list[CommandResult | Exception]:
    """Run commands at once on one host (one per HCA); a failure is returned, not raised."""

    def one(command: str) -> CommandResult | Exception:
        try:
            return transport.run(command, timeout=timeout)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, len(commands))) as pool:
        return list(pool.map(one, commands))


def run_round(runner: Runner, tests: Sequence[PlannedTest], opts: IBOptions) -> list[LinkResult]:
    """Run one round's tests; every server started is killed before this returns or raises."""
    by_server: dict[str, list[PlannedTest]] = {}
    by_client: dict[str, list[PlannedTest]] = {}
    for t in tests:
        by_server.setdefault(t.server.name, []).append(t)
        by_client.setdefault(t.client.name, []).append(t)
    server_hosts = [ts[0].server for ts in by_server.values()]
    client_hosts = [ts[0].client for ts in by_client.values()]
    started: dict[str, _Started] = {t.marker: _Started() for t in tests}
    client_out: dict[str, CommandResult | Exception] = {}
    client_limit = client_limit_s(opts)

    def start(transport: Transport) -> None:
        for t in by_server[transport.host.name]:
            result = transport.run(t.server_command, timeout=30)
            lines = [ln for ln in result.stdout.splitlines() if ln.strip()]
            pid = _PID.match(lines[-1]) if lines else None
            if result.ok and pid:
                started[t.marker].pid = int(pid.group(1))
            else:
                started[t.marker].error = f"server did not start (exit {result.exit_code}): " + (
                    result.stderr_tail(2) or result.stdout.strip()[-200:])

    def clients(transport: Transport) -> None:
        mine = [t for t in by_client[transport.host.name] if started[t.marker].pid is not None]
        for t, out in zip(mine, _run_many(transport, [t.client_command for t in mine], client_limit), strict=True):
            client_out[t.marker] = out

    def cleanup(transport: Transport) -> None:
        errors: list[str] = []
        for t in by_server[transport.host.name]:
            state = started[t.marker]
            if state.pid is None:
                continue
            log_path = shlex.quote(server_log_path(t.marker))
            try:
                log = transport.run(f"cat {log_path}", timeout=15)
                state.server_output = log.stdout
            except TransportError as exc:
                errors.append(str(exc))
            finally:
                try:
                    transport.run(f"{_sudo(opts, f'kill {state.pid}')} 2>/dev/null; rm -f {log_path}; true", timeout=15)
                except TransportError as exc:
                    errors.append(f"could not kill server PID {state.pid}: {exc}")
        if errors:
            raise TransportError(FailureKind.ERROR, "; ".join(errors))

    try:
        start_fleet = runner.run_task(server_hosts, start, label="bench: start servers", timeout_s=60)
        for outcome in start_fleet.failed:
            for t in by_server[outcome.host.name]:
                if started[t.marker].pid is None and outcome.failure:
                    started[t.marker].error = f"server host {outcome.host.name} failed: {outcome.failure.describe()}"
        if any(s.pid is not None for s in started.values()):
            time.sleep(opts.settle_s)
            client_fleet = runner.run_task(client_hosts, clients, label="bench: clients", timeout_s=client_limit + 5)
            for outcome in client_fleet.failed:
                for t in by_client[outcome.host.name]:
                    if t.marker not in client_out and outcome.failure:
                        client_out[t.marker] = RuntimeError(outcome.failure.describe())
    finally:
        # Always, even on Ctrl-C: the servers started above must not outlive this round.
        needs_cleanup = [h for h in server_hosts if any(started[t.marker].pid is not None for t in by_server[h.name])]
        if needs_cleanup:
            runner.run_task(needs_cleanup, cleanup, label="bench: stop servers", timeout_s=60)
    return [_result(t, started[t.marker], client_out.get(t.marker), opts) for t in tests]


def _result(t: PlannedTest, state: _Started, client: CommandResult | Exception | None, opts: IBOptions) -> LinkResult:
    same_rack, min_fraction = placement(t.server, t.client)
    base = LinkResult(
        round=t.round, server=t.server.name, client=t.client.name, server_hca=t.server_hca.name,
        client_hca=t.client_hca.name, port=t.port, test=opts.test, server_command=t.server_command,
        client_command=t.client_command, server_output=state.server_output, min_fraction=min_fraction,
        expected_gbps=t.line_rate_gbps, same_rack=same_rack,
    )
    if state.error is not None:
        return replace(base, error=state.error)
    if client is None:
        return replace(base, error="client did not run")
    if isinstance(client, Exception):
        return replace(base, error=f"client: {client}")
    return measure(base, client.stdout + client.stderr, state.server_output, client.exit_code)


def measure(base: LinkResult, client_text: str, server_text: str, exit_code: int) -> LinkResult:
    """Fill in the figure (or the error) from both sides' outputs."""
    base = replace(base, client_output=client_text)
    if server_text.strip():
        try:
            base = replace(base, server_result=parse_perftest(server_text, side="server"))
        except ParseError as exc:
            base = replace(base, server_parse_error=str(exc))
    try:
        client = parse_perftest(client_text, side="client")
    except ParseError as exc:
        return replace(base, error=f"client output: {exc}" if exit_code == 0 else _exit_reason(exit_code, client_text))
    base = replace(base, client_result=client, bidirectional=client.bidirectional, link_type=client.link_type)
    if not client.ok:
        reason = client.errors[0] if client.errors else "no result table"
        return replace(base, error=reason if exit_code == 0 else f"exit {exit_code}: {reason}")
    if client.kind == "lat":
        return replace(base, latency_us=client.typical_latency_us)
    server = base.server_result
    figures = [v for v in (client.peak_gbps, server.peak_gbps if server and server.ok else None) if v is not None]
    # Both ends measure the same traffic; the lower figure is the honest one.
    return replace(base, gbps=min(figures) if figures else None)


def _exit_reason(code: int, text: str) -> str:
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    return f"exit {code}" + (f": {tail}" if tail else "")


def run_rounds(runner: Runner, tests: Sequence[PlannedTest], opts: IBOptions) -> list[LinkResult]:
    results: list[LinkResult] = []
    for index in sorted({t.round for t in tests}):
        results.extend(run_round(runner, [t for t in tests if t.round == index], opts))
    return results
