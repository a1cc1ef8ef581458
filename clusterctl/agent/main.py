"""The command line the node runs: ``python3 clusterctl-node.pyz node-agent --config FILE``.

The systemd service bootstrap installs (``clusterctl-node-agent.service``, started by its timer)
runs it, and ``slurm-health`` is Slurm's ``HealthCheckProgram`` (through the script
``/usr/local/sbin/clusterctl-slurm-health`` bootstrap writes, since Slurm passes no arguments).
It needs only Python 3.10+ on the node (the bundle carries clusterctl's checks and
``prometheus-client``, ``bundle.py``), not clusterctl's own command line and its libraries. The
config file is JSON written by bootstrap: ``{"node": ..., "kubeconfig": ..., "textfile_dir": ...,
"since": ..., "probe_timeout_s": ..., "fabric": {...}}`` (the inventory's ``fabric`` of this host, where it
gives a rate: what its ports are held to); flags given on the command line win over it.

Exit 0 when the run published what it found (whatever the host's health: a finding is news, not
a failure of the agent), 1 when the conditions or the metrics could not be written (``systemctl
status`` then shows the unit failed), 2 for a bad command line or config.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.errors import BadValue, ClusterctlError, UsageError
from clusterctl.health.model import SLURM_CHECK_DEADLINE_S, since_seconds
from clusterctl.inventory import values
from clusterctl.terminal_text import one_line

if TYPE_CHECKING:
    from clusterctl.transport.base import Transport

CONFIG_PATH = "/etc/clusterctl/node-agent.json"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clusterctl-node", description="clusterctl's checks run on this node.")
    sub = parser.add_subparsers(dest="command", required=True)
    agent = sub.add_parser("node-agent", help="One run of the node health agent (what its systemd timer starts): "
                           "level-0 checks, NodeConditions on this node, node-exporter textfile metrics.")
    agent.add_argument("--config", default=CONFIG_PATH, help=f"JSON written by bootstrap (default {CONFIG_PATH}).")
    check = _setting_checks()
    agent.add_argument("--node", type=_flag(check["node"]), help="This host's Kubernetes node name.")
    agent.add_argument("--kubeconfig", type=_flag(check["kubeconfig"]),
                       help="The agent's kubeconfig (its node's ServiceAccount).")
    agent.add_argument("--textfile-dir", dest="textfile_dir", type=_flag(check["textfile_dir"]),
                       help="node-exporter's textfile collector folder.")
    agent.add_argument("--since", type=_flag(check["since"]), help="Kernel log window (30m, 1h).")
    agent.add_argument("--probe-timeout", dest="probe_timeout_s", type=_flag(check["probe_timeout_s"]),
                       help="Limit per probe, seconds.")
    slurm = sub.add_parser("slurm-health", help="Slurm's HealthCheckProgram, prolog or epilog: level-0 checks "
                           "within --deadline; on failure drain this node with a 'clusterctl: ' reason and exit 1; "
                           "when healthy resume it only if clusterctl drained it.")
    slurm.add_argument("--config", default=CONFIG_PATH,
                       help=f"The node agent's JSON, for this host's fabric (default {CONFIG_PATH}).")
    slurm.add_argument("--node", type=_flag(check["node"]),
                       help="The Slurm node name (default: this host's short name).")
    deadline = _flag(lambda v: values.positive_number(v, "--deadline"))
    slurm.add_argument("--deadline", type=deadline, default=SLURM_CHECK_DEADLINE_S,
                       help=f"Bound of the whole check, seconds (default {SLURM_CHECK_DEADLINE_S:g}).")
    slurm.add_argument("--since", type=_flag(check["since"]), default="1h", help="Kernel log window (default 1h).")
    return parser


def slurm_health(args: argparse.Namespace, transport: Transport) -> int:
    from clusterctl.agent.slurm_check import SlurmCheckOptions, run_slurm_check

    fabric = _config(transport, args.config).get("fabric")
    check = run_slurm_check(transport, SlurmCheckOptions(node=args.node, deadline_s=args.deadline, since=args.since,
                                                         fabric=fabric))
    # Both quote the cluster (scontrol's reasons and errors, the health reason): shown as text, never as control.
    print(one_line(check.message), file=sys.stderr if check.exit_code else sys.stdout)
    for problem in check.problems:
        print(f"ERROR: clusterctl: {one_line(problem)}", file=sys.stderr)
    return check.exit_code


def local_transport() -> Transport:
    from clusterctl.inventory.model import Host
    from clusterctl.transport.local import LocalTransport

    return LocalTransport(Host(name=socket.gethostname(), address="localhost", transport="local"))


def _setting_checks() -> dict[str, Callable[[Any], Any]]:
    """Each setting's check, the same for the config file and the command line: the inventory's readers."""
    def since(value: Any) -> str:
        try:
            since_seconds(values.text(value, "since"), "since")
        except UsageError as exc:
            raise BadValue(exc.message) from None
        return str(value)

    return {"node": lambda v: values.host_name(v, "node"), "kubeconfig": lambda v: values.text(v, "kubeconfig"),
            "textfile_dir": lambda v: values.text(v, "textfile_dir"), "since": since,
            "probe_timeout_s": lambda v: values.positive_number(v, "probe_timeout_s")}


def _flag(check: Callable[[Any], Any]) -> Callable[[str], Any]:
    """An argparse ``type`` that applies ``check``: a wrong flag is argparse's usage error (exit 2)."""

    def convert(text: str) -> Any:
        try:
            return check(text)
        except BadValue as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    return convert


def _config(transport: Transport, path: str) -> dict[str, Any]:
    """The settings of the config file ``path`` (none when there is no file; a null is a setting left out),
    each checked as the inventory's values are: a wrong one is an ``InventoryError`` naming the file, its
    line and the field."""
    from clusterctl.inventory.native import read_fabric
    from clusterctl.inventory.node_reader import NodeReader
    from clusterctl.inventory.yaml_tree import Mapping, Node, is_empty, parse_json

    data = transport.get(path)
    if data is None:
        return {}
    reader = NodeReader(path, Path(path).parent)
    try:
        root = parse_json(data.decode("utf-8"), path)
    except UnicodeDecodeError as exc:
        raise reader.error(f"this is not UTF-8 text ({exc.reason} at byte {exc.start}).", None) from None

    def setting(convert: Callable[[Any], Any]) -> Callable[[Node, str], Any]:
        return lambda node, field: None if is_empty(node) else reader.scalar(node, field, convert)

    readers = {key: setting(check) for key, check in _setting_checks().items()}
    # The inventory's fabric section of this host, as bootstrap wrote it: what a port's rate is held to.
    readers["fabric"] = lambda node, field: None if is_empty(node) else read_fabric(path, node, field)
    settings = reader.fields(root or Mapping((), 1), "", readers, what="node agent settings")
    return {key: value for key, value in settings.items() if value is not None}


def node_agent(args: argparse.Namespace, transport: Transport) -> int:
    from clusterctl.agent.run import AgentOptions, run_once

    settings = _config(transport, args.config)
    settings.update({k: getattr(args, k) for k in _setting_checks() if getattr(args, k) is not None})
    if not settings.get("node"):
        print(f"clusterctl-node: no node name: give --node or put \"node\" in {args.config}", file=sys.stderr)
        return 2
    options = AgentOptions(**settings)
    run = run_once(transport, options)
    # One line for the journal: the verdict and each condition as status/reason.
    summary = {"node": options.node, "verdict": run.health.verdict.value, "reason": run.health.reason[:300],
               "conditions": {c["type"]: f"{c['status']}/{c['reason']}" for c in run.conditions},
               "conditions_published": run.published, "duration_s": round(run.duration_s, 3)}
    print(json.dumps(summary, sort_keys=True))
    for problem in run.problems:  # the API server's or kubectl's words: shown as text, never as control
        print(f"clusterctl-node: {one_line(problem)}", file=sys.stderr)
    return 1 if run.problems else 0


def main(argv: Sequence[str] | None = None, transport: Callable[[], Transport] = local_transport) -> int:
    """Parse ``argv`` and run on ``transport()`` (this machine; the simulated systemd passes a mock host's)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    try:
        return {"node-agent": node_agent, "slurm-health": slurm_health}[args.command](args, transport())
    except ClusterctlError as exc:  # a bad config or option: one paragraph, as clusterctl's own errors
        # It may quote the file (an unknown key): shown as text, as clusterctl's error printer does.
        print(f"clusterctl-node: {one_line(str(exc))}", file=sys.stderr)
        return int(exc.exit_code)


if __name__ == "__main__":
    raise SystemExit(main())
