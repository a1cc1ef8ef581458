"""``clusterctl bootstrap``: Kubernetes with kubeadm on containerd with the NVIDIA runtime, in phases."""
