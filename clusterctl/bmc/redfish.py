"""One BMC over Redfish, through the ``sushy`` library (OpenStack's Redfish client): power state and resets.

Every request is bounded (``timeout_s`` to connect and to read, no retries beyond one), so a BMC
that does not answer fails in about its timeout; a 401 is said as such; TLS certificates are
verified unless the inventory says ``verify_tls: false`` (``ca_file`` for a private CA). Errors
never carry the password (``sushy`` puts none in its messages; ``mask_text`` is applied anyway).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clusterctl.inventory.model import BmcConfig
from clusterctl.secret import Secret, mask_text

ON, OFF = "On", "Off"
#: Redfish ``ResetType`` values clusterctl asks for.
FORCE_OFF, GRACEFUL_SHUTDOWN, RESET_ON = "ForceOff", "GracefulShutdown", "On"
PUSH_POWER_BUTTON = "PushPowerButton"
SYSTEMS = "/redfish/v1/Systems/"


class BmcError(Exception):
    """The BMC could not be used: not answering, credentials refused, an action refused or never done."""

    def __init__(self, message: str) -> None:
        self.message = mask_text(message)
        super().__init__(self.message)


@dataclass(frozen=True)
class BmcAddress:
    url: str
    #: The ComputerSystem's path, or None: the BMC's only one.
    system: str | None


def address_for(config: BmcConfig, host: str) -> BmcAddress:
    """Where ``host``'s BMC answers: the entry's address with ``{host}`` filled in, https when no scheme is given."""
    url = config.address.replace("{host}", host).rstrip("/")
    if "://" not in url:
        url = "https://" + url
    system = config.system
    if system is not None:
        system = system.replace("{host}", host)
        if not system.startswith("/"):
            system = SYSTEMS + system
    return BmcAddress(url, system)


class RedfishBmc:
    """One host's BMC: ``power_state()``, ``reset(TYPE)``, ``wait_for(STATE)``. Connects on first use."""

    def __init__(self, config: BmcConfig, host: str, password: Secret, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.host = host
        self.address = address_for(config, host)
        self._password = password
        self._system: Any = None
        self._sleep = sleep
        self._clock = clock

    def _call(self, what: str, action: Callable[[], Any]) -> Any:
        from sushy import exceptions

        try:
            return action()
        except exceptions.AccessError as exc:
            raise BmcError(f"the BMC {self.address.url} refused the credentials of user '{self.config.username}' "
                           f"(HTTP {exc.status_code}) while {what}") from None
        except exceptions.ConnectionError as exc:
            text = str(exc)
            if "CERTIFICATE_VERIFY_FAILED" in text or "SSLError" in text:
                raise BmcError(f"the BMC {self.address.url}'s TLS certificate is not trusted while {what}: give the CA "
                               "that signed it as ca_file (verify_tls: false only on a lab network)") from None
            raise BmcError(f"the BMC {self.address.url} does not answer (within {self.config.timeout_s:g} s) while "
                           f"{what}") from None
        except exceptions.ResourceNotFoundError:
            raise BmcError(f"the BMC {self.address.url} has no system {self.address.system} while {what}") from None
        except exceptions.UnknownDefaultError:
            raise BmcError(f"the BMC {self.address.url} manages several systems: name this host's in bmc.system "
                           f"while {what}") from None
        except exceptions.SushyError as exc:
            raise BmcError(f"the BMC {self.address.url} failed while {what}: {exc}") from None

    def _connect(self) -> Any:
        if self._system is None:
            import sushy

            def connect() -> Any:
                root = sushy.Sushy(self.address.url, username=self.config.username, password=self._password.reveal(),
                                   verify=self.config.ca_file or self.config.verify_tls,
                                   read_timeout=self.config.timeout_s, connect_timeout=self.config.timeout_s,
                                   server_side_retries=1, server_side_retries_delay=1)
                return root.get_system(self.address.system)

            self._system = self._call("connecting", connect)
        return self._system

    def power_state(self) -> str:
        """``On``, ``Off``, ``PoweringOn``, ``PoweringOff`` (as the BMC says it now)."""
        system = self._connect()

        def read() -> str:
            system.refresh(force=True)
            state = system.power_state
            return str(getattr(state, "value", state))

        return str(self._call("reading the power state", read))

    def reset(self, reset_type: str) -> None:
        """Ask for ``reset_type``, of those the BMC offers; an orderly shutdown is the power button's press where
        the BMC offers that and no GracefulShutdown (iDRAC 8, iLO 4: their own orderly shutdown)."""
        from sushy.resources.constants import ResetType

        system = self._connect()
        offered = {str(v.value) for v in self._call("reading its reset types", system.get_allowed_reset_system_values)}
        if reset_type == GRACEFUL_SHUTDOWN and reset_type not in offered and PUSH_POWER_BUTTON in offered:
            reset_type = PUSH_POWER_BUTTON
        if reset_type not in offered:
            raise BmcError(f"the BMC {self.address.url} does not offer {reset_type}: it offers "
                           f"{', '.join(sorted(offered))}")
        self._call(f"asking for {reset_type}", lambda: system.reset_system(ResetType(reset_type)))

    def wait_for(self, wanted: str) -> float:
        """Poll every half second until the BMC reports ``wanted``; seconds waited. ``BmcError`` once the
        inventory's ``power_timeout_s`` passes."""
        limit = self.config.power_timeout_s
        start = self._clock()
        while True:
            last = self.power_state()
            if last == wanted:
                return self._clock() - start
            if self._clock() - start >= limit:
                raise BmcError(f"the BMC {self.address.url} still reports power {last}, not {wanted}, "
                               f"{limit:g} s after the request")
            self._sleep(0.5)
