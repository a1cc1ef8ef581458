"""A host name the inventory lacks, wherever a command takes one, is the same usage error: one paragraph
naming the inventory file, the name as typed and the closest names the inventory has; exit 2, nothing
on stdout, nothing touched."""

from __future__ import annotations

import pytest
from clirun import DEMO, clusterctl

KERNEL_LOG = "tests/fixtures/kernel-log/gpud-dmesg-iso-xid48-63-94-h100.log"

#: Every way a command takes an inventory host name, with the typo 'gpu-a33' (the demo has gpu-a3).
TYPED = {
    "health read --host": ["health", "read", KERNEL_LOG, "--host", "gpu-a33"],
    "quarantine HOST": ["quarantine", "gpu-a33", "--reason", "typo", "--yes"],
    "release HOST": ["release", "gpu-a33", "--skip-checks", "--yes"],
    "status HOST": ["status", "gpu-a33"],
    "heal HOST": ["heal", "gpu-a33", "--dry-run"],
    "power HOST": ["power", "cycle", "gpu-a33", "--dry-run"],
    "remove-node HOST": ["remove-node", "gpu-a33", "--dry-run"],
    "bootstrap artifacts --from": ["bootstrap", "artifacts", "--probe", "--from", "gpu-a33"],
    "--limit": ["-l", "gpu-a33", "exec", "--", "true"],
}


@pytest.mark.parametrize("where", TYPED)
def test_a_host_name_the_inventory_lacks_is_one_usage_error(where: str) -> None:
    run = clusterctl("-i", DEMO, "-o", "json", *TYPED[where])
    assert run.exit_code == 2, run.stderr
    assert run.stdout == ""
    given = where.split()[-1]
    assert run.stderr.startswith(f"error: {DEMO}: {given} 'gpu-a33': not in the inventory. Did you mean "
                                 "'gpu-a3'"), run.stderr
    assert "\n" not in run.stderr.strip()  # one paragraph: off a terminal, one line


def test_several_unknown_names_are_named_together() -> None:
    run = clusterctl("-i", DEMO, "quarantine", "gpu-a33", "gpu-a1", "nosuch", "--reason", "typo", "--yes")
    assert run.exit_code == 2
    assert "HOST 'gpu-a33', 'nosuch': not in the inventory." in " ".join(run.stderr.split())


def test_health_read_without_an_inventory_names_the_host_freely() -> None:
    """Without -i, --host is only the report's name for the outputs; with -i and no --host, no entry applies."""
    assert clusterctl("-o", "json", "health", "read", KERNEL_LOG, "--host", "gpu-a33").json()["hosts"][0]["host"] \
        == "gpu-a33"
    assert clusterctl("-i", DEMO, "-o", "json", "health", "read", KERNEL_LOG).json()["hosts"][0]["host"] == "input"


def test_health_read_finds_its_host_as_limit_does() -> None:
    """--host took only the exact inventory name: an address (gpu-a3's, 10.0.0.13) or a pattern was refused."""
    for given in ("gpu-a3", "10.0.0.13", "~a3$", "gpu-a[3]"):
        run = clusterctl("-i", DEMO, "-o", "json", "health", "read", KERNEL_LOG, "--host", given)
        assert run.json()["hosts"][0]["host"] == "gpu-a3", (given, run.stderr)
    several = clusterctl("-i", DEMO, "health", "read", KERNEL_LOG, "--host", "rack-a")
    assert several.exit_code == 2 and "--host 'rack-a' matches 3 hosts (gpu-a[1-3]); it takes one." in \
        " ".join(several.stderr.split())
    assert clusterctl("-i", DEMO, "-o", "json", "-l", "10.0.1.11", "inventory", "show").json()["hosts"][0]["host"] \
        == "gpu-b1"
