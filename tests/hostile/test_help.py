"""Help that teaches: every option explained, nothing advertised that does not exist, and the
README's tour working exactly as written on a fresh checkout."""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer

from clusterctl.cli.app import COMMANDS, HELP, app, hoist_global_options

from .conftest import REPO


def _commands() -> list[tuple[list[str], object]]:
    found: list[tuple[list[str], object]] = []

    def walk(command: object, path: list[str]) -> None:
        found.append((path, command))
        if not hasattr(command, "list_commands"):
            return
        context = typer.Context(command)  # type: ignore[arg-type]
        for name in command.list_commands(context):
            walk(command.get_command(context, name), [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_top_level_help_lines_are_the_commands_own_help() -> None:
    """``--help`` lists commands from a table without importing them: each line must be what
    the command itself says, so the table cannot drift from the code."""
    top = typer.main.get_command(app)
    context = typer.Context(top)  # type: ignore[arg-type]
    for name, (_module, line) in COMMANDS.items():
        command = top.get_command(context, name)  # type: ignore[attr-defined]
        assert command is not None, name
        assert command.get_short_help_str(limit=1000) == line, name


def test_top_level_help_imports_no_command_module() -> None:
    code = ("import sys; sys.argv = ['clusterctl', '--help']\n"
            "from clusterctl.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.endswith('_cmd')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert "Commands:" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_every_option_and_argument_has_help() -> None:
    missing = [f"clusterctl {' '.join(path)} {param.name}"
               for path, command in _commands() for param in command.params  # type: ignore[attr-defined]
               if not getattr(param, "help", None) and param.name != "help"]
    assert missing == []


def test_every_help_fits_80_columns_and_cuts_nothing(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """At 80 columns every line of every --help fits (examples too: they are never rewrapped), a group
    lists each command's whole line (click cuts it with '...'), and an argument reads as its metavar
    says it: 'HOST...', never typer's '{HOST...}...' nor the Python type ('<list[str]>')."""
    monkeypatch.setenv("COLUMNS", "80")
    for path, _command in _commands():
        text = cli(*path, "--help").out
        assert max(len(line) for line in text.splitlines()) <= 80, (path, max(text.splitlines(), key=len))
        listed = text.partition("\nCommands:\n")[2].splitlines()
        assert not [line for line in listed if line.endswith("...")], path
        assert "{" not in text.splitlines()[0] and "<list[" not in text and "<str>" not in text, path
        assert not re.search(r"<(int|float)|RANGE", text), (path, re.findall(r".*(?:<(?:int|float)|RANGE).*", text))


def _examples(help_text: str) -> list[list[str]]:
    """The clusterctl command lines a help's examples show, as words (a line continued with '\\' joined;
    what a shell pipes into it or after it, or redirects it to, left out)."""
    joined = re.sub(r"\\\n\s*", " ", help_text)
    lines = re.findall(r"^ +(?:.*[|;] *)?clusterctl (.+)$", joined, re.MULTILINE)
    examples = []
    for words in (shlex.split(line, comments=True) for line in lines):
        cut = [i for i, word in enumerate(words) if word in ("|", ">", ";", "&&")]
        examples.append(words[:cut[0]] if cut else words)
    return examples


def _parsed_path(words: list[str]) -> list[str]:
    """The command ``clusterctl WORDS`` runs, once click has parsed every option and argument on the
    way to it as ``main`` would (global options after the command hoisted): a wrong one raises."""
    command = typer.main.get_command(app)
    context = command.make_context("clusterctl", hoist_global_options(words))
    path: list[str] = []
    while hasattr(command, "resolve_command") and (rest := [*context._protected_args, *context.args]):
        name, command, args = command.resolve_command(context, rest)
        path.append(name)
        context = command.make_context(name, args, parent=context)
    return path


def test_every_command_shows_an_example_of_itself_and_every_example_parses() -> None:
    """A newcomer reads a command's --help and copies an example: every command that runs (each leaf,
    and a group that runs on its own, as 'bootstrap') shows at least one of itself, and every example
    of every help parses as written (its options exist, its values are accepted)."""
    without = []
    for path, command in _commands():
        shown = [_parsed_path(words) for words in _examples(command.help or "")]  # type: ignore[attr-defined]
        runs = not hasattr(command, "list_commands") or command.invoke_without_command  # type: ignore[attr-defined]
        if path and runs and path not in shown:
            without.append(" ".join(path))
    assert without == []


def test_the_limit_help_lists_every_pattern_form() -> None:
    limit = next(p for p in typer.main.get_command(app).params if p.name == "limit")
    for form in ("'!x'", "'&g'", "'~regex'", "'@FILE'", "@retry"):
        assert form in (limit.help or "")


def test_top_level_help_names_only_commands_that_exist() -> None:
    existing = {path[0] for path, _ in _commands() if path}
    advertised = set(re.findall(r"^\s+clusterctl (?:-\S+ \S+ )*([a-z-]+)", HELP, re.MULTILINE))
    assert advertised and advertised <= existing


#: The tour's commands that change hosts or plan changes: on the demo each finishes its job (exit 0).
CHANGING = ("bootstrap", "upgrade", "quarantine", "undo", "reset", "tune-nccl", "copy", "remove-node")


def _tour() -> list[str]:
    """The tour's command lines. Each may end with 0 or 1 ("done, with findings", or the refusal its
    comment names), never 2: a line a user copies must not be a usage error or a refusal to act."""
    text = (REPO / "README.md").read_text()
    block = text.split("## A tour on the demo cluster", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = []
    for raw in block.splitlines():
        line = raw.partition("  #")[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def test_the_readme_tour_works_as_written_on_a_fresh_checkout(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh checkout: the repository's files, nothing any earlier run wrote.
    for name in ("inventories", "tests"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    # A fresh home: its ~/.local/state/clusterctl holds what the tour's runs keep (the undo journals it names).
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # perftest's settle time; mocks answer at once
    ran_any = 0
    for line in _tour():
        if line.startswith("export "):
            name, value = line[len("export "):].split("=", 1)
            monkeypatch.setenv(name, value)
            continue
        if "|" in line:
            continue  # 'nvidia-smi topo -m | clusterctl ...' needs a GPU host
        words = [w for part in map(os.path.expanduser, shlex.split(line))  # as a shell expands ~ and *
                 for w in (sorted(glob.glob(part)) if "*" in part else [part])]
        assert words[0] == "clusterctl"
        ran = cli(*words[1:])
        # What changes hosts, and its previews, finish the job on the demo: exit 1 there would be a step that failed.
        changing = set(words[1:4]) & set(CHANGING)  # the command, after any global option and its value
        assert ran.code in ((0,) if changing else (0, 1)), f"{line}\n{ran.err}"
        assert "internal error" not in ran.err and "Traceback" not in ran.err, line
        ran_any += 1
    assert ran_any >= 15
    assert os.path.isfile("runs/after/results.json")
