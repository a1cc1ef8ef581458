"""The ``bootstrap:`` section of clusterctl's inventory: apt sources, mirror, runtime, CDI, subnets.

```yaml
bootstrap:
  mirror: https://mirror.example.internal     # air-gapped: upstream hosts rewritten to this
  apt_repos:                                   # extra or replacement sources
    - name: site-tools
      url: https://mirror.example.internal/tools
      suites: [stable]
      components: [main]
      key_file: keys/site-tools.asc            # on the control machine, relative to the inventory
  nvidia_container_toolkit: "1.20.2"
  runtime: default                             # or runtimeclass
  cdi: false
  pod_subnet: 10.244.0.0/16
  registry_mirrors: {docker.io: [https://registry.example.internal]}
  allow_cgroup_v1: false                       # true: kubelet runs on hosts still on cgroup v1
```
Every error names the file, line and field.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from functools import partial
from typing import Any

from clusterctl.errors import BadValue
from clusterctl.inventory import values
from clusterctl.inventory.model import RUNTIME_MODES, AptRepo, BootstrapConfig
from clusterctl.inventory.node_reader import NodeReader, ValueReader
from clusterctl.inventory.yaml_tree import Mapping, Node, Sequence, kind_of


def _endpoint(value: Any, what: str) -> str:
    values.host_port(value, what, "Write host or host:port, e.g. k8s-api.example.internal:6443.")
    return values.text(value, what)


def _runtime(value: Any) -> str:
    text = values.text(value, "runtime")
    if text not in RUNTIME_MODES:
        raise BadValue(f"unknown runtime mode {text!r}", values.one_of_hint(text, RUNTIME_MODES))
    return text


def _clean_name(value: Any) -> str:
    text = values.text(value, "a repository name")
    if not all((c.isascii() and c.isalnum()) or c in "-_." for c in text) or text.startswith("."):
        raise BadValue(f"repository name {text!r} may only use ASCII letters, digits, '-', '_' and '.'",
                       "It names the file /etc/apt/sources.list.d/<name>.sources, which apt ignores otherwise.")
    return text


def read_bootstrap(r: NodeReader, node: Node, field: str) -> BootstrapConfig:
    def checked(check: Callable[[Any, str], Any], key: str) -> ValueReader:
        return r.single(lambda v: check(v, key), raw=True)

    def flag(key: str) -> ValueReader:
        return r.single(lambda v: values.boolean(v, key))

    # Every field of the section and its reader; settings that land in file names, keys, URLs or
    # commands each have their own check.
    out = r.fields(node, field, {
        "mirror": checked(values.url, "mirror"),
        "apt_repos": partial(_repos, r),
        "apt_repos_only": flag("apt_repos_only"),
        "nvidia_container_toolkit": checked(values.version, "nvidia_container_toolkit"),
        "containerd_package": checked(values.package_name, "containerd_package"),
        "runtime": r.single(_runtime),
        "cdi": flag("cdi"),
        "pod_subnet": checked(values.subnet, "pod_subnet"),
        "service_subnet": checked(values.subnet, "service_subnet"),
        "control_plane_endpoint": checked(_endpoint, "control_plane_endpoint"),
        "sandbox_image": checked(values.image_reference, "sandbox_image"),
        "registry_mirrors": partial(_mirrors, r),
        "min_var_lib_gib": r.single(partial(values.positive_number, what="min_var_lib_gib")),
        "allow_cgroup_v1": flag("allow_cgroup_v1"),
        # The sections the cluster phases read (checked by ``clusterctl.inventory.cluster_sections``).
        **{key: partial(_cluster_section, r, key) for key in ("network", "addons", "alerts")},
        "image_repository": checked(values.image_reference, "image_repository"),
        # A saved survey report on the control machine, next to the inventory.
        "survey": r.single(lambda v: str(values.local_path(values.text(v, "survey"), r.base_dir)), raw=True),
    })
    defaults = BootstrapConfig()
    pod = ipaddress.ip_network(out.get("pod_subnet", defaults.pod_subnet))
    svc = ipaddress.ip_network(out.get("service_subnet", defaults.service_subnet))
    if pod.version == svc.version and pod.overlaps(svc):
        raise r.error(f"pod_subnet {pod} overlaps service_subnet {svc}.", line=node.line, field=field,
                      hint="Pick two separate ranges.")
    return BootstrapConfig(**out, source=f"{r.file}:{node.line}")


def _cluster_section(r: NodeReader, key: str, node: Node, field: str) -> dict[str, Any]:
    """``network``, ``addons`` or ``alerts`` as plain values, checked now so errors carry the line."""
    from clusterctl.errors import UsageError
    from clusterctl.inventory import cluster_sections as cluster
    from clusterctl.inventory.yaml_tree import to_python

    if not isinstance(node, Mapping):
        raise r.error(f"'{key}' must be a mapping of settings, not {kind_of(node)}.", line=node.line, field=field)
    data = to_python(node)
    check = {"network": cluster.check_network, "addons": cluster.check_addons, "alerts": cluster.check_alerts}[key]
    try:
        check(data, field)
    except UsageError as exc:
        where = exc.field or field
        line = node.line
        entry = node.get(where.split(".")[2]) if where.count(".") >= 2 else None
        if entry is not None:
            line = entry.key_line
        raise r.error(exc.message, line=line, field=where, hint=exc.hint) from None
    for chart in (data.get("charts") or {}).values() if key == "addons" else ():
        if isinstance(chart, dict) and chart.get("archive"):
            # Chart archives live on the control machine, next to the inventory.
            chart["archive"] = str(values.local_path(chart["archive"], r.base_dir))
    return dict(data)


def _repos(r: NodeReader, node: Node, field: str) -> tuple[AptRepo, ...]:
    if not isinstance(node, Sequence):
        raise r.error(f"'apt_repos' must be a list of repositories, not {kind_of(node)}.", line=node.line,
                      field=field)

    def key_file(value: Node, where: str) -> str:
        # An OpenPGP key on the control machine, next to the inventory.
        path = r.scalar(value, where, lambda v: values.text(v, "key_file"), raw=True)
        full = values.local_path(path, r.base_dir)
        if not full.is_file():
            raise r.error(f"key_file {path} does not exist (looked at {full}).", line=value.line, field=where)
        return str(full)

    readers: dict[str, ValueReader] = {
        "name": r.single(_clean_name, raw=True), "url": r.single(lambda v: values.url(v, "url"), raw=True),
        "suites": r.names, "components": r.names, "key_file": key_file,
        "key_url": r.single(lambda v: values.url(v, "key_url"), raw=True)}
    repos: list[AptRepo] = []
    for index, item in enumerate(node.items):
        sub = f"{field}[{index}]"
        if not isinstance(item, Mapping):
            raise r.error(f"each repository must be a mapping with name and url, not {kind_of(item)}.",
                          line=item.line, field=sub)
        raw = r.fields(item, sub, readers)
        for needed in ("name", "url"):
            if needed not in raw:
                raise r.error(f"this repository has no '{needed}'.", line=item.line, field=sub)
        if any(existing.name == raw["name"] for existing in repos):
            raise r.error(f"two repositories are named '{raw['name']}'.", line=item.line, field=f"{sub}.name")
        repos.append(AptRepo(**raw))
    return tuple(repos)


def _mirrors(r: NodeReader, node: Node, field: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(node, Mapping):
        raise r.error(f"'registry_mirrors' must map a registry to mirror URLs, not {kind_of(node)}.",
                      line=node.line, field=field, hint="e.g. registry_mirrors: {docker.io: [https://mirror.local]}")
    out: list[tuple[str, tuple[str, ...]]] = []
    for entry in node.entries:
        sub = f"{field}.{entry.key}"
        # The key names a folder under certs.d and sits in hosts.toml: no '/', '..', newline or quote.
        with r.values_at(entry.key_line, sub):
            values.registry(entry.key, "registry", path=False)
        urls = r.names(entry.value, sub)
        with r.values_at(entry.value.line, sub):
            for url in urls:
                values.url(url, "a mirror")
        out.append((entry.key, tuple(urls)))
    return tuple(out)
