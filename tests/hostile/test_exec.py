"""Hostile cases for ``exec`` (and the fan-out every command shares): huge outputs, flags that
belong to the remote command, selections of nothing, Ctrl-C, and pdsh's habits."""

from __future__ import annotations

import json
import resource
import signal
import time
from pathlib import Path

from clusterctl.cli.app import hoist_global_options

from .conftest import DEMO, clusterctl_process, local_inventory


def test_a_million_lines_come_out_whole_and_unwrapped(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = local_inventory(tmp_path, "n1", "n2")
    wide = "x" * 400
    ran = cli("-i", inv, "exec", "--", f"seq 1 200000; echo {wide}")
    assert ran.code == 0
    lines = ran.out.splitlines()
    # One group for both hosts, every line as printed (no wrapping of the 400-column line).
    assert lines[:3] == ["-" * 16, "n[1-2]", "-" * 16]
    assert lines[3:] == [str(n) for n in range(1, 200001)] + [wide]


def test_everything_after_the_first_word_belongs_to_the_remote_command() -> None:
    assert hoist_global_options(["exec", "nvidia-smi", "-i", "0"]) == ["exec", "--", "nvidia-smi", "-i", "0"]
    assert hoist_global_options(["exec", "hostname", "-l", "gpu-a1"]) == ["exec", "--", "hostname", "-l", "gpu-a1"]
    # clusterctl's own options before the command still work, wherever they are.
    assert hoist_global_options(["exec", "-l", "gpu-a1", "--sudo", "ls", "-o", "x"]) == [
        "-l", "gpu-a1", "exec", "--sudo", "--", "ls", "-o", "x"]
    assert hoist_global_options(["-i", "inv", "exec", "--out-dir", "d", "uname", "-r"]) == [
        "-i", "inv", "exec", "--out-dir", "d", "--", "uname", "-r"]


def test_a_remote_flag_that_looks_like_a_global_option_runs_remotely(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = local_inventory(tmp_path, "n1", "n2")
    ran = cli("-i", inv, "exec", "echo", "-i", "0", "-l", "n1")
    assert ran.code == 0, ran.err
    assert ran.out.splitlines()[1] == "n[1-2]"  # no silent --limit
    assert "-i 0 -l n1" in ran.out


def test_a_limit_that_selects_nothing_is_a_usage_error_for_every_command(cli) -> None:  # type: ignore[no-untyped-def]
    for command in (["exec", "--", "hostname"], ["inventory", "show"], ["survey"]):
        ran = cli("-i", DEMO, "-l", "gpu-a1,&gpu-b1", *command)
        assert ran.code == 2, command
        assert "no host selected" in ran.err


def test_out_dir_writes_one_file_per_host(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "logs"
    ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-a2", "exec", "--out-dir", str(out), "--", "nvidia-smi", "-L")
    assert ran.code == 0, ran.err
    assert sorted(p.name for p in out.iterdir()) == ["gpu-a1.out", "gpu-a2.out"]
    assert (out / "gpu-a1.out").read_text().startswith("GPU 0: NVIDIA A100")
    assert "gpu-a1: exit 0" in ran.out and "GPU 0" not in ran.out
    # -o json names the files instead of repeating what went into them.
    ran = cli("-i", DEMO, "-l", "gpu-a1", "-o", "json", "exec", "--out-dir", str(out), "--", "nvidia-smi", "-L")
    record = json.loads(ran.out)["hosts"][0]
    assert record == {"host": "gpu-a1", "ok": True, "failure": None, "duration_s": record["duration_s"],
                      "stdout": None, "stderr": None, "exit_code": 0, "files": [str(out / "gpu-a1.out")]}


def test_out_dir_gives_hosts_whose_names_differ_files_that_differ(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # 'a:b' and 'a_b' both wrote a_b.out: one host's output was lost without a word.
    out = tmp_path / "logs"
    ran = cli("-i", local_inventory(tmp_path, "'a:b'", "a_b"), "exec", "--out-dir", str(out), "--", "echo $$")
    assert ran.code == 0, ran.err
    assert sorted(p.name for p in out.iterdir()) == ["a%3Ab.out", "a_b.out"]
    assert (out / "a%3Ab.out").read_text() != (out / "a_b.out").read_text()
    assert f"a:b: exit 0, {out / 'a%3Ab.out'}" in ran.out


def test_an_unwritable_out_dir_stops_before_any_host_is_touched(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("")
    ran = cli("-i", DEMO, "exec", "--out-dir", str(blocker / "sub"), "--", "hostname")
    assert ran.code == 2
    assert "--out-dir" in ran.err and "Traceback" not in ran.err


def test_a_file_that_cannot_be_written_is_named_and_the_other_hosts_files_are_written(  # type: ignore[no-untyped-def]
        cli, tmp_path: Path) -> None:
    out = tmp_path / "logs"
    (out / "gpu-a1.out").mkdir(parents=True)  # in the way of gpu-a1's file, as a full disk would be
    ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-a2", "exec", "--out-dir", str(out), "--", "nvidia-smi", "-L")
    assert ran.code == 2
    assert f"cannot write {out / 'gpu-a1.out'} (Is a directory)" in ran.err and "internal error" not in ran.err
    assert (out / "gpu-a2.out").read_text().startswith("GPU 0: NVIDIA A100")
    assert f"gpu-a2: exit 0, {out / 'gpu-a2.out'}" in ran.out
    # -o json keeps the output that has no file.
    ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-a2", "-o", "json", "exec", "--out-dir", str(out), "--", "nvidia-smi", "-L")
    assert ran.code == 2
    a1, a2 = json.loads(ran.out)["hosts"]
    assert a1["stdout"].startswith("GPU 0: NVIDIA A100") and "files" not in a1
    assert a2["files"] == [str(out / "gpu-a2.out")]


def test_out_dir_keeps_a_hosts_last_file_whole_when_the_new_one_cannot_be_written(tmp_path: Path) -> None:
    """A full disk while saving (here: a file-size limit of 1 MiB, 2 MiB of output) leaves the last run's
    HOST.out as it was, not cut to the part that fitted, and no partial file beside it."""
    out = tmp_path / "logs"
    out.mkdir()
    (out / "n1.out").write_text("the last run's output\n")
    limit = 1 << 20

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    proc = clusterctl_process("-i", local_inventory(tmp_path, "n1"), "exec", "--out-dir", str(out), "--",
                              f"head -c {2 * limit} /dev/zero | tr '\\0' x", preexec_fn=small_disk)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "File too large" in err and "internal error" not in err, err
    assert (out / "n1.out").read_text() == "the last run's output\n"
    assert [p.name for p in out.iterdir()] == ["n1.out"]


def test_stream_prints_host_prefixed_lines(cli) -> None:  # type: ignore[no-untyped-def]
    ran = cli("-i", DEMO, "-l", "gpu-a1,gpu-b2", "exec", "--stream", "nvidia-smi", "-L")
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert len(lines) == 16
    assert {line.split(": ", 1)[0] for line in lines} == {"gpu-a1", "gpu-b2"}
    assert all(line.split(": ", 1)[1].startswith("GPU ") for line in lines)


def _waits_for(flag: Path) -> str:
    """Shell that waits (10 s at most) for ``flag``, which the test creates once it read the first line."""
    return f"i=0; while [ ! -e {flag} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; [ -e {flag} ] || exit 9"


def test_stream_prints_each_line_while_the_command_still_runs(tmp_path: Path) -> None:
    inv = local_inventory(tmp_path, "n1")
    flag = tmp_path / "first-line-read"
    command = f"echo first; {_waits_for(flag)}; echo second; echo 'warning: late' >&2; printf partial; exit 4"
    proc = clusterctl_process("-i", inv, "exec", "--stream", "--", command)
    assert proc.stdout is not None
    # The command cannot go on before this line is read: only streaming lets it finish.
    assert proc.stdout.readline() == "n1: first\n"
    flag.touch()
    out, err = proc.communicate(timeout=60)
    lines = out.splitlines()
    # (stdout and stderr are two pipes: their lines keep their own order, not each other's.)
    assert [line for line in lines if "[stderr]" not in line] == ["n1: second", "n1: partial"]
    assert "n1: [stderr] warning: late" in lines and len(lines) == 3
    # The summary still comes after the lines: the host failed with its exit code.
    assert proc.returncode == 1
    assert "n1" in err and "4" in err


def test_stream_never_mixes_two_hosts_lines(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = local_inventory(tmp_path, "n1", "n2", "n3")
    wide = "y" * 3000
    ran = cli("-i", inv, "exec", "--stream", "--", f"for i in $(seq 1 300); do echo {wide}; done")
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert len(lines) == 900
    assert all(line in (f"n1: {wide}", f"n2: {wide}", f"n3: {wide}") for line in lines)


def test_ctrl_c_prints_what_finished_and_which_hosts_were_still_running(tmp_path: Path) -> None:
    inv = local_inventory(tmp_path, "n1", "n2", "n3")
    marker = tmp_path / "first"
    # The first host to start finishes at once; the others hang until interrupted.
    command = f"if mkdir {marker} 2>/dev/null; then echo quick; else sleep 20; fi"
    for fmt in ("table", "json"):
        if marker.exists():
            marker.rmdir()
        proc = clusterctl_process("-i", inv, "-o", fmt, "exec", "--", command)
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # let the quick host's result reach the fan-out
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "interrupted" in err and "Traceback" not in err
        assert "still running" in err
        running = err.split("still running (stopped): ", 1)[1].splitlines()[0]
        if fmt == "table":
            assert "quick" in out
            assert running.count("n") == 1 or "[" in running  # two hosts, compressed or not
        else:
            doc = json.loads(out)
            assert doc["interrupted"] is True
            assert [h["stdout"] for h in doc["hosts"]] == ["quick\n"]
            assert len(doc["still_running"]) == 2


def test_limit_at_retry_reruns_only_the_hosts_that_failed_last_time(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The mock hosts have no 'no-such-tool': the two hosts selected fail with exit 127.
    first = cli("-i", DEMO, "-l", "gpu-a2,gpu-b3", "exec", "--", "no-such-tool")
    assert first.code == 1
    failed = {"gpu-a2", "gpu-b3"}
    again = cli("-i", DEMO, "-o", "json", "exec", "-l", "@retry", "--", "nvidia-smi", "-L")
    assert again.code == 0, again.err
    assert {h["host"] for h in json.loads(again.out)["hosts"]} == failed
    names = tmp_path / "hosts.txt"
    names.write_text("# two hosts\ngpu-a1\ngpu-b2\n")
    from_file = cli("-i", DEMO, "-o", "json", "-l", f"@{names}", "exec", "--", "nvidia-smi", "-L")
    assert [h["host"] for h in json.loads(from_file.out)["hosts"]] == ["gpu-a1", "gpu-b2"]


def test_limit_at_retry_after_a_clean_run_selects_nothing_and_says_so(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-i", DEMO, "-l", "gpu-a1", "exec", "--", "nvidia-smi", "-L").code == 0
    ran = cli("-i", DEMO, "-l", "@retry", "exec", "--", "nvidia-smi", "-L")
    assert ran.code == 2 and "the last run had no failed host" in ran.err


def test_a_host_name_that_is_no_dns_name_cannot_be_resolved_in_words(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Each used to come back as "error: UnicodeError: encoding with 'idna' codec failed (...)".
    inventory, config = tmp_path / "inv.yaml", tmp_path / "ssh_config"
    inventory.write_text(f"hosts:\n  n1: {{}}\n  n2: {{}}\n  n3: {{}}\n  {'x' * 64}: {{}}\n")
    config.write_text("Host n1\n  HostName a..b\nHost n2\n  HostName x\u202ey\n"
                      "Host n3\n  HostName 10.9.9.9\n  ProxyJump bastion\nHost bastion\n  HostName c..d\n")
    ran = cli("-i", str(inventory), "--ssh-config", str(config), "exec", "--", "true")
    assert ran.code == 1
    # The failed host's line names it once (it said "n1: unreachable: n1: cannot resolve ..."); a jump host
    # that failed is named as one.
    assert "FAILED n1: unreachable: cannot resolve host name 'a..b' (not a DNS name)" in ran.err
    assert "FAILED n2: unreachable: cannot resolve host name 'x\\u202ey' (not a DNS name)" in ran.err
    assert "FAILED n3: unreachable: jump host bastion: cannot resolve host name 'c..d' (not a DNS name)" in ran.err
    assert f"cannot resolve host name '{'x' * 64}' (not a DNS name)" in ran.err
    assert "Error" not in ran.err and "\u202e" not in ran.err


def test_a_host_name_with_colons_is_printed_as_written_never_as_an_emoji(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Rich read ':b:' in 'rack:b:1' as the emoji code of a B in a red square.
    inventory, src, dest = local_inventory(tmp_path, "'rack:b:1'"), tmp_path / "src", tmp_path / "dest"
    ran = cli("-i", inventory, "exec", "--", "echo hi; exit 3")
    assert ran.code == 1
    assert "FAILED rack:b:1: command failed (exit 3)" in ran.err
    src.write_text("x\n")
    copied = cli("-i", inventory, "copy", str(src), str(dest), "--yes")
    assert f"rack:b:1: wrote {dest}" in copied.out
    assert "│ rack:b:1 │" in cli("-i", inventory, "survey").out


def test_a_server_that_hangs_up_after_its_banner_is_named_without_a_python_name(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # paramiko's bare EOFError came through as "... during the SSH handshake (EOFError)".
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))

    def hang_up() -> None:
        connection, _ = server.accept()
        connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
        connection.shutdown(socket.SHUT_WR)  # an end of file, not a reset: read until the client leaves
        while connection.recv(4096):
            pass
        connection.close()

    threading.Thread(target=hang_up, daemon=True).start()
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"hosts:\n  n1: {{address: 127.0.0.1, port: {server.getsockname()[1]}}}\n")
    ran = cli("-i", str(inventory), "--known-hosts", str(tmp_path / "known_hosts"), "exec", "--", "true")
    server.close()
    assert ran.code == 1
    assert "closed the connection during the SSH handshake\n" in ran.err and "Error" not in ran.err, ran.err
