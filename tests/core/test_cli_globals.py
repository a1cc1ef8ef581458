from clusterctl.cli.app import hoist_global_options


def test_global_options_after_the_command_are_moved_first() -> None:
    argv = ["survey", "-i", "inv.yaml", "--tp", "8", "-o", "json", "--debug"]
    assert hoist_global_options(argv) == ["-i", "inv.yaml", "-o", "json", "--debug", "survey", "--tp", "8"]


def test_nothing_after_double_dash_is_touched() -> None:
    argv = ["exec", "--limit=gpu*", "--", "ls", "-l", "-o", "x"]
    assert hoist_global_options(argv) == ["--limit=gpu*", "exec", "--", "ls", "-l", "-o", "x"]


def test_a_missing_ssh_config_is_a_usage_error(capsys) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from clusterctl.cli.app import main

    with pytest.raises(SystemExit) as exited:
        main(["--ssh-config", "/nonexistent/ssh_config", "inventory", "show"])
    assert exited.value.code == 2
    assert "--ssh-config /nonexistent/ssh_config: no such file" in capsys.readouterr().err
