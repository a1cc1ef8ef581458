"""Answer one command from a mock profile, as a real program on a real (sshd) mock host.

The integration-test fixture puts a small wrapper per tool in each mock host's ``bin/``
(``nvidia-smi``, ``ib_write_bw``...) that runs::

    python -m clusterctl.transport.replay --profile DIR --state FILE -- TOOL ARGS...

It rebuilds the command line, picks the first matching rule exactly as ``MockTransport``
does (same loader, same ``Rule.matches``), waits the rule's delay, prints its stdout and
stderr, remembers its ``set_state`` in ``FILE`` (shared by every command of that host) and
exits with its exit code. A command no rule matches runs the machine's real program of that
name when the wrapper names one (``--fallback``), else exits 127 like a missing tool.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.transport.mock import Rule, load_profile

#: Exit code for a rule that simulates a transport failure (what ssh itself returns).
SIMULATED_FAILURE_EXIT = 255


def command_lines(argv: Sequence[str]) -> list[str]:
    """The command lines the caller may have typed for this argv, most literal first.

    Rules are written as the user types them (``nvidia-smi topo -m``); arguments that needed
    quoting are tried both quoted and bare, since the shell removed the quotes.
    """
    quoted = shlex.join(argv)
    bare = " ".join(argv)
    return [quoted] if quoted == bare else [quoted, bare]


@dataclass
class HostState:
    """What a mock host remembers between commands: ``set_state`` values and answer counts."""

    values: dict[str, str] = field(default_factory=dict)
    #: Rule index -> how many times it answered (rules with several outputs cycle through them).
    answers: dict[str, int] = field(default_factory=dict)


def _decode_state(text: str) -> HostState:
    try:
        data = json.loads(text or "{}")
    except ValueError:
        return HostState()
    if not isinstance(data, dict):
        return HostState()
    raw_values, raw_answers = data.get("state"), data.get("answers")
    values: dict[str, object] = raw_values if isinstance(raw_values, dict) else {}
    answers: dict[str, object] = raw_answers if isinstance(raw_answers, dict) else {}
    return HostState(
        {str(k): str(v) for k, v in values.items()},
        {str(k): int(str(v)) for k, v in answers.items() if str(v).isdigit()},
    )


def read_state(path: Path) -> HostState:
    try:
        return _decode_state(path.read_text())
    except OSError:
        return HostState()


def record_answer(path: Path, rule_index: int, changes: Sequence[tuple[str, str]]) -> int:
    """Count the rule's answer and merge its ``set_state``, under a lock; return its earlier count.

    Several commands of one host may run at once, so the file is read and written while
    holding an exclusive lock.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0)
            state = _decode_state(fh.read())
            count = state.answers.get(str(rule_index), 0)
            state.answers[str(rule_index)] = count + 1
            state.values.update(dict(changes))
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps({"state": state.values, "answers": state.answers}, sort_keys=True))
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    return count


def find_rule(rules: Sequence[Rule], argv: Sequence[str], state: dict[str, str]) -> int | None:
    """Index of the first rule matching the command line (as ``MockTransport`` picks it)."""
    lines = command_lines(argv)
    for index, rule in enumerate(rules):
        if any(rule.matches(line, state) for line in lines):
            return index
    return None


def replay(profile_dir: str, state_file: str, argv: Sequence[str], fallback: str | None = None) -> int:
    profile = load_profile(profile_dir)
    state_path = Path(state_file)
    index = find_rule(profile.rules, argv, read_state(state_path).values)
    if index is None:
        if fallback:
            # A real tool of the machine (cat, systemctl...) answers what the profile does not.
            os.execv(fallback, [fallback, *argv[1:]])
        tool = argv[0] if argv else ""
        sys.stderr.write(f"sh: 1: {tool}: not found\n")
        return 127
    rule = profile.rules[index]
    if rule.delay_s:
        time.sleep(rule.delay_s)
    if rule.fail:
        sys.stderr.write(f"simulated failure: {rule.fail}\n")
        return SIMULATED_FAILURE_EXIT
    count = record_answer(state_path, index, rule.set_state)
    sys.stdout.write(rule.stdouts[count % len(rule.stdouts)])
    sys.stderr.write(rule.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    return rule.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusterctl.transport.replay", description=__doc__)
    parser.add_argument("--profile", required=True, help="mock profile folder (with profile.yaml)")
    parser.add_argument("--state", required=True, help="JSON file holding the host's state")
    parser.add_argument("--fallback", help="real program to run when no rule matches (else exit 127)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- TOOL ARGS...")
    args = parser.parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.error("no command given after --")
    return replay(args.profile, args.state, command, args.fallback)


if __name__ == "__main__":
    sys.exit(main())
