"""Output that fits the terminal (issue 37): names and values a user must copy are never cut;
long text wraps with a hanging indent at the terminal's width, never back to column 0.

Each command's table output is read at 80 and 120 columns (``COLUMNS``, as a terminal sets it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from clirun import DEMO, REPO_ROOT, CliRun, clusterctl

from clusterctl.terminal_layout import Column, fit, hanging, print_blocks, print_table

FIXTURES = REPO_ROOT / "tests" / "fixtures"
WIDTHS = (80, 120)


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}-columns")
def width(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("COLUMNS", str(request.param))
    return int(request.param)


def assert_fits(run: CliRun | str, width: int) -> list[str]:
    """Nothing cut with an ellipsis; a line wider than the terminal only for one unbreakable token."""
    text = run if isinstance(run, str) else run.stdout + run.stderr
    assert "…" not in text, text
    lines = text.splitlines()
    for line in lines:
        if len(line.rstrip()) > width:
            longest = max(len(token) for token in line.split())
            assert longest > width // 2, f"{len(line.rstrip())} columns at {width}: {line!r}"
    return lines


def continuation_lines(lines: list[str], first: str) -> list[str]:
    """The lines that follow the line starting with ``first`` until the next line at column 0."""
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    following = []
    for line in lines[start + 1:]:
        if not line.startswith(" "):
            break
        following.append(line)
    return following


def test_tune_nccl_never_cuts_a_variable_or_a_value_and_tells_the_override_from_the_fleet_row(
        width: int, tmp_path: Path) -> None:
    survey = tmp_path / "survey.json"
    assert clusterctl("-i", DEMO, "survey", "-o", "json", "--save", survey).exit_code == 1
    run = clusterctl("-i", DEMO, "tune-nccl", "--survey", survey)
    assert run.exit_code == 0, run.output
    # The files after "--- nccl.conf" are printed as they will be written, line for line.
    table = run.stdout.split("--- nccl.conf")[0]
    lines = assert_fits(table + run.stderr, width)
    assert "NCCL_IB_HCA @gpu-b3" in table and "NCCL_SOCKET_IFNAME" in table
    assert "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1" in table
    assert "=mlx5_0:1,mlx5_1:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1" in table
    # The reason is shown (wrapped), never given zero width.
    assert "8 active IB ports in GPU order" in " ".join(line.strip(" │") for line in lines)
    notes = continuation_lines(lines, "note: NCCL_CROSS_NIC")
    assert notes and all(line.startswith("      ") for line in notes)


def test_finding_lines_wrap_under_their_message(width: int) -> None:
    run = clusterctl("-i", DEMO, "survey")
    lines = assert_fits(run, width)
    following = continuation_lines(lines, "ERROR   gpu-a3 NVLINK_MISSING")
    assert following[0].startswith("          ") and not following[0].startswith("        fix:")
    fix = next(line for line in following if line.startswith("        fix:"))
    assert fix.startswith("        fix: Reset the GPUs")


def test_topo_show_wraps_its_host_lines_under_them(width: int) -> None:
    run = clusterctl("topo", "show", FIXTURES / "topo" / "dgx1-v100-hybrid-cube-mesh.txt", "--tp", "4")
    lines = assert_fits(run, width)
    gpu0 = continuation_lines(lines, "  GPU0: NUMA ?")
    if width < 100:
        assert gpu0 and gpu0[0].startswith("    across the PCIe host bridges")
    assert any("dgx1-v100-hybrid-cube-mesh.txt" in line and "…" not in line for line in lines)


def test_topo_show_wraps_what_it_could_not_read_and_the_nic_key(width: int) -> None:
    run = clusterctl("topo", "show", FIXTURES / "topo" / "DERIVED-h200-clipped-100-columns.txt")
    assert run.exit_code == 0, run.output
    warnings, _ = run.stdout.split("\n\n", 1)  # the matrix below is wider than 80 columns: printed whole
    lines = assert_fits(warnings, width)
    assert sum(line.startswith("  - line ") for line in lines) == 3, warnings
    assert all(line.startswith(("  - line ", "    ")) for line in lines[1:]), warnings
    if width < 100:  # the NICs' short names, with a key that wraps as text does
        key = run.stdout.split("\nkey: ", 1)[1].split("\nNV# ", 1)[0].splitlines()
        assert all(len(line) <= width for line in key) and "N7=mlx5_7" in key[-1], key


def test_bootstrap_artifacts_notes_break_no_quoted_command(width: int) -> None:
    run = clusterctl("-i", DEMO, "bootstrap", "artifacts")
    assert run.exit_code == 0, run.output
    lines = assert_fits(run, width)
    note = [next(line for line in lines if line.startswith("note: quay.io/tigera/operator is left out")),
            *continuation_lines(lines, "note: quay.io/tigera/operator is left out")]
    assert all(line.count("'") % 2 == 0 for line in note), note  # nothing quoted to copy is cut in two
    assert "the image: line of tigera-operator.yaml (in manifests.txt)" in " ".join(" ".join(note).split())


def test_layout_advice_keeps_the_limit_to_copy_on_one_line(width: int) -> None:
    run = clusterctl("-i", DEMO, "survey", "--tp", "8", "--pp", "2")
    lines = assert_fits(run, width)
    assert any("(-l '!gpu-a3')" in line for line in lines), run.stdout  # never "-l" / "'!gpu-a3'" on two lines


@pytest.mark.parametrize("command", ["bootstrap", "upgrade"])
def test_phases_say_where_each_runs_and_which_only_read_and_wrap_in_their_columns(command: str, width: int) -> None:
    phases = {p["name"]: p for p in clusterctl("-i", DEMO, "-o", "json", command, "phases").json()}
    run = clusterctl("-i", DEMO, command, "phases")
    lines = assert_fits(run, width)
    assert lines[0].split() == ["PHASE", "RUNS", "CHANGES", "WHAT", "IT", "DOES"]
    runs, changes, what = (lines[0].index(header) for header in ("RUNS", "CHANGES", "WHAT"))
    rows: list[list[str]] = []
    for line in lines[1:]:  # a wrapped cell goes on under itself, the first column blank
        if line[:runs].strip():
            rows.append([line[:runs].strip(), line[runs:changes].strip(), line[changes:what].strip()])
        else:
            rows[-1][1] = f"{rows[-1][1]} {line[runs:changes].strip()}".strip()
    said = {name: (where, changed) for name, where, changed in rows}
    assert list(said) == list(phases) and any(line.startswith(" " * what) for line in lines)
    assert all(changed == ("no" if phases[name]["read_only"] else "yes") for name, (_, changed) in said.items())
    assert said["network"][0] == "once, on the first control plane"
    assert phases["network"] | {"role": "control-plane", "once_per_cluster": True, "serial": False} == phases["network"]
    if command == "upgrade":  # node by node in batches (day2.upgrade.batches); drain, ready, uncordon from the first CP
        assert said["kubeadm"][0] == "each batch of nodes" and said["restart-kubelet"][0] == "each batch of nodes"
        assert said["drain"][0] == said["ready"][0] == "each batch of nodes, from the first control plane"
        assert [(p["in_batches"], p["runs_from"]) for p in (phases["kubeadm"], phases["uncordon"], phases["network"])] \
            == [(True, None), (True, "first-control-plane"), (False, None)]
    if command == "bootstrap":  # as it always said
        assert said["kernel"][0] == "each host" and "in_batches" not in phases["kernel"]
        assert said["control-plane"][0] == "control planes, one at a time" and said["preflight"] == ("each host", "no")
        assert said["join"][0] == "each host but control planes"
        assert (phases["control-plane"]["role"], phases["control-plane"]["serial"]) == ("control-plane", True)
        assert (phases["join"]["role"], phases["join"]["not_role"]) == (None, "control-plane")


def test_bench_report_never_breaks_the_file_name(width: int) -> None:
    path = FIXTURES / "nccl-tests" / "gather-a100-2node-1nic-nccl-info-topology-excerpt.txt"
    run = clusterctl("bench", "report", path)
    lines = assert_fits(run, width)
    assert any(str(path) in line for line in lines)
    assert lines[1].startswith("  ") or str(path) + ":" in lines[0]


def test_mock_show_never_cuts_a_state_folder(width: int) -> None:
    clusterctl("-i", DEMO, "exec", "--", "true")
    run = clusterctl("-i", DEMO, "mock", "show")
    assert_fits(run, width)
    folders = [h["folder"] for h in json.loads(clusterctl("-i", DEMO, "-o", "json", "mock", "show").stdout)["hosts"]]
    assert folders and all(folder in run.stdout for folder in folders)


def test_inventory_show_never_cuts_a_value(width: int) -> None:
    run = clusterctl("-i", DEMO, "inventory", "show")
    assert run.exit_code == 0, run.output
    assert_fits(run, width)
    assert "control-plane,worker" in run.stdout


def test_tune_nccl_sweep_table_cuts_no_header_and_no_value(
        width: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = clusterctl("-i", DEMO, "tune-nccl", "--sweep")
    assert run.exit_code == 0, run.output
    # The sweep's table and its left-out note (the files after it are printed as they will be written).
    lines = assert_fits("sweep:" + run.stdout.split("sweep:", 1)[1].split("\nnote:", 1)[0], width)
    header = next(line for line in lines if "collective" in line)
    assert "size range" in header and "gain (interval)" in header and "best" in header
    assert any("allreduce" in line and "medium" in line and "defaults" in line for line in lines)


def test_record_puts_the_replay_command_whole_on_a_line_of_its_own(width: int, tmp_path: Path) -> None:
    out = tmp_path / "a-rather-long-folder-name-for-the-recorded-replica-of-these-hosts"
    run = clusterctl("-i", DEMO, "-l", "gpu-a1", "record", "--out", out)
    assert run.exit_code == 0, run.output
    assert_fits(run, width)
    assert f"  clusterctl -i {out / 'inventory.yaml'} survey" in run.stdout.splitlines()


LONG_FOLDER = "/opt/a/rather/long/folder/name/that/does/not/exist/on/any/host/of/the/demo/fleet"


@pytest.mark.parametrize("command", [
    ["copy", str(REPO_ROOT / "pyproject.toml"), f"{LONG_FOLDER}/nccl.conf", "--sudo", "--dry-run"],
    ["exec", "--", f"ls {LONG_FOLDER} && echo the listing of that folder went well on every host; exit 3"],
], ids=["copy", "exec"])
def test_failed_lines_of_copy_and_exec_wrap_under_their_message_and_keep_the_path_whole(
        width: int, command: list[str]) -> None:
    """They were printed as one line however wide the terminal, unlike every other command's."""
    run = clusterctl("-i", DEMO, "-l", "gpu-a2", *command)
    assert run.exit_code == 1, run.output
    lines = run.stderr.splitlines()
    assert lines[0].startswith("FAILED gpu-a2: ")
    for line in lines:
        assert len(line) <= width or len(line.split()) == 1, f"{len(line)} columns at {width}: {line!r}"
    assert continuation_lines(lines, "FAILED")  # hanging under it (2 columns in where a path needs the room)
    assert any(LONG_FOLDER in line for line in lines)


# --- the layout rule itself -------------------------------------------------------------------


def test_a_table_leaves_out_droppable_columns_before_cutting_and_prints_blocks_last() -> None:
    columns = (Column("name", keep=True), Column("value", keep=True), Column("note", drop_order=1), Column("why"))
    rows = [("NCCL_IB_HCA", "=" + "mlx5_0:1," * 6, "a note", "a reason that is long " * 3)]
    assert fit(columns, rows, 200).as_table and not fit(columns, rows, 200).left_out
    narrow = fit(columns, rows, 100)
    assert narrow.as_table and narrow.left_out == ("note",)
    assert not fit(columns, rows, 60).as_table


def test_a_block_puts_a_path_too_long_for_the_room_after_its_header_on_a_line_of_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """'mock show' at 80 columns printed '  state folder: PATH' 88 columns wide, where the path alone fits."""
    from rich.console import Console

    monkeypatch.setenv("COLUMNS", "80")
    console = Console(width=80, color_system=None)
    folder = "/srv/" + "state/" * 11 + "gpu-a1"  # 77 characters: too long after 'state folder: ', not alone
    with console.capture() as captured:
        print_blocks(console, (Column("host", keep=True), Column("state folder", keep=True), Column("services")),
                     [("gpu-a1", folder, "containerd=active, kubelet=active, ssh=active, " * 2)])
    assert captured.get().splitlines() == [
        "gpu-a1", "  state folder:", f"  {folder}",
        "  services: containerd=active, kubelet=active, ssh=active, containerd=active,",
        "            kubelet=active, ssh=active,"]


def test_two_prose_columns_one_with_a_long_word_lose_no_word() -> None:
    """rich narrowed both prose columns evenly, one below its longest word, then cropped every line at the
    terminal's edge: 'status' at 120 columns showed "clusterctl release gp" and lost 'bench' and 'pass:'."""
    from rich.console import Console

    console = Console(width=120, color_system=None, record=True)
    needs = "health (level 1) and bench nccl on the host pass: clusterctl release gpu-a3"
    reason = "\\x1b]0;owned\\x07\\x1b[2Jfine\\nforged line \\x9b31m"
    columns = (Column("HOST", keep=True), Column("SINCE", keep=True), Column("BY", keep=True), Column("REASON"),
               Column("CODES", keep=True), Column("CORDONED", keep=True), Column("RELEASE NEEDS"))
    with console.capture() as captured:
        print_table(console, columns, [("gpu-a3", "2026-12-07T09:26:27Z", "root@vm", reason, "NVLINK_DOWN", "yes",
                                         needs)], boxed=False)
    shown = captured.get()
    assert all(len(line.rstrip()) <= 120 for line in shown.splitlines()), shown
    assert [word for word in (*needs.split(), *reason.split()) if word not in shown.split()] == [], shown


@pytest.mark.parametrize("make", [lambda: "x" * 90, lambda: "see /a/very/" + "long/" * 20 + "path now"])
def test_hanging_never_breaks_a_token(make: Callable[[], str]) -> None:
    text = make()
    wrapped = hanging(text, 40, 4)
    assert text.replace(" ", "") == wrapped.replace(" ", "").replace("\n", "")
    assert all(token in text.split() for token in wrapped.split())


# --- a path a user copies, under a deep working folder ------------------------------------------

DEEP = "a-rather-deep-working-directory-of-someone/" * 3


def on_a_line_of_its_own(lines: list[str], copied: str | Path) -> bool:
    """``copied`` (a path, or the command holding it) whole on one line, hanging 2 or more columns in."""
    return any(line.startswith("  ") and line.strip().rstrip(",") == str(copied) for line in lines)


@pytest.fixture
def deep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", "80")
    return tmp_path / DEEP


def test_bench_results_folder_goes_whole_on_a_line_of_its_own(deep: Path) -> None:
    run = clusterctl("-i", DEMO, "bench", "ib", "--results-dir", deep / "results")
    assert run.exit_code == 1, run.output  # the demo's slow link
    lines = assert_fits(run, 80)
    assert "results:" in lines and on_a_line_of_its_own(lines, deep / "results")


def test_a_bench_matrix_wider_than_the_terminal_cuts_no_host_and_no_figure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")  # 6 hosts: a table 65 columns wide
    run = clusterctl("-i", DEMO, "bench", "ib", "--results-dir", tmp_path / "results")
    lines = assert_fits(run.stdout, 50)
    block = lines[lines.index("gpu-a1"):lines.index("gpu-a2")]
    assert "  gpu-a2: 196.8" in block and "  gpu-b3: 7.9" in block, run.stdout  # the demo's slow link


def test_a_table_title_is_a_whole_line_above_its_table_however_narrow_the_table(width: int, tmp_path: Path) -> None:
    """The one title rule (``print_title``), on every table: a title longer than its table is neither folded
    at the table's width (bench ib's matrix did) nor widens the table (bench nccl's did); it starts at column 0
    and, like any long text, wraps only at the terminal's width."""
    nccl = clusterctl("-i", DEMO, "-l", "gpu-a1", "bench", "nccl", "--results-dir", tmp_path / "nccl").stdout
    assert nccl.splitlines()[:3] == ["all_reduce_perf bus bandwidth (GB/s), median 232.44",
                                     "┏━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━┓",
                                     "┃ host   ┃ busbw ┃ avg busbw ┃ status ┃"], nccl
    matrix = clusterctl("-i", DEMO, "bench", "ib", "--results-dir", tmp_path / "ib").stdout
    title = ("each cell: the lowest bandwidth in Gb/s of the tests between the two hosts (every HCA pair); "
             "'fail': a test failed; '·': not tested")
    assert matrix.split("\n┏")[0] == hanging(title, width, 2), matrix


def test_bootstrap_journal_and_progress_file_go_whole_on_lines_of_their_own(deep: Path) -> None:
    run = clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "--yes", "--state-dir", deep / "state")
    assert run.exit_code == 0, run.output
    lines = assert_fits(run, 80)
    (journal,) = (deep / "state" / "undo").glob("bootstrap-*.json")
    assert "note: undo with:" in lines and on_a_line_of_its_own(lines, f"clusterctl undo {journal}")
    assert "note: progress kept in" in lines
    assert any(on_a_line_of_its_own(lines, kept) for kept in (deep / "state" / "bootstrap").glob("*.json"))


def test_survey_graph_files_are_never_broken(deep: Path) -> None:
    run = clusterctl("-i", DEMO, "-l", "gpu-a1", "survey", "--graph", deep / "graphs")
    lines = assert_fits(run, 80)
    assert "graph gpu-a1:" in lines and on_a_line_of_its_own(lines, deep / "graphs" / "gpu-a1.dot")


# --- errors and an interrupted run's report, written on stderr, follow the same rule ------------

def test_an_inventory_error_keeps_its_file_whole_on_a_line_of_its_own(deep: Path) -> None:
    deep.mkdir(parents=True)
    inventory = deep / "inventory.yaml"
    inventory.write_text("hosts:\n  gpu-a1:\n    address: 10.0.0.1\n    port: seventy\n")
    run = clusterctl("-i", inventory, "inventory", "show")
    assert run.exit_code == 2 and run.stdout == "", run.output
    lines = assert_fits(run.stderr, 80)
    assert lines[0] == "error:" and on_a_line_of_its_own(lines, f"{inventory}:4:"), run.stderr
    assert all(line.startswith("  ") for line in lines[1:]) and len(lines) > 2, run.stderr
    assert " ".join(run.stderr.split()).endswith("not 'seventy'. SSH normally listens on port 22.")


def test_an_error_off_a_terminal_stays_on_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    inventory = tmp_path / DEEP / "inventory.yaml"
    inventory.parent.mkdir(parents=True)
    inventory.write_text("hosts:\n  gpu-a1:\n    port: seventy\n")
    run = clusterctl("-i", inventory, "inventory", "show")
    assert run.exit_code == 2 and run.stderr.startswith(f"error: {inventory}:3: field 'hosts.gpu-a1.port': ")
    assert run.stderr.count("\n") == 1, run.stderr  # a log or a grep gets the paragraph as one line
    debug = clusterctl("--debug", "-i", inventory, "inventory", "show")
    assert debug.exit_code == 2 and "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.endswith(run.stderr), debug.stderr


@pytest.mark.parametrize(("args", "said", "help_command"), [
    (("survey", "--no-such-option-of-some-length"), "no such option: --no-such-option-of-some-length.",
     "clusterctl survey -h"),
    (("-o", "xml", "survey"), "invalid value for '-o' / '--output': 'xml' is not one of ", "clusterctl -h"),
    (("topo", "show"), "missing argument 'FILE|-'. Usage: clusterctl topo show [OPTIONS] FILE|-;",
     "clusterctl topo show -h"),
    (("bench", "nccl", "--bogus"), "no such option: --bogus (Possible options: --gpus).", "clusterctl bench nccl -h"),
])
def test_a_bad_option_or_command_click_finds_is_the_same_one_paragraph_error(
        args: tuple[str, ...], said: str, help_command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    run = clusterctl(*args)
    assert run.exit_code == 2 and run.stdout == "", run.output
    lines = assert_fits(run.stderr, 80)
    assert lines[0].startswith("error: ") and all(line.startswith("  ") for line in lines[1:]), run.stderr
    assert all(len(line) <= 80 for line in lines), run.stderr
    text = " ".join(run.stderr.split())
    assert said in text and text.endswith(f"try '{help_command}' for help."), run.stderr


def test_an_interrupted_bootstrap_puts_the_undo_command_whole_on_a_line_of_its_own(
        deep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    from clusterctl.bootstrap.phases.packages import Packages

    plan = Packages.plan

    def plan_then_ctrl_c(self: Packages, ctx: object, state: object) -> object:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C once the kernel phase has changed the host
        return plan(self, ctx, state)  # type: ignore[arg-type]

    monkeypatch.setattr(Packages, "plan", plan_then_ctrl_c)
    run = clusterctl("-i", DEMO, "-l", "gpu-a1", "bootstrap", "--yes", "--state-dir", deep / "state")
    assert run.exit_code == 130 and "interrupted (SIGINT)" in run.stderr, run.output
    lines = assert_fits(run, 80)
    (journal,) = (deep / "state" / "undo").glob("bootstrap-*.json")
    assert on_a_line_of_its_own(lines, f"clusterctl undo {journal}"), run.stderr
    # The line that goes on, too: broken across lines, it pasted as two commands.
    goes_on = f"clusterctl -i {DEMO} -l gpu-a1 bootstrap --state-dir {deep / 'state'} --resume --yes"
    assert on_a_line_of_its_own(lines, goes_on), run.stderr
