"""``clusterctl bootstrap artifacts``: what an air-gapped site must mirror, and whether its mirrors have it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from clusterctl.cli.context import AppContext, app_context
from clusterctl.errors import UsageError
from clusterctl.terminal_layout import Column, print_table, print_wrapped

if TYPE_CHECKING:
    from clusterctl.bootstrap.artifacts import ArtifactList
    from clusterctl.bootstrap.artifacts_probe import ProbeResult

HELP = """\
List every apt package (with its version and source), signing key, container image (with
its tag), Helm chart (with version and repository) and manifest a bootstrap of these hosts
fetches: kubeadm's own images for the pinned Kubernetes version, the CNI, the device plugin,
NFD, DCGM exporter or the GPU Operator, and the verify pod's image. The mirrors the inventory
configures are applied, so each line says where a run will look.

Each host's /etc/os-release is read (as the plan reads it): Docker's apt repository and suite
are the ones its distribution and release get (linux/ubuntu or linux/debian).

--probe asks, from one host (the first control plane unless --from), whether each item is
there, and names what is missing or could not be verified (an unreachable mirror, a URL that
asks for credentials): exit 1 unless every item was found, with -o json too.

Examples:

  clusterctl -i inventories/demo.yaml bootstrap artifacts

  clusterctl bootstrap artifacts -o json > artifacts.json

  clusterctl bootstrap artifacts --out mirror-lists/

  clusterctl bootstrap artifacts --probe --from gpu-a1
"""

#: --out files: one plain list per kind, as mirroring tools take them.
LIST_FILES = {"apt-package": "packages.txt", "apt-key": "keys.txt", "image": "images.txt", "chart": "charts.txt",
              "manifest": "manifests.txt"}


def register_on(bootstrap_app: typer.Typer) -> None:
    """Add ``artifacts`` to the ``bootstrap`` group (called by ``bootstrap_cmd.register``), once."""
    if not any(c.name == "artifacts" for c in bootstrap_app.registered_commands):
        bootstrap_app.command("artifacts", help=HELP)(artifacts_command)


def artifacts_command(
    ctx: typer.Context,
    out: str | None = typer.Option(None, "--out", metavar="DIR",
                                      help="Also write images.txt, packages.txt, charts.txt, manifests.txt, "
                                      "keys.txt and artifacts.json under DIR."),
    probe: bool = typer.Option(False, "--probe", help="Ask whether each item is on the configured mirrors."),
    probe_from: str | None = typer.Option(None, "--from", metavar="HOST",
                                             help="Host to probe from (default: the first control plane)."),
) -> None:
    from clusterctl.bootstrap.artifacts import artifact_list, read_releases

    app = app_context(ctx)
    inventory = app.inventory()
    hosts = app.hosts()
    with app.runner() as runner:
        releases = read_releases(runner, hosts)
    found = artifact_list(inventory, hosts, releases)
    results = _probe(app, found, probe_from) if probe else None
    written = write_lists(found, out) if out else []
    payload: dict[str, Any] = found.to_json()
    if results is not None:
        payload["probe"] = [r.to_json() for r in results]
        payload["missing"] = [r.artifact.reference for r in results if r.status == "missing"]
        # Not found to be there is not there, for a CI check: a mirror that is down fails it.
        payload["not_verified"] = [r.artifact.reference for r in results if r.status != "present"]
    if out:
        payload["out_files"] = [str(p) for p in written]
    app.emit(payload, lambda: _table(app, found, results, written),
             failed=results is not None and any(r.status != "present" for r in results))


def write_lists(found: ArtifactList, out: str) -> list[Path]:
    import json

    from clusterctl.writable import write_files

    files = {name: "".join(f"{reference}\n" for reference in sorted({a.reference for a in found.of_kind(kind)}))
             for kind, name in LIST_FILES.items()}
    files["artifacts.json"] = json.dumps(found.to_json(), indent=2) + "\n"
    return write_files(files, Path(out).expanduser())


def _probe(app: AppContext, found: ArtifactList, probe_from: str | None) -> list[ProbeResult]:
    from clusterctl.bootstrap.artifacts_probe import probe
    from clusterctl.inventory.limit import host_named

    inventory = app.inventory()
    host = host_named(inventory, probe_from, "--from") if probe_from else inventory.first_control_plane
    if host is None:
        raise UsageError("no control-plane host to probe from", field="--from", hint="Name one with --from HOST.")
    mirrors = dict(inventory.bootstrap.registry_mirrors)

    def task(transport: Any) -> list[ProbeResult]:
        def run(command: str) -> tuple[str, str, int]:
            result = transport.run(command, timeout=30)
            return result.stdout, result.stderr, result.exit_code

        return probe(found, run, mirrors)

    with app.runner() as runner:
        fleet = runner.run_task([host], task, label="probe")
    outcome = fleet.outcomes[0]
    if not outcome.ok or outcome.value is None:
        message = outcome.failure.describe() if outcome.failure else "no result"
        raise UsageError(f"cannot probe the mirrors from {host.name}: {message}")
    return list(outcome.value)


def _table(app: AppContext, found: ArtifactList, results: list[ProbeResult] | None, written: list[Path]) -> None:
    status = {id(r.artifact): r for r in results or []}
    # The reference and its source are what a mirroring script copies: never cut; the note and
    # the phase give way first.
    columns = [Column("kind", keep=True), Column("artifact", keep=True), Column("source", keep=True),
               Column("phase", keep=True, drop_order=1), Column("note", drop_order=2)]
    if results is not None:
        columns.append(Column("on mirror"))
    rows = []
    for a in found.artifacts:
        row = [a.kind, a.reference if a.kind != "chart" else f"{a.name} {a.version}", a.source, a.phase, a.note]
        if results is not None:
            r = status.get(id(a))
            row.append(f"{r.status}: {r.detail}" if r else "")
        rows.append(row)
    print_table(app.console, columns, rows,
                title=f"artifacts of cluster {found.cluster} (Kubernetes {found.kubernetes})")
    app.say(", ".join(f"{len(found.of_kind(kind))} {kind}(s)" for kind in LIST_FILES), soft_wrap=False)
    for note in found.notes:
        app.note(note)
    if results is not None:
        missing = [r for r in results if r.status == "missing"]
        unknown = [r for r in results if r.status == "unknown"]
        for word, listed in (("MISSING", missing), ("NOT VERIFIED", unknown)):
            for r in listed:  # each wrapped under its item, past the word
                print_wrapped(app.console, f"{word} {r.artifact.reference} ({r.url}: {r.detail})", len(word) + 1)
        present = len(results) - len(missing) - len(unknown)
        verdict = ("every item is on the mirrors" if present == len(results) else
                   "exit 1: what is missing or not verified may not be there when a bootstrap needs it")
        print_wrapped(app.console, f"{present} present, {len(missing)} missing, {len(unknown)} not verified; "
                                   f"{verdict}", 2)
    if written:
        app.say(f"wrote {len(written)} file(s) under {written[0].parent}", soft_wrap=False)
