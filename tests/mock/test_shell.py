"""The mock shell runs what clusterctl sends as sh would, and refuses what it cannot run."""

from __future__ import annotations

from pathlib import Path

from test_simulated_tools import node


def test_lists_pipes_conditionals_and_redirections(cluster: Path) -> None:
    t = node(cluster)
    assert t.run("false || echo rescued").stdout == "rescued\n"
    assert t.run("false && echo no; echo $?").stdout == "1\n"
    assert t.run("set -e; false; echo never").exit_code == 1
    assert t.run("cat /etc/os-release | grep -c PRETTY").stdout == "1\n"
    assert t.run("if [ -e /etc/missing ]; then cat /etc/missing; else exit 3; fi").exit_code == 3
    assert t.run("X='a b'; echo \"$X\" ${X}").stdout == "a b a b\n"
    assert t.run("echo $(hostname)-$(uname -r)").stdout == "node-6.8.0-45-generic\n"
    assert t.run("sudo -n sh -c 'echo secret > /root/f; cat /root/f' 2>/dev/null").stdout == "secret\n"
    assert t.run("nosuch 2>&1").stdout == "sh: 1: nosuch: not found\n"
    assert t.run("mkdir -p /etc/containerd/certs.d/docker.io && ls /etc/containerd/certs.d").stdout == "docker.io\n"


def test_an_unsupported_construct_is_refused_with_the_reason(cluster: Path) -> None:
    result = node(cluster).run("for i in 1 2; do echo $i; done")
    assert result.exit_code == 2
    assert "'for' is not supported" in result.stderr and "profile rule" in result.stderr


def test_a_script_run_again_expands_and_reads_afresh(cluster: Path) -> None:
    """Every host of a fleet gets the same probe line: a line run a second time sees the new state."""
    t = node(cluster)
    probe = "echo \"[$MODE]\" $(cat /root/mark 2>&1); cat /root/mark 2>/dev/null || echo absent"
    assert t.run(probe, env={"MODE": "a"}).stdout == "[a] cat: /root/mark: No such file or directory\nabsent\n"
    assert t.run("echo 'one two' > /root/mark").ok
    assert t.run(probe, env={"MODE": "b"}).stdout == "[b] one two\none two\n"


def test_long_words_and_quoted_runs_keep_their_characters(cluster: Path) -> None:
    t = node(cluster)
    line = "echo a2>/root/x; cat /root/x; echo 10.0.0.1:6443 \"x  \\\"y\\\" \\$z \\\\q\" '$k' a#b # gone; echo no"
    assert t.run(line).stdout == 'a2\n10.0.0.1:6443 x  "y" $z \\q $k a#b\n'


def test_printf_reads_octal_and_hex_escapes_widths_and_numbers_as_sh_does(cluster: Path) -> None:
    t = node(cluster)
    line = r"printf '\033[1m\0101\x41|%5s|%-3d|%#o|%b|' ab 7 010 '\0101\cgone'; echo"
    assert t.run(line).stdout == "\x1b[1m\x081A|   ab|7  |010|A\n"
    assert t.run("printf -- '%s|' -- x").stdout == "--|x|"
    bad = t.run("printf '%d,' 12abc 0x10")
    assert (bad.stdout, bad.exit_code) == ("12,16,", 1)
    assert "12abc: invalid number" in bad.stderr


def test_wrappers_run_the_command_after_their_options_values(cluster: Path) -> None:
    """``nice -n 10 CMD``, ``timeout -s KILL 5 CMD``, ``sudo -u root CMD`` run CMD: an option's value was taken for
    the command (``sh: 1: 10: not found``)."""
    t = node(cluster)
    lines = ("nice -n 10 echo hi", "timeout -s KILL -k 1 5 echo hi", "sudo -u root -- echo hi", "ionice -c 3 echo hi",
             "nohup echo hi")
    answered = {line: t.run(line) for line in lines}
    assert {line: (answer.exit_code, answer.stdout) for line, answer in answered.items()} == dict.fromkeys(lines,
                                                                                                         (0, "hi\n"))
