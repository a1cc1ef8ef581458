"""The sweep: interleaved runs, fresh confirmation, corrected intervals, the baseline re-checked.

Most tests drive ``run_sweep`` with a simulated measurement (a seeded random machine); one runs
it against a mock host whose fake all_reduce_perf answers depend on the NCCL env in the command.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from clusterctl.errors import UsageError
from clusterctl.nccl.tune.candidates import Candidate, candidate_space, lint_validator
from clusterctl.nccl.tune.derive import Tuning
from clusterctl.nccl.tune.render import render_files, tuner_rows
from clusterctl.nccl.tune.saved_sweep import load_sweep, save_sweep
from clusterctl.nccl.tune.sweep import run_sweep
from clusterctl.nccl.tune.sweep_result import RangeOutcome, SweepResult, range_of
from clusterctl.nccl.versions import parse_version

#: A mock sweep on ``profiles/<name>``: its result and nccl-tests command lines (conftest.py).
MockSweep = Callable[[str], tuple[SweepResult, list[str]]]
SIZES = [8 << i for i in range(31)]  # 8 B .. 8 GiB, as tune-nccl --sweep measures
TREE = Candidate((("NCCL_ALGO", "Tree"),))
TREE_LL = Candidate((("NCCL_ALGO", "Tree"), ("NCCL_PROTO", "LL")))
BUFF = Candidate((("NCCL_BUFFSIZE", "8388608"),))
RING = Candidate((("NCCL_ALGO", "Ring"),))


class Machine:
    """Seeded simulated nccl-tests: ``gains[(label, predicate)]`` multiplies matching sizes."""

    def __init__(self, seed: int = 1, noise: float = 0.02, gains: Mapping[str, tuple[float, int, int]] = {},
                 step_after: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.noise = noise
        self.gains = gains
        self.step_after = step_after
        self.calls: list[str] = []

    def measure(self, env: Mapping[str, str]) -> dict[int, float]:
        label = " ".join(f"{k}={v}" for k, v in env.items()) or "defaults"
        self.calls.append(label)
        shared = math.exp(self.rng.gauss(0, self.noise / math.sqrt(2)))
        if self.step_after is not None and len(self.calls) > self.step_after:
            shared *= 1.10  # the machine got 10% faster near the end (a neighbour's job finished)
        out = {}
        for size in SIZES:
            value = 300.0 * size / (size + (16 << 20)) + 0.05
            gain, low, high = self.gains.get(label, (0.0, 0, 0))
            if low <= size <= high:
                value *= 1 + gain
            out[size] = value * shared * math.exp(self.rng.gauss(0, self.noise / math.sqrt(2)))
        return out


def _large(result: SweepResult, op: str = "allreduce") -> RangeOutcome:
    return next(r for r in result.ranges if r.range == "large" and r.collective == op)


def test_every_measured_size_belongs_to_a_range() -> None:
    # the old largest range stopped at 4294967295 and dropped the 4 GiB and 8 GiB rows
    assert range_of(4 << 30) == "large" and range_of(8 << 30) == "large"
    assert range_of(64 * 1024 - 1) == "small" and range_of(64 << 20) == "medium"


def test_a_win_only_at_4_and_8_gib_is_seen() -> None:
    machine = Machine(gains={"NCCL_ALGO=Tree": (0.30, 4 << 30, 8 << 30)})
    result = run_sweep(machine.measure, [TREE, BUFF], nccl_version="2.21.5")
    large = _large(result)
    assert large.significant and large.best_label == "NCCL_ALGO=Tree"


def test_screening_alternates_baseline_and_candidates() -> None:
    machine = Machine()
    run_sweep(machine.measure, [TREE, BUFF, RING], nccl_version="2.21.5")
    assert machine.calls[:7] == ["defaults", "NCCL_ALGO=Tree", "defaults", "NCCL_BUFFSIZE=8388608", "defaults",
                                 "NCCL_ALGO=Ring", "defaults"]
    # every candidate run, in every stage, sits between two baseline runs
    for i, label in enumerate(machine.calls):
        if label != "defaults":
            assert machine.calls[i - 1] == "defaults" and machine.calls[i + 1] == "defaults"


def test_the_winner_is_judged_on_fresh_runs_only() -> None:
    machine = Machine(gains={"NCCL_ALGO=Tree": (0.20, 65 << 20, 8 << 30)})
    result = run_sweep(machine.measure, [TREE, BUFF], nccl_version="2.21.5")
    large = _large(result)
    screening_runs = 2  # one in the first pass, one in the second
    assert machine.calls.count("NCCL_ALGO=Tree") == screening_runs + large.best_runs
    assert large.best_runs == 10
    assert 0.15 < large.ci_low < large.gain < large.ci_high < 0.25
    assert {(s.name, s.value) for s in result.settings} == {("NCCL_ALGO", "Tree")}
    assert "corrected interval" in result.settings[0].reason


def test_no_win_is_invented_from_noise() -> None:
    for seed in range(5):
        machine = Machine(seed=seed, noise=0.05)
        result = run_sweep(machine.measure, candidate_space(parse_version("2.21.5")), nccl_version="2.21.5")
        assert not any(r.significant for r in result.ranges)
        assert result.settings == () and result.tuner_rows == ()
        assert any("defaults are best" in n for n in result.notes)


def test_intervals_are_corrected_for_every_comparison() -> None:
    machine = Machine()
    candidates = candidate_space(parse_version("2.21.5"))
    result = run_sweep(machine.measure, candidates, nccl_version="2.21.5")
    assert result.confidence == pytest.approx(1 - 0.05 / (len(candidates) * 3), abs=1e-6)


def test_a_win_is_refused_when_the_baseline_moved() -> None:
    machine = Machine(gains={"NCCL_ALGO=Tree": (0.20, 65 << 20, 8 << 30)})
    clean = run_sweep(machine.measure, [TREE, BUFF], nccl_version="2.21.5")
    total = len(machine.calls)
    moved = Machine(gains={"NCCL_ALGO=Tree": (0.20, 65 << 20, 8 << 30)}, step_after=total - 3)
    result = run_sweep(moved.measure, [TREE, BUFF], nccl_version="2.21.5")
    assert _large(clean).significant
    large = _large(result)
    assert not large.significant and large.baseline_moved > 0.05
    assert "baseline moved" in large.verdict and result.settings == ()


def test_per_collective_winners_go_to_the_tuner_file_not_the_environment() -> None:
    all_gather = Machine(seed=2, gains={"NCCL_ALGO=Tree NCCL_PROTO=LL": (0.25, 0, 64 * 1024 - 1)})
    all_reduce = Machine(seed=3)
    result = run_sweep({"all_reduce": all_reduce.measure, "all_gather": all_gather.measure}, [TREE_LL, RING],
                       nccl_version="2.28.3")
    assert result.tuner_rows == (("allgather", "small", "tree", "ll"),)
    assert result.settings == ()
    assert {r.collective for r in result.ranges} == {"allreduce", "allgather"}
    assert tuner_rows(result) == [("allgather", 0, 65535, "tree", "ll")]
    files = render_files(Tuning(hosts=("a",), nccl_version="2.28.3", fabric="ib", settings=()), result, fmt="tuner")
    assert "allgather,0,65535,tree,ll,-1,-1,-1" in files["nccl_tuner.conf"]


def test_tuner_rows_need_2_28() -> None:
    machine = Machine(gains={"NCCL_ALGO=Tree NCCL_PROTO=LL": (0.25, 0, 64 * 1024 - 1)})
    old = run_sweep(machine.measure, [TREE_LL, RING], nccl_version="2.27.5")
    assert old.tuner_rows == ()
    # without the tuner plugin the pair becomes per-collective environment values (2.24+)
    assert {(s.name, s.value) for s in old.settings} == {("NCCL_ALGO", "allreduce:tree"),
                                                         ("NCCL_PROTO", "allreduce:ll")}


def test_a_saved_sweep_reads_back(tmp_path: Path) -> None:
    machine = Machine(gains={"NCCL_ALGO=Tree NCCL_PROTO=LL": (0.25, 0, 64 * 1024 - 1)})
    result = run_sweep(machine.measure, [TREE_LL, RING], nccl_version="2.28.3")
    save_sweep(result, str(tmp_path))
    assert load_sweep(str(tmp_path)) == result


def test_small_budget_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="too small"):
        run_sweep(Machine().measure, [TREE], budget=10)


def test_a_short_budget_says_what_it_left_out() -> None:
    result = run_sweep(Machine().measure, candidate_space(parse_version("2.21.5")), budget=40)
    assert result.runs_used <= 40
    assert any("budget allows" in n for n in result.notes)


def test_candidates_follow_the_installed_version_and_hardware() -> None:
    old = {name for c in candidate_space(parse_version("2.16.5")) for name, _ in c.env}
    new = {name for c in candidate_space(parse_version("2.21.5")) for name, _ in c.env}
    assert "NCCL_MIN_NCHANNELS" in old and "NCCL_MIN_CTAS" not in old
    assert "NCCL_MIN_CTAS" in new and "NCCL_MIN_NCHANNELS" not in new
    validated = candidate_space(parse_version("2.16.5"), validate=lint_validator())
    assert all(c.get("NCCL_MIN_CTAS") is None for c in validated)
    # the channel knobs of a release before 2.17 are swept, not dropped as deprecated
    assert {"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"} <= {name for c in validated for name, _ in c.env}
    # NVLS/NVLSTree only on NVSwitch systems and from the release whose ncclAlgoStr has them
    algos = {c.get("NCCL_ALGO") for c in candidate_space(parse_version("2.17.1"), nvswitch=True)}
    assert "NVLS" in algos and "NVLSTree" not in algos
    assert "NVLS" not in {c.get("NCCL_ALGO") for c in candidate_space(parse_version("2.21.5"))}


@pytest.mark.parametrize(("version", "channels"), [("2.16.5", "NCCL_MIN_NCHANNELS"), ("2.17", "NCCL_MIN_CTAS"),
                                                     ("2.21.5", "NCCL_MIN_CTAS"), (None, "NCCL_MIN_CTAS")])
def test_the_sweep_measures_the_channel_knob_the_version_reads(version: str | None, channels: str) -> None:
    """nccl_vars.yaml: NCCL_MIN/MAX_CTAS from the 2.17 series on (the newest release when the version is unknown),
    NCCL_MIN/MAX_NCHANNELS before."""
    from clusterctl.nccl.tune.derive import Tuning
    from clusterctl.nccl.tune.sweep import candidates_for

    tuning = Tuning(hosts=("a",), nccl_version=version, fabric="ib", settings=())
    knobs = {name for c in candidates_for(tuning, validate=lint_validator()) for name, _ in c.env}
    assert {n for n in knobs if n.startswith("NCCL_MIN_")} == {channels}


def test_against_a_mock_host_with_real_nccl_tests_output(mock_sweep: MockSweep) -> None:
    result, runs = mock_sweep("sweep")
    assert len(runs) == result.runs_used <= 120
    assert "NCCL_" not in runs[0]
    assert {(s.name, s.value) for s in result.settings} == {("NCCL_ALGO", "Tree")}
    # NCCL_BUFFSIZE=8388608's large messages are -1..+6%: within the noise, never kept
    assert all(s.name != "NCCL_BUFFSIZE" for s in result.settings)
    assert result.unread_rows == ()


def test_rows_nccl_tests_parser_could_not_read_reach_the_saved_sweep(tmp_path: Path, mock_sweep: MockSweep) -> None:
    result, runs = mock_sweep("sweep-row-cut")
    intact, _ = mock_sweep("sweep")
    # the row left out does not change what the sweep decides (only figures of the runs lacking it move)
    assert [(s.name, s.value) for s in result.settings] == [(s.name, s.value) for s in intact.settings]
    assert [(r.collective, r.range, r.best_label, r.significant) for r in result.ranges] == \
        [(r.collective, r.range, r.best_label, r.significant) for r in intact.ranges]
    # every run answered with base-1-row-cut.txt (the first of each three defaults-like answers)
    # names the 268435456-byte row, cut short on line 42 of its output
    defaults_like = [(i, c) for i, c in enumerate(runs, start=1) if "Tree" not in c and "BUFFSIZE" not in c]
    cut = defaults_like[::3]
    assert [(r.run, r.config) for r in result.unread_rows] == \
        [(i, "NCCL_NTHREADS=256" if "NCCL_NTHREADS" in c else "defaults") for i, c in cut]
    assert {r.config for r in result.unread_rows} == {"defaults", "NCCL_NTHREADS=256"}
    for row in result.unread_rows:
        assert (row.collective, row.host, row.line) == ("allreduce", "sweep-host", 42)
        assert "10 columns" in row.message and "13" in row.message
    save_sweep(result, str(tmp_path))
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["unread_rows"][0] == {"collective": "allreduce", "config": "defaults", "run": 1,
                                       "host": "sweep-host", "line": 42, "message": result.unread_rows[0].message}
    assert load_sweep(str(tmp_path)) == result
    # a sweep saved before the unread rows were kept still reads back for --bench
    del saved["unread_rows"]
    (tmp_path / "sweep.json").write_text(json.dumps(saved))
    assert load_sweep(str(tmp_path)).unread_rows == ()


def test_the_tuning_adds_what_the_topology_makes_worth_measuring() -> None:
    from dataclasses import replace

    from clusterctl.nccl.tune.derive import Tuning
    from clusterctl.nccl.tune.sweep import candidates_for

    tuning = Tuning(hosts=("a",), nccl_version="2.21.5", fabric="ib", settings=(),
                    sweep_candidates=((("NCCL_NET_GDR_LEVEL", "PHB"),),))
    labels = {c.label for c in candidates_for(tuning, validate=lint_validator())}
    assert "NCCL_NET_GDR_LEVEL=PHB" in labels and "NCCL_ALGO=NVLS" not in labels
    # NVSwitch systems: NCCL picks NVLS/NVLSTree itself, so they are measured too
    nvswitch = {c.label for c in candidates_for(replace(tuning, nvswitch=True), validate=lint_validator())}
    assert {"NCCL_ALGO=NVLS", "NCCL_ALGO=NVLSTree"} <= nvswitch


def test_saved_surveys_mark_nvswitch_hosts() -> None:
    from clusterctl.nccl.tune.inputs import host_from_saved
    from clusterctl.saved_survey import host_from_json

    assert host_from_saved(host_from_json({"host": "a", "reachable": True, "shape": "nvswitch"})).nvswitch
    assert not host_from_saved(host_from_json({"host": "b", "reachable": True, "shape": "pcie"})).nvswitch


def test_a_saved_survey_gives_tuning_the_ports_gids_a_live_one_does() -> None:
    """A RoCE fleet on NCCL 2.21+ whose ports list only RoCE v1 GIDs: tune-nccl --survey said "no RoCE GID found"
    (the saved ports' GIDs were not read) where the live survey sets NCCL_IB_ROCE_VERSION_NUM=1."""
    from clusterctl.facts.model import RDMADevice, RDMAPort, SoftwareStack
    from clusterctl.inventory.model import Host
    from clusterctl.nccl.tune.derive import derive_settings
    from clusterctl.nccl.tune.inputs import from_host_facts, host_from_saved
    from clusterctl.saved_survey import host_from_json
    from clusterctl.survey.collect import HostFacts
    from clusterctl.survey.report import HostReport, host_to_json
    from clusterctl.survey.run import host_state

    gids = ((0, "fe80:0000:0000:0000:0a00:27ff:fe00:0001", "RoCE v1"),)
    port = RDMAPort(1, "PORT_ACTIVE", "LinkUp", "Ethernet", 100.0, gids=gids)
    host = Host(name="roce-1", transport="local")
    facts = HostFacts(values={"rdma": (RDMADevice("mlx5_0", None, None, (port,)),),
                              "stack": SoftwareStack(nccl="2.21.5")})
    live = from_host_facts(host, facts)
    saved = host_from_saved(host_from_json(host_to_json(HostReport(host_state(host, facts), ()))), host)
    assert saved.nics == live.nics
    tuned = {s.name: s.value for s in derive_settings([saved]).settings}
    assert tuned["NCCL_IB_ROCE_VERSION_NUM"] == "1"


def test_a_run_that_gave_no_figures_names_its_settings_as_a_user_writes_them() -> None:
    from clusterctl.bench.nccl_tests import NcclHostRun, NcclRun
    from clusterctl.errors import ClusterctlError
    from clusterctl.nccl.tune.bench_measure import busbw_by_size

    failed = NcclRun("all_reduce", (NcclHostRun("n1", "all_reduce_perf", "", None, "exit 127"),),
                     env={"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_ALGO": "Ring"})
    with pytest.raises(ClusterctlError) as raised:
        busbw_by_size(failed)
    # Before: "with {'NCCL_IB_HCA': '=mlx5_0:1', 'NCCL_ALGO': 'Ring'}", a Python dict.
    assert str(raised.value) == "nccl-tests on n1 with NCCL_IB_HCA==mlx5_0:1 NCCL_ALGO=Ring: exit 127"
    with pytest.raises(ClusterctlError, match=r"^nccl-tests on n1 with defaults: exit 127$"):
        busbw_by_size(NcclRun("all_reduce", failed.runs))
