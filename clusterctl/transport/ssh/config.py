"""Where and how to reach a host: ssh_config loading and the merged connection target.

Precedence, as OpenSSH's ``ssh`` has it: the inventory entry (address, port, user,
``ssh.key_file``, ``ssh.jump_host``, ``ssh.options``), then the user's ssh_config
(``HostName``, ``User``, ``Port``, ``IdentityFile``, ``ProxyJump``, ``ConnectTimeout``,
``HostKeyAlias``, ``IdentitiesOnly``, ``IdentityAgent``), then ssh's defaults (current user,
port 22, ``~/.ssh/id_ed25519``/``id_ecdsa``/``id_rsa``).
"""

from __future__ import annotations

import getpass
import io
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import paramiko

from clusterctl.errors import BadValue
from clusterctl.inventory import values
from clusterctl.inventory.ansible_vars import jump_from_proxy_command
from clusterctl.transport.base import FailureKind, TransportError

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host


DEFAULT_KEY_NAMES = ("id_ed25519", "id_ecdsa", "id_rsa")


def user_home() -> Path:
    return Path(os.path.expanduser("~"))


@dataclass(frozen=True)
class JumpHop:
    """One ``[user@]host[:port]`` element of a ProxyJump chain."""

    host: str
    user: str | None = None
    port: int | None = None


def parse_jump_chain(spec: str | None) -> tuple[JumpHop, ...]:
    try:
        return tuple(JumpHop(host, user, port) for user, host, port in values.jump_hops(spec or "none"))
    except BadValue as exc:
        raise TransportError(FailureKind.ERROR, f"bad jump host {spec!r}: {exc}") from None


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to connect, after inventory, ssh_config and defaults were merged."""

    #: The name the user knows the host by (inventory name), for messages.
    name: str
    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...]
    #: True when ``key_files`` came from the user (inventory or ssh_config), not ssh's defaults.
    explicit_keys: bool
    identities_only: bool
    jump: tuple[JumpHop, ...]
    connect_timeout_s: float | None
    #: Name the host key is stored under in known_hosts (HostKeyAlias), else the hostname.
    host_key_alias: str | None = None
    use_agent: bool = True
    #: ``IdentityAgent``: a socket path; ``None`` means ``$SSH_AUTH_SOCK``.
    identity_agent: str | None = None
    #: ``UserKnownHostsFile`` (expanded; ``None``: ssh's default, ``()``: ``none``).
    user_known_hosts: tuple[str, ...] | None = None
    #: ``GlobalKnownHostsFile`` (expanded; ``None``: ssh's default).
    global_known_hosts: tuple[str, ...] | None = None
    #: ``StrictHostKeyChecking`` as configured (``yes``, ``accept-new``, ``no``, ``ask``), or None.
    strict_host_key_checking: str | None = None
    check_host_ip: bool = False
    hash_known_hosts: bool = False
    #: ``PasswordAuthentication`` (ssh's default: yes); used only when a password was given.
    password_authentication: bool = True

    def known_hosts_name(self, name: str | None = None) -> str:
        """How known_hosts names this host (or ``name``, its address): bare on ssh's own port, else ``[name]:port``."""
        name = name or self.host_key_alias or self.hostname
        return name if self.port == values.SSH_PORT else f"[{name}]:{self.port}"

    @property
    def label(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


def remaining(deadline: float, what: str) -> float:
    """The time left of a connection attempt's single deadline, shared by all of its steps."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TransportError(FailureKind.TIMED_OUT, f"{what} did not finish in time")
    return left


K = TypeVar("K")
V = TypeVar("V")


def once_per_process(lock: threading.Lock, kept: dict[K, V], key: K, make: Callable[[], V]) -> V:
    """``make()`` the first time ``key`` is asked for, the value kept in ``kept`` after; threads asking at
    once wait (on ``lock``) for the one making it. What ``make`` raises is not kept."""
    with lock:
        if key not in kept:
            kept[key] = make()
        return kept[key]


_config_lock = threading.Lock()
_config_cache: dict[str, paramiko.SSHConfig | None] = {}


def load_ssh_config(path: str | None) -> paramiko.SSHConfig | None:
    """The parsed ssh_config (``~/.ssh/config`` when ``path`` is None), parsed once per process."""
    file = Path(path).expanduser() if path else user_home() / ".ssh" / "config"

    def read() -> paramiko.SSHConfig | None:
        if file.is_file():
            try:
                return paramiko.SSHConfig.from_path(str(file))
            except (OSError, paramiko.ssh_exception.ConfigParseError) as exc:
                raise TransportError(FailureKind.ERROR, f"cannot read ssh_config {file}: {exc}") from exc
        if path is not None:
            raise TransportError(FailureKind.ERROR, f"ssh_config file {file} does not exist")
        return None

    return once_per_process(_config_lock, _config_cache, str(file), read)


_invoke: Any = getattr(paramiko.config, "invoke", None)


class _MatchExecAnswers(threading.local):
    """``invoke`` as paramiko's ssh_config reader uses it (``invoke.run`` of a ``Match exec`` command), wrapped:
    paramiko runs such a command in both passes of a lookup and a host is looked up by its name and its address,
    so it ran four times per host where ssh runs it once. While one host is looked up (``kept`` set), each command
    runs once and its answer is kept. Its stdin is empty, as ssh has it: not clusterctl's own (a piped file, or the
    terminal's keys, the terminal switched to cbreak mode while it runs)."""

    kept: dict[str, Any] | None = None

    def run(self, command: str, **options: Any) -> Any:
        kept = {} if self.kept is None else self.kept
        if command not in kept:
            kept[command] = _invoke.run(command, in_stream=io.StringIO(), **options)
        return kept[command]


_match_exec = _MatchExecAnswers()
if _invoke is not None:  # None: invoke is not installed, and paramiko refuses Match exec itself
    vars(paramiko.config)["invoke"] = _match_exec


def _lookup(config: paramiko.SSHConfig | None, *names: str) -> dict[str, Any]:
    """ssh_config's values for the first of ``names``; what its lookup leaves unset, those of the next."""
    if config is None:
        return {}
    found: dict[str, Any] = {}
    _match_exec.kept = {}
    try:
        for name in dict.fromkeys(names):
            try:
                looked_up = dict(config.lookup(name))
            except Exception as exc:  # paramiko raises several kinds for odd configs
                raise TransportError(FailureKind.ERROR, f"ssh_config lookup for {name!r} failed: {exc}") from exc
            # paramiko fills 'hostname' with the looked-up name itself when nothing matched.
            if looked_up.get("hostname") == name:
                looked_up.pop("hostname")
            for key, value in looked_up.items():
                found.setdefault(key, value)
    finally:
        _match_exec.kept = None
    return found


def _first(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return str(value[0]) if value else None
    return str(value)


def _yes(value: Any) -> bool:
    return str(_first(value) or "").lower() in ("yes", "true", "1")


def resolve_target(
    *,
    name: str,
    address: str | None = None,
    port: int | None = None,
    user: str | None = None,
    key_file: str | None = None,
    jump_host: str | None = None,
    options: Sequence[tuple[str, str]] = (),
    config: paramiko.SSHConfig | None = None,
    default_connect_timeout_s: float | None = None,
) -> SSHTarget:
    """Merge inventory values (win), ssh_config values, then ssh's defaults.

    ssh_config is looked up by the inventory name (users write ``Host gpu-*``); values that
    the name's lookup leaves unset are also looked up by the address, as ssh would if it
    had been given the address.
    """
    found = _lookup(config, name, address or name)
    # Inventory ``ssh.options`` are ssh_config-style settings that win over the file.
    for k, v in options:
        found[k.lower()] = v

    hostname = address or _first(found.get("hostname")) or name
    try:
        resolved_port = port or (values.port(str(_first(found["port"]))) if found.get("port") else None)
    except BadValue as exc:
        raise TransportError(FailureKind.ERROR, f"ssh_config's Port for {name}: {exc}") from None
    resolved_user = user or _first(found.get("user")) or getpass.getuser()

    identity_files = found.get("identityfile") or []
    # The inventory's key, else ssh_config's IdentityFile lines, else ssh's default key names.
    named = [key_file] if key_file else [identity_files] if isinstance(identity_files, str) else identity_files
    defaults = [user_home() / ".ssh" / n for n in DEFAULT_KEY_NAMES]
    keys = tuple(os.path.expanduser(str(k)) for k in named or defaults)

    jump_spec = jump_host if jump_host is not None else _first(found.get("proxyjump"))
    proxy_command = _first(found.get("proxycommand"))
    if jump_spec is None and proxy_command and str(proxy_command).lower() != "none":
        # 'ssh -W %h:%p bastion' is a jump, as in an Ansible inventory; ssh would run any other command, and
        # connecting directly instead would go around the proxy the user set.
        # ssh_config's %h and %p come expanded (paramiko's lookup); an inventory's ProxyCommand keeps them.
        port_text = str(_first(found.get("port")) or values.SSH_PORT)
        forwards = {shape.format(h, port_text) for h in (name, _first(found.get("hostname")) or name)
                    for shape in ("{}:{}", "[{}]:{}")} | {"%h:%p", "[%h]:%p"}
        jump_spec = jump_from_proxy_command(proxy_command, forwards)
        if jump_spec is None:
            raise TransportError(FailureKind.ERROR, f"ssh_config sets ProxyCommand {proxy_command!r} for {name}, "
                                 "which clusterctl does not run: write ProxyJump (or ssh.jump_host in the inventory) "
                                 "instead, and the jump host's key as IdentityFile under its own Host")

    timeout = default_connect_timeout_s
    if found.get("connecttimeout"):
        try:
            configured = float(str(_first(found["connecttimeout"])))
        except ValueError:
            raise TransportError(FailureKind.ERROR, f"bad ConnectTimeout for {name}") from None
        timeout = configured if timeout is None else min(timeout, configured)

    agent_setting = str(_first(found.get("identityagent")) or "")
    port_value = resolved_port or values.SSH_PORT
    alias = _first(found.get("hostkeyalias"))

    def expand(value: str) -> str:
        return expand_tokens(
            value, host=hostname, original=name, port=port_value, remote_user=resolved_user, alias=alias
        )

    def files(key: str) -> tuple[str, ...] | None:
        raw = found.get(key)
        if raw is None:
            return None
        words = " ".join(raw if isinstance(raw, list) else [str(raw)]).split()
        if [w.lower() for w in words] == ["none"]:
            return ()
        return tuple(expand(w) for w in words)

    strict = _first(found.get("stricthostkeychecking"))
    agent_path = None
    if agent_setting and agent_setting.lower() not in ("none", "ssh_auth_sock"):
        agent_path = os.environ.get(agent_setting[1:], "") if agent_setting.startswith("$") else expand(agent_setting)
    return SSHTarget(
        name=name,
        hostname=hostname,
        port=port_value,
        user=resolved_user,
        key_files=keys,
        explicit_keys=bool(named),
        identities_only=_yes(found.get("identitiesonly")),
        jump=parse_jump_chain(jump_spec),
        connect_timeout_s=timeout,
        host_key_alias=alias,
        use_agent=agent_setting.lower() != "none",
        identity_agent=agent_path or None,
        user_known_hosts=files("userknownhostsfile"),
        global_known_hosts=files("globalknownhostsfile"),
        strict_host_key_checking=strict.lower() if strict else None,
        check_host_ip=_yes(found.get("checkhostip")),
        hash_known_hosts=_yes(found.get("hashknownhosts")),
        password_authentication=str(_first(found.get("passwordauthentication")) or "yes").lower() != "no",
    )


def expand_tokens(
    value: str, *, host: str, original: str, port: int, remote_user: str, alias: str | None = None
) -> str:
    """``~`` and ssh_config's ``%`` tokens in a file name, as ssh expands them.

    ``%d`` home, ``%h`` host name, ``%k`` host key alias (else the host name), ``%n`` the name
    as given, ``%p`` port, ``%r`` remote user, ``%u`` local user, ``%i`` local uid, ``%l``/``%L``
    local host name (full/short), ``%%`` a percent sign. An unknown token is an error, as in ssh.
    """
    import socket

    home = str(user_home())
    if value == "~" or value.startswith("~/"):
        value = home + value[1:]
    local = socket.gethostname()
    table = {
        "d": home,
        "h": host,
        "k": alias or host,
        "n": original,
        "p": str(port),
        "r": remote_user,
        "u": getpass.getuser(),
        "i": str(os.getuid()),
        "l": local,
        "L": local.split(".")[0],
        "%": "%",
    }

    def token(match: re.Match[str]) -> str:
        if match[1] not in table:
            raise TransportError(FailureKind.ERROR, f"ssh_config: unknown token %{match[1]} in {value!r}")
        return table[match[1]]

    return re.sub("%(.)", token, value, flags=re.DOTALL)


def target_for_host(
    host: Host, config: paramiko.SSHConfig | None, connect_timeout_s: float | None
) -> SSHTarget:
    return resolve_target(
        name=host.name,
        address=host.address,
        port=host.port,
        user=host.user,
        key_file=host.ssh.key_file,
        jump_host=host.ssh.jump_host,
        options=host.ssh.options,
        config=config,
        default_connect_timeout_s=connect_timeout_s,
    )
