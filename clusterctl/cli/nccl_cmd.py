"""``clusterctl nccl lint``: check NCCL settings in env files, scripts and Kubernetes manifests."""

from __future__ import annotations

import typer

from clusterctl.cli.context import app_context
from clusterctl.errors import ParseError, UsageError
from clusterctl.wording import plural

nccl_app = typer.Typer(
    name="nccl",
    help="NCCL settings: check them against what each NCCL release reads and accepts.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

LINT_HELP = """Check NCCL settings for typos, wrong values, removed and harmful variables.

Reads KEY=VALUE files (/etc/nccl.conf), shell and Slurm scripts (export lines,
srun --export=..., mpirun -x ..., docker run -e ...), Dockerfiles (ENV, ARG, RUN, CMD) and
Kubernetes manifests (container env:, command/args, ConfigMap data:). Variables of well-known
plugins (GPUDirect-TCPX/TCPXO, aws-ofi-nccl, nccl-rdma-sharp-plugins) are reported as info.
'-' reads standard input. Exits 1 when a finding is an error (or a warning, with --strict),
or a file no setting was read from; 2 when an input cannot be read.

Examples:

  clusterctl nccl lint job.sbatch --nccl-version 2.21.5 --fabric ib

  clusterctl nccl lint pytorchjob.yaml -o json

  env | clusterctl nccl lint - --format env --survey survey.json
"""


def register(app: typer.Typer) -> None:
    nccl_app.command("lint", help=LINT_HELP)(lint_command)
    app.add_typer(nccl_app, name="nccl")


def lint_command(
    ctx: typer.Context,
    files: list[str] = typer.Argument(..., metavar="FILE...|-", help="Files to check; '-' is standard input."),
    fmt: str | None = typer.Option(
        None, "--format", metavar="FORMAT",
        help="env, shell, slurm, k8s or dockerfile (default: from name and content).",
    ),
    nccl_version: str | None = typer.Option(
        None, "--nccl-version", metavar="X.Y.Z", help="NCCL release the settings are for (e.g. 2.21.5)."
    ),
    survey: str | None = typer.Option(
        None, "--survey", metavar="FILE", help="Saved survey (clusterctl survey --save): version, fabric, NVLink."
    ),
    fabric: str | None = typer.Option(None, "--fabric", metavar="ib|roce|ethernet", help="Inter-host fabric."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on warnings too."),
    torch_version: str | None = typer.Option(
        None, "--torch-version", metavar="X.Y", help="PyTorch release the job runs (TORCH_NCCL_* names by version)."
    ),
) -> None:
    from clusterctl.cli.findings_view import print_findings, summary_line
    from clusterctl.findings import FINDINGS_SCHEMA_VERSION, Finding, count_by_severity, fails
    from clusterctl.inventory import values
    from clusterctl.inventory.cluster_sections import by_rule
    from clusterctl.nccl.lint import lint_settings, no_settings_finding
    from clusterctl.nccl.sources import FORMATS, Setting, read_settings

    app = app_context(ctx)
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"--format takes one of {', '.join(FORMATS)}, got {fmt!r}")
    fabric = None if fabric is None else by_rule(values.fabric_type, fabric, "--fabric")
    nvlink: bool | None = None
    gpu_nic_links: tuple[str, ...] | None = None
    if survey is not None:
        from clusterctl.nccl.lint import context_from_survey

        context = context_from_survey(survey)
        nccl_version = nccl_version or context.nccl_version
        fabric = fabric or context.fabric
        nvlink = context.nvlink
        gpu_nic_links = context.gpu_nic_links or None
        if len(context.versions_seen) > 1:
            app.warn(f"hosts run different NCCL versions ({', '.join(context.versions_seen)}); "
                     f"checking against {nccl_version}")
    from clusterctl.inputfile import read_text_input

    settings: list[Setting] = []
    unreadable: list[str] = []
    about_sources: list[Finding] = []
    for name in files:
        # One unreadable file is reported (exit 2) without stopping the check of the others.
        try:
            text, label = read_text_input(name, "nccl-settings")
            read = read_settings(text, fmt, name=label)
        except (UsageError, ParseError) as exc:
            unreadable.append(str(exc))
            continue
        settings.extend(read)
        about_sources += read.notes
        if not read:
            about_sources.append(no_settings_finding(label))
    findings = lint_settings(settings, nccl_version=nccl_version, fabric=fabric, nvlink=nvlink,
                             gpu_nic_links=gpu_nic_links, torch_version=torch_version, notes=about_sources)
    summary: dict[str, object] = {**count_by_severity(findings), "settings": len(settings), "files": files,
                                  "nccl_version": nccl_version, "fabric": fabric}
    if unreadable:
        summary["unreadable"] = unreadable
    payload = {
        "schema_version": FINDINGS_SCHEMA_VERSION,
        "findings": [f.to_json() for f in findings],
        "summary": summary,
    }

    def human() -> None:
        print_findings(app.console, findings, empty="No problems found.")
        app.say(f"{plural(len(settings), 'NCCL setting')} checked: {summary_line(findings)}", soft_wrap=False)

    # One unreadable input is a usage error (exit 2), after the others were still checked; a file read as
    # empty is never a silent pass (exit 1, its finding only a warning).
    app.emit(payload, human, errors=unreadable, inputs=len(files),
             failed=fails(findings, strict=strict) or any(f.code == "NO_SETTINGS_READ" for f in findings))
