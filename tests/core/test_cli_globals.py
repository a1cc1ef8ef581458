from clusterctl.cli.app import hoist_global_options


def test_global_options_after_the_command_are_moved_first() -> None:
    argv = ["survey", "-i", "inv.yaml", "--tp", "8", "-o", "json", "--debug"]
    assert hoist_global_options(argv) == ["-i", "inv.yaml", "-o", "json", "--debug", "survey", "--tp", "8"]


def test_nothing_after_double_dash_is_touched() -> None:
    argv = ["exec", "--limit=gpu*", "--", "ls", "-l", "-o", "x"]
    assert hoist_global_options(argv) == ["--limit=gpu*", "exec", "--", "ls", "-l", "-o", "x"]
