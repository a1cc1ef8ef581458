"""From an Ansible host's resolved variables to a clusterctl ``Host``.

Ansible's connection variables become the host's address, user, port, key file, jump host
and transport; ``clusterctl_*`` variables (and ``rack``) set what Ansible has no word for;
group names such as ``kube_control_plane`` give roles. Every error names the line where the
offending variable was set, which may be a group's vars rather than the host's line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, cast

from clusterctl.errors import BadValue, InventoryFileReader
from clusterctl.inventory import values
from clusterctl.inventory.model import Fabric, Host, SSHOptions, StackPin, TransportKind

#: Group names that mean "control-plane" in kubespray, kubeadm-ansible, k3s-ansible and friends.
CONTROL_PLANE_GROUPS = frozenset(
    {
        "kube_control_plane",
        "kube-master",
        "kube_master",
        "masters",
        "master",
        "control_plane",
        "control-plane",
        "controlplane",
    }
)
#: Group names that mean "worker".
WORKER_GROUPS = frozenset({"kube_node", "kube-node", "workers", "worker", "nodes", "node"})

#: Ansible variable -> what it sets. Legacy ``ansible_ssh_*`` spellings are still common.
ADDRESS_VARS = ("ansible_host", "ansible_ssh_host")
USER_VARS = ("ansible_user", "ansible_ssh_user")
PORT_VARS = ("ansible_port", "ansible_ssh_port")
KEY_FILE_VARS = ("ansible_ssh_private_key_file", "ansible_private_key_file")
SSH_ARGS_VARS = ("ansible_ssh_common_args", "ansible_ssh_extra_args")

#: Options of the OpenSSH client that take an argument (``man ssh``), to walk its command line.
_SSH_FLAGS_WITH_ARGUMENT = set("BbcDEeFIiJLlmOoPpQRSWw")
#: Flags of a ProxyCommand's ssh that a jump host's connection does without (quiet, no tty, compression).
_HARMLESS_SSH_FLAGS = ("-q", "-T", "-N", "-C")


@dataclass
class Var:
    """A variable's value and the line that set it, so errors point there."""

    value: Any
    line: int


@dataclass(kw_only=True)
class HostBuilder(InventoryFileReader):
    """Turns one host's resolved variables into a ``Host``; errors point at the variable's line."""

    file: str
    name: str
    line: int
    #: The host's variables after Ansible's precedence (group vars, then host vars) was applied.
    vars: dict[str, Var]
    groups: tuple[str, ...]
    base_dir: Path
    #: Variable names read so far, so unread ``ansible_*`` ones can be reported.
    used: set[str] = field(default_factory=set)

    def pick(self, names: tuple[str, ...]) -> tuple[str, Var] | None:
        """The first of several spellings that is set (``ansible_host`` before ``ansible_ssh_host``)."""
        self.used.update(names)
        for name in names:
            var = self.vars.get(name)
            if var is not None and var.value is not None:
                return name, var
        return None

    def convert(self, names: tuple[str, ...], convert: Any) -> Any:
        found = self.pick(names)
        if found is None:
            return None
        name, var = found
        with self.values_at(var.line, name, f"host '{self.name}': "):
            return convert(var.value)

    def build(self) -> Host:
        jump_host, options = self.ssh_args()
        transport = self.transport()
        fabric = {key: self.convert((f"clusterctl_fabric_{key}",), convert) for key, convert in (
            ("type", values.fabric_type), ("rate_gbps", partial(values.positive_number, what="rate_gbps")),
            ("hcas", partial(values.text_list, what="hcas")))}
        stack = {
            name: self.convert((f"clusterctl_stack_{name}",), lambda v, n=name: values.version(v, f"the {n} version"))
            for name in StackPin.__dataclass_fields__
        }
        gpus = self.convert(("clusterctl_gpus",), lambda v: values.ansible_boolean(v, "clusterctl_gpus"))
        host = Host(
            name=self.name,
            address=self.convert(ADDRESS_VARS, lambda v: values.address(v, "ansible_host")),
            port=self.convert(PORT_VARS, values.port),
            user=self.convert(USER_VARS, lambda v: values.text(v, "ansible_user")),
            roles=self.roles(),
            rack=self.convert(("clusterctl_rack", "rack"), lambda v: values.text(v, "rack")),
            groups=self.groups,
            fabric=Fabric(**{k: v for k, v in fabric.items() if v is not None}),
            ssh=SSHOptions(
                key_file=self.convert(KEY_FILE_VARS, lambda v: values.text(v, "key file")),
                jump_host=jump_host,
                options=options,
            ),
            transport=transport,
            profile=self.profile(transport),
            mock_state=self.convert(("clusterctl_mock_state",), lambda v: values.mock_state_folder(v, self.base_dir)),
            stack=StackPin(**{k: v for k, v in stack.items() if v is not None}),
            gpus=gpus is not False,
            source=f"{self.file}:{self.line}",
        )
        rest = {k: v.value for k, v in self.vars.items() if k not in self.used}
        return replace(host, vars=tuple(values.mask_secrets(rest).items()))

    def roles(self) -> tuple[str, ...]:
        explicit = self.convert(("clusterctl_roles",), values.roles)  # never empty: values.roles refuses that
        found = tuple(role for role, names in (("control-plane", CONTROL_PLANE_GROUPS), ("worker", WORKER_GROUPS))
                      if not names.isdisjoint(self.groups))
        return explicit or found or ("worker",)

    def transport(self) -> TransportKind:
        explicit = self.convert(("clusterctl_transport",), values.transport)
        connection = self.convert(("ansible_connection",), lambda v: values.text(v, "ansible_connection"))
        if explicit is not None:
            return cast("TransportKind", explicit)
        if connection in (None, "ssh", "paramiko", "smart"):
            return "ssh"
        if connection == "local":
            return "local"
        var = self.vars["ansible_connection"]
        raise self.error(
            f"host '{self.name}': ansible_connection '{connection}' is not supported.",
            var.line,
            "ansible_connection",
            "clusterctl reaches hosts over ssh (or local for this machine); set clusterctl_transport to override.",
        )

    def profile(self, transport: str) -> str | None:
        var = self.pick(("clusterctl_profile",))
        with self.values_at(self.line if var is None else var[1].line, "clusterctl_profile", f"host '{self.name}': "):
            return values.host_profile(None if var is None else var[1].value, transport, self.base_dir,
                                       "Set clusterctl_profile to the folder holding the host's profile.yaml.")

    def ssh_args(self) -> tuple[str | None, tuple[tuple[str, str], ...]]:
        """Jump host and ``-o`` options from ``ansible_ssh_common_args``/``_extra_args``."""
        self.used.update(SSH_ARGS_VARS)
        jump: str | None = None
        options: list[tuple[str, str]] = []
        for name in SSH_ARGS_VARS:
            var = self.vars.get(name)
            if var is None or var.value in (None, ""):
                continue
            with self.values_at(var.line, name, f"host '{self.name}': "):
                found_jump, found_options = parse_ssh_args(str(var.value))
                if found_jump:
                    values.jump_hops(found_jump)
            jump = found_jump or jump
            options.extend(found_options)
        return jump, tuple(options)


def parse_ssh_args(args: str) -> tuple[str | None, list[tuple[str, str]]]:
    """ProxyJump (``-J``, ``-o ProxyJump=``, or ``ssh -W %h:%p`` in a ProxyCommand) and other ``-o``."""
    try:
        tokens = shlex.split(args)
    except ValueError as exc:
        raise BadValue(f"cannot split the ssh arguments '{args}': {exc}.", "Check the quotes.") from None
    jump: str | None = None
    options: list[tuple[str, str]] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if len(token) < 2 or token[0] != "-" or token[1] not in "Jo":
            continue
        argument = token[2:]
        if not argument and index < len(tokens):
            argument = tokens[index]
            index += 1
        if token[1] == "J":
            jump = argument
            continue
        key, value = _ssh_option(argument)
        if key.lower() == "proxyjump":
            jump = value
        elif key.lower() == "proxycommand":
            # Only 'ssh -W %h:%p bastion' is understood (it is a jump); any other command is refused
            # rather than dropped, which would connect directly, around the proxy the user set.
            via = jump_from_proxy_command(value)
            if via is None:
                raise BadValue(f"ProxyCommand '{value}' is not supported: clusterctl connects through jump hosts "
                               "only.", "Write -o ProxyJump=[user@]bastion[:port] (or -J bastion), or "
                               "ProxyCommand='ssh -W %h:%p bastion'; the bastion's key goes in ~/.ssh/config "
                               "(Host bastion, IdentityFile).")
            jump = via
        elif key:
            options.append((key, value))
    return jump, options


def _ssh_option(argument: str) -> tuple[str, str]:
    match = re.match(r"\s*([A-Za-z]+)\s*(?:=|\s)\s*(.*)$", argument, re.DOTALL)
    if not match:
        return argument.strip(), ""
    return match.group(1), match.group(2).strip()


def jump_from_proxy_command(command: str, forwards: Collection[str] = ("%h:%p", "[%h]:%p")) -> str | None:
    """``ssh -W %h:%p -q [-p 2222] [-l user] [user@]bastion`` is a jump through ``bastion``; None for any other
    command. An option that changes how the bastion is reached or what is forwarded (``-i KEY``, ``-o``, ``-F``,
    ``-W`` to another address than ``forwards``) is not carried by a jump, so the command is not taken for one."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    if not tokens or Path(tokens[0]).name != "ssh":
        return None
    user = port = destination = forward = None
    index = 1
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("-") or len(token) < 2:
            if destination is not None:  # a remote command: ssh would run it
                return None
            destination = token
            continue
        flag, argument = token[1], token[2:]
        if flag in _SSH_FLAGS_WITH_ARGUMENT and not argument and index < len(tokens):
            argument = tokens[index]
            index += 1
        if flag == "p":
            port = argument
        elif flag == "l":
            user = argument
        elif flag == "W":
            forward = argument
        elif token not in _HARMLESS_SSH_FLAGS:
            return None
    if destination is None or forward not in forwards:
        return None
    if user and "@" not in destination:
        destination = f"{user}@{destination}"
    return f"{destination}:{port}" if port else destination
