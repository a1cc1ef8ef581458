"""``clusterctl nccl lint``'s logic: findings about NCCL settings, from the knowledge base."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import UsageError
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.fabric import rdma_fabric_of
from clusterctl.nccl.grammar import ValueProblem, check_value, legacy_level, normalise, strtoll
from clusterctl.nccl.knowledge import SCOPE_READER, KnowledgeBase, VariableInfo, knowledge_base, pytorch_series
from clusterctl.nccl.paths import DEFAULT_GDR_LEVEL, GPU_NIC_PATHS, nccl_path, path_rank, uses_gdr
from clusterctl.nccl.plugins import check_plugin_value
from clusterctl.nccl.sources import BUILD_ARG, PASSTHROUGH, UNSET, Setting, resembles_nccl_name
from clusterctl.nccl.versions import NcclVersion, distinct, parse_version

#: Below this many channels a collective cannot spread over the NICs/NVLinks of a modern GPU host.
LOW_CHANNEL_CAP = 4
#: NCCL_SOCKET_NTHREADS * NCCL_NSOCKS_PERTHREAD may not exceed this (src/transport/net_socket.cc MAX_SOCKETS).
MAX_SOCKETS_PER_PEER = 64
#: Prefixes of other libraries' settings: only the names a known plugin documents are judged.
FOREIGN_PREFIXES: tuple[str, ...] = ("FI_",)


def lint_settings(
    settings: list[Setting],
    *,
    nccl_version: str | NcclVersion | None = None,
    fabric: str | None = None,
    nvlink: bool | None = None,
    gpu_nic_links: Iterable[str] | None = None,
    torch_version: str | None = None,
    notes: Iterable[Finding] = (),
) -> list[Finding]:
    """Everything worth saying about ``settings``, and ``notes`` on their files, ordered by file, line and variable.

    ``fabric`` (ib | roce | ethernet), ``nvlink`` (whether the hosts have NVLink) and
    ``gpu_nic_links`` (for every surveyed GPU, the ``nvidia-smi topo -m`` class to its nearest
    NIC: PIX, PXB, PHB, NODE, SYS) enable the checks that depend on the hardware; None means
    unknown. ``torch_version`` (``2.4``, ``2.4.1+cu121``) checks PyTorch's TORCH_NCCL_* names against
    the release that first reads them.
    """
    kb = knowledge_base()
    torch = _torch_series(torch_version)
    version = parse_version(nccl_version) if isinstance(nccl_version, str) else nccl_version
    findings = list(notes)
    assigned = {(s.file, s.scope, s.name) for s in settings if s.origin != PASSTHROUGH}
    for setting in settings:
        if setting.origin == PASSTHROUGH and (setting.file, setting.scope, setting.name) in assigned:
            continue  # mpirun -x NAME forwards a value set (and checked) elsewhere in the file
        if setting.origin == UNSET:
            findings.append(_finding(
                setting, "UNSET_BY_VALUES", "info",
                f"{setting.name}: null removes the chart's default: the variable is not set at all, NCCL uses its "
                "own default", f"set a value for {setting.name} where the job needs one"))
        findings.extend(_lint_one(setting, kb, version, torch))
    for group in _by_environment(settings).values():
        findings.extend(_duplicates(group))
        effective = _effective(group)
        findings.extend(_combinations(effective, fabric, nvlink))
        if gpu_nic_links is not None:
            findings.extend(_gdr_against_topology(effective, tuple(gpu_nic_links)))
    return sorted(findings, key=lambda f: (f.file or "", f.line or 0, f.severity.rank, f.subject or "", f.code))


def _by_environment(settings: Iterable[Setting]) -> dict[tuple[str, str], list[Setting]]:
    """Settings per environment: per file, and inside a Kubernetes file per container (a RayCluster's
    head and each worker group, a JobSet's replicated jobs, a PyTorchJob's Master and Worker each
    start with their own environment: the same name once in each is no duplicate)."""
    groups: dict[tuple[str, str], list[Setting]] = {}
    for s in settings:
        groups.setdefault((s.file, s.scope), []).append(s)
    return groups


def _effective(group: list[Setting]) -> dict[str, Setting]:
    """The value each name ends up with: the later line wins, as in a shell or an env list.

    ``mpirun -x NAME`` passes on the value set before it, so it never replaces a known value.
    """
    result: dict[str, Setting] = {}
    for s in sorted(group, key=lambda s: s.line):
        if s.origin == PASSTHROUGH and s.name in result:
            continue
        if s.origin == UNSET:
            result.pop(s.name, None)  # NAME: null in chart values: no value at all
            continue
        result[s.name] = s
    return result


#: The end of a launcher's own install-path variable (``OFI_NCCL_PATH``, ``NCCL_PLUGIN_HOME``).
_PATH_SUFFIXES = ("_PATH", "_HOME", "_DIR", "_ROOT", "_PREFIX", "_INSTALL", "_INSTALL_DIR", "_LIB", "_LIBDIR")


def no_settings_finding(file: str) -> Finding:
    """A file nccl lint read nothing from: never a silent 'no problems'."""
    return Finding(Severity.WARNING, "NO_SETTINGS_READ",
                   "no NCCL setting was read from this file: nothing in it was checked", file=file,
                   fix="check the file is the one the job uses; give --format if the detected one is wrong")


def value_problems(info: VariableInfo, value: str, version: NcclVersion | None = None) -> list[ValueProblem]:
    """What is wrong with ``value`` for this variable (empty list: nothing): the grammar of its reader, a
    plugin's (``plugins``) or libnccl's (``grammar``)."""
    return check_plugin_value(info, value) if info.plugin is not None else check_value(info, value, version)


def _finding(s: Setting, code: str, severity: str | Severity, message: str, fix: str) -> Finding:
    """A finding about setting ``s``: its file and line, the variable as subject."""
    return Finding(Severity(severity), code, message, subject=s.name, file=s.file, line=s.line, fix=fix)


def _torch_series(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        return pytorch_series(text)
    except ValueError:
        raise UsageError(f"--torch-version {text!r} is not a PyTorch version such as 2.4 or 2.4.1") from None


def _lint_one(s: Setting, kb: KnowledgeBase, version: NcclVersion | None,
              torch: tuple[int, int] | None = None) -> list[Finding]:
    if resembles_nccl_name(s.name):
        if s.origin == BUILD_ARG:
            return []  # ARG AWS_OFI_NCCL_VERSION=...: a build parameter, gone at run time
        return [_finding(s, "NOT_NCCL", "info",
                         f"{s.name} is not read by NCCL or a known plugin: the name only resembles one "
                         "(NCCL reads names under NCCL_, plugins under their own prefixes)",
                         "nothing to do unless it was meant for NCCL")]
    info = kb.variable(s.name)
    if info is None and s.name.startswith(FOREIGN_PREFIXES):
        return []  # libfabric (FI_*) has hundreds of settings; only the ones plugins document are known
    if (info is None or info.scope == "build") and s.origin == BUILD_ARG:
        return []  # a build argument such as ARG NCCL_VERSION=2.23.4 never reaches NCCL at run time
    if info is None and s.referenced_at is not None and not kb.similar(s.name, version=version):
        return [_finding(
            s, "NOT_NCCL", "info",
            f"{s.name} is not read by NCCL or a known plugin; the file reads it back itself (line "
            f"{s.referenced_at}), so it is taken for the script's own variable",
            "rename it without the NCCL_ prefix if it is the script's own, so it is not taken for an NCCL setting")]
    if info is None or info.scope == "nonexistent":
        return [_unknown(s, kb, info, version)]
    if info.scope == "pytorch":
        if info.replaced_by:
            return [_finding(
                s, "PYTORCH_OLD_NAME", "warning",
                f"{s.name} is read by {SCOPE_READER['pytorch']}; PyTorch renamed it {info.replaced_by} "
                f"(PyTorch 2.2) and reads the old name only with a deprecation warning",
                f"rename it to {info.replaced_by}")]
        return _pytorch_findings(s, info, torch)
    if info.plugin is not None:
        return _plugin_findings(s, info)
    if info.scope != "core":
        return [_finding(s, "NOT_NCCL", "info", f"{s.name} is read by {SCOPE_READER[info.scope]}",
                         "keep it only where that component is used")]
    findings = _version_findings(s, info, version, kb)
    if s.dynamic:
        return findings
    problems = value_problems(info, s.value, version)
    findings.extend(_finding(s, p.code, p.severity, p.message, p.fix) for p in problems)
    if not problems:
        findings.extend(_value_notes(s, info, version))
    return findings


def _pytorch_findings(s: Setting, info: VariableInfo, torch: tuple[int, int] | None) -> list[Finding]:
    """A PyTorch ProcessGroupNCCL variable too new for ``--torch-version``."""
    since = info.pytorch_since
    if torch is None or since is None or torch >= since:
        return []  # values: PyTorch's getCvar* parsing is not modelled (clusterctl.nccl.grammar)
    return [_finding(
        s, "NOT_IN_VERSION", "warning",
        f"{s.name} is read by PyTorch {since[0]}.{since[1]} and later; PyTorch {torch[0]}.{torch[1]} ignores it",
        f"upgrade PyTorch to {since[0]}.{since[1]} or later, or remove {s.name}")]


def _plugin_findings(s: Setting, info: VariableInfo) -> list[Finding]:
    """A plugin's variable: said to be the plugin's (info), its value checked as the plugin reads it."""
    plugin = info.plugin
    assert plugin is not None
    where = info.source.split(" ", 1)[1] if " " in info.source else info.source
    if s.name.startswith(FOREIGN_PREFIXES):
        said = f"; {info.note}" if info.note else ""
        message = (f"{s.name} is a libfabric setting that {plugin.name} documents, not an NCCL variable "
                   f"({plugin.repo}: {where}{said})")
    else:
        message = f"{s.name} is read by {plugin.name}, not by libnccl ({plugin.repo}: {where})"
    findings = [_finding(s, "PLUGIN_VARIABLE", "info", message,
                         "keep it where that plugin is loaded; without it the setting does nothing")]
    if info.note and info.note.startswith(("removed", "deprecated")):
        findings.append(_finding(s, "DEPRECATED", "warning", f"{s.name}: {info.note}", f"remove {s.name}"))
    if not s.dynamic:
        findings.extend(_finding(s, p.code, p.severity, p.message, p.fix) for p in value_problems(info, s.value))
    return findings


def _unknown(s: Setting, kb: KnowledgeBase, info: VariableInfo | None, version: NcclVersion | None) -> Finding:
    similar = kb.similar(s.name, version=version)
    owner = kb.plugin_owning(s.name)
    if info is None and owner is not None and (s.name.endswith(_PATH_SUFFIXES) or s.referenced_at is not None):
        # OFI_NCCL_PATH set by a launcher for its own use (an install path in LD_LIBRARY_PATH): the plugin's
        # prefix, but no variable the plugin reads.
        return _finding(
            s, "NOT_NCCL", "info",
            f"{s.name} is not an NCCL/plugin variable: {owner.name} defines no such variable, and the name is a "
            "script-local path variable"
            + (f" (the file reads it back on line {s.referenced_at})" if s.referenced_at is not None else ""),
            "nothing to do; rename it without the plugin's prefix to keep it apart from the plugin's settings")
    if info is not None:
        message = f"{s.name} is not an NCCL variable: no NCCL release reads it, so it has no effect"
    elif owner is not None:
        message = (f"{s.name} is not a variable {owner.name} reads ({owner.repo}), "
                   "and libnccl does not read it either")
    elif s.name.startswith("TORCH_NCCL_"):
        message = f"{s.name} is not a PyTorch ProcessGroupNCCL variable clusterctl knows; check the spelling"
    else:
        message = (f"{s.name} is not a variable NCCL or a known plugin reads "
                   "(NCCL ignores unknown names silently)")
    dead = kb.similar(s.name, version=version, living=False, limit=1)
    dead_is_closer = bool(dead) and dead[0] not in similar and (
        not similar or _likeness(s.name, dead[0]) > _likeness(s.name, similar[0]))
    if info is not None and info.hint:
        fix = info.hint
    elif dead_is_closer or not similar:
        fix = _no_living_match(s.name, dead, kb, version)
    else:
        fix = f"did you mean {' or '.join(similar)}?"
    severity = "warning" if s.name.startswith("TORCH_NCCL_") else "error"
    return _finding(s, "UNKNOWN_VARIABLE", severity, message, fix)


def _likeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def _no_living_match(name: str, dead: list[str], kb: KnowledgeBase, version: NcclVersion | None) -> str:
    """The fix when no living variable is spelled alike: name the removed look-alike (``dead``) and its successor."""
    if not dead:
        return f"remove {name}"
    old = kb.variable(dead[0])
    assert old is not None
    gone = f"removed in NCCL {_series(old.removed)}" if old.removed is not None else "not read by this version"
    successor = kb.successor(old, version)
    then = f" and replaced by {successor}" if successor else ""
    return f"remove {name}: the closest name, {old.name}, was {gone}{then}"


def _version_findings(s: Setting, info: VariableInfo, version: NcclVersion | None, kb: KnowledgeBase
                      ) -> list[Finding]:
    replacement = info.replaced_by
    instead = f"use {replacement}" if replacement else f"remove {s.name}"
    why = f" (replaced by {replacement})" if replacement else ""
    if info.removed is not None:
        if version is None:
            return [_finding(s, "NOT_IN_VERSION", "warning",
                             f"{s.name} was removed in NCCL {_series(info.removed)}{why}; "
                             f"NCCL {_series(info.removed)} and later ignore it", instead)]
        if version >= info.removed:
            return [_finding(s, "NOT_IN_VERSION", "error",
                             f"{s.name} is not read by NCCL {version}: it was removed in "
                             f"{_series(info.removed)}{why}", instead)]
    if version is not None and info.since is not None and not info.read_by(version):
        return [_finding(s, "NOT_IN_VERSION", "error",
                         f"{s.name} is not read by NCCL {version}: it first appears in the "
                         f"{_series(info.since)} series", f"upgrade NCCL to {_series(info.since)} or later, "
                         f"or remove {s.name}")]
    # Deprecated only where its replacement is read: NCCL 2.16 has NCCL_MIN_NCHANNELS but no NCCL_MIN_CTAS.
    if replacement and info.removed is None and (version is None or kb.successor(info, version)):
        note = (info.replaced_note or "").removeprefix(replacement).strip()
        note = f" {note}" if note.startswith("(") else (f" ({note})" if note else "")
        return [_finding(s, "DEPRECATED", "warning",
                         f"{s.name} is deprecated in favour of {replacement}{note}", f"use {replacement}")]
    return []


def _series(version: NcclVersion) -> str:
    return f"{version.major}.{version.minor}"


def _value_notes(s: Setting, info: VariableInfo, version: NcclVersion | None) -> list[Finding]:
    notes: list[Finding] = []
    if s.name == "NCCL_DEBUG" and s.value.strip().upper() in ("INFO", "TRACE"):
        notes.append(_finding(
            s, "DEBUG_IN_PRODUCTION", "warning",
            f"NCCL_DEBUG={s.value} logs every rank's initialisation (and more) to stdout; "
            "it slows start-up and floods job logs", "use NCCL_DEBUG=WARN outside debugging sessions"))
    default = info.default_for(version)
    if default is not None and normalise(info, s.value) == normalise(info, default.value):
        since = f" (since {_series(default.since)})" if default.since is not None and version is None else ""
        notes.append(_finding(s, "DEFAULT_VALUE", "info",
                              f"{s.name}={s.value} is NCCL's default{since}; setting it changes nothing",
                              f"remove {s.name} unless you pin it on purpose"))
    return notes


def _duplicates(group: list[Setting]) -> list[Finding]:
    findings: list[Finding] = []
    first: dict[str, Setting] = {}
    for s in sorted(group, key=lambda s: s.line):
        if s.origin == PASSTHROUGH:
            continue  # mpirun -x NAME forwards the value set earlier: not a second assignment
        if s.name in first and s.line != first[s.name].line and not s.exclusive_with(first[s.name]):
            earlier = first[s.name]
            same = " (same value)" if earlier.value == s.value else f"; '{s.value}' wins over '{earlier.value}'"
            findings.append(_finding(s, "DUPLICATE", "warning",
                                     f"{s.name} is set again (first on line {earlier.line}){same}",
                                     "keep one assignment"))
        first.setdefault(s.name, s)
    return findings


def _number(s: Setting | None) -> int | None:
    if s is None or s.dynamic:
        return None
    number, rest = strtoll(s.value)
    return number if rest == "" and s.value.strip() else None


def _combinations(env: dict[str, Setting], fabric: str | None, nvlink: bool | None) -> list[Finding]:
    """Checks that need more than one value or the hardware."""
    findings: list[Finding] = []
    ib_disable = env.get("NCCL_IB_DISABLE")
    if _number(ib_disable) == 1 and ib_disable is not None:
        if fabric in ("ib", "roce"):
            name = "InfiniBand" if fabric == "ib" else "RoCE"
            findings.append(_finding(
                ib_disable, "HARMFUL", "error",
                f"NCCL_IB_DISABLE=1 turns off NCCL's IB verbs transport, which carries both InfiniBand and RoCE: "
                f"on this {name} fabric NCCL falls back to TCP sockets", "remove NCCL_IB_DISABLE (or set it to 0)"))
        elif fabric is None:
            ib_settings = sorted(n for n in env if n.startswith("NCCL_IB_") and n != "NCCL_IB_DISABLE")
            if ib_settings:
                findings.append(_finding(
                    ib_disable, "HARMFUL", "warning",
                    f"NCCL_IB_DISABLE=1 turns off the IB/RoCE transport, so {', '.join(ib_settings)} "
                    f"{'has' if len(ib_settings) == 1 else 'have'} no effect and NCCL uses TCP sockets between hosts",
                    "remove NCCL_IB_DISABLE if the hosts have InfiniBand or RoCE NICs"))
    for name, what in (("NCCL_P2P_DISABLE", "GPU peer-to-peer over NVLink/PCIe"),
                       ("NCCL_SHM_DISABLE", "the shared-memory transport")):
        s = env.get(name)
        if s is not None and _number(s) == 1 and nvlink is not False:
            severity = "error" if nvlink else "warning"
            on = "on these NVLink hosts " if nvlink else ""
            findings.append(_finding(
                s, "HARMFUL", severity,
                f"{name}=1 disables {what} {on}for every communicator; intra-host traffic takes a slower path",
                f"remove {name} unless it works around a known hardware fault"))
    for name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_MAX_NRINGS"):
        s = env.get(name)
        n = _number(s)
        if s is not None and n is not None and 1 <= n < LOW_CHANNEL_CAP:
            findings.append(_finding(
                s, "HARMFUL", "warning",
                f"{name}={s.value} caps every collective at {n} channel(s); multi-NIC and NVLink hosts need more "
                "to reach full bandwidth", f"remove {name} or raise it"))
    threads, socks = env.get("NCCL_SOCKET_NTHREADS"), env.get("NCCL_NSOCKS_PERTHREAD")
    t, k = _number(threads), _number(socks)
    if threads is not None and socks is not None and t is not None and k is not None and t * k > MAX_SOCKETS_PER_PEER:
        later = max(threads, socks, key=lambda s: s.line)
        findings.append(_finding(
            later, "INVALID_VALUE", "error",
            f"NCCL_SOCKET_NTHREADS * NCCL_NSOCKS_PERTHREAD = {t} * {k} = {t * k} exceeds {MAX_SOCKETS_PER_PEER}",
            f"keep the product at most {MAX_SOCKETS_PER_PEER}"))
    low, high = env.get("NCCL_MIN_NCHANNELS"), env.get("NCCL_MAX_NCHANNELS")
    lo, hi = _number(low), _number(high)
    if low is not None and high is not None and lo is not None and hi is not None and lo > hi:
        findings.append(_finding(low, "INVALID_VALUE", "warning",
                                 f"NCCL_MIN_NCHANNELS={lo} is above NCCL_MAX_NCHANNELS={hi}",
                                 "make NCCL_MIN_NCHANNELS <= NCCL_MAX_NCHANNELS"))
    return findings


def _gdr_level(value: str) -> str | None:
    """The path type NCCL reads from NCCL_NET_GDR_LEVEL (exact name, or a legacy number); None if ignored."""
    text = value.strip()
    return text if text in GPU_NIC_PATHS else legacy_level(text)


def _gdr_against_topology(env: dict[str, Setting], links: tuple[str, ...]) -> list[Finding]:
    """NCCL_NET_GDR_LEVEL judged against the surveyed GPU-to-nearest-NIC distances.

    The distances go through the same table as tune-nccl (clusterctl.nccl.paths): nvidia-smi's
    NODE is NCCL's PHB. NCCL's default (PXB) uses GPUDirect RDMA where the GPU and NIC share a
    PCIe switch and stages through host memory farther out, which is usually faster than
    peer-to-peer reads through the CPU's root complex or across sockets.
    """
    s = env.get("NCCL_NET_GDR_LEVEL")
    level = _gdr_level(s.value) if s is not None else None
    paths = [p for p in (nccl_path(link) for link in links) if p is not None and p != "LOC"]
    if s is None or level is None or not paths:
        return []
    near = sum(1 for p in paths if uses_gdr(p, DEFAULT_GDR_LEVEL))
    if level == "LOC" and near:
        return [_finding(
            s, "HARMFUL", "warning",
            f"NCCL_NET_GDR_LEVEL={s.value} turns GPUDirect RDMA off, although {near} of the {len(paths)} "
            "surveyed GPUs have a NIC on their own PCIe switch: every transfer is staged through host memory",
            "remove NCCL_NET_GDR_LEVEL (NCCL's default, PXB, uses GPUDirect RDMA where it pays)")]
    far = [p for p in paths if not uses_gdr(p, DEFAULT_GDR_LEVEL) and uses_gdr(p, level)]
    if far:
        names = sorted(set(far), key=path_rank)
        return [_finding(
            s, "HARMFUL", "warning",
            f"NCCL_NET_GDR_LEVEL={s.value} forces GPUDirect RDMA for {len(far)} of the {len(paths)} surveyed "
            f"GPUs whose nearest NIC is only reachable at {'/'.join(names)} (through the CPU's root complex or "
            "across sockets), where peer-to-peer reads are usually slower than staging in host memory",
            "remove NCCL_NET_GDR_LEVEL, or set it to PXB")]
    return []


@dataclass(frozen=True)
class SurveyContext:
    """What ``nccl lint --survey FILE`` takes from a saved survey: NCCL version, fabric, NVLink."""

    nccl_version: str | None
    fabric: str | None
    nvlink: bool | None
    #: The versions the hosts run, oldest first (more than one: the oldest is checked against).
    versions_seen: tuple[str, ...] = ()
    #: For every GPU of every host, the topo -m class to its nearest NIC (PIX ... SYS).
    gpu_nic_links: tuple[str, ...] = ()


def context_from_survey(path: str | Path) -> SurveyContext:
    """The fleet's NCCL version, fabric and NVLink presence, read from a saved survey."""
    from clusterctl.saved_survey import load_saved_survey

    hosts = list(load_saved_survey(path).hosts.values())
    # As tune-nccl: checked against the oldest, since a setting the oldest NCCL does not read is lost on its hosts.
    versions = distinct(str(h.stack["nccl"]) for h in hosts if h.stack and h.stack.get("nccl"))
    version = str(versions[0]) if versions else None
    layers = Counter(port.link_layer.lower() for h in hosts for nic in h.nics if nic.fabric for port in nic.ports)
    fabric = rdma_fabric_of(layers.most_common(1)[0][0]) if layers else None
    nvlink = any(len(domain) > 1 for h in hosts for domain in h.nvlink_domains) if hosts else None
    links = tuple(str(g.nic_link) for h in hosts for g in h.gpus if g.nic_link)
    return SurveyContext(version, fabric, nvlink, tuple(map(str, versions)), links)
