"""Group identical host outputs, like ``pdsh ... | dshbak -c``, in time linear in the output.

Outputs are grouped by hashing each host's whole (stdout, stderr, exit code) once; nothing is
split into lines or re-rendered, so 1,000,000 lines cost about what writing them costs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from clusterctl.hostlist import compress


@dataclass(frozen=True)
class OutputGroup:
    hosts: tuple[str, ...]
    stdout: str
    stderr: str
    exit_code: int

    @property
    def header(self) -> str:
        status = "" if self.exit_code == 0 else f" (exit {self.exit_code})"
        rule = "-" * 16
        return f"{rule}\n{compress(self.hosts)}{status}\n{rule}\n"

    def body(self) -> str:
        """Exactly what the hosts printed (stdout, then stderr), ending with one newline."""
        text = self.stdout + self.stderr
        if not text:
            return ""
        return text if text.endswith("\n") else text + "\n"


def group_outputs(outputs: Iterable[tuple[str, str, str, int]]) -> list[OutputGroup]:
    """``(host, stdout, stderr, exit_code)`` -> groups of hosts that printed the same, in first-seen order."""
    groups: dict[tuple[str, str, int], list[str]] = {}
    for host, stdout, stderr, code in outputs:
        groups.setdefault((stdout, stderr, code), []).append(host)
    return [OutputGroup(tuple(hosts), out, err, code) for (out, err, code), hosts in groups.items()]
