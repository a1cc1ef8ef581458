"""--limit patterns, Ansible style."""

from __future__ import annotations

import pytest

from clusterctl.errors import UsageError
from clusterctl.inventory.limit import select_hosts
from clusterctl.inventory.model import Host, Inventory

NAMES = ["gpu-a1", "gpu-a2", "gpu-b1", "gpu-b2", "cpu-1", "gpu[1]", "gpu;reboot"]
INVENTORY = Inventory(
    name="t",
    hosts=tuple(Host(name=n) for n in NAMES),
    groups={
        "rack_a": ("gpu-a1", "gpu-a2"),
        "rack_b": ("gpu-b1", "gpu-b2"),
        "gpu": ("gpu-a1", "gpu-a2", "gpu-b1", "gpu-b2"),
        "training": ("gpu-a2", "gpu-b2"),
    },
)


def names(patterns: list[str] | str | None) -> list[str]:
    return [h.name for h in select_hosts(INVENTORY, patterns)]


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        (None, NAMES),
        ("all", NAMES),
        ("gpu-b1", ["gpu-b1"]),
        ("gpu-b1,gpu-a1", ["gpu-a1", "gpu-b1"]),  # inventory order, not pattern order
        ("gpu-b1:gpu-a1", ["gpu-a1", "gpu-b1"]),
        (["gpu-b1", "cpu-1"], ["gpu-b1", "cpu-1"]),
        ("rack_b", ["gpu-b1", "gpu-b2"]),
        ("gpu-a*", ["gpu-a1", "gpu-a2"]),
        ("rack_*", ["gpu-a1", "gpu-a2", "gpu-b1", "gpu-b2"]),
        ("gpu:!rack_a", ["gpu-b1", "gpu-b2"]),
        ("gpu,&training", ["gpu-a2", "gpu-b2"]),
        ("rack_a,rack_b,&training,!gpu-b2", ["gpu-a2"]),
        ("!gpu", ["cpu-1", "gpu[1]", "gpu;reboot"]),
        ("~gpu-[ab]2", ["gpu-a2", "gpu-b2"]),
        # Names with glob or shell characters are found as themselves.
        ("gpu[1]", ["gpu[1]"]),
        ("gpu;reboot", ["gpu;reboot"]),
        ("gpu-[ab]1", ["gpu-a1", "gpu-b1"]),
    ],
)
def test_patterns(patterns: list[str] | str | None, expected: list[str]) -> None:
    assert names(patterns) == expected


def test_returns_the_inventory_hosts() -> None:
    assert select_hosts(INVENTORY, "cpu-1") == (INVENTORY.host("cpu-1"),)


@pytest.mark.parametrize("pattern", ["gpu-c1", "!gpu-c1", "&rack_c", "gpu-z*"])
def test_pattern_matching_nothing_is_an_error(pattern: str) -> None:
    with pytest.raises(UsageError) as caught:
        select_hosts(INVENTORY, f"gpu-a1,{pattern}")
    assert caught.value.exit_code == 2
    assert f"'{pattern}'" in str(caught.value)


@pytest.mark.parametrize("pattern", ["", " ", ",", ":"])
def test_a_pattern_with_no_term_is_an_error_not_every_host(pattern: str) -> None:
    """'-l "$HOSTS"' with the variable empty selected every host: 'clusterctl -l "$BAD" reset --yes'
    would have reset the whole cluster."""
    with pytest.raises(UsageError, match="names no host; leave --limit out") as caught:
        select_hosts(INVENTORY, pattern)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("only", ["", "!", "nosuch"])
def test_a_bad_only_is_named_as_only_not_limit(only: str) -> None:
    """bootstrap --only '' said "--limit '': names no host": an option the user never gave."""
    from clirun import DEMO, clusterctl

    run = clusterctl("-i", DEMO, "bootstrap", "--only", only, "--dry-run")
    assert run.exit_code == 2, run.output
    assert "--only" in run.stderr and "--limit" not in run.stderr


def test_a_limit_that_leaves_none_of_the_named_hosts_names_both() -> None:
    """It said "--limit leaves none of the named hosts": neither the limit nor the hosts."""
    from clirun import DEMO, clusterctl

    done = clusterctl("-i", DEMO, "-l", "gpu-b1", "quarantine", "gpu-a3", "--reason", "x", "--dry-run")
    assert (done.exit_code, done.stdout) == (2, "")
    assert "--limit 'gpu-b1' leaves none of the named hosts (gpu-a3)" in " ".join(done.stderr.split())


def test_typo_gets_a_suggestion() -> None:
    with pytest.raises(UsageError, match="Did you mean 'rack_a'"):
        select_hosts(INVENTORY, "rack-a")


def test_bad_regex() -> None:
    with pytest.raises(UsageError, match="regular expression"):
        select_hosts(INVENTORY, "~gpu[")
