"""``apt-get``: update, install (pinned ``name=version``), remove, purge.

Packages come from the profile's repository (``clusterctl.mock.tools.packages``). Output and
exit codes are apt 2.6's (Debian 12, recorded in recordings/ran-here-debian12.txt):
``E: Unable to locate package X`` and ``E: Version 'V' for 'X' was not found`` exit 100; a
held package changed without ``--allow-change-held-packages`` and a downgrade without
``--allow-downgrades`` exit 100; without ``-y`` apt asks, and with no terminal answers "Abort.".
"""

from __future__ import annotations

import fnmatch

from clusterctl.debian_version import compare_debian_versions, debian_version_key
from clusterctl.mock.tools import packages as db
from clusterctl.mock.tools.base import ToolContext, ToolResult, split_args

HEADER = "Reading package lists...\nBuilding dependency tree...\nReading state information...\n"
_VALUE_OPTIONS = ("-o", "-t", "--target-release", "-c")


def _parse(args: list[str]) -> tuple[str | None, list[str], set[str]]:
    """The verb, the package names, and the options given (long ones by name, short ones letter by letter)."""
    words, given, flags = split_args(args, _VALUE_OPTIONS)
    options = {name for name in [*given, *flags] if name.startswith("--") and name not in _VALUE_OPTIONS}
    options.update(f"-{c}" for flag in flags if not flag.startswith("--") for c in flag[1:] if c.isalpha())
    return (words[0] if words else None), words[1:], options


def _refused(out: str, options: set[str], *, held: bool, downgraded: bool = False) -> ToolResult | None:
    """apt's refusals before it changes anything: held packages changed, or a downgrade, without the option
    that allows it (exit 100), the downgrade first as apt-private/private-install.cc checks them; no ``-y``:
    it asks, and with no terminal answers "Abort." (exit 1)."""
    if downgraded and "--allow-downgrades" not in options:
        return ToolResult(out + "E: Packages were downgraded and -y was used without --allow-downgrades.\n", "", 100)
    if held and "--allow-change-held-packages" not in options:
        return ToolResult(out + "E: Held packages were changed and -y was used without "
                          "--allow-change-held-packages.\n", "", 100)
    if not options & {"-y", "--yes", "--assume-yes"}:
        return ToolResult(out + "Do you want to continue? [Y/n] Abort.\n", "", 1)
    return None


def update(ctx: ToolContext) -> ToolResult:
    sources = db.configured_sources(ctx)
    seen = [source for source in db.all_sources(ctx) if any(source in text for text in sources)]
    with ctx.host.edit() as data:
        data["apt_updated"] = seen
        # The lists as fetched now: apt offers these versions until the next update.
        data["apt_lists"] = {source: db.offered(ctx, source) for source in seen}
    lines = [f"Hit:{i} https://{source} InRelease" for i, source in enumerate(seen, 1)]
    return ToolResult("\n".join(lines) + ("\n" if lines else "") + "Reading package lists...\n")


def install(ctx: ToolContext, names: list[str], options: set[str]) -> ToolResult:
    repo = db.repository(ctx)
    have = db.installed(ctx)
    held = set(db.holds(ctx))
    plan: list[tuple[db.Available, str, str | None]] = []  # package, version to install, version installed
    newest: list[str] = []
    for spec in names:
        name, _, wanted = spec.partition("=")
        package = repo.get(name)
        if package is None or not db.visible(ctx, package) or not package.versions:
            return ToolResult(HEADER + f"E: Unable to locate package {name}\n", "", 100)
        # apt takes glob patterns in a version ('kubeadm=1.36.2-*', as the Kubernetes upgrade
        # docs write it) and picks the newest version that matches.
        offered = db.versions_seen(ctx, package)
        matching = [v for v in offered if fnmatch.fnmatchcase(v, wanted)] if wanted else []
        if wanted and not matching:
            return ToolResult(HEADER + f"E: Version '{wanted}' for '{name}' was not found\n", "", 100)
        version = max(matching or offered, key=debian_version_key)
        current = str(have[name]["version"]) if name in have else None
        if current == version:
            newest.append(f"{name} is already the newest version ({version}).")
            continue
        plan.append((package, version, current))
    out = HEADER + "".join(line + "\n" for line in newest)
    new = [p.name for p, _v, cur in plan if cur is None]
    upgraded = [p.name for p, v, cur in plan if cur is not None and compare_debian_versions(v, cur) > 0]
    downgraded = [p.name for p, v, cur in plan if cur is not None and compare_debian_versions(v, cur) < 0]
    changed_held = [p.name for p, _v, cur in plan if cur is not None and p.name in held]
    for listed, group in (("held packages will be changed", changed_held), ("packages will be upgraded", upgraded),
                          ("packages will be DOWNGRADED", downgraded), ("NEW packages will be installed", new)):
        if group:
            out += f"The following {listed}:\n  " + " ".join(group) + "\n"
    out += (f"{len(upgraded)} upgraded, {len(new)} newly installed, {len(downgraded)} downgraded, "
            "0 to remove and 0 not upgraded.\n") if downgraded else \
        f"{len(upgraded)} upgraded, {len(new)} newly installed, 0 to remove and 0 not upgraded.\n"
    if not plan:
        return ToolResult(out)
    refused = _refused(out, options, held=bool(changed_held), downgraded=bool(downgraded))
    if refused:
        return refused
    for number, (package, version, _current) in enumerate(plan, 1):
        out += f"Get:{number} https://{package.source or 'mock-repository'} {package.name} {version} [1,024 kB]\n"
    for package, version, current in plan:
        if current is None:
            out += f"Selecting previously unselected package {package.name}.\n"
        out += (f"Preparing to unpack .../{package.name}_{version}_amd64.deb ...\n"
                f"Unpacking {package.name} ({version})" + (f" over ({current})" if current else "") + " ...\n")
    with ctx.host.edit() as data:
        installed = data.setdefault("packages", {})
        services = data.setdefault("services", {})
        for package, version, _current in plan:
            installed[package.name] = {"version": version}
            for unit in package.units:
                # Debian's maintainer scripts enable and start a service they install.
                entry = services.setdefault(unit, {})
                entry.setdefault("enabled", "enabled")
                entry["active"] = "active"
    for package, version, _current in plan:
        db.install_files(ctx, package, version)
        out += f"Setting up {package.name} ({version}) ...\n"
    return ToolResult(out)


def remove(ctx: ToolContext, names: list[str], options: set[str], *, purge: bool) -> ToolResult:
    repo = db.repository(ctx)
    have = db.installed(ctx)
    held = set(db.holds(ctx))
    targets = []
    out = HEADER
    for name in names:
        if name not in have:
            if name not in repo:
                return ToolResult(out + f"E: Unable to locate package {name}\n", "", 100)
            out += f"Package '{name}' is not installed, so not removed\n"
            continue
        targets.append(name)
    if targets:
        out += "The following packages will be REMOVED:\n  " + " ".join(targets) + "\n"
    out += f"0 upgraded, 0 newly installed, {len(targets)} to remove and 0 not upgraded.\n"
    if not targets:
        return ToolResult(out)
    refused = _refused(out, options, held=bool(held & set(targets)))
    if refused:
        return refused
    with ctx.host.edit() as data:
        installed = data.setdefault("packages", {})
        for name in targets:
            version = installed.pop(name, {}).get("version", "")
            out += f"Removing {name} ({version}) ...\n"
            for unit in db.package(repo, name).units:
                data.setdefault("services", {}).pop(unit, None)
    for name in targets:
        db.remove_files(ctx, db.package(repo, name), purge=purge)
    return ToolResult(out)


def run(ctx: ToolContext) -> ToolResult:
    result = _run(ctx)
    # apt prints its progress on stdout and its "E:" errors on stderr.
    lines = result.stdout.splitlines(keepends=True)
    errors = "".join(line for line in lines if line.startswith("E: "))
    if not errors:
        return result
    return ToolResult("".join(line for line in lines if not line.startswith("E: ")), result.stderr + errors,
                      result.exit_code)


def _run(ctx: ToolContext) -> ToolResult:
    verb, names, options = _parse(ctx.args)
    if verb is None:
        return ToolResult("", "E: Invalid operation \n" if ctx.args else "", 100 if ctx.args else 0)
    if verb == "update":
        return update(ctx)
    if verb == "install":
        return install(ctx, names, options)
    if verb in ("remove", "purge"):
        return remove(ctx, names, options, purge=verb == "purge" or "--purge" in options)
    return ToolResult("", f"E: Invalid operation {verb}\n", 100)
