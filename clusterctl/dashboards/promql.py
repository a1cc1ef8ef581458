"""PromQL the panels share: dcgm-exporter's host label under both its names, and matchers for host lists.

dcgm-exporter labelled the host ``Hostname`` until its PR #655 (2026-05) and ``hostname`` since; a
fleet mid-upgrade has both. Every DCGM query here selects on either and copies whichever is set into
one label, ``host``, so panels, joins and legends work on both (bootstrap's alert rules match both too).
"""

from __future__ import annotations

from collections.abc import Iterable

#: The dashboards' host variable: Grafana expands a multi-value selection to ``(a|b)`` and All to ``.*``.
HOST_VAR = "$host"
DCGM_HOST_LABELS = ("Hostname", "hostname")


def _matchers(label: str, hosts: Iterable[str], gpus: str | None, extra: str) -> str:
    parts = [f'{label}=~"{pattern}"' for pattern in hosts]
    if gpus is not None:
        parts.append(f'gpu=~"{gpus}"')
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}"


def dcgm_selector(metric: str, *, hosts: Iterable[str] = (HOST_VAR,), gpus: str | None = None, extra: str = "",
                  rate: str | None = None) -> str:
    """``metric`` from dcgm-exporter on the hosts matching every pattern in ``hosts`` (under either host
    label), with a ``host`` label added; ``rate``: a counter's per-second rate over that window."""
    patterns = tuple(hosts)
    sides = []
    for label in DCGM_HOST_LABELS:
        selector = metric + _matchers(label, patterns, gpus, extra)
        sides.append(f"rate({selector}[{rate}])" if rate else selector)
    either = f"({sides[0]} or {sides[1]})"
    for label in DCGM_HOST_LABELS:
        either = f'label_replace({either}, "host", "$1", "{label}", "(.+)")'
    return either


def per_gpu(metric: str, **kwargs: object) -> str:
    """One series per host and GPU: MIG instances and the pod labels dcgm-exporter adds would otherwise
    make several series of one GPU."""
    return f"max by (host, gpu) ({dcgm_selector(metric, **kwargs)})"  # type: ignore[arg-type]
