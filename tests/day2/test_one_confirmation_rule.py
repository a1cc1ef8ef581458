"""One rule for confirming changes (``clusterctl/cli/confirm.py``; CONTRIBUTING.md, "Confirming changes").

Every command of the app is listed here as changing hosts or not; the list is checked against the
commands the app registers, so a new command cannot escape. Each command that changes hosts, on
the bootstrapped demo cluster:

- off a terminal, without --yes or CLUSTERCTL_YES: exit 2 before anything changes, naming --yes,
  CLUSTERCTL_YES and the command that previews the change;
- at a terminal: one question, default no; "n" changes nothing and exits 2;
- CLUSTERCTL_YES=1 (as --yes): no question, the change is made;
- --dry-run: no question even off a terminal; it shows the plan, says "nothing was changed" and
  leaves every host byte for byte as it was.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from clirun import REPO_ROOT, CliRun, clusterctl
from day2_helpers import DEMO, DEMO_SURVEY
from host_state import assert_hosts_unchanged

from clusterctl.cli.app import COMMANDS, load_command


@dataclass(frozen=True)
class Changing:
    """A command that changes hosts, as run on the bootstrapped demo (``{tmp}``, ``{journal}`` filled in)."""

    args: tuple[str, ...]
    #: Run first (with --yes): what makes the command meaningful (a quarantined node to release).
    before: tuple[str, ...] = ()
    #: A server that runs until stopped: only the refusal and the "no" are tried.
    serves: bool = False
    #: Exit codes of a run that went through (a release whose checks fail exits 1).
    done_codes: tuple[int, ...] = (0,)
    prepare: Callable[[Path], None] = field(default=lambda _: None)


def _source(tmp: Path) -> None:
    (tmp / "nccl.conf").write_text("NCCL_DEBUG=WARN\n")


CHANGING: dict[str, Changing] = {
    "copy": Changing(("-l", "gpu-a1", "copy", "{tmp}/nccl.conf", "/etc/nccl.conf"), prepare=_source),
    "tune-nccl": Changing(("tune-nccl", "--survey", str(DEMO_SURVEY), "--push")),
    "bootstrap": Changing(("bootstrap", "--survey", str(DEMO_SURVEY), "--state-dir", "{tmp}/state")),
    "bootstrap phase": Changing(("bootstrap", "phase", "kernel", "--state-dir", "{tmp}/state")),
    "upgrade apply": Changing(("upgrade", "apply", "--to", "1.36.3", "--state-dir", "{tmp}/state",
                               "--ready-timeout", "2")),
    "upgrade phase": Changing(("upgrade", "phase", "uncordon", "--to", "1.36.3", "--state-dir", "{tmp}/state")),
    "remove-node": Changing(("remove-node", "gpu-b3")),
    "certs renew": Changing(("certs", "renew", "--restart-wait", "1")),
    "reset": Changing(("-l", "gpu-b3", "reset", "--state-dir", "{tmp}/state")),
    "undo": Changing(("undo", "{journal}"), before=("quarantine", "gpu-a2", "--reason", "test")),
    "quarantine": Changing(("quarantine", "gpu-a2", "--reason", "test", "--drain")),
    "release": Changing(("release", "gpu-a2", "--level", "0"), before=("quarantine", "gpu-a2", "--reason", "test")),
    "health": Changing(("health", "--quarantine"), done_codes=(1,)),
    "remediate serve": Changing(("remediate", "serve", "--listen", "127.0.0.1:0"), serves=True),
}

#: Commands that find the bootstrapped demo as they would leave it: nothing to change, no journal.
CONVERGED = {"bootstrap", "bootstrap phase"}

#: Commands that change hosts the demo cannot stand for, and where the rule is run on them (the
#: structural checks below hold them too: --yes, --dry-run, confirm.py only).
CHANGING_ELSEWHERE = {
    # Their dry runs: tests/core/test_dry_runs_change_nothing.py (heal and power, on the Redfish emulator).
    "power on": "tests/bmc/test_power.py, on a Redfish emulator (the demo has no BMC)",
    "power off": "tests/bmc/test_power.py, on a Redfish emulator (the demo has no BMC)",
    "power cycle": "tests/bmc/test_power.py, on a Redfish emulator (the demo has no BMC)",
    "heal": "tests/heal/test_heal_demo.py, on a bootstrapped demo with a quarantined host and a Redfish emulator",
}

#: Commands that change no host, and why.
NOT_CHANGING = {
    "inventory show": "reads the inventory", "inventory check": "reads the inventory",
    "exec": "runs the command line typed after it, as ssh and pdsh do: that line is its own confirmation",
    "survey": "reads", "health compare": "reads saved files", "health read": "reads pasted logs",
    "topo show": "reads a matrix", "bench ib": "measures; its servers and files are temporary, cleaned up",
    "bench nccl": "measures; its files are temporary, cleaned up", "bench report": "reads saved files",
    "bench compare": "reads saved files", "nccl lint": "reads settings files",
    "bootstrap plan": "plans", "bootstrap phases": "lists", "bootstrap artifacts": "lists",
    "upgrade plan": "plans", "upgrade phases": "lists", "certs check": "reads", "status": "reads",
    "remediate alertmanager-config": "prints a configuration", "record": "reads hosts, writes local files",
    "mock show": "the simulator's own files", "mock reset": "the simulator's own files on this machine",
    "power status": "reads the power state through the BMC",
    "dashboards": "surveys (reads) and writes dashboard files on this machine",
    "mock set": "a mock host's simulated state (a fault to replay), on this machine",
    "mock timers": "fires a mock host's simulated timers: the simulator's clock, on this machine",
}


def _leaves(command: object, path: list[str]) -> Iterator[tuple[str, object]]:
    subs = getattr(command, "commands", None)
    if not subs or getattr(command, "invoke_without_command", False):
        yield " ".join(path), command
    for name, sub in (subs or {}).items():
        yield from _leaves(sub, [*path, name])


def _all_commands() -> dict[str, object]:
    return {name: cmd for top in COMMANDS for name, cmd in _leaves(load_command(top), [top])}


def _options(command: object) -> set[str]:
    return {o for p in getattr(command, "params", []) for o in getattr(p, "opts", [])}


def test_every_command_of_the_app_is_listed_and_every_changing_one_has_yes_and_dry_run() -> None:
    found = _all_commands()
    listed = set(CHANGING) | set(CHANGING_ELSEWHERE) | set(NOT_CHANGING)
    assert sorted(set(found) - listed) == [], "new commands: list each in CHANGING (it confirms through " \
        "cli/confirm.py) or NOT_CHANGING (with why) in tests/day2/test_one_confirmation_rule.py"
    assert sorted(listed - set(found)) == [], "commands listed here that the app no longer has"
    for name in [*CHANGING, *CHANGING_ELSEWHERE]:
        assert {"--yes", "--dry-run"} <= _options(found[name]), name
    # Every command that journals its changes takes the one --state-dir, and undo (--last, --list) reads it.
    state_dirs = {n: next((p.help for p in getattr(found[n], "params", []) if "--state-dir" in p.opts), None)
                  for n in [*CHANGING, *CHANGING_ELSEWHERE]}
    assert len(set(state_dirs.values())) == 1 and None not in state_dirs.values(), state_dirs
    # --yes on a command that changes nothing would promise a question that never comes.
    assert [n for n in NOT_CHANGING if "--yes" in _options(found[n])] == []


#: Commands whose --yes says more than the one wording: it only acts with another option, or at start.
YES_SAYS_MORE = {"health": "With --quarantine:", "tune-nccl": "With --push:", "remediate serve": "Act on alerts"}


def test_yes_reads_the_same_on_every_command() -> None:
    found = _all_commands()
    helps = {name: next(p.help for p in getattr(found[name], "params", []) if "--yes" in p.opts)
             for name in [*CHANGING, *CHANGING_ELSEWHERE]}
    for name, prefix in YES_SAYS_MORE.items():
        assert helps.pop(name).startswith(prefix), name
    assert set(helps.values()) == {"Change without asking (required off a terminal; CLUSTERCTL_YES=1 does the same)."}


def test_only_the_rule_module_asks_or_looks_for_a_terminal() -> None:
    package = REPO_ROOT / "clusterctl"
    asking = [str(p.relative_to(package)) for p in package.rglob("*.py")
              if re.search(r"\b(typer|click)\.confirm\(|stdin\.isatty\(\)|CLUSTERCTL_YES\b", p.read_text())
              and p.name != "confirm.py"]
    # credentials.py asks for secrets (never a yes/no); docstrings may name CLUSTERCTL_YES.
    code_only = [p for p in asking if p != "cli/credentials.py"
                 and re.search(r"\b(typer|click)\.confirm\(|stdin\.isatty\(\)", (package / p).read_text())]
    assert code_only == []


class _Terminal(io.StringIO):
    """A terminal whose user types ``answer``."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def demo(bootstrapped_demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    return bootstrapped_demo


def _args(case: Changing, tmp: Path) -> list[str]:
    case.prepare(tmp)
    journal = ""
    if case.before:
        done = clusterctl("-i", DEMO, "-o", "json", *case.before, "--yes")
        assert done.exit_code == 0, done.output
        journal = done.json().get("undo_journal") or ""
    return [a.format(tmp=tmp, journal=journal) for a in case.args]


def _unconfirmed(name: str, demo: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch, stdin: io.StringIO,
                 *extra: str) -> CliRun:
    """The case run without CLUSTERCTL_YES, a question reading ``stdin``; no host may change."""
    args = _args(CHANGING[name], tmp)
    monkeypatch.delenv("CLUSTERCTL_YES")
    monkeypatch.setattr("sys.stdin", stdin)
    with assert_hosts_unchanged(demo):
        return clusterctl("-i", DEMO, *args, *extra)


@pytest.mark.parametrize("name", sorted(CHANGING))
def test_off_a_terminal_it_refuses_naming_yes_and_the_preview(name: str, demo: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    done = _unconfirmed(name, demo, tmp_path, monkeypatch, io.StringIO(""))
    assert done.exit_code == 2, done.output
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "refusing without a terminal to ask" in line and "--yes" in line and "CLUSTERCTL_YES=1" in line, line
    preview = re.search(r"'(clusterctl [^']*)' shows what would change", line)
    assert preview is not None and ("--dry-run" in preview[1] or " plan" in preview[1]), line


@pytest.mark.parametrize("name", sorted(CHANGING))
def test_at_a_terminal_it_asks_and_no_changes_nothing(name: str, demo: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    done = _unconfirmed(name, demo, tmp_path, monkeypatch, _Terminal("n\n"))
    assert done.exit_code == 2, done.output
    assert re.search(r"This will .+ on \d+ hosts? \(.+\)\. Continue\? \[y/N\]", done.stderr), done.stderr
    assert "nothing changed: not confirmed" in done.stderr


@pytest.mark.parametrize("name", sorted(n for n, c in CHANGING.items() if not c.serves))
def test_clusterctl_yes_confirms_without_asking_and_the_journal_goes_to_the_state_folder(
        name: str, demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CHANGING[name]
    args = _args(case, tmp_path)
    monkeypatch.setenv("CLUSTERCTL_YES", "1")
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))  # a question would read this "n"
    done = clusterctl("-i", DEMO, *args)
    assert "Continue?" not in done.output and "not confirmed" not in done.output
    assert done.exit_code in case.done_codes, done.output
    # One place for every command's undo journals: the state folder's undo/ (CLUSTERCTL_STATE_DIR, set by
    # the fixture), where undo takes the path the command names; never the folder it ran in.
    journals = sorted((tmp_path / "state" / "undo").glob("*.json"))
    named = [Path(p) for p in re.findall(r"clusterctl undo (\S+)", done.output)]
    assert set(named) <= set(journals) and (journals or name in CONVERGED), (named, journals, done.output)
    assert not (tmp_path / "clusterctl-results" / "undo").exists()


@pytest.mark.parametrize("name", sorted(n for n, c in CHANGING.items() if not c.serves))
def test_dry_run_never_asks_and_says_nothing_was_changed(name: str, demo: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    done = _unconfirmed(name, demo, tmp_path, monkeypatch, io.StringIO(""), "--dry-run")
    assert done.exit_code in (0, 1), done.output
    assert "nothing was changed" in done.stdout, done.stdout


def test_every_readme_line_that_changes_hosts_runs_off_a_terminal() -> None:
    """The README's lines are run as written, often by a script: a line that changes hosts carries
    --yes or --dry-run, or says that it asks first (else it would stop with exit 2 unexplained)."""
    import shlex

    from clusterctl.cli.app import GLOBAL_OPTIONS

    readme = (REPO_ROOT / "README.md").read_text()
    lines = [line.strip() for line in readme.splitlines() if line.startswith("clusterctl ")]
    assert len(lines) > 40
    unsafe = []
    for line in lines:
        if "asks first" in line:
            continue
        line = line.split(" #")[0].strip()
        words = shlex.split(line.replace("*", "x"))[1:]
        plain: list[str] = []
        skip = False
        for word in words:
            if skip:
                skip = False
            elif word in GLOBAL_OPTIONS:
                skip = GLOBAL_OPTIONS[word]
            else:
                plain.append(word)
        known = set(CHANGING) | set(CHANGING_ELSEWHERE) | set(NOT_CHANGING)
        name = next((n for n in (" ".join(plain[:2]), " ".join(plain[:1])) if n in known), "")
        changing = name in {*CHANGING, *CHANGING_ELSEWHERE} and (name != "health" or "--quarantine" in words) and (
            name != "tune-nccl" or "--push" in words)
        if changing and not {"--yes", "--dry-run"} & set(words):
            unsafe.append(line)
    assert unsafe == []
