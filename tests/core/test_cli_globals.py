from pathlib import Path

import pytest
from clirun import DEMO, clusterctl

from clusterctl.cli.app import hoist_global_options


def test_global_options_after_the_command_are_moved_first() -> None:
    argv = ["survey", "-i", "inv.yaml", "--tp", "8", "-o", "json", "--debug"]
    assert hoist_global_options(argv) == ["-i", "inv.yaml", "-o", "json", "--debug", "survey", "--tp", "8"]


def test_nothing_after_double_dash_is_touched() -> None:
    argv = ["exec", "--limit=gpu*", "--", "ls", "-l", "-o", "x"]
    assert hoist_global_options(argv) == ["--limit=gpu*", "exec", "--", "ls", "-l", "-o", "x"]


@pytest.mark.parametrize("option", ["-o", "-l", "-i", "--timeout"])
def test_a_global_option_last_without_its_value_is_said_so(option: str) -> None:
    """'clusterctl survey -l' said "missing command" ('-i': the same; '-o': "'survey' is not one of ..."):
    the hoisted option took the command's name for its value."""
    run = clusterctl("survey", option)
    assert (run.exit_code, run.stdout) == (2, "")
    assert run.stderr == f"error: option '{option}' requires an argument.\n"


def test_a_missing_ssh_config_is_a_usage_error() -> None:
    run = clusterctl("--ssh-config", "/nonexistent/ssh_config", "inventory", "show")
    assert run.exit_code == 2
    assert "--ssh-config /nonexistent/ssh_config: no such file" in run.stderr


def test_bad_options_are_usage_errors_even_where_typer_vendors_click() -> None:
    """Recent typer releases ship click inside typer; the CLI must not need the click package."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['click'] = None\n"  # any `import click` now fails
        "from clusterctl.cli.app import main\n"
        "main(['survey', '--no-such-option'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "error: no such option: --no-such-option" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_choice_is_said_in_the_products_words_not_typers() -> None:
    """typer 0.29 said "invalid value for '-o' / '--output': Value error, 'xml' is not one of ..."."""
    run = clusterctl("-o", "xml", "survey")
    assert run.exit_code == 2
    assert "'-o' / '--output': 'xml' is not one of 'table', 'json', 'yaml'." in " ".join(run.stderr.split())


def test_help_imports_nothing_heavy() -> None:
    """``clusterctl --help`` starts fast: no SSH, YAML, rich, logging or change machinery loaded."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from clusterctl.cli.app import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ['paramiko', 'yaml', 'rich', 'jinja2', 'logging', 'clusterctl.changes', 'clusterctl.transport',"
        " 'clusterctl.fanout', 'clusterctl.findings']\n"
        "print('LOADED', [m for m in heavy if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "LOADED []" in done.stdout, done.stdout[-400:] + done.stderr[-400:]


def test_the_program_ends_with_the_commands_status_and_every_byte_of_its_output(tmp_path: Path) -> None:
    """``python -m clusterctl`` skips the interpreter's teardown (``run_program``): the exit status
    and the whole output, written to a pipe, must be exactly what the command produced."""
    import json
    import subprocess
    import sys

    inventory = tmp_path / "inv.yaml"
    inventory.write_text("cluster: here\nhosts:\n  me: {transport: local}\n")

    def program(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "clusterctl", "-i", str(inventory), *args],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)

    big = program("-o", "json", "exec", "--", "seq", "1", "200000")
    assert big.returncode == 0, big.stderr
    assert json.loads(big.stdout)["hosts"][0]["stdout"].endswith("199999\n200000\n")
    failed = program("-o", "json", "exec", "--", "false")
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["hosts"][0]["exit_code"] == 1
    usage = program("--parallel", "0", "exec", "--", "true")
    assert usage.returncode == 2 and usage.stderr.strip()


@pytest.mark.parametrize(("typo", "meant"), [("survy", "survey"), ("heath", "health"), ("bootstap", "bootstrap")])
def test_a_mistyped_command_gets_a_did_you_mean(typo: str, meant: str) -> None:
    result = clusterctl(typo)
    assert result.exit_code == 2
    assert f"no such command '{typo}'. Did you mean '{meant}'" in result.output


def test_a_subcommand_typo_is_still_answered_once() -> None:
    result = clusterctl("bootstrap", "plna")
    assert result.exit_code == 2
    assert result.output.count("Did you mean 'plan'?") == 1


# --- every number option is checked (issue 37) ------------------------------------------------


def _number_options() -> list[tuple[list[str], str, type]]:
    from typer.main import get_command

    from clusterctl.cli.app import COMMANDS, app, load_command

    found: list[tuple[list[str], str, type]] = []

    def walk(command: object, path: list[str]) -> None:
        for param in getattr(command, "params", ()):
            kind = getattr(getattr(param, "type_descriptor", None), "annotation", None)
            if kind in (int, float):
                found.append((path, max(param.opts, key=len), kind))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(get_command(app), [])  # the global options (--parallel, --timeout)
    for name in COMMANDS:
        walk(load_command(name), [name])
    return found


NUMBER_OPTIONS = _number_options()


def test_the_number_options_are_found() -> None:
    names = {(" ".join(path), option) for path, option, _ in NUMBER_OPTIONS}
    assert ("quarantine", "--drain-timeout") in names and ("remove-node", "--drain-timeout") in names
    assert ("health", "--probe-timeout") in names and ("", "--timeout") in names
    assert len(names) > 25


@pytest.mark.parametrize(("path", "option", "kind"), NUMBER_OPTIONS,
                         ids=[f"{' '.join(p) or 'global'} {o}" for p, o, _ in NUMBER_OPTIONS])
def test_every_number_option_refuses_nan_inf_and_values_below_its_range(path: list[str], option: str,
                                                                        kind: type) -> None:
    values = ["-5", "nan", "inf", "-inf"] if kind is float else ["-5", "1.5", "nan"]
    for value in values:
        result = clusterctl("-i", DEMO, *path, option, value)
        assert result.exit_code == 2, (value, result.output)
        assert option in result.stderr, (value, result.output)
        assert "Traceback" not in result.output and "internal error" not in result.output


@pytest.mark.parametrize(("args", "said"), [
    (["upgrade", "apply", "--max-unavailable", "0"], "--max-unavailable 0: out of range; give a whole number of at "
                                                     "least 1"),
    (["survey", "--tp", "0"], "--tp 0: out of range; give a whole number of at least 1"),
    (["health", "--level", "7"], "--level 7: out of range; give a whole number from 0 to 3"),
    (["bench", "ib", "--port", "70000"], "--port 70000: out of range; give a whole number from 1 to 65000"),
    (["bench", "ib", "--client-timeout", "0.01"], "--client-timeout 0.01: out of range; give a number of at least 0.1"),
    (["health", "--level", "1.5"], "--level 1.5: not a whole number; give a whole number from 0 to 3 (the default"),
    (["--parallel", "x", "health"], "--parallel x: not a number; give a whole number from 1 to 4096 (the default"),
    (["bench", "ib", "--client-timeout", "5s"], "--client-timeout 5s: not a number; give a number of at least 0.1"),
])
def test_a_value_out_of_range_or_not_a_number_of_its_kind_is_named_with_the_range_in_one_line(args: list[str],
                                                                                                said: str) -> None:
    result = clusterctl("-i", DEMO, *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.startswith(f"error: {said}") and result.stderr.count("\n") == 1


@pytest.mark.parametrize("command", [["quarantine", "gpu-a3", "--reason", "x", "--drain"], ["remove-node", "gpu-b3"],
                                     ["upgrade", "apply", "--to", "1.36.3"]])
@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0"])
def test_drain_timeouts_of_nan_inf_negative_or_zero_are_refused_before_anything_runs(command: list[str],
                                                                                     value: str) -> None:
    result = clusterctl("-i", DEMO, *command, "--drain-timeout", value, "--dry-run" if command[0] != "upgrade"
                        else "--yes")
    assert result.exit_code == 2, result.output
    assert "--drain-timeout" in result.stderr and "no working cluster" not in result.stderr


def test_text_printed_for_people_masks_a_registered_secret(capsys: pytest.CaptureFixture[str]) -> None:
    """``say``, ``note`` and ``warn`` mask a secret that reached a message (a host's answer quoting a join
    token), as ``-o json`` output does."""
    from clusterctl.cli.context import AppContext
    from clusterctl.secret import MASK, Secret

    Secret("abcdef.0123456789abcdef")
    app = AppContext()
    app.say("FAILED gpu-b1: kubeadm join --token abcdef.0123456789abcdef", err=True)
    app.say("kubeadm join --token abcdef.0123456789abcdef", soft_wrap=False)
    app.note("token abcdef.0123456789abcdef")
    app.warn("token abcdef.0123456789abcdef")
    out, err = capsys.readouterr()
    assert "0123456789abcdef" not in out + err
    assert (out + err).count(MASK) == 4
