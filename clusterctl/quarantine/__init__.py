"""Quarantine and release of failing hosts: taint, cordon, drain (Kubernetes and Slurm), checks before release.

- ``drain``: ``drain_node`` evicts a node's pods as ``kubectl drain`` does, through the gate
  (the day-2 upgrade uses it too);
- ``node_ops``: the taint, cordon and annotation changes, each with its undo;
- ``slurm``: ``scontrol update ... state=drain|resume`` on hosts that run slurmd;
- ``run``: ``quarantine_hosts``, the command as one call;
- ``release``: ``release_hosts``: health and a one-host ``bench nccl`` first, then the reverse;
- ``status``: which nodes are quarantined, since when and why;
- ``receiver`` (``remediate serve``): alerts accepted at once (``webhook_server``: token, TLS,
  bounds; ``webhook_payload``), worked on per host (``host_queue``), decided and marked under the
  cluster's Lease (``cluster_marker``, ``cluster_lease``), kept until acted on (``pending_work``).
"""
