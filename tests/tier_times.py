"""How long each test tier took (docs/testing.md), printed at the end of the run for the CI log.

Printed when ``CI`` is true (``.ci/run``) or ``CLUSTERCTL_TIER_TIMES=1``. A tier's time is the sum
of its tests' setup, call and teardown durations, so a session fixture (the real control plane)
counts in the tier of the first test that uses it; the run's wall time also includes collection.
The tier of a test is its folder's, as docs/testing.md's table assigns them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

#: (tier, what it runs against), by the first folder under tests/; every other folder is tier 2.
TIERS = {
    "facts": "tier 1, pure parsers on recorded output (tests/facts)",
    "upstream": "tier 3, real tools and control plane (tests/upstream)",
    "realnodes": "tier 4, real nodes (tests/realnodes)",
}
SIMULATED = "tier 2, simulated hosts (every other folder)"
SSHD = "tier 2, of it real sshd mock hosts (@pytest.mark.sshd)"


@dataclass
class Tally:
    seconds: float = 0.0
    tests: int = 0


def wanted() -> bool:
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes")
               for name in ("CI", "CLUSTERCTL_TIER_TIMES"))


def tier_of(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    folder = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    return TIERS.get(folder, SIMULATED)


class TierTimes:
    def __init__(self) -> None:
        self.tallies: dict[str, Tally] = {}

    def add(self, report: pytest.TestReport) -> None:
        names = [tier_of(report.nodeid)]
        if "sshd" in report.keywords:
            names.append(SSHD)
        for name in names:
            tally = self.tallies.setdefault(name, Tally())
            tally.seconds += report.duration
            tally.tests += report.when == "call"

    def lines(self) -> list[str]:
        # Tier number order (1, 2 with its sshd part, 3), whatever order the tests ran in.
        ordered = [name for name in (TIERS["facts"], SIMULATED, SSHD, TIERS["upstream"], TIERS["realnodes"])
                   if name in self.tallies]
        return [f"== {name}: {self.tallies[name].seconds:.0f}s, {self.tallies[name].tests} tests" for name in ordered]


_TIMES = TierTimes()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _TIMES.add(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if wanted() and _TIMES.tallies:
        for line in _TIMES.lines():
            terminalreporter.write_line(line)
        workers = getattr(terminalreporter.config.option, "numprocesses", None)
        if workers:
            # With -n the tiers' test times add up over the workers: the wall time is pytest's last line.
            terminalreporter.write_line(f"== (test time summed over {workers} pytest-xdist workers)")
