"""check_inventory: warnings about inventories that load but look wrong."""

from __future__ import annotations

from clusterctl.inventory.checks import check_inventory
from clusterctl.inventory.model import Fabric, Host, Inventory, StackPin


def inventory(*hosts: Host) -> Inventory:
    return Inventory(name="t", hosts=hosts)


def test_clean_inventory_has_no_warnings() -> None:
    assert (
        check_inventory(
            inventory(
                Host(name="a", address="10.0.0.1", roles=("control-plane", "worker"), rack="r1"),
                Host(name="b", address="10.0.0.2", rack="r1"),
            )
        )
        == []
    )


def test_no_control_plane() -> None:
    warnings = check_inventory(inventory(Host(name="a"), Host(name="b")))
    assert any("control-plane" in w for w in warnings)


def test_even_number_of_control_planes() -> None:
    cps = [Host(name=n, roles=("control-plane",)) for n in ("a", "b")]
    assert any("odd" in w and "a, b" in w for w in check_inventory(inventory(*cps)))


def test_long_host_lists_say_how_many_more_like_every_other_list() -> None:
    cps = [Host(name=f"cp{i:02}", roles=("control-plane",)) for i in range(10)]
    warnings = [w for w in check_inventory(inventory(*cps)) if "odd" in w]
    assert warnings and "cp07 (+2 more)" in warnings[0] and "cp08" not in warnings[0]


def test_hosts_without_rack_when_others_have_one() -> None:
    warnings = check_inventory(
        inventory(
            Host(name="a", roles=("control-plane",), rack="r1"),
            Host(name="b", rack="r1"),
            Host(name="c"),
        )
    )
    assert any("without a rack: c" in w for w in warnings)


def test_same_address_and_port() -> None:
    warnings = check_inventory(
        inventory(
            Host(name="a", address="10.0.0.1", roles=("control-plane",)),
            Host(name="b", address="10.0.0.1", port=22),
            Host(name="c", address="10.0.0.1", port=2222),
            Host(name="m1", transport="mock", profile="/p"),
            Host(name="m2", transport="mock", profile="/p"),
        )
    )
    dupes = [w for w in warnings if "connect to" in w]
    assert dupes == ["hosts a, b all connect to 10.0.0.1:22: they are probably one machine listed twice."]


def test_inverted_thresholds_and_mixed_pins() -> None:
    warnings = check_inventory(
        inventory(
            Host(
                name="a",
                roles=("control-plane",),
                fabric=Fabric(latency_warn_us=60, latency_error_us=50, within_rack_min=0.5, across_racks_min=0.7),
                stack=StackPin(nccl="2.21.5"),
            ),
            Host(name="b", stack=StackPin(nccl="2.18.1")),
        )
    )
    assert any("latency_warn_us is above latency_error_us on a" in w for w in warnings)
    assert any("within_rack_min is below across_racks_min on a" in w for w in warnings)
    assert any("different nccl versions" in w and "2.21.5" in w and "2.18.1" in w for w in warnings)


def test_group_named_like_a_host() -> None:
    inv = Inventory(
        name="t",
        hosts=(Host(name="gpu", roles=("control-plane",)), Host(name="b")),
        groups={"gpu": ("b",)},
    )
    assert any("share a name: gpu" in w for w in check_inventory(inv))
