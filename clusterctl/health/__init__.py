"""``clusterctl health``: is every GPU, NVLink, NIC and PCIe path still healthy?

The public entry point is :func:`clusterctl.health.run.run_health`: ``run_health(hosts, runner,
options) -> HealthReport``. Each host of the report has a ``verdict`` (``healthy``, ``degraded``,
``unhealthy``, or ``unknown`` when it could not be checked), a one-line ``reason`` and its
``findings`` (the one ``Finding`` shape, each with a stable code, the evidence line and the action
to take in ``fix``). ``quarantine``'s release gate calls it; ``HostHealth.ok`` says whether a host
may go back into service.
"""
