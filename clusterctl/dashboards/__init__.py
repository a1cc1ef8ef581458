"""Grafana dashboards rendered from what clusterctl knows (``clusterctl dashboards``).

What a survey found (hosts, GPUs, NVLink domains, racks) and what bench measured (pairwise
ib_write_bw, nccl-tests per host) decide which panels exist and what they select; the live series
come from the exporters a fleet already runs: dcgm-exporter, node-exporter (with clusterctl's
textfile metrics, ``measured.py``), kube-state-metrics, and the node health agent's metrics.
Dashboards are built with ``grafana-foundation-sdk``'s typed builders, never assembled by hand.
"""
