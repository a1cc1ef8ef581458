"""The demo cluster (``inventories/demo.yaml`` after ``clusterctl bootstrap``) as the day-2 tests use it:
the survey bootstrap reads, kubectl on the first control plane, and a training Deployment to drain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clirun import REPO_ROOT, clusterctl

SURVEY = REPO_ROOT / "tests" / "bootstrap_cluster" / "fixtures" / "demo-survey.json"
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
TRAINER = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec: {containers: [{name: main, image: busybox}]}
"""


def trainer_with_budget(min_available: int) -> str:
    """``TRAINER`` and a PodDisruptionBudget keeping ``min_available`` of its pods."""
    return TRAINER + f"""\
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: trainer, namespace: default}}
spec: {{minAvailable: {min_available}, selector: {{matchLabels: {{app: trainer}}}}}}
"""


def kubectl_apply(inventory: Path, folder: Path, manifest: str) -> None:
    """``kubectl apply`` of ``manifest`` on gpu-a1 (copied there as ``/root/trainer.yaml`` from ``folder``)."""
    (folder / "trainer.yaml").write_text(manifest)
    on_gpu_a1 = ("-i", inventory, "-l", "gpu-a1")
    assert clusterctl(*on_gpu_a1, "copy", folder / "trainer.yaml", "/root/trainer.yaml").exit_code == 0
    assert clusterctl(*on_gpu_a1, "exec", "--", f"{KUBECTL} apply -f /root/trainer.yaml").exit_code == 0


def node(inventory: Path, name: str) -> dict[str, Any]:
    """The node object as the (simulated) API server has it, read with kubectl on gpu-a1."""
    run = clusterctl("-i", inventory, "-l", "gpu-a1", "-o", "json", "exec", "--", f"{KUBECTL} get node {name} -o json")
    assert run.exit_code == 0, run.output
    found: dict[str, Any] = json.loads(run.json()["hosts"][0]["stdout"])
    return found
