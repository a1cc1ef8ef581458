"""In-process simulated hosts take turns computing, and a slow one never holds up the others.

The turn (``clusterctl.mock.turns``) exists for speed alone: a fleet's mock hosts answer one at a
time instead of fighting for the interpreter. What users rely on is unchanged: a host whose
profile makes it slow (``delay:``) is slow on its own, inside a survey's burst of reads too.
"""

from __future__ import annotations

import threading
from pathlib import Path

from clusterctl.inventory.model import Host
from clusterctl.mock.transport import MockTransport
from clusterctl.transport.base import CommandResult

PROFILE = 'commands:\n  - match: "slow"\n    delay: 3\n    stdout_text: "late\\n"\n' \
          '  - match: "quick"\n    stdout_text: "now\\n"\n'


def _hosts(tmp_path: Path) -> tuple[MockTransport, MockTransport]:
    folder = tmp_path / "profile"
    folder.mkdir()
    (folder / "profile.yaml").write_text(PROFILE)
    state = tmp_path / "state"
    return tuple(MockTransport(Host(name=name, transport="mock", profile=str(folder)), state_folder=state)
                 for name in ("slow-host", "quick-host"))  # type: ignore[return-value]


def _start_slow(slow: MockTransport, *, burst: bool) -> tuple[threading.Thread, list[CommandResult], threading.Event]:
    answers: list[CommandResult] = []
    asked = threading.Event()

    def run() -> None:
        if burst:
            with slow.burst():
                answers.append(slow.run("quick"))
                asked.set()
                answers.append(slow.run("slow"))
        else:
            asked.set()
            answers.append(slow.run("slow"))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    asked.wait(10)
    return thread, answers, asked


def test_a_slow_simulated_host_does_not_hold_up_another(tmp_path: Path) -> None:
    slow, quick = _hosts(tmp_path)
    thread, answers, _ = _start_slow(slow, burst=False)
    # The other host answers while the slow one still waits out its 3 s delay.
    assert quick.run("quick").stdout == "now\n"
    assert thread.is_alive() and not answers
    thread.join(10)
    assert [a.stdout for a in answers] == ["late\n"]


def test_a_burst_keeps_the_turn_only_while_its_host_computes(tmp_path: Path) -> None:
    slow, quick = _hosts(tmp_path)
    thread, answers, _ = _start_slow(slow, burst=True)
    # The slow host is inside its burst, waiting out the delay: the quick one still gets its turn.
    assert quick.run("quick").stdout == "now\n"
    assert thread.is_alive() and [a.stdout for a in answers] == ["now\n"]
    thread.join(10)
    assert [a.stdout for a in answers] == ["now\n", "late\n"]
