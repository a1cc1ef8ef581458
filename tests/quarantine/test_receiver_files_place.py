"""Where ``remediate serve`` writes its undo journals and ``--heal``'s "needs hardware" reports.

The receiver runs as a service (a systemd unit starts it in ``/``), so what it writes must not
depend on the folder it was started from: by default everything is in clusterctl's state folder
(``$CLUSTERCTL_STATE_DIR``, else ``$XDG_STATE_HOME/clusterctl``): ``undo/`` beside bootstrap's
journals, ``heal/`` for the reports. ``--state-dir`` moves it all (made absolute at start); the
places are printed at start; a folder that cannot be written is refused before it listens.
Every other command's undo journal goes to the same ``undo/`` (tests/day2/test_one_confirmation_rule.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clirun import DEMO, clusterctl
from receiver_start import serve_from


def said(stderr: str, start: str, end: str = "/") -> Path:
    (line,) = [line for line in stderr.splitlines() if line.startswith(start)]
    return Path(line.removeprefix(start).removesuffix(end))


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CLUSTERCTL_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "clusterctl"


def test_journals_and_heal_reports_default_to_the_state_folder_from_any_folder(
    started: list[Any], state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in (tmp_path / "here", tmp_path / "there"):
        folder.mkdir()
        code, err = serve_from(folder, monkeypatch, "--heal")
        assert code == 0, err
        assert said(err, "undo journals are written to ") == state / "undo"
        assert said(err, "needs-hardware reports are written to ") == state / "heal"
        assert (state / "undo").is_dir() and (state / "heal").is_dir()
        assert started[-1].state_dir == str(state)
        assert list(folder.iterdir()) == []  # no clusterctl-results/ where it was started


def test_without_heal_no_report_folder_is_named_or_made(
    started: list[Any], state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = serve_from(tmp_path, monkeypatch)
    assert code == 0 and said(err, "undo journals are written to ") == state / "undo", err
    assert "needs-hardware reports" not in err and not (state / "heal").exists()


def test_a_relative_state_dir_is_from_the_folder_it_started_in_and_holds_every_file(
    started: list[Any], state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = serve_from(tmp_path, monkeypatch, "--heal", "--state-dir", "records")
    assert code == 0, err
    records = tmp_path / "records"
    assert said(err, "undo journals are written to ") == records / "undo"
    assert said(err, "needs-hardware reports are written to ") == records / "heal"
    assert said(err, "accepted alerts are kept in ", " until acted on").parent == records / "remediate"
    assert started[0].state_dir == str(records)  # absolute: a later chdir changes nothing
    assert not state.exists()


def test_clusterctl_state_dir_moves_them(started: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "env-records"))
    code, err = serve_from(tmp_path, monkeypatch, "--heal")
    assert code == 0 and said(err, "undo journals are written to ") == tmp_path / "env-records" / "undo", err


@pytest.mark.parametrize(("blocked", "args", "expected"), [
    ("state/clusterctl/undo", (), "the state folder: the undo journals' folder"),
    ("state/clusterctl/heal", ("--heal",), "the state folder: the heal reports' folder"),
    ("records", ("--state-dir", "records"), "--state-dir"),
])
def test_a_folder_it_cannot_write_is_refused_before_it_listens(
    started: list[Any], state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blocked: str,
    args: tuple[str, ...], expected: str
) -> None:
    (tmp_path / blocked).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / blocked).write_text("a file where a folder must be\n")
    code, err = serve_from(tmp_path, monkeypatch, *args)
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert started == []  # never listened


def test_a_dry_run_writes_nothing_and_names_no_journal_folder(
    started: list[Any], state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = serve_from(tmp_path, monkeypatch, "--dry-run", "--heal")
    assert code == 0 and "undo journals are written" not in err, err
    assert not state.exists()


def test_heal_after_drain_writes_its_journal_and_report_where_it_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--heal``'s chain gets the receiver's folders: the report lands there and the log names it."""
    from clusterctl.heal.run import HostHeal, heal_after_drain
    from clusterctl.inventory.loader import load_inventory

    inventory = load_inventory(str(DEMO))
    host = inventory.hosts[0]
    asked: dict[str, Any] = {}

    def heal(runner: Any, inventory: Any, hosts: Any, *, apply: bool, say: Any, state_dir: str | None = None,
             drain: Any = None) -> Any:
        asked["state_dir"] = state_dir
        assert state_dir is not None
        return [HostHeal(host.name, outcome="needs hardware", detail="nothing cured it",
                         report="host: " + host.name)], str(Path(state_dir) / "undo" / "heal-1.json")

    monkeypatch.setattr("clusterctl.heal.run.heal", heal)
    monkeypatch.chdir(tmp_path)
    log: list[dict[str, Any]] = []
    after = heal_after_drain(inventory, state_dir=str(tmp_path / "state"), reports_folder=tmp_path / "state" / "heal")
    after(None, host, lambda **entry: log.append(entry))
    assert asked["state_dir"] == str(tmp_path / "state")
    (report,) = (tmp_path / "state" / "heal").iterdir()
    assert report.name.startswith(f"{host.name}-needs-hardware-") and report.read_text() == f"host: {host.name}\n"
    assert report.stat().st_mode & 0o777 == 0o600
    assert str(report) in log[0]["why"]
    assert log[1]["why"] == f"undo with: clusterctl undo {tmp_path / 'state' / 'undo' / 'heal-1.json'}"
    assert not (tmp_path / "clusterctl-results").exists()


def test_help_names_the_state_folder_and_what_goes_in_it() -> None:
    text = " ".join(clusterctl("remediate", "serve", "--help").stdout.split())
    assert "--state-dir" in text and "undo journals in DIR/undo" in text and "reports in DIR/heal" in text
    assert "~/.local/state/clusterctl" in text and "a relative DIR is from the current folder" in text


def test_heal_after_drain_with_no_cluster_left_logs_that_hosts_failed_heal(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``clusterctl heal`` stops with the one "no cluster here" error; the receiver's chain, run by a server,
    logs it as the host's failed heal (the decision "failed", no class name) and goes on serving."""
    from clusterctl.fanout import Runner
    from clusterctl.heal.run import heal_after_drain
    from clusterctl.inventory.loader import load_inventory
    from clusterctl.transport.factory import ConnectOptions, make_connector

    inventory = load_inventory(str(DEMO))  # never bootstrapped: no kubectl on gpu-a1
    monkeypatch.chdir(tmp_path)
    log: list[dict[str, Any]] = []
    after = heal_after_drain(inventory, state_dir=str(tmp_path), reports_folder=tmp_path / "heal")
    with Runner(make_connector(ConnectOptions()), parallel=4, timeout_s=120) as runner:
        after(runner, inventory.host("gpu-a3"), lambda **entry: log.append(entry))
    (entry,) = log
    assert entry["host"] == "gpu-a3" and entry["decision"] == "failed", log
    assert entry["why"].startswith("no working cluster: cannot read the node of gpu-a3 through the control plane "
                                   "gpu-a1") and "NoCluster" not in entry["why"]
    assert not (tmp_path / "undo").exists() or not any((tmp_path / "undo").iterdir())
