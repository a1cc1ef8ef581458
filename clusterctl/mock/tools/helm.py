"""``helm`` (3.x) against the simulated cluster: ``upgrade --install``, ``list -o json``, ``status``.

A chart comes from ``--repo URL`` (any chart and version: the mock has no index to check) or
from a local ``.tgz`` that must exist on the host. ``--values`` files must exist and be YAML.
With ``--wait`` an install fails as Helm does when no node is Ready (no CNI yet). Releases are
kept in ``kube_state`` (``releases``), so every host of the mock cluster sees them.
"""

from __future__ import annotations

import json
import re
import time

from clusterctl.mock.tools import kube_state as ks
from clusterctl.mock.tools.base import ToolContext, ToolResult, option, split_args

PACKAGES = ("helm",)
_ARCHIVE = re.compile(r"^(?P<chart>.+)-(?P<version>v?\d+\.\d+\.\d+[^/]*)\.tgz$")


#: Flags of ``helm`` that take a value as the next word.
VALUED_FLAGS = frozenset({"--repo", "--version", "--namespace", "-n", "--values", "-f", "--timeout", "--kubeconfig",
                          "--output", "-o"})


def _cluster_error(ctx: ToolContext) -> ToolResult | None:
    kubeconfig = option(ctx.args, "--kubeconfig")
    if not kubeconfig or not ctx.fs.exists(kubeconfig) or not ks.read(ctx).get("initialized"):
        return ctx.fail("Error: Kubernetes cluster unreachable: Get \"http://localhost:8080/version\": dial tcp "
                        "127.0.0.1:8080: connect: connection refused\n")
    return None


def _upgrade_install(ctx: ToolContext, words: list[str]) -> ToolResult:
    import yaml

    if len(words) < 2:
        return ctx.fail('Error: "helm upgrade" requires 2 arguments\n\nUsage:  helm upgrade [RELEASE] [CHART] '
                        "[flags]\n")
    release, chart_ref = words[0], words[1]
    namespace = option(ctx.args, "--namespace", "-n") or "default"
    if chart_ref.endswith(".tgz"):
        if not ctx.fs.exists(ctx.path(chart_ref)):
            return ctx.fail(f"Error: path \"{chart_ref}\" not found\n")
        match = _ARCHIVE.match(chart_ref.rsplit("/", 1)[-1])
        chart, version = (match["chart"], match["version"]) if match else (chart_ref, "0.0.0")
    else:
        if not option(ctx.args, "--repo"):
            return ctx.fail(f'Error: repo {chart_ref.split("/", 1)[0]} not found\n')
        chart, version = chart_ref, option(ctx.args, "--version") or "latest"
    values_path = option(ctx.args, "--values", "-f")
    if values_path:
        data = ctx.fs.read(ctx.path(values_path))
        if data is None:
            return ctx.fail(f"Error: open {values_path}: no such file or directory\n")
        try:
            yaml.safe_load(data.decode())
        except yaml.YAMLError as exc:
            return ctx.fail(f"Error: failed to parse {values_path}: error converting YAML to JSON: {exc}\n")
    kube = ks.read(ctx)
    if "--wait" in ctx.args and not ks.cni_ready(kube):
        return ctx.fail("Error: INSTALLATION FAILED: context deadline exceeded\n")
    key = f"{namespace}/{release}"
    with ks.edit(ctx) as live:
        releases = live.setdefault("releases", {})
        before = releases.get(key)
        revision = int(before.get("revision", 0)) + 1 if before else 1
        releases[key] = {"chart": f"{chart}-{version}", "status": "deployed", "revision": revision,
                         "app_version": version.lstrip("v"), "updated": time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC",
                                                                                    time.gmtime())}
        live.setdefault("objects", {})[f"namespace//{namespace}"] = {"spec": "{}"}
    text = ks.recording("helm-upgrade-install.txt", name=release, namespace=namespace, revision=str(revision),
                     when=time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime()))
    if before is not None:
        text = text.replace(f'Release "{release}" does not exist. Installing it now.\n',
                            f'Release "{release}" has been upgraded. Happy Helming!\n')
    return ctx.ok(text)


def run(ctx: ToolContext) -> ToolResult:
    args = ctx.args
    error = _cluster_error(ctx)
    if error is not None:
        return error
    words = split_args(args, VALUED_FLAGS)[0]  # the command and its release: helm's flags may stand anywhere
    if words[:1] == ["upgrade"] and ("--install" in args or "-i" in args):
        return _upgrade_install(ctx, words[1:])
    releases = ks.read(ctx).get("releases") or {}
    if words[:1] in (["list"], ["ls"]):
        namespace = option(args, "--namespace", "-n")
        rows = [{"name": key.split("/", 1)[1], "namespace": key.split("/", 1)[0], "revision": str(r["revision"]),
                 "updated": r.get("updated", ""), "status": r["status"], "chart": r["chart"],
                 "app_version": r.get("app_version", "")}
                for key, r in sorted(releases.items())
                if "--all-namespaces" in args or "-A" in args or key.split("/", 1)[0] == (namespace or "default")]
        if option(args, "--output", "-o") == "json":
            return ctx.ok(json.dumps(rows) + "\n")
        lines = ["NAME\tNAMESPACE\tREVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION"]
        lines += ["\t".join(row.values()) for row in rows]  # the columns in the JSON's order
        return ctx.ok("\n".join(lines) + "\n")
    if words[:1] == ["status"] and len(words) >= 2:
        namespace = option(args, "--namespace", "-n") or "default"
        found = releases.get(f"{namespace}/{words[1]}")
        if found is None:
            return ctx.fail("Error: release: not found\n")
        return ctx.ok(f"NAME: {words[1]}\nLAST DEPLOYED: {found.get('updated', '')}\nNAMESPACE: {namespace}\n"
                      f"STATUS: {found['status']}\nREVISION: {found['revision']}\nTEST SUITE: None\n")
    return ctx.fail(f'Error: unknown command "{" ".join(words[:1])}" for "helm"\nRun \'helm --help\' for usage.\n')
