"""Every command line clusterctl sends, run by the real ``dash`` and by the mock hosts' shell.

The corpus is what the demo's bootstrap (and its variants) sent to its hosts (``demo_calls``).
Both shells run each line with the same stand-ins for every program (each prints its name and
arguments, one per bracket, and exits 0; ``sh`` is the shell itself, ``sudo``/``env``/
``timeout`` run what follows them), so what is compared is the shell's own work: quoting and
word splitting, ``$VAR`` and ``$(...)``, ``&&``/``||``/``if``, ``set -e``, redirections and globs.
``dash`` runs in a chroot holding only itself, its libraries and the stand-ins, so a redirection
can only write there; the mock shell reads and writes the same folder. Every line must also
parse as POSIX shell (``dash -n``), whatever the programs would do.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from demo_calls import VARIANTS, DemoRecordings
from real_tools import system_tool

from clusterctl.mock.shell import Shell

CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"

#: Programs that start others: both shells must run what follows them.
STUB = """#!/bin/dash
printf '%s' "${0##*/}"
for arg in "$@"; do printf ' [%s]' "$arg"; done
printf '\\n'
"""
PASS_THROUGH = {
    "sudo": '#!/bin/dash\nwhile case "$1" in -*) true;; *) false;; esac; do shift; done\nexec "$@"\n',
    "timeout": '#!/bin/dash\nwhile case "$1" in -*) true;; *) false;; esac; do shift; done\nshift\nexec "$@"\n',
    "env": '#!/bin/dash\nwhile case "$1" in *=*) export "$1";; *) false;; esac; do shift; done\nexec "$@"\n',
}


class Jail:
    """A chroot with dash, its libraries and a stand-in for each program name."""

    def __init__(self, folder: Path, dash: Path, names: set[str]) -> None:
        self.root = folder
        for library in re.findall(r"(/\S+\.so[.\d]*)", subprocess.run(["ldd", str(dash)], capture_output=True,
                                                                      text=True, check=True).stdout):
            target = folder / library.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(library, target)
        (folder / "bin").mkdir(exist_ok=True)
        shutil.copy(dash, folder / "bin" / "dash")
        (folder / "dev").mkdir()
        os.mknod(folder / "dev" / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # lines say 2>/dev/null
        (folder / "stubs").mkdir()
        (folder / "stubs" / "sh").symlink_to("/bin/dash")
        for name in names | set(PASS_THROUGH):
            if "/" in name or name == "sh":
                continue
            stub = folder / "stubs" / name
            stub.write_text(PASS_THROUGH.get(name, STUB))
            stub.chmod(0o755)

    def dash(self, line: str) -> tuple[str, int]:
        done = subprocess.run([CHROOT, str(self.root), "/bin/dash", "-c", line], capture_output=True, text=True,
                              env={"PATH": "/stubs", "HOME": "/root"}, stdin=subprocess.DEVNULL, timeout=30)
        return done.stdout, done.returncode

    def mock(self, line: str) -> tuple[str, int]:
        root = self.root

        def dispatch(argv: list[str], data: bytes, environ: dict[str, str], shell: Shell) -> tuple[bytes, bytes, int]:
            if argv[:2] == ["command", "-v"]:
                found = (root / "stubs" / argv[2]).exists() if len(argv) > 2 else False
                return (f"/stubs/{argv[2]}\n".encode(), b"", 0) if found else (b"", b"", 1)
            if argv[0] in ("test", "["):  # dash's own builtin, against the same folder
                done = subprocess.run([CHROOT, str(root), "/bin/dash", "-c", 'test "$@"' if argv[0] == "test"
                                       else '[ "$@"', argv[0], *argv[1:]], capture_output=True, timeout=30)
                return b"", b"", done.returncode
            name = argv[0].rsplit("/", 1)[-1]
            if not (root / "stubs" / name).exists():
                return b"", f"sh: 1: {argv[0]}: not found\n".encode(), 127
            text = name + "".join(f" [{arg}]" for arg in argv[1:]) + "\n"
            return text.encode(), b"", 0

        def inside(path: str) -> Path:
            return root / path.lstrip("/")

        def read(path: str) -> bytes | None:
            target = inside(path)
            return target.read_bytes() if target.is_file() else None

        def write(path: str, data: bytes, append: bool) -> None:
            target = inside(path)
            if not target.parent.is_dir():
                raise OSError(2, "Directory nonexistent")
            with target.open("ab" if append else "wb") as sink:
                sink.write(data)

        def glob(pattern: str) -> list[str]:
            return sorted("/" + str(p.relative_to(root)) for p in root.glob(pattern.lstrip("/")))

        shell = Shell(dispatch, env={"PATH": "/stubs", "HOME": "/root"}, glob=glob, read_file=read,
                      write_file=write, cwd="/")
        out, _err, code = shell.run(line)
        return out.decode(errors="replace"), code


def corpus(demo_recordings: DemoRecordings) -> list[str]:
    lines: dict[str, None] = {}
    for variant in VARIANTS[:2]:
        for line in demo_recordings.get(variant).lines:
            lines[line] = None
    return list(lines)


def program_names(lines: list[str]) -> set[str]:
    """Every program the lines call, as the mock shell sees them (its dispatch is asked for each)."""
    names: set[str] = set()

    def dispatch(argv: list[str], data: bytes, environ: dict[str, str], shell: Shell) -> tuple[bytes, bytes, int]:
        names.add(argv[2] if argv[:2] == ["command", "-v"] and len(argv) > 2 else argv[0])
        return b"", b"", 0

    for line in lines:
        Shell(dispatch, glob=lambda _p: [], read_file=lambda _p: b"", write_file=lambda *_a: None).run(line)
    return {n for n in names if re.fullmatch(r"[\w.+-]+", n)}


@pytest.fixture(scope="module")
def lines(demo_recordings: DemoRecordings) -> list[str]:
    found = corpus(demo_recordings)
    assert len(found) > 50, "the demo's bootstrap sends many distinct lines"
    return found


def test_every_line_clusterctl_sends_parses_as_posix_shell(lines: list[str]) -> None:
    dash = system_tool("dash", "dash")
    refused = []
    for line in lines:
        done = subprocess.run([str(dash), "-n", "-c", line], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            refused.append(f"{line[:200]}: {done.stderr.strip()}")
    assert refused == []


def test_dash_and_the_mock_shell_run_every_line_alike(lines: list[str], tmp_path: Path) -> None:
    assert differences(lines, tmp_path) == []


def test_dash_and_the_mock_shell_run_the_survey_probes_alike(tmp_path: Path) -> None:
    """The survey's fact commands (the stack's compound probe above all) are run by the mock shell
    on every simulated host: twice each, as two hosts of a fleet receive them."""
    from clusterctl.facts.survey_facts import SURVEY_FACTS

    probes = [fact.command for fact in SURVEY_FACTS] + [f.command for fact in SURVEY_FACTS for f in fact.fallbacks]
    assert any("### " in probe for probe in probes), "the compound stack probe is among them"
    assert differences(probes + probes, tmp_path) == []


#: printf lines where bash's builtin and coreutils' printf agree: escapes, conversions, bad numbers.
PRINTF_CASES = [
    [r'\033]0;title\007\033[2J\0101\101\18\x41\e\q\"\a\v\f\0 x' "\\"],
    ["%b|", r"\033x\0101\101\18\8\x41", r"a\cb", "z"],
    ["%5s|%-3s|%03d|%x|%X|%c|%.2s|%i|%u|%o|%#o|%#x|%+d|%.3d", "ab", "c", "7", "255", "255", "hello", "abc",
     "9", "9", "9", "8", "255", "5", "5"],
    ["%d|", "010", "0x10", "-0x10", "+3", " 5", "12abc", "08", "", "'A", "abc"],
    [r"%s-%s\n", "a", "b", "c"], ["%e|%5.1f|%g|%f", "1", "2.25", "0.5", "x"], ["no conversion", "x"],
    ["%%|%s|%s", "\u00e9"], [r"\377\400"], ["a%"], ["%z", "1"], ["--", "%s|", "--", "x"],
]
#: printf lines where coreutils' printf differs and the mock prints as bash's builtin (and dash's): ``%b`` keeps
#: ``\"`` whole (coreutils and the format read it as ``"``).
PRINTF_BASH_CASES = [["%b|", r'\"', r'a\"b', r"\\\"", "\\"], [r'\"%b\"', r'x\"y']]


def _builtins_only() -> Shell:
    """The mock shell with no program besides its builtins (echo, printf)."""
    return Shell(lambda *_a: (b"", b"", 127), glob=lambda _p: [], read_file=lambda _p: None,
                 write_file=lambda *_a: None)


def test_printf_prints_and_exits_as_bash_and_coreutils_do() -> None:
    bash = system_tool("bash", "bash")
    shell = _builtins_only()
    for case in PRINTF_CASES + PRINTF_BASH_CASES:
        real = subprocess.run([str(bash), "-c", 'printf "$@"', "printf", *case], capture_output=True, timeout=30)
        coreutils = subprocess.run(["/usr/bin/printf", *case], capture_output=True, timeout=30)
        mock, _err, code = shell.run(shlex.join(["printf", *case]))
        if case in PRINTF_CASES:
            assert (real.stdout, real.returncode) == (coreutils.stdout, coreutils.returncode), case
        assert (mock, code) == (real.stdout, real.returncode), case


#: echo lines as dash's builtin prints them: the escapes of printf's %b but \xHH, \c, a first -n only.
ECHO_CASES = [
    [r"a\nb\tc\0101\101\1234\777\08\00101\8\x41\e\E\q\"\a\b\f\r\v\\", "x\\"], [r"a\cb", "c"],
    ["-n", "no", "newline"], ["-n", "-e", "y"], ["-e", "x"], ["-nn", "w"], ["--", "z"], [], ["\u00e9\\0"],
]


def test_echo_prints_as_dash_does() -> None:
    dash = system_tool("dash", "dash")
    shell = _builtins_only()
    for case in ECHO_CASES:
        real = subprocess.run([str(dash), "-c", 'echo "$@"', "echo", *case], capture_output=True, timeout=30)
        mock, _err, code = shell.run(shlex.join(["echo", *case]))
        assert (mock, code) == (real.stdout, real.returncode), case


def differences(lines: list[str], tmp_path: Path) -> list[str]:
    """Each line where dash and the mock shell printed or exited differently."""
    dash = system_tool("dash", "dash")
    differ: list[str] = []
    for index, line in enumerate(lines):
        jail = Jail(tmp_path / f"jail-{index}", dash, program_names([line]))
        for folder in ("etc", "root", "tmp", "var/lib", "run"):
            (jail.root / folder).mkdir(parents=True, exist_ok=True)
        real = jail.dash(line)
        for folder in ("etc", "root", "tmp", "var/lib", "run"):  # the same starting tree for the mock
            shutil.rmtree(jail.root / folder)
            (jail.root / folder).mkdir(parents=True)
        simulated = jail.mock(line)
        if real != simulated:
            differ.append(f"{line[:300]}\n  dash: {real}\n  mock: {simulated}")
    return differ


def test_the_comparison_tells_a_difference(tmp_path: Path) -> None:
    """The contract can fail: a line whose quoting the two would split differently is caught."""
    dash = system_tool("dash", "dash")
    jail = Jail(tmp_path / "jail", dash, {"echo-args"})
    line = "x='a b'; echo-args $x \"$x\""
    assert jail.dash(line) == jail.mock(line) == ("echo-args [a] [b] [a b]\n", 0)
    assert jail.dash("echo-args $((1+2))")[0] == "echo-args [3]\n"
    assert jail.mock("echo-args $((1+2))") != jail.dash("echo-args $((1+2))")  # arithmetic: not in the mock shell
