"""JSON shapes of bench results (``-o json``, results.json)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from clusterctl.bench.ib_bench import IBBenchReport
from clusterctl.bench.model import LinkResult
from clusterctl.bench.nccl_tests import NcclHostRun, NcclRun
from clusterctl.facts.nccltests import NcclTestResult
from clusterctl.facts.perftest import PerftestResult
from clusterctl.findings import FINDINGS_SCHEMA_VERSION
from clusterctl.plain_json import to_plain


def perftest_record(result: PerftestResult) -> dict[str, Any]:
    """One perftest log in JSON (``bench report``'s file): a summary, and under ``parsed`` every field the
    parser read."""
    record: dict[str, Any] = {
        "tool": "perftest", "test": result.test, "side": result.side, "device": result.device,
        "link_type": result.link_type, "gid_index": result.gid_index, "bidirectional": result.bidirectional,
        "printed_unit": result.printed_unit, "errors": list(result.errors),
        "parse_warnings": [w.to_json() for w in result.warnings], "qps": result.qps,
    }
    if result.kind == "bw" or result.bandwidth:
        record["rows"] = [{"size_bytes": r.size_bytes, "iterations": r.iterations, "bw_avg_gbps": r.bw_avg_gbps,
                           "bw_peak_gbps": r.bw_peak_gbps, "msg_rate_mpps": r.msg_rate_mpps}
                          for r in result.bandwidth]
        record["peak_gbps"] = result.peak_gbps
    if result.latency:
        record["latency"] = [asdict(r) for r in result.latency]
    record["parsed"] = to_plain(result)
    return record


def nccl_record(result: NcclTestResult) -> dict[str, Any]:
    """One nccl-tests output in JSON (``bench report``'s file, each run of ``bench nccl``): a summary, and
    under ``parsed`` every field the parser read."""
    net = result.net
    return {
        "test": result.test, "hosts": list(result.hosts), "n_gpus": result.n_gpus,
        "nccl_version": result.nccl_version, "nccl_tests_version": result.nccl_tests_version,
        "rows": [{"size_bytes": r.size_bytes, "count": r.count, "type": r.type, "redop": r.redop, "root": r.root,
                  "timestamp": r.timestamp,
                  **{f"{side}_{figure}": getattr(getattr(r, side), figure)
                     for figure in ("busbw_gbs", "algbw_gbs", "time_us", "cpu_time_us", "wrong", "error", "iter_min_us",
                                    "iter_max_us", "iter_p99_us", "iter_cv_pct")
                     for side in ("out_of_place", "in_place")}}
                 for r in result.rows],
        "avg_busbw_gbs": result.avg_busbw_gbs, "largest_busbw_gbs": result.largest_busbw_gbs,
        "validation": result.validation, "out_of_bounds": result.out_of_bounds, "errors": list(result.errors),
        "nccl_warnings": list(result.nccl_warnings),
        # What the log's NCCL INFO lines said about the network (None when nothing).
        "network": None if net.empty else {
            "network": net.network, "nranks": net.nranks, "nnodes": net.nnodes, "channels": net.channels,
            "nics_listed": [{"index": n.index, "name": n.name, "link": n.link, "gbs": n.gbs} for n in net.listed()],
            "nics_used": [n.name for n in net.used_nics()]},
        "parse_warnings": [w.to_json() for w in result.warnings],
        "parsed": to_plain(result),
    }


def link_record(r: LinkResult) -> dict[str, Any]:
    return {
        "round": r.round, "server": r.server, "client": r.client, "server_hca": r.server_hca,
        "client_hca": r.client_hca, "port": r.port, "test": r.test, "gbps": r.gbps, "latency_us": r.latency_us,
        "expected_gbps": r.expected_gbps, "bidirectional": r.bidirectional, "judged_gbps": r.judged_gbps,
        "link_type": r.link_type, "min_fraction": r.min_fraction, "same_rack": r.same_rack, "slow": r.slow,
        "error": r.error, "server_command": r.server_command, "client_command": r.client_command,
        # Each side's output as its parser read it, bench report's "parsed" (None: none, or one it could not read).
        "client_result": to_plain(r.client_result), "server_result": to_plain(r.server_result),
        "server_parse_error": r.server_parse_error,
    }


def ib_payload(report: IBBenchReport, *, by_hca: bool = False) -> dict[str, Any]:
    matrix = report.matrix(by_hca=by_hca)
    return {
        "kind": "bench-ib",
        "schema_version": FINDINGS_SCHEMA_VERSION,
        "test": report.test,
        "pattern": report.pattern,
        "rounds_used": report.rounds_used,
        "all_pairs_rounds": report.all_pairs_rounds,
        "rounds": [[{"server": a, "client": b} for a, b in r] for r in report.rounds],
        "links": [link_record(r) for r in report.results],
        "matrix": {"unit": matrix.unit, "nodes": list(matrix.nodes),
                   "cells": [{"a": a, "b": b, "value": v} for (a, b), v in matrix.cells.items()]},
        "diagnoses": [asdict(d) for d in report.diagnoses],
        "findings": [f.to_json() for f in report.findings],
    }


def dry_run_payload(report: IBBenchReport) -> dict[str, Any]:
    return {
        "kind": "bench-ib-plan",
        "test": report.test,
        "pattern": report.pattern,
        "rounds": [
            {"round": index, "tests": [
                {"server": t.server.name, "client": t.client.name, "server_hca": t.server_hca.name,
                 "client_hca": t.client_hca.name, "port": t.port, "server_command": t.server_command,
                 "client_command": t.client_command}
                for t in report.planned if t.round == index]}
            for index in range(1, len(report.rounds) + 1)
        ],
    }


def nccl_host_run_record(r: NcclHostRun) -> dict[str, Any]:
    """One host's (or the mpirun job's) nccl-tests run in JSON: ``bench nccl``'s runs, ``health``'s level 2."""
    return {"host": r.host, "command": r.command, "busbw_gbs": r.busbw_gbs, "error": r.error,
            "host_gpus": r.host_gpus, "nvlinks": to_plain(r.nvlinks), "nic_ports": to_plain(r.nic_ports),
            **(nccl_record(r.result) if r.result else {"avg_busbw_gbs": None, "rows": []})}


def nccl_payload(run: NcclRun) -> dict[str, Any]:
    return {
        "kind": "bench-nccl",
        "schema_version": FINDINGS_SCHEMA_VERSION,
        "op": run.op,
        "env": run.env,
        "median_busbw_gbs": run.median_busbw_gbs,
        "runs": [nccl_host_run_record(r) for r in run.runs],
        "findings": [f.to_json() for f in run.findings],
    }
