"""``clusterctl record`` as one call: real hosts into mock profiles a team can replay in its CI.

Runs every read-only fact command clusterctl knows (``record_commands``: survey's facts and
their fallbacks, bootstrap's preflight node facts, ``hostname``) on each host through the
normal transport, and writes::

    OUT/inventory.yaml               the same hosts (names, roles, racks, fabric, stack pin),
                                     transport: mock, each pointing at its profile
    OUT/profiles/<host>/profile.yaml one exact-match rule per command, outputs beside it
    OUT/README.md                    when, from where, with which clusterctl, which commands

Nothing that changes a host is ever run: the command list is fixed here, read-only by
construction (no ``put``, no gate). ``--redact`` replaces IPv4 addresses, MAC addresses,
UUIDs, InfiniBand GUIDs and serial numbers consistently (the same original always becomes
the same stand-in, across hosts and files), in outputs and in the inventory.
"""

from __future__ import annotations

import datetime
import platform
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from clusterctl import __version__
from clusterctl.facts.node import NODE_FACTS
from clusterctl.facts.survey_facts import SURVEY_FACTS
from clusterctl.health.probe import recorded_commands
from clusterctl.record.redact import Redactor
from clusterctl.transport.base import TransportError

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import CommandResult, Transport

#: Per-command limit while recording (a hung tool must not eat the host's deadline).
COMMAND_TIMEOUT_S = 30.0


def record_commands() -> list[tuple[str, bool]]:
    """(command line, needs sudo) of every read-only fact clusterctl runs, in a stable order."""
    found: list[tuple[str, bool]] = [("hostname", False)]
    todo: list[Any] = [*SURVEY_FACTS, NODE_FACTS]
    while todo:
        fact = todo.pop(0)
        if (fact.command, fact.sudo) not in found:
            found.append((fact.command, fact.sudo))
        todo[0:0] = list(fact.fallbacks)
    # clusterctl health's level-0 probes: a replayed host then answers 'clusterctl health' too.
    found += [(command, False) for command in recorded_commands() if (command, False) not in found]
    return found


def record_host(transport: Transport, commands: Sequence[tuple[str, bool]]) -> dict[str, CommandResult]:
    """Run each read-only command once: the command as sent -> its result; a command that fails is recorded with
    its failure."""
    found: dict[str, CommandResult] = {}
    for command, sudo in commands:
        try:
            result = transport.run(command, sudo=sudo, timeout=COMMAND_TIMEOUT_S)
        except TransportError as exc:
            if exc.kind.value == "timed out":
                continue  # a tool that hangs is left out: the replayed host answers "not found"
            raise
        found[command] = result
    return found


def _file_name(index: int, command: str) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", "-", " ".join(shlex.split(command)[:3]) if command else "cmd").strip("-")
    return f"{index:02d}-{words[:40] or 'cmd'}.txt"


def write_profile(folder: Path, host_name: str, recorded: dict[str, CommandResult], redactor: Redactor) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rules: list[dict[str, Any]] = []
    hostname = None
    for index, (command, item) in enumerate(recorded.items(), 1):
        stdout = redactor.text(item.stdout)
        if command == "hostname" and item.exit_code == 0:
            hostname = stdout.strip()
            continue
        name = _file_name(index, command)
        (folder / name).write_text(stdout)
        rule: dict[str, Any] = {"match": command, "stdout": name}
        if item.stderr:
            rule["stderr_text"] = redactor.text(item.stderr)
        if item.exit_code:
            rule["exit"] = item.exit_code
        rules.append(rule)
    profile: dict[str, Any] = {"hostname": hostname or host_name, "commands": rules}
    header = (f"# Recorded from {host_name} by 'clusterctl record'; see ../../README.md. A pure replay:\n"
              "# add 'simulate: true' to let the simulated tools answer what was not recorded.\n")
    (folder / "profile.yaml").write_text(header + yaml.safe_dump(profile, sort_keys=False, width=10_000))


def inventory_entry(host: Host, redactor: Redactor) -> dict[str, Any]:
    fabric = {k: v for k, v in {"type": host.fabric.type, "rate_gbps": host.fabric.rate_gbps,
                                 "hcas": list(host.fabric.hcas) or None}.items() if v}
    # What the host has of these, in this order; a setting it lacks is left out.
    optional = {"address": redactor.address(host.address) if host.address else None, "rack": host.rack,
                "labels": dict(host.labels), "fabric": fabric, "stack": host.stack.pinned()}
    return {"transport": "mock", "profile": f"profiles/{host.name}", "roles": list(host.roles),
            **{k: v for k, v in optional.items() if v}}


@dataclass(frozen=True)
class RecordReport:
    out: str
    hosts: list[str]
    failed: dict[str, str]
    commands: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"out": self.out, "hosts": self.hosts, "failed": self.failed, "commands": self.commands}


def record(runner: Runner, inventory: Inventory, hosts: Sequence[Host], out: Path, *, redact: bool) -> RecordReport:
    """Record ``hosts`` into ``out`` (see the module docstring)."""
    commands = record_commands()
    fleet = runner.run_task(hosts, lambda t: record_host(t, commands), label="record")
    redactor = Redactor(enabled=redact)
    done: list[str] = []
    failed: dict[str, str] = {}
    entries: dict[str, Any] = {}
    for outcome in fleet.outcomes:
        name = outcome.host.name
        if outcome.value is None:
            failed[name] = outcome.failure.describe() if outcome.failure else "failed"
            continue
        write_profile(out / "profiles" / name, name, outcome.value, redactor)
        entries[name] = inventory_entry(outcome.host, redactor)
        done.append(name)
    out.mkdir(parents=True, exist_ok=True)
    document = {"cluster": inventory.name, "hosts": entries}
    (out / "inventory.yaml").write_text(
        "# Mock replica of the recorded hosts: clusterctl -i THIS_FILE survey | tune-nccl | bootstrap plan\n"
        + yaml.safe_dump(document, sort_keys=False))
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Recorded mock hosts",
        "",
        f"- When: {when}",
        f"- From: {redactor.text(platform.node()) if redact else platform.node()} (the control machine)",
        f"- clusterctl: {__version__}",
        f"- Inventory: {Path(inventory.source).name if inventory.source else '(unknown)'}, "
        f"hosts {', '.join(done) or '(none)'}",
        "- Redacted: " + ("yes: IPv4 and MAC addresses, UUIDs, GUIDs and serial numbers replaced consistently"
                          if redact else "no"),
        "",
        "Replay: `clusterctl -i inventory.yaml survey` (or `tune-nccl`). Every profile answers these",
        "read-only commands with what the host answered (stdout, stderr, exit code) and nothing else:",
        "any other command gets `not found` (exit 127). For `bootstrap plan`, add `simulate: true` to",
        "a profile: clusterctl's simulated tools then answer what was not recorded.",
        "",
        "Commands recorded (nothing that changes a host is ever run):",
        "",
        *[f"- `{c}`" + (" (sudo)" if s else "") for c, s in commands],
    ]
    if failed:
        lines += ["", "Hosts that could not be recorded:", "", *[f"- {h}: {why}" for h, why in failed.items()]]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    return RecordReport(str(out), done, failed, [c for c, _ in commands])
