"""GPU checks: count and model against peers, NVLink pairs and lanes, PCIe width/generation, health."""

from __future__ import annotations

from itertools import combinations
from typing import Any

from clusterctl.survey.checks.baseline import FleetBaseline
from clusterctl.survey.checks.codes import Finding, Severity, finding
from clusterctl.survey.checks.host import SurveyedHost, active_lanes, majority, narrow_pcie
from clusterctl.survey.topology import HostTopology, Shape, compress_indices, modal_nvlink_count


def check_gpu_inventory(state: SurveyedHost, baseline: FleetBaseline) -> list[Finding]:
    if state.facts is None or state.gpu_only_control_plane:
        return []
    out: list[Finding] = []
    expected_model = baseline.gpu_model
    model = state.gpu_model
    if expected_model and model and model != expected_model:
        out.append(finding(Severity.WARNING, "GPU_MODEL_DIFFERS", state.name,
                           f"GPUs are {model}; most hosts have {expected_model}",
                           model=model, fleet_model=expected_model))
    # Count peers share the model: a 4-GPU L40S box is not a broken 8-GPU H100 box.
    expected_count = baseline.gpu_count(model)
    count = state.gpu_count
    if expected_count is not None and count is not None and count != expected_count:
        out.append(finding(Severity.ERROR, "GPU_COUNT_DIFFERS", state.name,
                           f"{count} GPUs; peers have {expected_count}", gpus=count, fleet_gpus=expected_count))
    return out


def check_nvlink_pairs(state: SurveyedHost, baseline: FleetBaseline) -> list[Finding]:
    topology = state.topology
    if topology is None or len(topology.gpus) < 2:
        return []
    peers_expect = baseline.nvlinks(state, topology)
    missing: list[dict[str, Any]] = []
    fewer: list[dict[str, Any]] = []
    used_peers = False
    single_modal, linked_fraction = modal_nvlink_count(topology)
    for a, b in combinations(topology.gpu_indices, 2):
        have = topology.nvlinks(a, b)
        expected = peers_expect[a, b]
        if expected is not None:
            used_peers = True
        else:
            expected = _single_host_expectation(topology, single_modal, linked_fraction, have)
        if not expected or have >= expected:
            continue
        link = topology.gpu_link(a, b)
        pair = {"gpus": [a, b], "link": link.raw if link else None, "expected": f"NV{expected}"}
        (fewer if have else missing).append(pair)
    basis = "peers" if used_peers else "the rest of this host"
    out: list[Finding] = []
    for code, says, pairs in (("NVLINK_MISSING", "no NVLink between", missing),
                              ("NVLINK_FEWER_LINKS", "fewer NVLinks:", fewer)):
        if pairs:
            shown = ", ".join(f"GPU{p['gpus'][0]}-GPU{p['gpus'][1]} {p['link']} (expected {p['expected']})"
                              for p in pairs)
            out.append(finding(Severity.ERROR, code, state.name, f"{says} {shown}, compared with {basis}",
                               pairs=pairs, basis=basis))
    return out


def _single_host_expectation(topology: HostTopology, modal: int, linked_fraction: float, have: int) -> int:
    """NV count a pair should have judging by the host alone (0 = no expectation).

    Only a near-complete mesh is judged: at least 3/4 of the pairs NVLinked and the host not
    a hybrid cube mesh (whose missing pairs are by design). Fewer-links is judged only on
    NVSwitch-era counts (>= 4): V100/P100 meshes mix NV1 and NV2 by design.
    """
    if topology.shape is Shape.HYBRID_CUBE_MESH or linked_fraction < 0.75 or modal == 0:
        return 0
    if have == 0:
        return modal
    return modal if modal >= 4 else 0


def check_nvlink_lanes(state: SurveyedHost, baseline: FleetBaseline) -> list[Finding]:
    statuses = state.facts.nvlink if state.facts else None
    if not statuses:
        return []
    active = {s.gpu_index: active_lanes(s) for s in statuses}
    expected = baseline.active_lanes(state) or majority(active.values(), minimum=2)
    if not expected:
        return []
    out: list[Finding] = []
    for status in statuses:
        if active[status.gpu_index] >= expected:
            continue
        inactive = [lane.link for lane in status.lanes if not lane.active]
        # A GPU whose links all fell lists none: nvidia-smi says so in one line instead.
        which = f"inactive: {', '.join(map(str, inactive))}" if inactive else "nvidia-smi: all links are inactive"
        out.append(finding(Severity.WARNING, "NVLINK_LANE_INACTIVE", state.name,
                           f"GPU{status.gpu_index}: {active[status.gpu_index]} of {expected} NVLink lanes active "
                           f"({which})",
                           gpu=status.gpu_index, active=active[status.gpu_index], expected=expected,
                           inactive_lanes=inactive))
    return out


def check_pcie(state: SurveyedHost, baseline: FleetBaseline) -> list[Finding]:
    gpus = state.gpus
    if not gpus:
        return []
    expected_width, expected_gen = baseline.pcie(state)
    narrow: list[dict[str, Any]] = []
    by_design: list[int] = []
    slow_gen: list[dict[str, Any]] = []
    for gpu in gpus:
        width, width_max = gpu.pcie_width_current, gpu.pcie_width_max
        why = narrow_pcie(width, width_max, expected_width)
        if why == "downtrained":
            narrow.append({"gpu": gpu.index, "width": width, "width_max": width_max})
        elif why == "design":
            by_design.append(gpu.index)
        gen, gen_max = gpu.pcie_gen_current, gpu.pcie_gen_max
        # Idle GPUs drop the PCIe generation to save power: only one below its peers is noted.
        if gen and gen_max and gen < gen_max and expected_gen is not None and gen < expected_gen:
            slow_gen.append({"gpu": gpu.index, "gen": gen, "gen_max": gen_max, "peers_gen": expected_gen})
    out = [finding(Severity.ERROR, "PCIE_DOWNTRAINED", state.name,
                   f"GPU{item['gpu']} PCIe link x{item['width']} of x{item['width_max']}", **item) for item in narrow]
    if by_design:
        out.append(finding(Severity.INFO, "PCIE_DOWNTRAINED", state.name,
                           f"GPUs {compress_indices(by_design)} run below their maximum PCIe width, like their "
                           "peers (slot or riser design)", gpus=by_design))
    if slow_gen:
        shown = ", ".join(f"GPU{i['gpu']} gen{i['gen']}" for i in slow_gen)
        out.append(finding(Severity.INFO, "PCIE_DOWNTRAINED", state.name,
                           f"PCIe generation below peers ({shown}); normal when idle, re-check under load",
                           gpus=slow_gen))
    return out


def check_gpu_health(state: SurveyedHost) -> list[Finding]:
    gpus = state.gpus or ()
    out: list[Finding] = []
    off = [g.index for g in gpus if g.persistence_mode is False]
    if off:
        out.append(finding(Severity.WARNING, "PERSISTENCE_OFF", state.name,
                           f"persistence mode off on GPUs {compress_indices(off)}", gpus=off))
    for gpu in gpus:
        if gpu.ecc_errors_uncorrected:
            out.append(finding(Severity.ERROR, "ECC_ERRORS", state.name,
                               f"GPU{gpu.index}: {gpu.ecc_errors_uncorrected} uncorrected ECC errors (volatile)",
                               gpu=gpu.index, uncorrected=gpu.ecc_errors_uncorrected))
    return out
