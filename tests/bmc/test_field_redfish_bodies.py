"""Real BMCs' ComputerSystem recordings (tests/fixtures/redfish, sources in its README) read and reset through
``RedfishBmc`` as ``clusterctl power`` does: the state it reads, the ResetType it asks for, what an error says."""

from __future__ import annotations

import pytest
from recorded_bmc import RecordedBmc

from clusterctl.bmc.power import BmcTarget
from clusterctl.bmc.redfish import BmcError, RedfishBmc
from clusterctl.inventory.model import BmcConfig, Host
from clusterctl.secret import Secret
from clusterctl.transport.base import RunRequest


def bmc_for(recorded: RecordedBmc, *, system: str | None = None) -> RedfishBmc:
    config = BmcConfig(pattern="gpu-*", address=recorded.url, username="admin", system=system, timeout_s=10,
                       power_timeout_s=10)
    return RedfishBmc(config, "gpu-01", Secret("recorded-bmc-pass"), sleep=lambda s: None)


OLDER = ["idrac8-poweredge-m630-system.json", "ilo4-proliant-bl460c-gen9-system.json",
         "supermicro-x10dff-ctg-system.json"]


@pytest.mark.parametrize("recording", ["supermicro-sys-821ge-tnhr-system.json", "ztsystems-ami-self-system.json",
                                       *OLDER])
def test_a_real_system_is_read_and_power_cycled_with_reset_types_it_allows(recording: str) -> None:
    """Every recording, ``/Systems/1/`` with iLO 4's trailing slash included, is found as the BMC's only system
    and cycled (ForceOff, then On), the ResetTypes all of them offer."""
    with RecordedBmc(recording) as recorded:
        bmc = bmc_for(recorded)
        assert bmc.power_state() == "On"
        done = BmcTarget(Host(name="gpu-01"), bmc).execute(RunRequest("redfish power cycle"))
        assert done.exit_code == 0, done.stderr
        assert recorded.resets == ["ForceOff", "On"] and bmc.power_state() == "On"


@pytest.mark.parametrize(("recording", "asked"), [("idrac8-poweredge-m630-system.json", "PushPowerButton"),
                                                  ("ilo4-proliant-bl460c-gen9-system.json", "PushPowerButton"),
                                                  ("supermicro-sys-821ge-tnhr-system.json", "GracefulShutdown")])
def test_an_orderly_shutdown_is_the_power_buttons_press_where_no_gracefulshutdown_is_offered(recording: str,
                                                                                          asked: str) -> None:
    """iDRAC 8 and iLO 4 offer no GracefulShutdown: their orderly shutdown is PushPowerButton (before, sushy
    refused the request: ``value "ResetType.GRACEFUL_SHUTDOWN" is invalid``, and ``--graceful`` never worked)."""
    with RecordedBmc(recording) as recorded:
        bmc = bmc_for(recorded)
        done = BmcTarget(Host(name="gpu-01"), bmc).execute(RunRequest("redfish power off graceful"))
        assert done.exit_code == 0, done.stderr
        assert recorded.resets == [asked] and bmc.power_state() == "Off"


def test_a_bmc_offering_no_orderly_shutdown_is_named_with_what_it_offers() -> None:
    """Supermicro X10's BMC offers neither GracefulShutdown nor PushPowerButton: nothing is asked, and the error
    says what it offers (before: sushy's ``Valid values are: {<ResetType.FORCE_ON: 'ForceOn'>, ...}``)."""
    with RecordedBmc("supermicro-x10dff-ctg-system.json") as recorded:
        done = BmcTarget(Host(name="gpu-01"), bmc_for(recorded)).execute(RunRequest("redfish power off graceful"))
    assert done.exit_code == 1 and recorded.resets == []
    assert done.stderr == (f"the BMC {recorded.url} does not offer GracefulShutdown: it offers ForceOff, ForceOn, "
                           "ForceRestart, GracefulRestart, Nmi, On\n")


@pytest.mark.parametrize("recording", ["supermicro-sys-821ge-tnhr-system.json", "ztsystems-ami-self-system.json"])
def test_a_real_system_is_read_switched_off_and_on_with_the_reset_types_it_allows(recording: str) -> None:
    """The Supermicro HGX H100 server names its reset types only through ``@Redfish.ActionInfo`` (not served:
    a BMC that has none); the ZT Systems AMI BMC lists five, without PowerCycle. Both are found as the BMC's
    only system, whatever its name (``/Systems/1``, ``/Systems/Self``)."""
    with RecordedBmc(recording) as recorded:
        bmc = bmc_for(recorded)
        assert bmc.power_state() == "On"
        target = BmcTarget(Host(name="gpu-01"), bmc)
        done = target.execute(RunRequest("redfish power cycle"))
        assert done.exit_code == 0, done.stderr
        assert recorded.resets == ["ForceOff", "On"] and bmc.power_state() == "On"
        done = target.execute(RunRequest("redfish power off graceful"))
        assert done.exit_code == 0 and recorded.resets[-1] == "GracefulShutdown" and bmc.power_state() == "Off"


def test_a_system_named_in_the_inventory_is_the_one_used() -> None:
    with RecordedBmc("supermicro-sys-821ge-tnhr-system.json") as recorded:
        assert bmc_for(recorded, system="/redfish/v1/Systems/1").power_state() == "On"
        with pytest.raises(BmcError, match=r"has no system /redfish/v1/Systems/System\.Embedded\.1 while connecting"):
            bmc_for(recorded, system="/redfish/v1/Systems/System.Embedded.1").power_state()


def test_an_ilo_refusal_with_only_message_ids_is_named_with_them() -> None:
    """iLO's 400 for a reset it will not do names the reason only in ``@Message.ExtendedInfo``'s MessageID and
    MessageArgs (no Message text); the error the user reads carries both."""
    with RecordedBmc("ztsystems-ami-self-system.json", refuse=(400, "ilo-reset-power-is-off-400.json")) as recorded:
        bmc = bmc_for(recorded)
        with pytest.raises(BmcError) as refused:
            bmc.reset("ForceOff")
    said = refused.value.message
    assert said.startswith(f"the BMC {recorded.url} failed while asking for ForceOff:"), said
    assert "InvalidOperationForSystemState" in said and "Power is off" in said, said


def test_a_bmc_of_several_systems_needs_the_hosts_named_and_offers_its_reset_types_through_actioninfo() -> None:
    """SpacemiT's RV2768 cluster server: one BMC, 49 systems (``system``, the whole, first; ``sub0-0`` to
    ``sub23-1``, the modules). Never the first member by chance: the user is asked to name it; named by its
    short name, the module's ResetActionInfo is read and its reset types are asked for."""
    with RecordedBmc("spacemit-rv2768-sub0-0-system.json", members=("/redfish/v1/Systems/system",),
                     extra={"/redfish/v1/Systems/sub0-0/ResetActionInfo":
                            "spacemit-rv2768-sub0-0-resetactioninfo.json"}) as recorded:
        with pytest.raises(BmcError, match=r"manages several systems: name this host's in bmc\.system"):
            bmc_for(recorded).power_state()
        assert recorded.resets == []
        bmc = bmc_for(recorded, system="sub0-0")
        done = BmcTarget(Host(name="gpu-01"), bmc).execute(RunRequest("redfish power cycle"))
        assert done.exit_code == 0, done.stderr
        assert recorded.resets == ["ForceOff", "On"] and bmc.power_state() == "On"
        assert "/redfish/v1/Systems/sub0-0/ResetActionInfo" in recorded.gets
        assert recorded.gets.count("/redfish/v1/Systems/system") == 1  # listed once, while refusing to guess
