"""``clusterctl health``: is every GPU, NVLink, NIC and PCIe path still healthy?

The public entry point is :func:`clusterctl.health.run.run_health` (also importable from
here): ``run_health(hosts, runner, options) -> HealthReport``. Each host of the report has a
``verdict`` (``healthy``, ``degraded``, ``unhealthy``, or ``unknown`` when it could not be
checked), a one-line ``reason`` and its ``findings`` (the one ``Finding`` shape, each with a
stable code, the evidence line and the action to take in ``fix``). ``quarantine``'s release
gate calls it; ``HostHealth.ok`` says whether a host may go back into service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterctl.health.model import HealthOptions, HealthReport, HostHealth, Verdict
    from clusterctl.health.run import run_health

__all__ = ["HealthOptions", "HealthReport", "HostHealth", "Verdict", "run_health"]


def __getattr__(name: str) -> Any:
    # Lazy: importing the package (the CLI's --help) must not import the checks.
    if name == "run_health":
        from clusterctl.health.run import run_health

        return run_health
    if name in ("HealthOptions", "HealthReport", "HostHealth", "Verdict"):
        from clusterctl.health import model

        return getattr(model, name)
    raise AttributeError(name)
