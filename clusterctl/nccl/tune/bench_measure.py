"""The sweep's measurement through ``bench nccl``: one nccl-tests job, bus bandwidth per message size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clusterctl.bench.nccl_tests import NcclRun, run_nccl_test
from clusterctl.errors import ClusterctlError
from clusterctl.fanout import Runner
from clusterctl.inventory.model import Host, Inventory
from clusterctl.nccl.tune.candidates import Candidate
from clusterctl.nccl.tune.sweep_result import Measure, MeasuredRun


def bench_measure(
    runner: Runner, inventory: Inventory, hosts: Sequence[Host], *, base_env: Mapping[str, str] | None = None,
    op: str = "all_reduce", state_dir: str | None = None
) -> Measure:
    """A ``Measure`` running ``<op>_perf`` through the bench library, ``base_env`` under every candidate.

    Several hosts run one job across all of them (``mpirun`` from the first): that is what a
    training job sees. One host runs alone.
    """
    def measure(env: Mapping[str, str]) -> MeasuredRun:
        full = {**(base_env or {}), **env}
        run = run_nccl_test(runner, hosts, op=op, env=full, multi_node=len(hosts) > 1, inventory=inventory,
                             state_dir=state_dir)
        unread = tuple((host_run.host, warning) for host_run in run.runs if host_run.result is not None
                       for warning in host_run.result.warnings)
        return MeasuredRun(busbw_by_size(run), unread)

    return measure


#: From here on the printed busbw (two decimals) is within 0.05%; below it the time column is used.
PRINTED_PRECISE_GBPS = 10.0


def busbw_by_size(run: NcclRun) -> dict[int, float]:
    """Bytes -> bus bandwidth of a bench run: best of out-of-place/in-place, slowest host when several ran."""
    per_host: list[dict[int, float]] = []
    for host_run in run.runs:
        if host_run.result is None or not host_run.result.rows:
            why, settings = host_run.error or "no result rows", Candidate(tuple(run.env.items())).label
            raise ClusterctlError(f"nccl-tests on {host_run.host} with {settings}: {why}")
        rows = host_run.result.rows
        # busbw/algbw is one constant per run (it depends on the collective and rank count only)
        factor = next((m.busbw_gbs / m.algbw_gbs for r in reversed(rows) for m in (r.out_of_place, r.in_place)
                       if m.busbw_gbs and m.algbw_gbs and m.algbw_gbs >= 0.1), None)
        sizes: dict[int, float] = {}
        for row in rows:
            values = []
            for m in (row.out_of_place, row.in_place):
                # printed busbw has two decimals: precise enough from 10 GB/s, else derive it from the time
                if m.busbw_gbs is not None and m.busbw_gbs >= PRINTED_PRECISE_GBPS:
                    values.append(m.busbw_gbs)
                elif factor is not None and m.time_us and m.time_us > 0:
                    values.append(row.size_bytes / (m.time_us * 1e3) * factor)
                elif m.busbw_gbs is not None:
                    values.append(m.busbw_gbs)
            if values:
                sizes[row.size_bytes] = max(values)
        per_host.append(sizes)
    common = set.intersection(*(set(d) for d in per_host)) if per_host else set()
    return {size: min(d[size] for d in per_host) for size in sorted(common)}
