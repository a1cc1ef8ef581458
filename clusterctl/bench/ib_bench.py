"""``bench ib`` as one function: plan the rounds, run them, judge, localise stragglers."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from clusterctl.bench.judge import judge_link, latency_high
from clusterctl.bench.model import HcaInfo, LinkResult, Matrix, bench_finding, build_matrix
from clusterctl.bench.perftest_rounds import IBOptions, PlannedTest, plan_tests, run_rounds
from clusterctl.bench.schedule import Round, all_pairs_round_count, plan_rounds
from clusterctl.bench.straggler import Diagnosis, Edge, find_straggler, localise
from clusterctl.changes import Change, Gate
from clusterctl.errors import UsageError
from clusterctl.fanout import Runner
from clusterctl.findings import Finding, Severity, fails
from clusterctl.inventory.model import Host
from clusterctl.transport.base import FailureKind


@dataclass(frozen=True)
class IBBenchReport:
    test: str
    pattern: str
    rounds: tuple[Round, ...]
    planned: tuple[PlannedTest, ...]
    results: tuple[LinkResult, ...] = ()
    findings: tuple[Finding, ...] = ()
    diagnoses: tuple[Diagnosis, ...] = ()
    rounds_used: int = 0
    #: Rounds an all-pairs run of the same hosts would take (for --find-straggler's report).
    all_pairs_rounds: int = 0

    def matrix(self, *, by_hca: bool = False) -> Matrix:
        return build_matrix(list(self.results), by_hca=by_hca, latency=self.test.endswith("_lat"))

    @property
    def good_gbps(self) -> float | None:
        """Where the matrix's colour scale turns green: the lowest rate a link is judged against (its line rate,
        twice that for a ``-b`` run); ``None`` for a latency test."""
        rates = [r.judged_gbps for r in self.results if r.judged_gbps and not self.test.endswith("_lat")]
        return min(rates, default=None)

    @property
    def failed(self) -> bool:
        return fails(self.findings)


def _edges(results: Sequence[LinkResult], hosts: Mapping[str, Host], *, by_hca: bool) -> list[Edge]:
    worst: dict[tuple[str, str], bool] = {}
    for r in results:
        if r.error is not None:
            # A test that failed measured nothing: it is reported as failed, never counted as slow.
            continue
        a, b = r.endpoints if by_hca else (r.server, r.client)
        key = (a, b) if a <= b else (b, a)
        # Too slow or over the latency warning: it counts against its endpoints when localising stragglers.
        high = latency_high(r.latency_us, hosts[r.server].fabric) is not None
        worst[key] = worst.get(key, False) or r.slow or high
    return [(a, b, slow) for (a, b), slow in worst.items()]


#: Up to this many all-pairs rounds, --find-straggler measures all pairs.
SMALL_FLEET_ROUNDS = 7


def run_ib_bench(
    runner: Runner,
    hosts: Sequence[Host],
    hcas: Mapping[str, Sequence[HcaInfo]],
    opts: IBOptions,
    *,
    pattern: str = "all-pairs",
    find_stragglers: bool = False,
    gate: Gate | None = None,
) -> IBBenchReport:
    """Plan perftest over ``hosts`` and run it on ``runner``.

    Given a recording gate (``Gate(apply=False)``: ``--dry-run``), every server and client
    command of the plan is recorded there instead, and no host is reached.
    """
    opts.validate()
    if len(hosts) < 2:
        raise UsageError("bench ib needs at least two hosts")
    missing = [h.name for h in hosts if not (opts.hcas or hcas.get(h.name))]
    if missing:
        raise UsageError(f"no active HCA known on {', '.join(missing)}: give --hca, --survey or fabric.hcas")
    unreachable: list[Finding] = []
    if gate is None or gate.apply:
        hosts, unreachable = _reachable(runner, hosts)
        if len(hosts) < 2:
            return IBBenchReport(opts.test, pattern, (), (), findings=tuple(unreachable))
    by_name = {h.name: h for h in hosts}
    run_id = secrets.token_hex(4)
    all_pairs_rounds = all_pairs_round_count(len(hosts))
    if find_stragglers and all_pairs_rounds <= SMALL_FLEET_ROUNDS:
        # A ring plus its re-tests costs about as many rounds as the full matrix on a small
        # fleet, and the full matrix tells more: measure everything instead.
        find_stragglers, pattern = False, "all-pairs"
    rounds = plan_rounds(hosts, "ring" if find_stragglers else pattern)
    planned = plan_tests(rounds, by_name, hcas, opts, run_id=run_id)
    if gate is not None and not gate.apply:
        record_plan(gate, planned, opts)
        return IBBenchReport(opts.test, pattern, tuple(rounds), tuple(planned), rounds_used=len(rounds),
                             all_pairs_rounds=all_pairs_rounds)
    rack_of = {h.name: h.rack for h in hosts}
    results: list[LinkResult] = []
    round_offset = 0

    def run_host_rounds(batch: list[Round]) -> list[Edge]:
        nonlocal round_offset
        tests = plan_tests(batch, by_name, hcas, opts, run_id=f"{run_id}-{round_offset}")
        shifted = [replace(t, round=t.round + round_offset) for t in tests]
        round_offset += len(batch)
        got = run_rounds(runner, shifted, opts)
        results.extend(got)
        return _edges(got, by_name, by_hca=False)

    if find_stragglers:
        search = find_straggler([h.name for h in hosts], rack_of, run_host_rounds)
        used, diagnoses = search.rounds_used, list(search.diagnoses)
    else:
        run_host_rounds(rounds)
        # Per endpoint, so one slow HCA is not blamed on its whole host (nor a cable on a host).
        used, diagnoses = len(rounds), localise(_edges(results, by_name, by_hca=True), rack_of, by_hca=True)
    return IBBenchReport(
        test=opts.test, pattern="find-straggler" if find_stragglers else pattern, rounds=tuple(rounds),
        planned=tuple(planned), results=tuple(results),
        findings=(*unreachable, *(f for r in results for f in judge_link(r, by_name[r.server].fabric)),
                  *(bench_finding(Severity.WARNING if d.kind == "inconclusive" else Severity.ERROR,
                                  d.kind.upper().replace("-", "_"), d.subject, d.explanation,
                                  about_kind="host" if d.kind == "slow-host" else "subject") for d in diagnoses)),
        diagnoses=tuple(diagnoses), rounds_used=used, all_pairs_rounds=all_pairs_rounds,
    )


def _reachable(runner: Runner, hosts: Sequence[Host]) -> tuple[list[Host], list[Finding]]:
    """The hosts that answer, and a finding per host that does not: an unreachable host is
    unreachable, not a host whose every link is slow."""
    probe = runner.run_command(hosts, "true", label="bench: reach hosts")
    down = {o.host.name: o.failure for o in probe.failed
            if o.failure is not None and o.failure.kind is not FailureKind.COMMAND_FAILED}
    findings = [Finding(Severity.ERROR, "HOST_UNREACHABLE", f"not tested: {failure.describe()}", host=name,
                        fix="check that the host is up and its SSH port is open, then run bench again")
                for name, failure in down.items()]
    return [h for h in hosts if h.name not in down], findings


def record_plan(gate: Gate, planned: Sequence[PlannedTest], opts: IBOptions) -> None:
    """Each test's server start and client run, in round order (the round kills each server by its PID)."""
    for t in planned:
        who = f"{t.server.name}/{t.server_hca.name} <-> {t.client.name}/{t.client_hca.name}"
        for side, host, line in (("server", t.server, t.server_command), ("client", t.client, t.client_command)):
            gate.record(Change.run(host.name, line, summary=f"round {t.round}: {opts.test} {side}, {who}", sudo=False))
