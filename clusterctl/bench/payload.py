"""JSON shapes of bench results (``-o json``, results.json)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from clusterctl.bench.ib_bench import IBBenchReport
from clusterctl.bench.model import LinkResult
from clusterctl.bench.nccl_tests import NcclRun
from clusterctl.findings import FINDINGS_SCHEMA_VERSION


def link_record(r: LinkResult) -> dict[str, Any]:
    return {
        "round": r.round, "server": r.server, "client": r.client, "server_hca": r.server_hca,
        "client_hca": r.client_hca, "port": r.port, "test": r.test, "gbps": r.gbps, "latency_us": r.latency_us,
        "expected_gbps": r.expected_gbps, "bidirectional": r.bidirectional, "judged_gbps": r.judged_gbps,
        "link_type": r.link_type, "min_fraction": r.min_fraction, "same_rack": r.same_rack, "slow": r.slow,
        "error": r.error, "server_command": r.server_command, "client_command": r.client_command,
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


def nccl_payload(run: NcclRun) -> dict[str, Any]:
    return {
        "kind": "bench-nccl",
        "schema_version": FINDINGS_SCHEMA_VERSION,
        "op": run.op,
        "env": run.env,
        "median_busbw_gbs": run.median_busbw_gbs,
        "runs": [{"host": r.host, "command": r.command, "busbw_gbs": r.busbw_gbs, "error": r.error,
                  "avg_busbw_gbs": r.result.avg_busbw_gbs if r.result else None,
                  "rows": [{"size_bytes": row.size_bytes, "out_of_place_busbw_gbs": row.out_of_place.busbw_gbs,
                            "in_place_busbw_gbs": row.in_place.busbw_gbs, "out_of_place_wrong": row.out_of_place.wrong,
                            "in_place_wrong": row.in_place.wrong} for row in (r.result.rows if r.result else ())]}
                 for r in run.runs],
        "findings": [f.to_json() for f in run.findings],
    }
