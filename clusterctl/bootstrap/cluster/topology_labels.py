"""NFD local feature files from a saved survey: NVLink domains and shape, fabric, lost NVLink.

Keys (all under clusterctl's own ``clusterctl.dev/`` prefix; docs/bootstrap.md lists them):

* ``nvlink.domains`` — NVLink domains on the host (GPUs that reach each other over NVLink);
* ``nvlink.gpus-per-domain`` — GPUs in the smallest domain: the largest tensor-parallel group
  every domain of the host can hold;
* ``nvlink.largest-domain`` — GPUs in the largest domain;
* ``nvlink.shape`` — ``nvswitch``, ``hybrid-cube-mesh``, ``partial-nvlink``, ``pcie-only``, ...;
* ``nvlink.degraded=true`` — the survey saw NVLink lost on this host (a GPU out of its domain,
  fewer links, inactive lanes): keep tensor-parallel jobs off it;
* ``fabric.type``, ``fabric.rate-gbps`` (slowest active fabric port), ``fabric.ports``;
* ``fabric.degraded=true`` — a fabric port down or trained below the fleet's rate.

Keys that exist elsewhere are left to their owners: ``nvidia.com/gpu.clique`` is GFD's, set
from NVML fabric info on multi-node NVLink systems only (never faked here); Topograph's
``accelerator.topograph.run/*`` are Topograph's. NFD refuses ``kubernetes.io`` namespaces, so
the zone is the kubelet's (``topology.kubernetes.io/zone``); the rack goes in as a feature
without a label (``# +no-label``) because the kubelet already labels it.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.bootstrap.cluster.settings import LABEL_PREFIX
from clusterctl.saved_survey import SavedHost, SavedSurvey
from clusterctl.survey.checks.codes import NIC_LOSS_CODES, NVLINK_LOSS_CODES
from clusterctl.templating import render

FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
FEATURE_FILE = "clusterctl-topology"
#: Kept outside features.d (NFD would read a backup or a temporary file there as features).
STAGING_PATH = "/etc/kubernetes/clusterctl/nfd/clusterctl-topology"
#: NFD's limit on one feature file.
MAX_FEATURE_FILE_BYTES = 64 * 1024


@dataclass(frozen=True)
class TopologyLabels:
    host: str
    labels: tuple[tuple[str, str], ...]
    #: Features without labels (``# +no-label``).
    features: tuple[tuple[str, str], ...]

    def as_dict(self) -> dict[str, str]:
        return dict(self.labels)


def _key(name: str) -> str:
    return f"{LABEL_PREFIX}/{name}"


def _rate(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def topology_labels(host: SavedHost, fabric_type: str | None = None) -> TopologyLabels:
    labels: list[tuple[str, str]] = []
    domains = host.nvlink_groups
    if host.shape:
        labels.append((_key("nvlink.shape"), host.shape))
    labels.append((_key("nvlink.domains"), str(len(domains))))
    if domains:
        labels.append((_key("nvlink.gpus-per-domain"), str(min(len(d) for d in domains))))
        labels.append((_key("nvlink.largest-domain"), str(max(len(d) for d in domains))))
    codes = {f.code for f in host.findings}
    if codes & NVLINK_LOSS_CODES or host.shape == "partial-nvlink":
        labels.append((_key("nvlink.degraded"), "true"))
    fabric_ports = [p for n in host.nics if n.fabric for p in n.ports if p.state == "PORT_ACTIVE"]
    layers = {p.link_layer for p in fabric_ports}
    kind = fabric_type or ("ib" if layers == {"InfiniBand"} else "roce" if layers == {"Ethernet"} else None)
    if kind:
        labels.append((_key("fabric.type"), kind))
    rates = [p.rate_gbps for p in fabric_ports if p.rate_gbps]
    if rates:
        labels.append((_key("fabric.rate-gbps"), _rate(min(rates))))
    labels.append((_key("fabric.ports"), str(len(fabric_ports))))
    # A NIC off the fabric (management, storage) down or slow leaves it whole; an HCA not found was a fabric one.
    off_fabric = {n.name for n in host.nics if not n.fabric}
    if any(f.code in NIC_LOSS_CODES and f.evidence.get("hca") not in off_fabric for f in host.findings):
        labels.append((_key("fabric.degraded"), "true"))
    features = [(_key("rack"), host.rack)] if host.rack else []
    return TopologyLabels(host.name, tuple(labels), tuple(features))


def render_feature_file(labels: TopologyLabels, survey: SavedSurvey) -> str:
    text = render("bootstrap/nfd/topology-features.j2", host=labels.host, survey_time=survey.generated_at,
                  prefix=LABEL_PREFIX, labels=labels.labels, features=labels.features)
    if len(text.encode()) > MAX_FEATURE_FILE_BYTES:
        raise ValueError(f"feature file for {labels.host} exceeds NFD's 64 kB limit")
    return text
