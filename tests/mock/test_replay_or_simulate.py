"""A profile replays its recordings alone unless it says `simulate: true`; then the simulated tools answer too."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.errors import UsageError
from clusterctl.inventory.model import Host
from clusterctl.mock.profile import forget_profiles, load_profile
from clusterctl.mock.transport import MockTransport

RECORDED = """\
hostname: gpu-r1
files:
  /etc/os-release: os-release.txt
commands:
  - match: "systemctl is-active ssh"
    stdout_text: "active\\n"
"""


def _host(tmp_path: Path, text: str) -> MockTransport:
    folder = tmp_path / "profile"
    folder.mkdir()
    (folder / "profile.yaml").write_text(text)
    (folder / "os-release.txt").write_text('PRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    host = Host(name="gpu-r1", transport="mock", profile=str(folder), mock_state=str(tmp_path / "state"))
    return MockTransport(host)


def test_a_recorded_profile_answers_only_with_its_recordings(tmp_path: Path) -> None:
    host = _host(tmp_path, RECORDED)
    assert host.run("systemctl is-active ssh").stdout == "active\n"
    # Not recorded: "not found", as on a host without the tool, never the simulation's answer.
    for command in ("systemctl is-active containerd", "apt-get update", "sysctl -n vm.swappiness"):
        result = host.run(command)
        assert result.exit_code == 127 and "not found" in result.stderr, command
    assert host.run("command -v systemctl").exit_code == 0  # the recorded tool is there
    assert host.run("command -v apt-get").exit_code == 1
    # The host's files are still its files.
    assert "Ubuntu 22.04" in host.run("cat /etc/os-release").stdout
    host.put("/etc/motd", b"hello\n")
    assert host.run("cat /etc/motd").stdout == "hello\n"


def test_simulate_true_lets_the_stateful_tools_answer_what_no_rule_does(tmp_path: Path) -> None:
    host = _host(tmp_path, RECORDED + "simulate: true\nmachine:\n  services:\n    containerd: {active: true}\n")
    assert host.run("systemctl is-active ssh").stdout == "active\n"  # the recording still wins
    assert host.run("systemctl is-active containerd").stdout == "active\n"
    host.run("systemctl stop containerd")
    assert host.run("systemctl is-active containerd").stdout == "inactive\n"


def test_a_machine_section_without_simulate_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "profile.yaml").write_text("machine:\n  kernel: 5.15.0-113-generic\n")
    with pytest.raises(UsageError, match="simulate: true"):
        load_profile(str(folder))
    (folder / "profile.yaml").write_text("simulate: yes-please\n")
    forget_profiles()
    with pytest.raises(UsageError, match="field 'simulate': not a mock profile: text where true or false belongs"):
        load_profile(str(folder))


def test_a_profile_that_is_not_yaml_is_refused_in_one_line_naming_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "profile.yaml").write_text("simulate: true\nmachine:\n  kernel: 5.15\n bad: x\n")
    with pytest.raises(UsageError) as caught:
        load_profile(str(tmp_path))
    assert str(caught.value) == (f"{tmp_path / 'profile.yaml'}:4: not valid YAML: expected <block end>, but found "
                                 "'<block mapping start>' (while parsing a block mapping that started at line 1) "
                                 "at column 2")


def test_simulate_is_inherited_and_can_be_turned_off(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "profile.yaml").write_text("simulate: true\n")
    child = tmp_path / "child"
    child.mkdir()
    (child / "profile.yaml").write_text("extends: ../base\n")
    assert load_profile(str(child)).simulate
    (child / "profile.yaml").write_text("extends: ../base\nsimulate: false\n")
    forget_profiles()
    assert not load_profile(str(child)).simulate


def test_profiles_that_extend_each_other_in_a_circle_are_refused_naming_the_circle(tmp_path: Path) -> None:
    """A circle of ``extends`` (even a profile extending itself) is named, not "JSON nested too deep"."""
    for name, parent in (("a", "../b"), ("b", "../a"), ("self", ".")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "profile.yaml").write_text(f"extends: {parent}\n")
    a, b = tmp_path / "a", tmp_path / "b"
    with pytest.raises(UsageError) as caught:
        load_profile(str(a))
    assert str(caught.value) == (f"{b / 'profile.yaml'}: field 'extends': not a mock profile: the profiles extend "
                                 f"each other in a circle: {a} -> {b} -> {a}.")
    with pytest.raises(UsageError, match=r"field 'extends': .* in a circle: (\S+)self -> \1self\.$"):
        load_profile(str(tmp_path / "self"))
