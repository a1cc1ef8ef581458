"""The agent's parts as a user sees their results: conditions, the metrics file, the bundle a node runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clusterctl.agent import conditions as cond
from clusterctl.agent.bundle import build
from clusterctl.agent.metrics import RunFigures, render
from clusterctl.findings import Finding, Severity

NOW = "2026-12-06T02:00:00Z"
LATER = "2026-12-06T02:01:00Z"


def _xid79() -> Finding:
    return Finding(Severity.ERROR, "GPU_XID", "Xid 79 (GPU has fallen off the bus)", host="n1", subject="GPU 3")


def test_an_error_sets_its_condition_and_every_other_type_is_written_false() -> None:
    found = {c["type"]: c for c in cond.conditions([_xid79()], NOW)}
    assert set(found) == {"GPUProblem", "NVLinkProblem", "InfiniBandProblem", "PCIeProblem", "HealthCheckProblem"}
    assert found["GPUProblem"]["status"] == "True" and found["GPUProblem"]["reason"] == "GPUXid"
    assert found["GPUProblem"]["message"] == "clusterctl: GPU_XID: GPU 3: Xid 79 (GPU has fallen off the bus)"
    assert all(c["status"] == "False" for t, c in found.items() if t != "GPUProblem")


def test_warnings_set_no_condition_and_codes_go_to_their_kind() -> None:
    warning = Finding(Severity.WARNING, "GPU_PERSISTENCE_OFF", "persistence mode is off", host="n1")
    ib = Finding(Severity.ERROR, "IB_PORT_DOWN", "mlx5_2 port 1 is Down", host="n1", subject="mlx5_2")
    hung = Finding(Severity.ERROR, "PROBE_HUNG", "nvidia-smi hung", host="n1")
    found = {c["type"]: c for c in cond.conditions([warning, ib, hung], NOW)}
    assert found["GPUProblem"]["status"] == "False"
    assert found["InfiniBandProblem"]["reason"] == "IBPortDown"
    assert found["HealthCheckProblem"]["reason"] == "ProbeHung"


def test_transition_time_moves_only_when_the_status_does() -> None:
    first = cond.conditions([_xid79()], NOW)
    again = {c["type"]: c for c in cond.conditions([_xid79()], LATER, first)}
    assert again["GPUProblem"]["lastTransitionTime"] == NOW and again["GPUProblem"]["lastHeartbeatTime"] == LATER
    cleared = {c["type"]: c for c in cond.conditions([], LATER, first)}
    assert cleared["GPUProblem"]["status"] == "False" and cleared["GPUProblem"]["lastTransitionTime"] == LATER
    assert cleared["NVLinkProblem"]["lastTransitionTime"] == NOW


def test_many_findings_are_one_bounded_message() -> None:
    many = [Finding(Severity.ERROR, "GPU_ECC_UNCORRECTABLE", "x" * 300, host="n1", subject=f"GPU {i}")
            for i in range(8)]
    message = next(c for c in cond.conditions(many, NOW) if c["type"] == "GPUProblem")["message"]
    assert len(message) <= cond.MESSAGE_LIMIT and "(+7 more: GPU_ECC_UNCORRECTABLE)" in message


def test_the_metrics_file_counts_findings_by_code_gpu_and_severity() -> None:
    findings = [_xid79(), _xid79(),
                Finding(Severity.WARNING, "GPU_CLOCKS_THROTTLED", "slow", host="n1", subject="GPU 1"),
                Finding(Severity.INFO, "GPU_ECC_UNCORRECTABLE_HISTORY", "old", host="n1", subject="GPU 2"),
                Finding(Severity.ERROR, "IB_PORT_DOWN", "down", host="n1", subject="mlx5_2")]
    text = render(findings, RunFigures("n1", 1_800_000_000.0, 1.5, False)).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("clusterctl_node_health_finding", (("code", "GPU_XID"), ("gpu", "3"), ("hostname", "n1"),
                                                       ("severity", "error")))] == 2
    assert samples[("clusterctl_node_health_finding", (("code", "IB_PORT_DOWN"), ("gpu", ""), ("hostname", "n1"),
                                                       ("severity", "error")))] == 1
    assert not any("HISTORY" in str(key) for key in samples)  # info findings stay out
    assert samples[("clusterctl_node_health_last_run_timestamp_seconds", (("hostname", "n1"),))] == 1.8e9
    assert samples[("clusterctl_node_health_conditions_published", (("hostname", "n1"),))] == 0


def test_the_bundle_is_the_same_bytes_each_build_and_runs_on_plain_python(tmp_path: Path) -> None:
    data = build()
    assert data == build()  # a re-run of bootstrap writes nothing
    bundle = tmp_path / "clusterctl-node.pyz"
    bundle.write_bytes(data)
    # Run by the system's Python with no site packages: only what the bundle carries.
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    out = tmp_path / "textfiles"
    done = subprocess.run([python, "-S", "-I", str(bundle), "node-agent", "--node", "n1", "--config",
                           str(tmp_path / "none.json"), "--textfile-dir", str(out), "--probe-timeout", "10"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["node"] == "n1" and summary["conditions_published"] is None
    text = (out / "clusterctl_node_health.prom").read_text()
    assert 'clusterctl_node_health_last_run_timestamp_seconds{hostname="n1"}' in text
    # A bad config is read and refused on the node's plain Python too (no PyYAML there).
    config = tmp_path / "bad.json"
    config.write_text('{\n  "node": "n1",\n  "probe_timeout_s": [30]\n}\n')
    refused = subprocess.run([python, "-S", "-I", str(bundle), "node-agent", "--config", str(config)],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and refused.stdout == "", refused.stderr
    assert refused.stderr == f"clusterctl-node: {config}:3: field 'probe_timeout_s': expected a single value here, " \
        "found a list.\n"


def test_a_bad_command_line_exits_2() -> None:
    from clusterctl.agent.main import main

    assert main(["node-agent", "--probe-timeout", "soon"]) == 2


@pytest.mark.parametrize(("argv", "said"), [
    (["node-agent", "--node", "n1", "--probe-timeout", "nan"], "probe_timeout_s must be a number greater than 0"),
    (["node-agent", "--node", "n1", "--probe-timeout", "0"], "probe_timeout_s must be a number greater than 0"),
    (["node-agent", "--node", "a b"], "node 'a b' may only use ASCII letters"),
    (["slurm-health", "--deadline", "inf"], "--deadline must be a number greater than 0"),
    (["slurm-health", "--node", "a b"], "node 'a b' may only use ASCII letters"),
    (["slurm-health", "--since", "soon"], "since takes a duration such as 30m, 24h or 7d, got 'soon'"),
])
def test_a_flag_is_checked_as_the_config_file_s_setting_is(
        argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A NaN timeout was a traceback mid-run; a node name the config file refuses ran: both exit 2 first."""
    from clusterctl.agent.main import main

    assert main([*argv, *(["--textfile-dir", str(tmp_path / "out")] if argv[0] == "node-agent" else [])]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("config", "said"), [
    ('{\n  "node": "n1",\n  "probe_timeout_s": "soon"\n}\n',
     "3: field 'probe_timeout_s': probe_timeout_s must be a number greater than 0, not 'soon'."),
    ('{\n  "node": "n1",\n  "since": 30\n}\n', "3: field 'since': since takes a duration such as 30m, 24h or 7d"),
    ('{\n  "node": ["n1"]\n}\n', "2: field 'node': expected a single value here, found a list."),
    ('[{"node": "n1"}]\n', "1: the file must be a mapping of node agent settings, not a list."),
    ('{\n  "node": "n1",\n\n  "probe_timeout": 30\n}\n',
     "4: field 'probe_timeout': unknown field 'probe_timeout'. Did you mean 'probe_timeout_s'?"),
    ('{\n  "node": "n1",\n  "since": "1h",\n}\n',
     "4: this is not valid JSON at column 1: a ',' before the '}' or ']' that ends the entries is one too many.\n"),
    ('{\n  "node": "n\u0001"\n}\n', "2: this is not valid JSON at column 13: a control character (U+0001) in text "
                                    "in double quotes, which JSON writes as an escape such as \\n or \\u0001.\n"),
    # A key is echoed in the error: its control characters shown as escapes, never sent to the terminal.
    ('{\n  "node": "n1",\n  "\\u001b[2Jx": 1\n}\n', "3: field '\\x1b[2Jx': unknown field '\\x1b[2Jx'."),
])
def test_a_config_value_of_the_wrong_type_is_one_line_naming_the_file_line_and_field(
        config: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As an inventory's values are: exit 2 before the agent reads or writes anything, no traceback."""
    from clusterctl.agent.main import main

    path = tmp_path / "node-agent.json"
    path.write_text(config)
    assert main(["node-agent", "--config", str(path), "--textfile-dir", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"clusterctl-node: {path}:{said}") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_what_the_api_server_says_is_printed_as_text_never_as_terminal_control(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.agent import run as agent_run
    from clusterctl.agent.main import main
    from clusterctl.health.model import HostHealth, Verdict

    said = "could not patch node n1: Error from server: \x1b]0;owned\x07\x1b[2J denied\r\nforged line"
    healthy = HostHealth("n1", Verdict.HEALTHY, "all checks passed")
    monkeypatch.setattr(agent_run, "run_once", lambda transport, options: agent_run.AgentRun(healthy, problems=[said]))
    assert main(["node-agent", "--node", "n1", "--config", "/nonexistent/agent.json"]) == 1
    err = capsys.readouterr().err
    assert err == "clusterctl-node: could not patch node n1: Error from server: \\x1b]0;owned\\x07\\x1b[2J " \
        "denied\\r\\nforged line\n", err
