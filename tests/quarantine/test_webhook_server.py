"""remediate serve as an attacker meets it: authentication, TLS, listen addresses, hostile bodies, stalled
connections.

Each test starts the real server (``webhook_server``) on loopback in front of a receiver acting on a
simulated cluster, so "nothing changed" is the cluster's state, compared before and after.
"""

from __future__ import annotations

import contextlib
import io
import json
import secrets
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from certs import Pki, make_pki
from clirun import clusterctl
from kube_sim import KubeSim
from local_daemons import free_port
from receiver_start import secured_receiver, token_file

from clusterctl.quarantine.receiver import Remediator
from clusterctl.quarantine.webhook_server import Limits, Security, TokenFile, tls_context


def payload(*alerts: tuple[str, str]) -> bytes:
    return json.dumps({"version": "4", "status": "firing", "receiver": "clusterctl-remediate", "alerts": [
        {"status": "firing", "labels": {"alertname": name, "Hostname": host}} for name, host in alerts]}).encode()


@dataclass
class Running:
    url: str
    log: io.StringIO
    sim: KubeSim
    pki: Pki
    token: Path
    remediator: Remediator

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.getvalue().splitlines()]


@contextlib.contextmanager
def started(tmp_path: Path, security_for: Any, *, host: str = "127.0.0.1",
            limits: Limits | None = None) -> Iterator[Running]:
    sim = KubeSim(tmp_path / "cluster", names=("gpu-01", "gpu-02", "gpu-03", "gpu-04"))
    receiver = secured_receiver(tmp_path, sim.inventory, security_for, host=host, limits=limits)
    yield Running(receiver.url, receiver.log, sim, receiver.pki, receiver.token, receiver.remediator)


def token_over_tls(pki: Pki, token: Path) -> Security:
    return Security(TokenFile(str(token)), tls_context(str(pki.server_cert), str(pki.server_key)))


def mutual_tls(pki: Pki, token: Path) -> Security:
    return Security(None, tls_context(str(pki.server_cert), str(pki.server_key), str(pki.ca)), mutual=True)


@pytest.fixture
def with_token(tmp_path: Path) -> Iterator[Running]:
    with started(tmp_path, token_over_tls) as run:
        yield run


def client_context(pki: Pki, *, certificate: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if certificate:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context


def post(url: str, body: bytes, context: ssl.SSLContext | None, headers: dict[str, str] | None = None) \
        -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60, context=context) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def bearer(token: Path) -> dict[str, str]:
    return {"Authorization": "Bearer " + token.read_text().strip()}


def test_without_the_token_the_answer_is_401_and_nothing_changes(with_token: Running) -> None:
    run = with_token
    context = client_context(run.pki)
    before = run.sim.snapshot()
    body = payload(("GPUFellOffTheBus", "gpu-02"))
    for headers in ({}, {"Authorization": "Bearer " + "0" * 64}, {"Authorization": "Basic YWRtaW46YWRtaW4="},
                    {"Authorization": "Bearer"}):
        status, answer = post(run.url, body, context, headers)
        assert status == 401 and "bearer token" in answer["error"], headers
    assert run.sim.snapshot() == before
    assert [line["decision"] for line in run.lines()] == ["unauthorized"] * 4
    status, _ = post(run.url, body, context, bearer(run.token))
    assert status == 200 and run.remediator.settle(300) and run.sim.node("gpu-02")["spec"]["unschedulable"] is True
    assert run.token.read_text().strip() not in run.log.getvalue()


def test_a_rotated_token_takes_effect_without_a_restart(with_token: Running) -> None:
    run = with_token
    context = client_context(run.pki)
    old = bearer(run.token)
    run.token.write_text(secrets.token_hex(32) + "\n")
    assert post(run.url, payload(("GPUTemperatureHigh", "gpu-01")), context, old)[0] == 401
    assert post(run.url, payload(("GPUTemperatureHigh", "gpu-01")), context, bearer(run.token))[0] == 200


def test_plain_http_to_the_tls_port_changes_nothing(with_token: Running) -> None:
    run = with_token
    before = run.sim.snapshot()
    with pytest.raises((urllib.error.URLError, ConnectionError, http_client_errors())):
        post(run.url.replace("https://", "http://"), payload(("GPUFellOffTheBus", "gpu-02")), None,
             bearer(run.token))
    assert run.sim.snapshot() == before


def http_client_errors() -> type[Exception]:
    import http.client

    return http.client.HTTPException


def test_mutual_tls_refuses_a_caller_without_a_certificate_of_its_ca(tmp_path: Path) -> None:
    with started(tmp_path, mutual_tls) as run:
        before = run.sim.snapshot()
        other = make_pki(tmp_path / "other", ca_name="someone else's CA")
        stranger = client_context(run.pki)
        stranger.load_cert_chain(str(other.client_cert), str(other.client_key))
        for context in (client_context(run.pki), stranger):
            with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
                post(run.url, payload(("GPUFellOffTheBus", "gpu-02")), context)
        assert run.sim.snapshot() == before
        assert all(line["decision"] == "connection closed" for line in run.lines())
        status, _ = post(run.url, payload(("GPUFellOffTheBus", "gpu-02")), client_context(run.pki, certificate=True))
        assert status == 200 and run.remediator.settle(300)
        assert run.sim.node("gpu-02")["spec"]["unschedulable"] is True
        assert any("CN=alertmanager" in line.get("caller", "") for line in run.lines())


HOSTILE = {
    "deep JSON": b'{"alerts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "deep JSON, unclosed": b"[" * 200_000,
    "a 5,000-digit number": b'{"version": "4", "truncatedAlerts": ' + b"9" * 5000 + b', "alerts": []}',
    "a 5,000-digit float": b'{"alerts": [], "x": 1.' + b"5" * 5000 + b"}",
    "NaN": b'{"alerts": [], "x": NaN}',
    "a 900 kB alert name": payload(("G" * 900_000, "gpu-01")),
    "a 900 kB host label": payload(("GPUFellOffTheBus", "h" * 900_000)),
}


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_hostile_bodies_are_answered_400_with_one_short_log_line(with_token: Running, what: str,
                                                                 capfd: pytest.CaptureFixture[str]) -> None:
    run = with_token
    before = run.sim.snapshot()
    status, answer = post(run.url, HOSTILE[what], client_context(run.pki), bearer(run.token))
    assert status == 400 and len(answer["error"]) < 1000, answer
    assert run.sim.snapshot() == before
    (line,) = run.log.getvalue().splitlines()
    assert json.loads(line)["decision"] == "rejected" and len(line) < 1000
    assert "Traceback" not in capfd.readouterr().err


def test_a_900_kb_host_label_beside_a_readable_alert_is_rejected_alone_and_the_other_acted_on(
        with_token: Running) -> None:
    run = with_token
    body = payload(("GPUReport", "gpu-01"), ("GPUFellOffTheBus", "h" * 900_000))
    # Without the token the server answers 401 before reading a body, so a 900 kB one would meet a reset
    # while still being sent; the token is asked for as before, shown with the same alerts' small form.
    assert post(run.url, payload(("GPUReport", "gpu-01"), ("GPUFellOffTheBus", "h")), client_context(run.pki))[0] \
        == 401
    status, answer = post(run.url, body, client_context(run.pki), bearer(run.token))
    assert status == 200 and len(json.dumps(answer)) < 1000, answer
    assert [d["decision"] for d in answer["decisions"]] == ["reported", "rejected"]
    assert all(len(line) < 1000 for line in run.log.getvalue().splitlines())


def test_a_body_over_the_limit_is_413_unread(with_token: Running) -> None:
    import http.client

    run = with_token
    port = int(run.url.rsplit(":", 1)[1].split("/")[0])
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=60, context=client_context(run.pki))
    connection.putrequest("POST", "/webhook")
    connection.putheader("Authorization", bearer(run.token)["Authorization"])
    connection.putheader("Content-Length", str((1 << 20) + 1))
    connection.endheaders()  # the body is never sent: the answer must not wait for it
    answer = connection.getresponse()
    assert answer.status == 413 and "body over" in json.loads(answer.read())["error"]
    connection.close()


def test_stalled_and_trickling_connections_are_closed(tmp_path: Path) -> None:
    limits = Limits(request_s=2.0, idle_s=1.0)
    with started(tmp_path, token_over_tls, limits=limits) as run:
        port = int(run.url.rsplit(":", 1)[1].split("/")[0])

        def closed_after(send: Any, port: int = port) -> float:
            """Seconds until the server closes a connection that ``send`` feeds."""
            began = time.monotonic()
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                send(sock)
                sock.settimeout(30)
                try:
                    while sock.recv(4096):
                        pass
                except OSError:
                    pass
            return time.monotonic() - began

        def silent(sock: socket.socket) -> None:  # never starts the TLS handshake
            return

        def trickle(sock: socket.socket) -> None:  # a byte every 0.5 s: each read is within idle_s
            for _ in range(60):
                try:
                    sock.sendall(b"\x16")
                except OSError:
                    return
                time.sleep(0.5)

        stalled: dict[str, float] = {}

        def measure(send: Any) -> None:
            stalled[send.__name__] = closed_after(send)

        threads = [threading.Thread(target=measure, args=(f,)) for f in (silent, trickle)]
        for thread in threads:
            thread.start()
        # Meanwhile the receiver answers others at once.
        status, _ = post(run.url, payload(("GPUTemperatureHigh", "gpu-01")), client_context(run.pki),
                         bearer(run.token))
        assert status == 200
        for thread in threads:
            thread.join(60)
        # Closed by the request bound (2 s), not by the client giving up (30 s); slack for a loaded machine.
        assert stalled["silent"] < 15 and stalled["trickle"] < 15, stalled


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_it_listens_on_ipv6(tmp_path: Path) -> None:
    with started(tmp_path, token_over_tls, host="::1") as run:
        assert run.url.startswith("https://[::1]:")
        status, _ = post(run.url, payload(("NVLinkCRCErrors", "gpu-03")), client_context(run.pki), bearer(run.token))
        assert status == 200 and run.remediator.settle(300) and run.sim.node("gpu-03")["spec"]["unschedulable"] is True
        assert any(line.get("caller", "").startswith("[::1]:") for line in run.lines())


def test_listening_beyond_loopback_without_authentication_and_tls_exits_2(tmp_path: Path) -> None:
    token = token_file(tmp_path / "t.token")
    pki = make_pki(tmp_path / "pki")
    tls = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]
    for args, says in (([], "without authentication and TLS"),
                       (["--token-file", str(token)], "without TLS"),
                       (tls, "without authentication")):
        for listen in ("0.0.0.0:9095", "[::]:9095", "10.1.2.3:9095", "gpu-01.example:9095"):
            run = clusterctl("remediate", "serve", "--listen", listen, *args)
            assert run.exit_code == 2, run.output
            assert says in run.output and "loopback" in run.output and "Traceback" not in run.output
    token.chmod(0o644)
    run = clusterctl("remediate", "serve", "--listen", "0.0.0.0:9095", "--token-file", str(token), *tls)
    assert run.exit_code == 2 and "chmod 600" in run.output
    run = clusterctl("remediate", "serve", "--listen", "::1:9095")
    assert run.exit_code == 2 and "[::1]:9095" in run.output


@pytest.mark.parametrize("listen", ["gpu 01:9095", "-gpu-01:9095"])
def test_a_listen_host_that_is_no_host_name_or_ip_address_is_one_line_exit_2(listen: str) -> None:
    run = clusterctl("remediate", "serve", "--listen", listen)
    assert run.exit_code == 2, run.output
    assert run.output.strip().count("\n") == 0 and "--listen" in run.output
    assert "is not a host name or IP address" in run.output and "authentication" not in run.output


def test_help_shows_no_unauthenticated_wildcard_listen() -> None:
    run = clusterctl("remediate", "serve", "--help")
    assert run.exit_code == 0 and "--token-file" in run.output and "--client-ca" in run.output
    assert "0.0.0.0" not in run.output


def test_the_alertmanager_snippet_is_what_alertmanager_accepts(tmp_path: Path) -> None:
    import shutil
    import subprocess

    import yaml

    run = clusterctl("remediate", "alertmanager-config", "--url", "https://10.0.0.5:9095/webhook",
                     "--token-file", "/etc/alertmanager/remediate.token", "--ca-file", "/etc/alertmanager/ca.crt")
    assert run.exit_code == 0, run.output
    config = yaml.safe_load(run.stdout)["receivers"][0]["webhook_configs"][0]
    assert config["http_config"] == {"authorization": {"type": "Bearer",
                                                       "credentials_file": "/etc/alertmanager/remediate.token"},
                                     "tls_config": {"ca_file": "/etc/alertmanager/ca.crt"}}
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("needs Debian's prometheus-alertmanager (amtool)")
    (tmp_path / "alertmanager.yml").write_text(run.stdout)
    checked = subprocess.run([amtool, "check-config", str(tmp_path / "alertmanager.yml")], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("url", ["http://10.0.0.5:9095/\x01webhook", "https://10.0.0.5:9095/web hook",
                                 "file:/etc/alertmanager", "10.0.0.5:9095/webhook"])
def test_the_alertmanager_snippet_refuses_a_url_alertmanager_cannot_post_to(url: str) -> None:
    """--url is read by the inventory's one URL rule: a control character or a space, a non-web scheme or none."""
    run = clusterctl("remediate", "alertmanager-config", "--url", url)
    assert run.exit_code == 2 and "Traceback" not in run.output and "receivers" not in run.stdout
    error = run.stderr.strip()
    assert "\n" not in error and error.startswith("error: --url must ")
    assert repr(url) in error and "\x01" not in error


def test_remediate_serve_as_a_user_runs_it(tmp_path: Path) -> None:
    """The command in its own process: HTTPS with a token, 401 without, an alert acted on, Ctrl-C ends it."""
    import os
    import signal
    import subprocess
    import sys

    from clirun import REPO_ROOT

    sim = KubeSim(tmp_path / "cluster", names=("gpu-01", "gpu-02", "gpu-03"))
    pki = make_pki(tmp_path / "pki")
    token = token_file(tmp_path / "remediate.token")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "NO_COLOR": "1", "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("CLUSTERCTL_INVENTORY", None)
    env.pop("CLUSTERCTL_STATE_DIR", None)
    started_in = tmp_path / "service-cwd"  # where a service unit starts it (/): nothing of it lands there
    started_in.mkdir()
    process = subprocess.Popen(  # no --pending-file, no --state-dir: the state folder's, wherever it is started
        [sys.executable, "-m", "clusterctl", "-i", str(sim.inventory), "remediate", "serve", "--listen",
         f"127.0.0.1:{port}", "--token-file", str(token), "--tls-cert", str(pki.server_cert), "--tls-key",
         str(pki.server_key), "--yes"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=started_in, env=env)
    lines: list[str] = []
    listening = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if line.startswith("listening on "):
                listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert listening.wait(120), "".join(lines)
        assert f"listening on https://127.0.0.1:{port}/webhook, bearer token" in "".join(lines)
        url = f"https://127.0.0.1:{port}/webhook"
        assert post(url, payload(("GPUXidError", "gpu-02")), client_context(pki))[0] == 401
        assert post(url, payload(("GPUXidError", "gpu-02")), client_context(pki), bearer(token))[0] == 200
        deadline = time.monotonic() + 120
        (pending,) = (tmp_path / "state" / "clusterctl" / "remediate").glob("*-pending.json")
        assert f"accepted alerts are kept in {pending} until acted on" in "".join(lines)
        while not any('"decision": "journal"' in line for line in lines) or \
                json.loads(pending.read_text())["hosts"]:  # acted on: journal written, the alert out of the file
            assert time.monotonic() < deadline and process.poll() is None, "".join(lines)
            time.sleep(0.3)
        assert sim.node("gpu-02")["spec"]["unschedulable"] is True
        process.send_signal(signal.SIGINT)
        process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(10)
    text = "".join(lines)
    decisions = [json.loads(line)["decision"] for line in lines if line.startswith("{")]
    assert decisions[:3] == ["unauthorized", "accepted", "quarantine"], text
    assert token.read_text().strip() not in text and "Traceback" not in text
    # The undo journal is in the state folder, named at start and in the decision; 'clusterctl undo' run
    # from any other folder takes the path the log gave.
    undo_folder = tmp_path / "state" / "clusterctl" / "undo"
    assert f"undo journals are written to {undo_folder}/" in text
    (said,) = [json.loads(line)["why"] for line in lines if '"decision": "journal"' in line]
    journal = Path(said.removeprefix("undo with: clusterctl undo "))
    assert journal.parent == undo_folder and journal.is_file(), text
    assert list(started_in.iterdir()) == []
    undone = subprocess.run([sys.executable, "-m", "clusterctl", "-i", str(sim.inventory), "-o", "json", "undo",
                             "--dry-run", str(journal)], capture_output=True, text=True, cwd=tmp_path, env=env,
                            timeout=120)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    would = [step for host in json.loads(undone.stdout)["hosts"] for step in host["done"]]
    assert any(step.endswith("uncordon gpu-02") for step in would), undone.stdout  # on the control plane


def test_a_flood_of_unauthenticated_requests_cannot_fill_the_log(tmp_path: Path) -> None:
    with started(tmp_path, token_over_tls, limits=Limits(noise_per_minute=5)) as run:
        context = client_context(run.pki)
        for _ in range(25):
            assert post(run.url, payload(("GPUFellOffTheBus", "gpu-02")), context)[0] == 401
        assert post(run.url, payload(("GPUTemperatureHigh", "gpu-01")), context, bearer(run.token))[0] == 200
        decisions = [line["decision"] for line in run.lines()]
        assert decisions == ["unauthorized"] * 5 + ["reported"]


def test_the_noise_limit_says_what_it_left_out() -> None:
    from clusterctl.quarantine.webhook_server import NoiseLimit

    said: list[dict[str, object]] = []
    now = [0.0]
    limit = NoiseLimit(lambda **entry: said.append(entry), 2, clock=lambda: now[0])
    for _ in range(5):
        limit(decision="unauthorized")
    now[0] = 61.0
    limit(decision="unauthorized")
    assert [d["decision"] for d in said] == ["unauthorized", "unauthorized", "left out", "unauthorized"]
    assert "3 more line(s)" in str(said[2]["why"])
