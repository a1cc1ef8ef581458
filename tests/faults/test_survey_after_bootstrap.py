"""After a bootstrap, survey reads the simulated hosts' state: containerd, kubelet and kubeadm are
reported at the versions bootstrap installed, the same that ``exec ... --version`` answers."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import clusterctl

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "inventories" / "demo.yaml")
NODE_ONLY = "control-plane,join,network,gpu-addons,topology-labels,alert-rules,verify"


def _stack() -> dict[str, object]:
    done = clusterctl("-i", DEMO, "-l", "gpu-a1", "-o", "json", "survey")
    (host,) = json.loads(done.stdout)["hosts"]
    return host.get("stack") or host["facts"]["stack"]  # type: ignore[no-any-return]


def test_a_fresh_host_has_no_kubernetes_and_a_bootstrapped_one_has_the_pinned_one(tmp_path: Path) -> None:
    before = _stack()
    assert before["containerd"] is None and before["kubelet"] is None
    assert before["kernel"] == "5.15.0-113-generic" and before["nccl"] == "2.18.3" and before["cuda"] == "12.2"

    ran = clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "--skip-phases", NODE_ONLY, "--state-dir",
                     tmp_path / "progress")
    assert ran.exit_code == 0, ran.stderr

    after = _stack()
    assert (after["containerd"], after["kubelet"], after["kubeadm"]) == ("2.3.7", "1.36.2", "1.36.2")
    assert after["missing"] == {}
    answered = clusterctl("-i", DEMO, "-l", "gpu-a1", "-o", "json", "exec", "--", "containerd --version")
    assert "v2.3.7" in json.loads(answered.stdout)["hosts"][0]["stdout"]
