"""Day-2 operations on a bootstrapped cluster: upgrade, remove a node, certificates.

Each action reads the cluster first (read-only), plans its steps as ``Change``s, and passes
them through the one ``Gate``: ``--dry-run`` and ``upgrade plan`` are the same code stopped
before anything is touched. Node-level work that bootstrap already knows (packages,
containerd's configuration, the NVIDIA runtime, the add-on charts) is done by bootstrap's own
phases, so a pin changed in the inventory rolls out with the same checks.

* ``upgrade``: ``clusterctl upgrade plan|apply --to X`` (kubeadm's documented order);
* ``remove_node``: ``clusterctl remove-node HOST``;
* ``drain``: cordon + drain + uncordon, the one place a day-2 action takes pods off a node.
"""
