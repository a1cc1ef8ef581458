"""The ``bmc:`` section of clusterctl's inventory: how to reach each host's BMC over Redfish.

```yaml
bmc:
  gpu-a*:                                   # a host name, or a pattern (fnmatch) of host names
    address: https://{host}-bmc.mgmt        # {host}: the host's name; https:// when no scheme is given
    username: admin
    password_file: ~/.config/clusterctl/bmc-password   # mode 0600; or password_env: BMC_PASSWORD
    system: /redfish/v1/Systems/1           # optional: the BMC's only system by default
    verify_tls: true                        # the default; ca_file: a CA bundle for self-signed BMCs
    timeout_s: 10                           # each request
    power_timeout_s: 300                    # the wait for the BMC to report a power change
  gpu-b1: {address: 10.1.0.21, username: root, password_env: GPU_B1_BMC_PASSWORD}
```

A host takes the entry written under its own name, else the first pattern that matches it. The
password is never written in the inventory (a ``password:`` field is refused): only where to read
it, when a power action needs it. Every error names the file, line and field.
"""

from __future__ import annotations

import fnmatch
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.inventory import values
from clusterctl.inventory.model import BmcConfig

if TYPE_CHECKING:
    from clusterctl.inventory.node_reader import NodeReader
    from clusterctl.inventory.yaml_tree import Node

FIELDS = ("address", "username", "password_file", "password_env", "system", "verify_tls", "ca_file", "timeout_s",
          "power_timeout_s")


def bmc_address(value: Any) -> str:
    text = values.text(value, "address").strip()
    scheme, _, authority = text.rpartition("://")
    if "{" in authority.replace("{host}", ""):
        raise values.BadValue(f"address {text!r}: only {{host}} may be written in braces")
    try:
        host, _ = values.host_port(authority.removesuffix("/").replace("{host}", "h"), "address")
    except values.BadValue:
        host = ""
    if not host or scheme not in ("", "http", "https") or (":" in host and not authority.startswith("[")):
        raise values.BadValue(f"address {text!r} is not a BMC address",  # (a URL writes IPv6 in brackets)
                              hint="Write https://HOST[:PORT] (or just HOST); {host} stands for the host's name.")
    return text


def read_bmc(r: NodeReader, node: Node, field: str, host_names: list[str]) -> tuple[BmcConfig, ...]:
    section = r.mapping(node, field, must_be="'bmc' must map host names or patterns to BMC settings",
                        hint="e.g. 'bmc: {gpu-a*: {address: https://{host}-bmc, username: admin, "
                             "password_env: BMC_PASSWORD}}'")
    readers = {key: r.plain(partial(_value, key, base_dir=r.base_dir)) for key in FIELDS}
    entries: list[BmcConfig] = []
    for entry in section.entries:
        pattern = entry.key
        where = f"{field}.{pattern}"
        if not any(fnmatch.fnmatchcase(name, pattern) for name in host_names):
            raise r.error(f"'{pattern}' names no host of the inventory.", line=entry.key_line, field=where,
                          hint=values.did_you_mean(pattern, host_names) or "Write a host name or a pattern such "
                          "as gpu-a* that matches some.")
        out = r.fields(entry.value, where, readers, what="BMC settings", refused={"password": (
            "a BMC password is never written in the inventory.",
            "Use password_file: PATH (a file of mode 0600) or password_env: VARIABLE.")})
        for required in ("address", "username"):
            if required not in out:
                raise r.error(f"the BMC of '{pattern}' has no {required}.", line=entry.key_line, field=where,
                              hint="address and username are required; the password comes from password_file or "
                                   "password_env.")
        has_file, has_env = "password_file" in out, "password_env" in out
        if has_file == has_env:
            raise r.error(f"the BMC of '{pattern}' needs exactly one of password_file and password_env"
                          + (", not both." if has_file else "."), line=entry.key_line, field=where,
                          hint="password_file: a file of mode 0600 holding the password; password_env: the "
                               "environment variable that holds it.")
        entries.append(BmcConfig(pattern=pattern, source=f"{r.file}:{entry.key_line}", **out))
    return tuple(entries)


def _value(key: str, raw: Any, base_dir: Path) -> Any:
    if key == "address":
        return bmc_address(raw)
    if key == "verify_tls":
        return values.boolean(raw, "verify_tls")
    if key in ("timeout_s", "power_timeout_s"):
        return values.positive_number(raw, key)
    text = values.text(raw, key).strip()
    if not text:
        raise values.BadValue(f"{key} is empty")
    if key == "password_env" and not values.ENV_NAME.fullmatch(text):
        raise values.BadValue(f"password_env {text!r} is not an environment variable name")
    if key in ("password_file", "ca_file"):
        path = values.local_path(text, base_dir)
        if key == "ca_file" and not path.is_file():
            raise values.BadValue(f"ca_file {text!r}: no such file ({path})")
        return str(path)
    return text


def bmc_for(entries: tuple[BmcConfig, ...], host: str) -> BmcConfig | None:
    """The entry for ``host``: the one written under its name, else the first pattern that matches it."""
    return next((e for e in entries if e.pattern == host), None) or next(
        (e for e in entries if fnmatch.fnmatchcase(host, e.pattern)), None)
