"""Day-2 operations on a bootstrapped cluster: upgrade, remove a node, certificates.

Each is an ordered list of phases on the action engine (``clusterctl.engine``): the phases read
the cluster, plan ``Change``s and the engine passes them through the one ``Gate`` (``--dry-run``
and ``upgrade plan`` are the same code with the gate recording), with its lock, progress, undo
journal and interrupt handling. Node-level work that bootstrap already knows (packages,
containerd's configuration, the NVIDIA runtime, the add-on charts) is done by bootstrap's own
phases, so a pin changed in the inventory rolls out with the same checks.

* ``upgrade``: ``clusterctl upgrade plan|apply|phase`` (kubeadm's documented order);
* ``remove_node``: ``clusterctl remove-node HOST``; ``certs``: ``clusterctl certs check|renew``;
* ``drain``: the drain phase, the one place a day-2 action takes pods off a node.
"""
