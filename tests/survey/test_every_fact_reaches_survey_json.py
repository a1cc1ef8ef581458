"""Every fact survey reads reaches ``survey -o json``: each host's record.

Each field of each parsed recording (every one in the fact's fixture folders that its parser reads) is
changed in turn, and the host's JSON must change with it.
"""

from __future__ import annotations

from typing import Any

import pytest
from fixture_files import fixture_dir
from json_holds import assert_reached_but, demo_json

from clusterctl.errors import ParseError
from clusterctl.facts.survey_facts import SURVEY_FACTS
from clusterctl.inventory.model import Host
from clusterctl.survey.collect import HostFacts
from clusterctl.survey.report import HostReport, host_to_json
from clusterctl.survey.run import host_state

#: Survey fact -> the fixture folders of its tool's recordings.
FOLDERS = {"topology": ["topo"], "gpus": ["nvidia-smi"], "nvlink": ["nvlink"], "rdma": ["ibv_devinfo", "ibstat"],
           "stack": ["stack"], "netdev": ["ibdev2netdev"], "ipv4": ["ip"]}

#: Fields that are not facts of the host, and why.
NOT_FACTS = {
    "TopoDevice.index": "the number in the device's label (GPU3, NIC0), which the JSON holds",
}


def test_every_survey_fact_has_recordings() -> None:
    assert sorted(FOLDERS) == sorted(f.name for f in SURVEY_FACTS)


def _parsed(name: str) -> list[Any]:
    fact = next(f for f in SURVEY_FACTS if f.name == name)
    found = []
    for folder in FOLDERS[name]:
        for path in sorted(fixture_dir(folder).iterdir()):
            if path.name != "README.md":
                try:
                    found.append(fact.parse(path.read_text()))
                except ParseError:
                    continue  # a recording of what the parser refuses: no fields
    return found


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_every_field_a_survey_fact_reads_reaches_the_hosts_json(name: str) -> None:
    host = Host(name="h1", transport="local")

    def record(value: Any) -> dict[str, Any]:
        return host_to_json(HostReport(host_state(host, HostFacts(values={name: value})), ()))

    parsed = _parsed(name)
    assert parsed
    assert_reached_but(NOT_FACTS, parsed, record)


def test_demo_survey_json_carries_each_gpus_nvlinks_driver_and_each_hcas_guid() -> None:
    data = demo_json("survey", "survey.schema.json")
    host = next(h for h in data["hosts"] if h["host"] == "gpu-a1")
    gpu = host["gpus"][0]
    assert gpu["driver_version"] and gpu["power_limit_w"] and len(gpu["nvlink_links"]) == 12
    assert all(link["active"] and link["speed_gbps"] for link in gpu["nvlink_links"])
    assert all(nic["node_guid"] for nic in host["nics"] if nic["ports"])
