"""Simulated tools the bootstrap node phases need: containerd's version line, curl for apt keys,
apt's version globs."""

from __future__ import annotations

from pathlib import Path

from conftest_mock import write_cluster

from clusterctl.inventory.loader import load_inventory
from clusterctl.mock.profile import forget_profiles
from clusterctl.mock.transport import MockTransport

K8S_SOURCE = "echo 'deb https://pkgs.k8s.io/core:/stable:/v1.30/deb/ /' > /etc/apt/sources.list.d/k8s.list"


def node(inventory: Path) -> MockTransport:
    return MockTransport(load_inventory(inventory).host("n1"))


def test_apt_version_globs_pick_the_newest_match(tmp_path: Path) -> None:
    t = node(write_cluster(tmp_path))
    t.run(K8S_SOURCE)
    assert t.run("apt-get update").ok
    done = t.run("apt-get install -y 'kubeadm=1.30.*'")
    assert done.ok and "Setting up kubeadm (1.30.2-1.1) ..." in done.stdout
    missing = t.run("apt-get install -y 'kubelet=1.31.*'")
    assert (missing.exit_code, missing.stderr) == (100, "E: Version '1.31.*' for 'kubelet' was not found\n")


def test_containerd_version_line_follows_the_installed_package(tmp_path: Path) -> None:
    t = node(write_cluster(tmp_path))  # the profile's machine has Ubuntu's containerd 1.7.24 installed
    assert t.run("containerd --version").stdout == (
        "containerd github.com/containerd/containerd 1.7.24 1.7.24-0ubuntu1~24.04.2\n")
    assert t.run("apt-get remove -y containerd").ok
    assert t.run("containerd --version").exit_code == 127  # no package, no program


def test_curl_writes_a_key_file_only_into_an_existing_folder(tmp_path: Path) -> None:
    t = node(write_cluster(tmp_path))
    failed = t.run("curl -fsSL --retry 3 https://example.org/key.asc -o /srv/keys/x.asc")
    assert failed.exit_code == 23 and "Failure writing output" in failed.stderr
    assert t.run("install -d -m 0755 /etc/apt/keyrings").ok
    assert t.run("curl -fsSL https://example.org/key.asc -o /etc/apt/keyrings/x.asc").ok
    assert t.get("/etc/apt/keyrings/x.asc").startswith(b"-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert t.run("curl -fsSL ftp://example.org/key -o /tmp/k").stderr == 'curl: (1) Protocol "ftp" not supported\n'
    # An apt source's package index (the apt-get the profile simulates) into a missing folder fails alike.
    t.run(K8S_SOURCE)
    index = t.run("curl -fsSL https://pkgs.k8s.io/core:/stable:/v1.30/deb/Packages -o /srv/index/Packages")
    assert (index.exit_code, t.get("/srv/index/Packages")) == (23, None)


def test_file_tools_answer_by_the_name_they_were_called_by(tmp_path: Path) -> None:
    t = node(write_cluster(tmp_path))
    assert t.run("printf 'a\\nb\\nc\\n' > /tmp/abc && cp /tmp/abc /tmp/copy && mv /tmp/copy /tmp/moved").ok
    assert t.run("head -n 1 /tmp/moved").stdout == "a\n"
    assert t.run("tail -n 1 /tmp/moved").stdout == "c\n"
    assert t.run("test -e /tmp/copy").exit_code == 1
    assert t.run("mv /tmp/nope /tmp/x").stderr == "mv: cannot stat '/tmp/nope': No such file or directory\n"
    assert t.run("tail /tmp/nope").stderr == "tail: cannot open '/tmp/nope' for reading: No such file or directory\n"
    refused = t.run("rm -z /tmp/abc")
    assert refused.exit_code == 1
    assert refused.stderr == "rm: invalid option -- 'z'\nTry 'rm --help' for more information.\n"
    assert t.run("cat /tmp/abc").stdout == "a\nb\nc\n"


def test_chmod_refuses_a_bad_mode_before_any_file_and_goes_on_past_a_missing_one(tmp_path: Path) -> None:
    """GNU chmod's answers (coreutils 9.1, LC_ALL=C): a bad mode or a missing operand is a usage error (with its
    'Try' line) before any file is looked at; a missing file is reported and the others still change."""
    t = node(write_cluster(tmp_path))
    assert t.run("touch /tmp/f").ok
    try_line = "Try 'chmod --help' for more information.\n"
    for line, said in (("chmod zz /nonexist", "chmod: invalid mode: 'zz'\n"), ("chmod 999 /tmp/f",
                       "chmod: invalid mode: '999'\n"), ("chmod 644", "chmod: missing operand after '644'\n")):
        refused = t.run(line)
        assert (refused.exit_code, refused.stderr) == (1, said + try_line), line
    both = t.run("chmod 600 /nonexist /tmp/f")
    assert (both.exit_code, both.stderr) == (1, "chmod: cannot access '/nonexist': No such file or directory\n")
    assert t.machine.host.fs.local("/tmp/f").stat().st_mode & 0o777 == 0o600


def test_chmod_recurses_with_r_and_refuses_an_option_it_does_not_do(tmp_path: Path) -> None:
    """``chmod -R`` changes the folder and everything under it (it changed the folder alone); ``-v``, which
    the simulator does not print for, is refused as GNU chmod refuses an option it lacks; '-w' stays a mode."""
    t = node(write_cluster(tmp_path))
    assert t.run("mkdir -p /tmp/d/e && touch /tmp/d/e/f && chmod -R 700 /tmp/d").ok
    assert [t.machine.host.fs.local(p).stat().st_mode & 0o777 for p in ("/tmp/d", "/tmp/d/e/f")] == [0o700] * 2
    assert t.run("chmod -w /tmp/d/e/f").ok and t.machine.host.fs.local("/tmp/d/e/f").stat().st_mode & 0o777 == 0o500
    refused = t.run("chmod -v 600 /tmp/d")
    assert (refused.exit_code, refused.stderr) == (1, "chmod: invalid option -- 'v'\n"
                                                      "Try 'chmod --help' for more information.\n")


def test_date_says_the_time_in_utc_and_refuses_an_option_it_lacks(tmp_path: Path) -> None:
    """``date -u +FORMAT`` (what the backup names are made with) and ``--utc``; an option GNU date lacks is
    refused with its message and exit 1 (it was ignored and the time printed)."""
    t = node(write_cluster(tmp_path))
    assert [t.run(f"date {words} +%z").stdout for words in ("-u", "--utc")] == ["+0000\n"] * 2
    # GNU date names the zone UTC (it printed GMT, as Python's gmtime does).
    assert t.run("date -u +%Z").stdout == "UTC\n" and " UTC " in t.run("date -u").stdout
    refused = t.run("date -z +%s")
    assert (refused.exit_code, refused.stdout, refused.stderr) == (
        1, "", "date: invalid option -- 'z'\nTry 'date --help' for more information.\n")


def test_head_and_tail_count_lines_as_gnus_do(tmp_path: Path) -> None:
    """``head -n -N`` leaves out the last N lines and ``tail -n +N`` starts at line N (they were taken for
    the first and the last N); a count that is no number is refused."""
    t = node(write_cluster(tmp_path))
    assert t.run("printf 'a\\nb\\nc\\nd\\n' > /tmp/abcd").ok
    shown = {line: t.run(f"{line} /tmp/abcd").stdout for line in
             ("head -n -1", "head -2", "head -n0", "tail -n +2", "tail -n -1", "tail -3", "tail -n +0")}
    assert shown == {"head -n -1": "a\nb\nc\n", "head -2": "a\nb\n", "head -n0": "", "tail -n +2": "b\nc\nd\n",
                     "tail -n -1": "d\n", "tail -3": "b\nc\nd\n", "tail -n +0": "a\nb\nc\nd\n"}
    bad = t.run("head -n x /tmp/abcd")
    assert (bad.exit_code, bad.stderr) == (1, "head: invalid number of lines: 'x'\n")


def test_apt_offers_what_its_lists_had_at_the_last_update(tmp_path: Path) -> None:
    """A version the repository gained after ``apt-get update`` is not offered until the next one,
    as on a real host (the real nodes' site mirror gains Kubernetes 1.37 after the bring-up)."""
    inventory = write_cluster(tmp_path)
    t = node(inventory)
    t.run(K8S_SOURCE)
    assert t.run("apt-get update").ok
    assert t.run("apt-get install -y 'kubeadm=1.30.2-*'").ok
    profile = tmp_path / "profile" / "profile.yaml"
    profile.write_text(profile.read_text().replace('kubeadm: {versions: ["1.30.1-1.1", "1.30.2-1.1"]',
                                                   'kubeadm: {versions: ["1.30.1-1.1", "1.30.2-1.1", "1.30.3-1.1"]'))
    forget_profiles()
    t = node(inventory)  # the repository as it is now
    stale = t.run("apt-get install -y 'kubeadm=1.30.3-*'")
    assert (stale.exit_code, stale.stderr) == (100, "E: Version '1.30.3-*' for 'kubeadm' was not found\n")
    assert t.run("apt-get update").ok
    done = t.run("apt-get install -y 'kubeadm=1.30.3-*'")
    assert done.ok and "Setting up kubeadm (1.30.3-1.1) ..." in done.stdout


def test_file_tools_refuse_the_options_and_operands_gnus_refuse(tmp_path: Path) -> None:
    """As GNU coreutils 9.1 and grep 3.8 answer (LC_ALL=C): an option the tool does not know, one without its value
    or no operand is a usage error with the 'Try' line (grep's usage line before it; ls and grep exit 2), and
    nothing is done (touch took any option and made the file, and with no operand exited 0)."""
    t = node(write_cluster(tmp_path))
    assert t.run("printf 'a\\n' > /tmp/abc").ok

    def try_line(tool: str) -> str:
        return f"Try '{tool} --help' for more information.\n"

    grep_usage = "Usage: grep [OPTION]... PATTERNS [FILE]...\n"
    expected = {
        "touch -z /tmp/t": (1, "touch: invalid option -- 'z'\n" + try_line("touch")),
        "touch": (1, "touch: missing file operand\n" + try_line("touch")),
        "mkdir -m": (1, "mkdir: option requires an argument -- 'm'\n" + try_line("mkdir")),
        "mkdir --bogus /tmp/t": (1, "mkdir: unrecognized option '--bogus'\n" + try_line("mkdir")),
        "uname -z": (1, "uname: invalid option -- 'z'\n" + try_line("uname")),
        "ls -y /tmp": (2, "ls: invalid option -- 'y'\n" + try_line("ls")),
        "grep -Q a /tmp/abc": (2, "grep: invalid option -- 'Q'\n" + grep_usage + try_line("grep")),
        "grep": (2, grep_usage + try_line("grep")),
    }
    answered = {line: t.run(line) for line in expected}
    assert {line: (answer.exit_code, answer.stderr) for line, answer in answered.items()} == expected
    assert t.run("test -e /tmp/t").exit_code == 1
