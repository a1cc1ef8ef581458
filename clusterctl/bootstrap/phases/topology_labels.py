"""topology-labels: each host's NFD local feature file, from a saved ``clusterctl survey`` report.

The file is staged under ``/etc/kubernetes/clusterctl/nfd/`` (written atomically, with a backup,
shown as a diff in plans) and published into NFD's ``features.d`` by copying it to a dot-file
there and renaming it: NFD skips dot-files, so it never reads half a file, and backups never
land where NFD would read them as features. Without ``--survey FILE`` the phase says so and
changes nothing; on a host without GPUs (``gpus: false``) it has nothing to do.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from clusterctl.bootstrap.cluster.topology_labels import (
    FEATURE_FILE,
    FEATURES_DIR,
    STAGING_PATH,
    render_feature_file,
    topology_labels,
)
from clusterctl.bootstrap.phase import GpuPhase, PhaseContext
from clusterctl.bootstrap.phases import cluster_common as cc
from clusterctl.changes import MAKES_FILE, Change
from clusterctl.findings import Finding, Severity

PUBLISHED_PATH = f"{FEATURES_DIR}/{FEATURE_FILE}"


def publish_command() -> str:
    tmp = shlex.quote(f"{FEATURES_DIR}/.{FEATURE_FILE}.tmp")
    script = f"cp {shlex.quote(STAGING_PATH)} {tmp} && chmod 644 {tmp} && mv -f {tmp} {shlex.quote(PUBLISHED_PATH)}"
    return "sh -c " + shlex.quote(script)


@dataclass
class LabelState:
    wanted: str | None
    staged: bytes | None
    published: bytes | None
    why_none: str = ""


class TopologyLabels(GpuPhase[LabelState]):
    name = "topology-labels"
    confirmable = True
    description = "NFD feature files from a saved survey: NVLink domains, fabric, lost NVLink"
    uses_cluster_settings = True

    def check(self, ctx: PhaseContext) -> LabelState:
        survey = cc.survey(ctx)
        if survey is None:
            return LabelState(None, None, ctx.reader.get(PUBLISHED_PATH, sudo=True),
                              "no saved survey given (--survey FILE)")
        saved = survey.hosts.get(ctx.host.name)
        if saved is None or not saved.reachable:
            return LabelState(None, None, None, f"the survey of {survey.generated_at} has no data for this host")
        text = render_feature_file(topology_labels(saved, ctx.host.fabric.type), survey)
        return LabelState(text, ctx.reader.get(STAGING_PATH, sudo=True), ctx.reader.get(PUBLISHED_PATH, sudo=True))

    def findings(self, ctx: PhaseContext, state: LabelState) -> list[Finding]:
        if state.wanted is None and state.published is not None:
            # Labels from an earlier run's survey stay as they are: say so, not "no labels".
            return [Finding(Severity.INFO, "TOPOLOGY_LABELS_KEPT", f"topology labels left as an earlier run "
                            f"published them ({state.why_none}); they are not refreshed", host=ctx.host.name,
                            fix="Pass --survey FILE with a current survey to refresh them.")]
        if state.wanted is None:
            return [Finding(Severity.WARNING, "NO_TOPOLOGY_LABELS", f"no topology labels: {state.why_none}",
                            host=ctx.host.name, fix="clusterctl survey --save survey.json, then bootstrap "
                            "--survey survey.json")]
        return []

    def plan(self, ctx: PhaseContext, state: LabelState) -> list[Change]:
        if state.wanted is None:
            return []
        wanted = state.wanted.encode()
        changes = [Change.write_file(ctx.host.name, STAGING_PATH, wanted, current=state.staged,
                                     summary="topology features for NFD (staged)")]
        if state.published == wanted:
            return cc.with_folders(ctx, changes)
        changes.append(Change.run(ctx.host.name, publish_command(), summary=f"publish {PUBLISHED_PATH} for NFD",
                                  undo=f"rm -f {shlex.quote(PUBLISHED_PATH)}", makes=(MAKES_FILE + PUBLISHED_PATH,)))
        return cc.with_folders(ctx, changes, [FEATURES_DIR])

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        state = self.check(ctx)
        if state.wanted is not None and state.published != state.wanted.encode():
            return [Finding(Severity.ERROR, "FEATURES_NOT_PUBLISHED", f"{PUBLISHED_PATH} differs from what was "
                            "written", host=ctx.host.name)]
        return []
