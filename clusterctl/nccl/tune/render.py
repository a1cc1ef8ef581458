"""Rendering tuned settings from the Jinja templates in ``templates/nccl/``.

The shared environment of ``clusterctl.templating`` renders them: every value passes through a
filter that makes it safe where it lands (``shq``, ``yamlq``, ``conf_value``, ``comment``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from clusterctl.errors import UsageError
from clusterctl.nccl.tune.derive import TunedSetting, Tuning, sort_settings
from clusterctl.nccl.tune.sweep_result import SIZE_RANGES, TUNER_MAX_BYTES, SweepResult
from clusterctl.templating import environment

FORMATS: tuple[str, ...] = ("conf", "env", "k8s", "slurm", "tuner", "all")
CONF_PATH = "/etc/nccl.conf"
TUNER_PATH = "/etc/nccl_tuner.conf"
CONFIGMAP_NAME = "nccl-settings"
_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_SAFE_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def tuner_rows(sweep: SweepResult | None) -> list[tuple[str, int, int, str, str]]:
    """(collective, min_bytes, max_bytes, algorithm, protocol) for each collective and size range the sweep
    confirmed, as the tuner CSV lists them (plugins/tuner/example/README.md)."""
    if sweep is None:
        return []
    bounds = {name: (low, TUNER_MAX_BYTES if high is None else high) for name, low, high in SIZE_RANGES}
    order = {name: i for i, (name, _, _) in enumerate(SIZE_RANGES)}
    rows = sorted(sweep.tuner_rows, key=lambda r: (r[0], order.get(r[1], 9)))
    return [(op, *bounds[r], algo, proto) for op, r, algo, proto in rows]


def final_settings(tuning: Tuning, sweep: SweepResult | None, *, host: str | None = None) -> tuple[TunedSetting, ...]:
    """Derived settings, measured ones, and the tuner plugin's two variables when it has rows."""
    base = tuning.for_host(host) if host else tuning.settings
    # A measured setting wins over the derived one of the same name.
    merged = {s.name: s for s in (*base, *(sweep.settings if sweep is not None else ()))}
    if sweep is not None and sweep.tuner_rows:
        why = "per-size algorithm/protocol winners of the sweep"
        merged["NCCL_TUNER_PLUGIN"] = TunedSetting(
            "NCCL_TUNER_PLUGIN", "example", f"NCCL's example tuner plugin applies the {why}", "sweep")
        merged["NCCL_TUNER_CONFIG_FILE"] = TunedSetting(
            "NCCL_TUNER_CONFIG_FILE", TUNER_PATH, f"the {why}, as CSV", "sweep")
    for s in merged.values():
        if not _NAME.match(s.name):
            raise UsageError(f"refusing to render a setting with an invalid name: {s.name!r}")
    return sort_settings(merged.values())


def _overridden(tuning: Tuning) -> list[tuple[str, list[str]]]:
    by_name: dict[str, list[str]] = {}
    for host, settings in tuning.host_overrides.items():
        for s in settings:
            by_name.setdefault(s.name, []).append(host)
    return sorted(by_name.items())


def _host_folder(name: str) -> str:
    if not _SAFE_HOST.match(name):
        raise UsageError(f"host name {name!r} cannot be used as a folder name for its per-host files")
    return name


def _render(template: str, tuning: Tuning, settings: Sequence[TunedSetting], host: str | None = None,
            **extra: Any) -> str:
    return environment().get_template(f"nccl/{template}").render(
        settings=settings, host=host, nccl_version=tuning.nccl_version, fabric=tuning.fabric, **extra)


def render_files(
    tuning: Tuning,
    sweep: SweepResult | None = None,
    *,
    fmt: str = "all",
    namespace: str | None = None,
    nodes: int = -1,
    ranks: int = -1,
) -> dict[str, str]:
    """Relative file name -> content for ``fmt`` (one of FORMATS); hosts with overrides get ``hosts/<name>/...``."""
    common = final_settings(tuning, sweep)
    wanted = FORMATS[:-1] if fmt == "all" else (fmt,)
    files: dict[str, str] = {}
    # The formats a host with overrides gets its own copy of: (file name, template).
    per_host = [(name, template) for kind, name, template in (("conf", "nccl.conf", "nccl.conf.j2"),
                                                             ("env", "nccl.sh", "nccl.sh.j2")) if kind in wanted]
    for name, template in per_host:
        files[name] = _render(template, tuning, common)
    for host in sorted(tuning.host_overrides):
        own = final_settings(tuning, sweep, host=host)
        for name, template in per_host:
            files[f"hosts/{_host_folder(host)}/{name}"] = _render(template, tuning, own, host)
    # The ConfigMap's name, and the per-host values that the ConfigMap and the Slurm exports cannot hold.
    shared: dict[str, Any] = {"overridden": _overridden(tuning), "configmap_name": CONFIGMAP_NAME,
                              "namespace": namespace}
    if "k8s" in wanted:
        files["nccl-configmap.yaml"] = _render("configmap.yaml.j2", tuning, common, **shared)
        files["nccl-envfrom.yaml"] = _render("envfrom.yaml.j2", tuning, common, **shared)
    if "slurm" in wanted:
        files["nccl-slurm.sh"] = _render("slurm-exports.sh.j2", tuning, common, **shared)
    rows = tuner_rows(sweep)
    if "tuner" in wanted and rows:
        files["nccl_tuner.conf"] = _render("nccl_tuner.conf.j2", tuning, common, rows=rows, nodes=nodes, ranks=ranks,
                                           tuner_path=TUNER_PATH)
    return files


def conf_for_host(tuning: Tuning, sweep: SweepResult | None, host: str) -> str:
    """The /etc/nccl.conf one host gets (common settings with its overrides)."""
    own = host if host in tuning.host_overrides else None
    return _render("nccl.conf.j2", tuning, final_settings(tuning, sweep, host=own), own)
