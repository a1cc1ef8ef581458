"""NFD local feature files from the demo's saved survey."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from cluster_builders import FIXTURES

from clusterctl.bootstrap.cluster.topology_labels import render_feature_file, topology_labels
from clusterctl.facts.model import RDMAPort
from clusterctl.findings import Finding, Severity
from clusterctl.saved_survey import SavedNIC, SavedSurvey, load_saved_survey

#: NFD's local feature file format (docs: customization guide, "Feature files"): a comment, a
#: directive comment, or <name>[=<value>] where a prefixed name is <namespace>/<name>.
LINE = re.compile(r"^(#.*|(?P<ns>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)/(?P<name>[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)"
                  r"(=(?P<value>[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?)?)$")
DIRECTIVES = {"# +no-label", "# +no-feature"}


@pytest.fixture(scope="module")
def survey() -> SavedSurvey:
    return load_saved_survey(FIXTURES / "demo-survey.json")


def parse_feature_file(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, features without labels) as NFD reads them; fails on any line NFD would not take."""
    labels: dict[str, str] = {}
    unlabelled: dict[str, str] = {}
    no_label = False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = LINE.match(line)
        assert match, f"line {number} is not in NFD's feature file format: {line!r}"
        if line.startswith("#"):
            if line.startswith("# +"):
                assert line in DIRECTIVES or line.startswith("# +expiry-time="), line
                no_label = no_label or line == "# +no-label"
            continue
        namespace = match["ns"]
        assert namespace != "kubernetes.io" and not namespace.endswith(".kubernetes.io"), line
        assert len(match["name"]) <= 63 and len(match["value"] or "") <= 63
        (unlabelled if no_label else labels)[f"{namespace}/{match['name']}"] = match["value"] or "true"
    return labels, unlabelled


def test_every_demo_host_gets_a_valid_feature_file(survey: SavedSurvey) -> None:
    for host in survey.hosts.values():
        text = render_feature_file(topology_labels(host), survey)
        labels, features = parse_feature_file(text)
        assert labels and all(key.startswith("clusterctl.dev/") for key in labels)
        assert "nvidia.com/gpu.clique" not in text.replace("nvidia.com/gpu.clique stays", "")
        assert features == {"clusterctl.dev/rack": host.rack}


def test_a_healthy_nvswitch_host(survey: SavedSurvey) -> None:
    labels, _ = parse_feature_file(render_feature_file(topology_labels(survey.hosts["gpu-a1"]), survey))
    assert labels == {
        "clusterctl.dev/nvlink.shape": "nvswitch",
        "clusterctl.dev/nvlink.domains": "1",
        "clusterctl.dev/nvlink.gpus-per-domain": "8",
        "clusterctl.dev/nvlink.largest-domain": "8",
        "clusterctl.dev/fabric.type": "ib",
        "clusterctl.dev/fabric.rate-gbps": "200",
        "clusterctl.dev/fabric.ports": "8",
    }


def test_lost_nvlink_gets_its_own_label(survey: SavedSurvey) -> None:
    labels, _ = parse_feature_file(render_feature_file(topology_labels(survey.hosts["gpu-a3"]), survey))
    assert labels["clusterctl.dev/nvlink.degraded"] == "true"
    assert labels["clusterctl.dev/nvlink.gpus-per-domain"] == "7"
    assert labels["clusterctl.dev/nvlink.shape"] == "partial-nvlink"
    healthy, _ = parse_feature_file(render_feature_file(topology_labels(survey.hosts["gpu-a2"]), survey))
    assert "clusterctl.dev/nvlink.degraded" not in healthy


def test_a_slow_fabric_port_shows_in_rate_and_degraded(survey: SavedSurvey) -> None:
    labels, _ = parse_feature_file(render_feature_file(topology_labels(survey.hosts["gpu-b3"]), survey))
    assert labels["clusterctl.dev/fabric.rate-gbps"] == "10"
    assert labels["clusterctl.dev/fabric.degraded"] == "true"


def test_only_a_fabric_port_down_marks_the_fabric_degraded(survey: SavedSurvey) -> None:
    """A management port down (survey's NIC_DOWN warning about a NIC off the fabric) keeps training jobs on
    the host; a fabric HCA the survey did not find does not."""
    host = survey.hosts["gpu-a1"]
    management = SavedNIC("mlx5_9", "0", (), False, (RDMAPort(1, "PORT_DOWN", None, "Ethernet"),))
    down = Finding(Severity.WARNING, "NIC_DOWN", "mlx5_9:1 is PORT_DOWN", host="gpu-a1",
                   evidence={"hca": "mlx5_9", "port": 1, "fabric": False})
    off = replace(host, nics=(*host.nics, management), findings=(*host.findings, down))
    assert "clusterctl.dev/fabric.degraded" not in topology_labels(off).as_dict()
    absent = Finding(Severity.ERROR, "NIC_DOWN", "mlx5_7: expected by the inventory, not found", host="gpu-a1",
                     evidence={"hca": "mlx5_7", "state": "absent"})
    gone = replace(host, findings=(*host.findings, absent))
    assert topology_labels(gone).as_dict()["clusterctl.dev/fabric.degraded"] == "true"


def test_the_format_check_can_fail() -> None:
    with pytest.raises(AssertionError):
        parse_feature_file("kubernetes.io/evil=1\n")
    with pytest.raises(AssertionError):
        parse_feature_file("clusterctl.dev/rack=a b\n")
