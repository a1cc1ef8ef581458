"""``clusterctl power`` against sushy-tools' Redfish emulator: the BMC's power drives the mock host down and up."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bmc_lab import Lab
from clirun import REPO_ROOT, clusterctl
from redfish_emulator import PASSWORD

from clusterctl.mock.power import KERNEL_LOG_SINCE_BOOT


def cli(lab: Lab, *args: str) -> tuple[int, str]:
    done = clusterctl("-i", lab.inventory, *args)
    return done.exit_code, done.stdout + done.stderr


def test_status_reads_each_hosts_power_through_its_bmc(lab: Lab) -> None:
    code, out = cli(lab, "-o", "json", "power", "status", "gpu-a1", "gpu-a2")
    assert code == 0, out
    hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert hosts["gpu-a1"]["before"] == "On" and hosts["gpu-a2"]["before"] == "On"
    assert hosts["gpu-a2"]["bmc"] == lab.emulator.url
    assert PASSWORD not in out


def test_cycle_takes_the_mock_host_down_and_boots_it(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    monkeypatch.chdir(tmp_path)
    state = lab.host_state("gpu-a2")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime())  # as journalctl -k -o short-iso prints it
    xid = "NVRM: Xid (PCI:0000:47:00): 79, pid=0, GPU has fallen off the bus."
    state.fs.write(KERNEL_LOG_SINCE_BOOT, f"{stamp} gpu-a2 kernel: {xid}\n".encode())
    code, out = cli(lab, "-l", "gpu-a2", "exec", "--", "journalctl -k --no-pager -q -o short-iso --since=-600s")
    assert code == 0 and "Xid (PCI:0000:47:00): 79" in out, out

    code, out = cli(lab, "power", "cycle", "gpu-a2", "--dry-run")
    assert code == 0, out
    assert "would power-cycle gpu-a2 through its BMC" in out and "dry run: nothing was changed" in out
    assert lab.emulator.notified == []

    code, out = cli(lab, "-o", "json", "power", "cycle", "gpu-a2", "--yes")
    assert code == 0, out
    (host,) = json.loads(out)["hosts"]
    assert host["before"] == "On" and host["after"] == "On" and host["error"] is None
    # The emulator applied Off, then On, and each drove the mock host: switched off, then booted.
    states = [s for _, name, s in lab.emulator.notified if name == "gpu-a2"]
    assert "Off" in states and states[-1] == "On" and states.index("Off") < len(states) - 1
    assert state.values().get("boots") == "1" and state.values().get("power") is None
    assert state.fs.read(KERNEL_LOG_SINCE_BOOT) is None  # what the kernel logged before the boot is gone
    assert not any(name == "gpu-a1" for _, name, _ in lab.emulator.notified)
    journal = json.loads(out)["undo_journal"]
    assert journal and "power-cycle gpu-a2" in Path(journal).read_text()
    assert PASSWORD not in Path(journal).read_text()


def test_off_leaves_the_host_unreachable_until_on(lab: Lab) -> None:
    code, out = cli(lab, "power", "off", "gpu-a1", "--yes")
    assert code == 0, out
    assert "gpu-a1: power Off" in out
    code, out = cli(lab, "-l", "gpu-a1", "exec", "--", "hostname")
    assert code == 1 and "switched off" in out, out
    code, out = cli(lab, "power", "off", "gpu-a1", "--yes")
    assert code == 0 and "off already: nothing to do" in out, out
    code, out = cli(lab, "power", "on", "gpu-a1", "--yes")
    assert code == 0 and "gpu-a1: power On" in out, out
    assert cli(lab, "-l", "gpu-a1", "exec", "--", "hostname")[0] == 0


def test_a_change_asks_first_and_refuses_off_a_terminal(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTERCTL_YES")
    code, out = cli(lab, "power", "off", "gpu-a1")
    assert code == 2, out
    assert "refusing without a terminal" in out and "--yes" in out
    assert "clusterctl power off gpu-a1 --dry-run" in out
    assert lab.emulator.notified == []


def test_wrong_credentials_fail_the_host_with_401_and_change_nothing(lab: Lab) -> None:
    lab.password_file.write_text("not-the-password\n")
    code, out = cli(lab, "power", "cycle", "gpu-a1", "--yes")
    assert code == 1, out
    assert "FAILED gpu-a1" in out and "refused the credentials of user 'clusterctl-admin' (HTTP 401)" in out
    assert "not-the-password" not in out
    assert lab.emulator.notified == []


def test_an_untrusted_certificate_is_refused_by_default(lab: Lab) -> None:
    lab.write_inventory(ca_file=None)
    code, out = cli(lab, "power", "status", "gpu-a1")
    assert code == 1, out
    assert "TLS certificate is not trusted" in out and "ca_file" in out


@pytest.fixture
def silent_bmc() -> Iterator[int]:
    """A BMC that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def test_a_bmc_that_does_not_answer_fails_within_its_timeout(lab: Lab, silent_bmc: int) -> None:
    lab.write_inventory(address=f"https://127.0.0.1:{silent_bmc}", timeout_s=2)
    start = time.monotonic()
    code, out = cli(lab, "power", "cycle", "gpu-a1", "gpu-a2", "--yes")
    took = time.monotonic() - start
    assert code == 1, out
    assert out.count("does not answer (within 2 s)") == 2, out
    assert took < 30, took  # two bounded requests per host at most, not sushy's retries of a minute each


@pytest.fixture
def ignoring_bmc(lab: Lab) -> Iterator[int]:
    """The emulator behind a proxy that acknowledges every reset and passes it on to no one: a BMC that
    accepts a power action and never carries it out."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import requests

    upstream = lab.emulator.url

    class Proxy(BaseHTTPRequestHandler):
        def _forward(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if method == "POST" and self.path.endswith("ComputerSystem.Reset"):
                self.send_response(204)
                self.end_headers()
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            answer = requests.request(method, upstream + self.path, data=body, headers=headers,
                                      verify=str(lab.emulator.ca_file), allow_redirects=False, timeout=10)
            self.send_response(answer.status_code)
            for key, value in answer.headers.items():
                if key.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                    self.send_header(key, value.replace(upstream, f"http://127.0.0.1:{self.server.server_address[1]}"))
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def do_GET(self) -> None:
            self._forward("GET")

        def do_POST(self) -> None:
            self._forward("POST")

        def do_DELETE(self) -> None:
            self._forward("DELETE")

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_failure_is_wrapped_under_its_host_at_80_columns(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lab.write_inventory(address="https://127.0.0.1:1", timeout_s=2)  # nothing listens: refused at once
    code, out = cli(lab, "power", "cycle", "gpu-a1", "--dry-run")
    assert code == 1, out
    assert "FAILED gpu-a1: the BMC https://127.0.0.1:1 does not answer (within 2 s)" in " ".join(out.split()), out
    assert max(len(line) for line in out.splitlines()) <= 80, out


def test_a_bmc_that_never_reports_the_change_fails_after_power_timeout(lab: Lab, ignoring_bmc: int) -> None:
    lab.write_inventory(address=f"http://127.0.0.1:{ignoring_bmc}", power_timeout_s=3)
    code, out = cli(lab, "power", "off", "gpu-a1", "--yes")
    assert code == 1, out
    assert "still reports power On, not Off, 3 s after the request" in out, out
    assert lab.host_state("gpu-a1").values().get("power") is None


def test_the_password_is_in_no_output_log_journal_or_argument_list(lab: Lab, tmp_path: Path) -> None:
    """A whole power cycle with --debug in a process of its own: its output, its debug log and its journal
    never hold the password (nor the Basic-auth header made of it), and no process's argv does."""
    import base64

    env = {k: v for k, v in os.environ.items() if k not in ("CLUSTERCTL_INVENTORY",)}
    env.update(PYTHONPATH=str(REPO_ROOT), COLUMNS="200", NO_COLOR="1", CLUSTERCTL_STATE_DIR=str(tmp_path / "state"))
    out_file, err_file = tmp_path / "stdout", tmp_path / "stderr"
    with out_file.open("wb") as out_handle, err_file.open("wb") as err_handle:
        proc = subprocess.Popen([sys.executable, "-m", "clusterctl", "--debug", "-i", str(lab.inventory), "power",
                                 "cycle", "gpu-a1", "--yes"], stdout=out_handle, stderr=err_handle,
                                cwd=tmp_path, env=env)
    argv_seen: list[bytes] = []
    while proc.poll() is None:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    argv_seen.append((entry / "cmdline").read_bytes())
                except OSError:
                    continue
        time.sleep(0.2)
    proc.wait(timeout=120)
    out, err = out_file.read_bytes(), err_file.read_bytes()
    assert proc.returncode == 0, (out + err).decode()
    basic = base64.b64encode(f"clusterctl-admin:{PASSWORD}".encode())
    assert b"DEBUG" in err or b"urllib3" in err or b"sushy" in err  # the debug log was on
    journals = list((tmp_path / "state" / "undo").glob("*.json"))
    assert journals
    for blob in [out, err, *(j.read_bytes() for j in journals), *argv_seen]:
        assert PASSWORD.encode() not in blob and basic not in blob


@pytest.mark.parametrize(("action", "before", "said"), [
    ("off", "On", "cannot undo 'switch off gpu-a1 through its BMC https://bmc-a1': undo does not switch power: "
                  "'clusterctl power on' does"),
    ("on", "Off", "cannot undo 'switch on gpu-a1 through its BMC https://bmc-a1': undo does not switch power: "
                  "'clusterctl power off' does"),
    ("cycle", "On", "nothing to undo: 'power-cycle gpu-a1 through its BMC https://bmc-a1': a power cycle leaves the "
                    "host on, as it was"),
])
def test_undo_names_a_power_action_and_fails_only_where_the_power_stays_changed(action: str, before: str,
                                                                               said: str) -> None:
    from clusterctl.bmc.power import PowerAction, power_change
    from clusterctl.changes import not_undone

    change = power_change("gpu-a1", PowerAction(action), before, "https://bmc-a1")
    assert change is not None
    step = not_undone(change)
    assert step.done == said
    assert step.left is (action != "cycle")
