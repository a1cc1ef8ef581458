"""nccl-tests on each host alone and across hosts (``mpirun``), judged against the fleet.

``run_nccl_test`` is the library entry point (the tune-nccl sweep calls it). Each host's bus
bandwidth at the largest size is compared with the fleet median using the median absolute
deviation (robust to the very outliers we look for): more than 2 robust standard deviations
below is a warning, more than 3 an error; and with the peak expected for its GPUs.
"""

from __future__ import annotations

import secrets
import shlex
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from clusterctl.bench.hcas import discover_hcas
from clusterctl.bench.judge import line_rate
from clusterctl.bench.model import bench_finding
from clusterctl.bench.net_capacity import FROM_SURVEY, link_capacity_checks
from clusterctl.bench.plausible import FIGURE_IMPOSSIBLE, every_gpu_is, nccl_checks
from clusterctl.changes import Change, Gate
from clusterctl.errors import ParseError, UsageError
from clusterctl.facts.model import NVLinkStatus
from clusterctl.facts.nccltests import NcclTestResult, parse_nccl_tests
from clusterctl.facts.node import GPU_LIST
from clusterctl.facts.nvlink import NVLINK
from clusterctl.fanout import HostOutcome, Runner
from clusterctl.findings import Finding, Severity, fails
from clusterctl.inventory.model import Host, Inventory
from clusterctl.survey.checks.host import usual_link_rates
from clusterctl.survey.collect import read_fact
from clusterctl.transport.base import Transport

OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "broadcast", "reduce")

#: 8-GPU all_reduce bus bandwidth at large sizes (GB/s); see shared/reference/README.md.
#: H100: ring figure; NVLS reaches 450+, so a ring-level result is never flagged as low.
EXPECTED_ALLREDUCE_BUSBW: tuple[tuple[str, float], ...] = (("H100", 370.0), ("H200", 370.0), ("A100", 235.0))
#: Below this fraction of the expected peak is a warning.
PEAK_FRACTION = 0.9
_FROM_HOSTS = ("the hosts' HCAs (ibv_devinfo -v) at the inventory's rate, else their usual one",) * 2


@dataclass(frozen=True)
class NcclHostRun:
    host: str
    command: str
    output: str
    result: NcclTestResult | None
    error: str | None = None
    #: GPUs the host has (``nvidia-smi -L``), when counted: a log with another rank count measured something else.
    host_gpus: int | None = None
    #: The host's NVLinks as ``nvidia-smi nvlink -s`` reports them, read beside the run (None: not read).
    nvlinks: tuple[NVLinkStatus, ...] | None = None
    #: Host -> (NIC, Gb/s) of its active fabric ports, what a multi-node run's links carry (None: not read).
    nic_ports: Mapping[str, Sequence[tuple[str, float]]] | None = None
    nic_ports_from: tuple[str, str] = FROM_SURVEY
    #: Why the host's GPUs could not be counted (``nvidia-smi -L``), naming it: the run went without ``-g``.
    gpus_unknown: str | None = None

    @property
    def busbw_gbs(self) -> float | None:
        return self.result.largest_busbw_gbs if self.result and self.error is None else None


@dataclass(frozen=True)
class NcclRun:
    op: str
    #: One entry per host (single-host runs) or one entry for the whole ``mpirun`` job.
    runs: tuple[NcclHostRun, ...]
    findings: tuple[Finding, ...] = ()
    median_busbw_gbs: float | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return fails(self.findings)

    def host_findings(self) -> dict[str, list[Finding]]:
        """Each host's findings, then the figure it measured as ``NCCL_BUSBW`` (info: health and release show it)."""
        found: dict[str, list[Finding]] = {}
        for finding in self.findings:
            found.setdefault(finding.host or "", []).append(finding)
        for run in self.runs:
            if run.busbw_gbs is not None:
                found.setdefault(run.host, []).append(Finding(
                    Severity.INFO, "NCCL_BUSBW", f"{self.op} bus bandwidth {run.busbw_gbs:.1f} GB/s "
                    f"(fleet median {self.median_busbw_gbs or 0:.1f} GB/s)", host=run.host,
                    evidence={"busbw_gbs": run.busbw_gbs, "command": shlex.quote(run.command)[:200]}))
        return found


def nccl_args(op: str, *, min_bytes: str, max_bytes: str, factor: int, gpus: int | None,
              binary_dir: str | None) -> list[str]:
    if op not in OPS:
        raise UsageError(f"unknown --op {op!r}; choose one of {', '.join(OPS)}")
    path = f"{binary_dir.rstrip('/')}/{op}_perf" if binary_dir else f"{op}_perf"
    args = [path, "-b", min_bytes, "-e", max_bytes, "-f", str(factor)]
    if gpus:
        args += ["-g", str(gpus)]
    return args


def mpirun_command(hostfile: str, nprocs: int, test: Sequence[str], env: Mapping[str, str]) -> str:
    """Open MPI: one process per host driving all its GPUs (``-g``), settings passed with ``-x``."""
    words = ["mpirun", "--hostfile", hostfile, "-np", str(nprocs), "--map-by", "ppr:1:node", "--bind-to", "none"]
    for key, value in env.items():
        words += ["-x", f"{key}={value}"]
    return " ".join(shlex.quote(w) for w in [*words, *test])


def hostfile_text(hosts: Sequence[Host], gpus: int | None) -> str:
    slots = f" slots={gpus}" if gpus else ""
    return "".join(f"{h.connect_address}{slots}\n" for h in hosts)


def _count_gpus(transport: Transport) -> tuple[int | None, str | None]:
    """The host's GPUs, else why they are unknown (an unreadable line leaves the count unknown, not one more)."""
    listed, missing = read_fact(transport, GPU_LIST)
    why = missing.reason if missing else "no GPU listed"
    return (len(listed), None) if listed else (None, f"{GPU_LIST.command} on {transport.host.name} gave no GPU "
                                                     f"count ({why})")


def _host_run(host: str, command: str, text: str, exit_code: int, env: Mapping[str, str]) -> NcclHostRun:
    try:
        parsed = parse_nccl_tests(text, min_bw=env.get("NCCL_TESTS_MIN_BW"))
    except ParseError as exc:
        return NcclHostRun(host, command, text, None, str(exc))
    return NcclHostRun(host, command, text, parsed, parsed.failure() or (f"exit {exit_code}" if exit_code else None))


def run_nccl_test(
    runner: Runner,
    hosts: Sequence[Host],
    *,
    op: str = "all_reduce",
    env: Mapping[str, str] | None = None,
    min_bytes: str = "8",
    max_bytes: str = "8G",
    factor: int = 2,
    gpus: int | None = None,
    multi_node: bool = False,
    binary_dir: str | None = None,
    timeout_s: float = 900.0,
    gate: Gate | None = None,
    inventory: Inventory | None = None,
    state_dir: str | None = None,
) -> NcclRun:
    """Run nccl-tests on each host alone, or once across ``hosts`` with ``mpirun`` (from the first).

    ``mpirun``'s hostfile is a temporary change through ``gate``, by default the engine's journaled
    gate for ``inventory``'s fleet (``state_dir``: ``--state-dir``): in the undo journal before it is written to
    the launcher, removed however the run ends, and a run killed in between leaves the journal ``clusterctl undo``
    completes.
    """
    environment = {str(k): str(v) for k, v in (env or {}).items()}

    def test_args(ngpus: int | None) -> list[str]:
        return nccl_args(op, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor, gpus=ngpus, binary_dir=binary_dir)

    test_args(gpus)  # an unknown --op is refused before any host is touched
    if not hosts:
        raise UsageError("bench nccl needs at least one host")

    def task(transport: Transport) -> NcclHostRun:
        counted, unknown = (None, None) if gpus else _count_gpus(transport)
        command = " ".join(shlex.quote(a) for a in test_args(gpus or counted))
        result = transport.run(command, env=environment or None, timeout=timeout_s)
        run = _host_run(transport.host.name, command, result.stdout + result.stderr, result.exit_code, environment)
        # Read with the run: a figure the host's own links cannot give is a finding, not "ok".
        return replace(run, host_gpus=counted, gpus_unknown=unknown, nvlinks=read_fact(transport, NVLINK)[0])

    if multi_node:
        ports = _nic_ports(runner, hosts)  # read before mpirun takes the links
        runs = [replace(_run_multi(runner, hosts, op, environment, test_args, gpus, timeout_s, gate, inventory,
                                   state_dir), nic_ports=ports, nic_ports_from=_FROM_HOSTS)]
    else:
        runs = [_run_of(outcome) for outcome in runner.run_task(
            hosts, task, label=f"bench nccl: {op}", timeout_s=timeout_s + 30).outcomes]
    # One judge for every run, one host's or the mpirun job's.
    expected = {h.name: dict(h.vars).get("expected_busbw_gbs") for h in hosts}
    findings, median = judge_nccl(runs, op, expected)
    return NcclRun(op, tuple(runs), tuple(findings), median, environment)


def _run_multi(runner: Runner, hosts: Sequence[Host], op: str, env: dict[str, str],
               test_args: Callable[[int | None], list[str]], gpus: int | None, timeout_s: float, gate: Gate | None,
               inventory: Inventory | None, state_dir: str | None) -> NcclHostRun:
    if gate is None:
        from clusterctl.engine.journaled import journaled_gate

        if inventory is None:
            raise UsageError("bench nccl --multi-node: no inventory to journal mpirun's hostfile for")
        with journaled_gate(f"bench nccl {op}", inventory, apply=True, state_dir=state_dir) as step:
            return _run_multi(runner, hosts, op, env, test_args, gpus, timeout_s, step.gate, inventory, state_dir)
    hostfile = f"/tmp/clusterctl-hostfile-{secrets.token_hex(4)}"

    def task(transport: Transport) -> NcclHostRun:
        ngpus, unknown = (gpus, None) if gpus else _count_gpus(transport)
        name = transport.host.name
        write = Change.write_file(name, hostfile, hostfile_text(hosts, ngpus), current=None, sudo=False, backup=False,
                                  summary="mpirun hostfile")
        remove = Change.remove_file(name, hostfile, sudo=False, summary="remove the mpirun hostfile")
        command = mpirun_command(hostfile, len(hosts), test_args(ngpus), env)
        with gate.temporary(transport, [write], [remove]):
            result = transport.run(command, timeout=timeout_s)
        return replace(_host_run("+".join(h.name for h in hosts), command, result.stdout + result.stderr,
                                 result.exit_code, env), gpus_unknown=unknown)

    (outcome,) = runner.run_task(hosts[:1], task, label=f"bench nccl: mpirun {op}", timeout_s=timeout_s + 30).outcomes
    return _run_of(outcome)


def _nic_ports(runner: Runner, hosts: Sequence[Host]) -> dict[str, list[tuple[str, float]]]:
    """Each host's fabric HCAs as ``bench ib`` finds them (``discover_hcas``) at the rate the one port-rate rule
    holds them to (``line_rate``, as ``bench ib`` judges them): what a multi-node run's links carry."""
    found, _ = discover_hcas(runner, hosts)
    usual = usual_link_rates(((h.name, None), h.rate_gbps) for hcas in found.values() for h in hcas)
    return {host.name: [(h.name, rate) for h in found.get(host.name, []) if (rate := line_rate([(host, h)], usual))]
            for host in hosts}


def _run_of(outcome: HostOutcome[NcclHostRun]) -> NcclHostRun:
    """A host's run, or one that says why the host gave none."""
    if outcome.value is not None:
        return outcome.value
    return NcclHostRun(outcome.host.name, "", "", None, outcome.failure.describe() if outcome.failure else "no result")


def judge_nccl(runs: Sequence[NcclHostRun], op: str, expected: Mapping[str, object] | None = None, *,
               nic_rate_gbps: float | None = None, about_kind: str = "host") -> tuple[list[Finding], float | None]:
    """The one judge of nccl-tests output, a live run's or a saved log's (``about_kind="file"``): failed, figures that
    cannot be true, unvalidated, warned, below the fleet, the GPUs' peak or the links (``nic_rate_gbps``: each NIC's,
    else the run's ``nic_ports``). A fact the run lacks (a saved log's NVLinks) skips the check that needs it."""
    findings = [bench_finding(Severity.ERROR, "NCCL_FAILED", r.host, r.error, about_kind=about_kind)
                for r in runs if r.error]
    findings += [bench_finding(Severity.WARNING, "GPU_COUNT_UNKNOWN", r.host, f"{r.gpus_unknown}: nccl-tests ran "
                               "without -g, on one GPU, and its ranks were not checked against the host's GPUs",
                               about_kind=about_kind) for r in runs if r.gpus_unknown]
    for r in runs:
        if r.result is None:
            continue
        # A figure above the GPUs' NVLinks, or a log with fewer ranks than the host has GPUs, is no result.
        findings += nccl_checks(r.result, gpus_per_host=r.host_gpus, nvlinks=r.nvlinks, about=r.host,
                                about_kind=about_kind)
        if r.busbw_gbs is None:
            continue
        findings += link_capacity_checks(r.result, about=r.host, about_kind=about_kind, nic_rate_gbps=nic_rate_gbps,
                                         survey_ports=r.nic_ports, ports_from=r.nic_ports_from)
        override = (expected or {}).get(r.host)
        # Else the peak of an 8-GPU all_reduce on the GPUs one host's log names (across hosts the network sets it).
        one_host = op == "all_reduce" and len(r.result.ranks) >= 8 and len(r.result.hosts) == 1
        peak = (float(str(override)), "the inventory") if override else next(
            ((gbs, f"8x {model} on NVSwitch") for model, gbs in EXPECTED_ALLREDUCE_BUSBW
             if one_host and every_gpu_is(r.result, model)), None)
        if peak and r.busbw_gbs < PEAK_FRACTION * peak[0]:
            findings.append(bench_finding(Severity.WARNING, "NCCL_BELOW_PEAK", r.host,
                                    f"{op} bus bandwidth {r.busbw_gbs:.1f} GB/s is below {PEAK_FRACTION:.0%} of "
                                    f"the ~{peak[0]:g} GB/s expected for {peak[1]}", about_kind=about_kind))
    impossible = {f.host for f in findings if f.code == FIGURE_IMPOSSIBLE}
    values = {r.host: r.busbw_gbs for r in runs if r.busbw_gbs is not None and r.host not in impossible}
    median = statistics.median(values.values()) if values else None
    if median is not None and len(values) >= 3:
        mad = statistics.median(abs(v - median) for v in values.values())
        # 1.4826 x MAD estimates the standard deviation; a floor of 1% of the median keeps a
        # perfectly uniform fleet from flagging a host for noise.
        sd = max(1.4826 * mad, 0.01 * median)
        for host, value in sorted(values.items()):
            z = (median - value) / sd
            if z <= 2:
                continue
            findings.append(bench_finding(Severity.ERROR if z > 3 else Severity.WARNING, "NCCL_OUTLIER", host,
                                    f"{op} bus bandwidth {value:.1f} GB/s is {z:.1f} robust SD below the "
                                    f"fleet median {median:.1f} GB/s", about_kind=about_kind))
    return findings, median
