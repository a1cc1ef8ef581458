"""Answer one program call on a real (sshd) mock host, from its profile and the simulated tools.

The integration-test fixture puts a small wrapper per tool in each sshd mock host's ``bin/``
(``nvidia-smi``, ``ib_write_bw``, ``systemctl``, ``apt-get``...) that runs::

    python -m clusterctl.mock.replay --profile DIR --state-dir DIR --host NAME -- TOOL ARGS...

It answers exactly as the in-process ``MockTransport`` does, from the same state folder
(``clusterctl.mock.machine.MockMachine.run_argv``): the first matching profile rule (its
delay, ``set_state``, ``skip``/``times`` honoured), else the simulated tool, else the
machine's real program of that name when the wrapper names one (``--fallback``), else exit
127 like a missing tool. A rule's ``fail:`` exits 255, what ssh itself returns.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from clusterctl.mock.machine import MockMachine, SimulatedFailure, command_lines
from clusterctl.mock.profile import load_profile
from clusterctl.mock.tools import tool_module

#: Exit code for a rule that simulates a transport failure (what ssh itself returns).
SIMULATED_FAILURE_EXIT = 255


def replay(profile_dir: str, state_dir: str, host: str, argv: Sequence[str], fallback: str | None = None) -> int:
    machine = MockMachine.open(load_profile(profile_dir), state_dir, host, shell_builtins=False)
    argv = list(argv)
    try:
        answer = machine.answer_rule(command_lines(tuple(argv)))
    except SimulatedFailure as exc:
        sys.stderr.write(f"simulated failure: {exc.kind}\n")
        return SIMULATED_FAILURE_EXIT
    if answer is None:
        module = tool_module(argv[0]) if argv else None
        # Only tools that read their input wait for it: an ssh session's stdin may stay open.
        stdin = sys.stdin.buffer.read() if module is not None and getattr(module, "READS_STDIN", False) else b""
        answer = machine.run_tool(argv, stdin, dict(os.environ), os.getcwd())
    if answer is None:
        if fallback:
            # A real program of the machine answers what the profile and the simulation do not.
            os.execv(fallback, [fallback, *argv[1:]])
        sys.stderr.write(f"sh: 1: {argv[0] if argv else ''}: not found\n")
        return 127
    sys.stdout.write(answer.stdout)
    sys.stderr.write(answer.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    return answer.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusterctl.mock.replay", description=__doc__)
    parser.add_argument("--profile", required=True, help="mock profile folder (with profile.yaml)")
    parser.add_argument("--state-dir", required=True, help="the mock cluster's state folder")
    parser.add_argument("--host", required=True, help="the host's name in that state folder")
    parser.add_argument("--fallback", help="real program to run when nothing simulated answers (else exit 127)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- TOOL ARGS...")
    args = parser.parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.error("no command given after --")
    return replay(args.profile, args.state_dir, args.host, command, args.fallback)


if __name__ == "__main__":
    sys.exit(main())
