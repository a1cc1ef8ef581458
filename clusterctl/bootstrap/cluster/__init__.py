"""The cluster half of ``clusterctl bootstrap``: what the cluster phases render and decide.

Pure logic only (no transport): settings from the inventory, the pinned versions, the kubeadm
configuration, the CNI and GPU add-on manifests and Helm values, NFD topology feature files
from a saved survey, and the Prometheus alerting rules. The phases that carry these to hosts
through the gate live in ``clusterctl.bootstrap.phases``.
"""
