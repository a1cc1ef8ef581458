"""``tests/upstream/build-tools``'s cache rules, with a stand-in ``go`` that logs what it is asked.

The real cold build takes most of an hour (figures: docs/testing.md, ``benchmarks/cold_build_tools``);
what a user relies on between builds is checked here: the tools of one Kubernetes release come
from one ``go build``, a complete cache is reused without running Go at all, the last line is the
folder, and a failed or incomplete build never counts as a cache entry.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from toolset import KUBERNETES_DEMO_MINOR, KUBERNETES_NEWEST, TOOLS

SCRIPT = Path(__file__).resolve().parent / "build-tools"

#: Answers the go subcommands build-tools runs; appends each command line to $FAKE_GO_LOG, and
#: fails a build that names a package containing $FAKE_GO_FAIL.
FAKE_GO = """\
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_GO_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
root = Path(os.environ["FAKE_GO_ROOT"])
if args[:2] == ["env", "GOVERSION"]:
    print("go1.26.0")
elif args[:3] == ["mod", "download", "-json"]:
    (root / "go.mod").write_text("module example\\n")
    print(json.dumps({"GoMod": str(root / "go.mod")}))
elif args[:2] == ["list", "-m"]:
    print(root / "module")
elif args[0] == "build":
    target = args[args.index("-o") + 1]
    packages = args[args.index("-o") + 2:]
    if os.environ.get("FAKE_GO_FAIL") and any(os.environ["FAKE_GO_FAIL"] in p for p in packages):
        sys.exit("compile: out of memory")
    names = [p.rsplit("/", 1)[-1] if not p.rsplit("/", 1)[-1].startswith("v3") else "server" for p in packages]
    paths = [Path(target) / name for name in names] if target.endswith("/") else [Path(target)]
    for path in paths:
        path.write_text("#!/bin/sh\\n")
        path.chmod(0o755)
"""


def fake_go(tmp_path: Path) -> dict[str, str]:
    bin_folder, root = tmp_path / "bin", tmp_path / "go-root"
    bin_folder.mkdir()
    for data in {d for tool in TOOLS for d in tool.data}:
        (root / "module" / data).parent.mkdir(parents=True, exist_ok=True)
        (root / "module" / data).write_text("kind: Stage\n")
    go = bin_folder / "go"
    go.write_text(f"#!{sys.executable}\n{FAKE_GO}")
    go.chmod(0o755)
    return {"PATH": f"{bin_folder}:/usr/bin:/bin", "FAKE_GO_LOG": str(tmp_path / "go.log"),
            "FAKE_GO_ROOT": str(root), "HOME": str(tmp_path)}


def build_tools(cache: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--cache", str(cache), *args], capture_output=True,
                          text=True, env=env, timeout=120)


def go_calls(tmp_path: Path, subcommand: str) -> list[str]:
    log = tmp_path / "go.log"
    return [line for line in log.read_text().splitlines() if line.startswith(subcommand)] if log.exists() else []


def test_a_cold_build_makes_every_tool_once_and_a_second_run_reuses_them_without_go(tmp_path: Path) -> None:
    env, cache = fake_go(tmp_path), tmp_path / "tools"
    first = build_tools(cache, env, "--time-report", str(tmp_path / "report.json"))
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.splitlines()[-1] == str(cache)
    wanted = [tool for tool in TOOLS if not tool.optional]
    for tool in wanted:
        assert os.access(cache / tool.key / tool.file_name, os.X_OK), tool.key
        assert json.loads((cache / tool.key / "build-info.json").read_text())["version"] == tool.version
    builds = go_calls(tmp_path, "build")
    # The binaries of one Kubernetes release come from one go build (the newest's and the demo
    # minor's: the real nodes' cluster runs 1.36 before its upgrade); every other build is its own.
    together = ("kubeadm", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet",
                "kube-proxy")
    for release in (KUBERNETES_NEWEST, KUBERNETES_DEMO_MINOR):
        same = [line for line in builds if "cmd/kube-apiserver" in line and f"gitVersion=v{release} " in line]
        assert len(same) == 1 and all(f"k8s.io/kubernetes/cmd/{name}" in same[0] for name in together), release
        assert all(flag in same[0] for flag in ("-trimpath", "-s -w"))
    assert len(builds) == len({(t.module, t.version) for t in wanted})
    report = json.loads((tmp_path / "report.json").read_text())
    assert {key for build in report["builds"] for key in build["tools"]} == {t.key for t in wanted}
    assert [line for line in first.stdout.splitlines() if line.startswith("built")], first.stdout
    assert not [leftover.name for leftover in cache.glob(".*") if leftover.name != ".lock"]

    (tmp_path / "go.log").unlink()
    second = build_tools(cache, {**env, "PATH": "/usr/bin:/bin"})
    assert second.returncode == 0, second.stdout + second.stderr
    assert not (tmp_path / "go.log").exists(), "a complete cache must not run Go"
    assert second.stdout.splitlines()[-1] == str(cache)
    assert sum(line.startswith("reused ") for line in second.stdout.splitlines()) == len(wanted)


def test_a_failed_build_leaves_no_cache_entry_and_the_others_are_still_built(tmp_path: Path) -> None:
    env, cache = fake_go(tmp_path), tmp_path / "tools"
    failed = build_tools(cache, {**env, "FAKE_GO_FAIL": "containerd/v2/cmd/ctr"}, "--only", "containerd", "--only",
                         "ctr", "--only", "crictl")
    assert failed.returncode == 1
    assert "FAILED containerd, ctr" in failed.stdout and "out of memory" in failed.stdout
    assert not list(cache.glob("containerd-*")) and not list(cache.glob("ctr-*"))
    assert os.access(cache / "crictl-1.37.0" / "crictl", os.X_OK)
    assert not [leftover.name for leftover in cache.glob(".*") if leftover.name != ".lock"]
    assert failed.stdout.splitlines()[-1] == str(cache)


def test_an_entry_missing_a_file_is_rebuilt_and_a_killed_builds_staging_folder_is_not_reused(tmp_path: Path) -> None:
    env, cache = fake_go(tmp_path), tmp_path / "tools"
    kwok = next(tool for tool in TOOLS if tool.name == "kwok")
    crictl = next(tool for tool in TOOLS if tool.name == "crictl")
    # kwok's folder without its stage files; crictl only as a staging folder a killed run left.
    (cache / kwok.key).mkdir(parents=True)
    (cache / kwok.key / "kwok").write_text("#!/bin/sh\n")
    (cache / kwok.key / "kwok").chmod(0o755)
    staging = cache / f".{crictl.key}.4242.new"
    staging.mkdir()
    (staging / "crictl").write_text("half written")
    done = build_tools(cache, env, "--only", "kwok", "--only", "crictl")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"built kwok {kwok.version}" in done.stdout and f"built crictl {crictl.version}" in done.stdout
    assert all((cache / kwok.key / Path(data).name).is_file() for data in kwok.data)
    assert not staging.exists()


def load_script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("build_tools", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("build_tools", loader))
    sys.modules["build_tools"] = module
    loader.exec_module(module)
    return module


def test_the_idle_core_figure_replays_gos_action_graph_on_that_many_cores() -> None:
    """Two 10 s compiles and the 5 s link needing both: 15 s on two cores, 25 s on one; the
    figure follows dependencies, not only the CPU total."""
    script = load_script()
    second = 1_000_000_000
    actions = [{"ID": 0, "Mode": "link", "Deps": [1, 2], "Priority": 3, "CmdUser": 4 * second, "CmdSys": second},
               {"ID": 1, "Mode": "build", "Deps": [3], "Priority": 1, "CmdUser": 10 * second, "Cmd": ["compile"]},
               {"ID": 2, "Mode": "build", "Deps": [], "Priority": 2, "CmdUser": 10 * second, "Cmd": ["compile"]},
               {"ID": 3, "Mode": "build check cache", "Deps": [], "Priority": 0}]
    assert script.idle_wall(actions, 2) == 15
    assert script.idle_wall(actions, 1) == 25
    chain = [{"ID": 0, "Deps": [1], "Priority": 1, "CmdUser": 10 * second},
             {"ID": 1, "Deps": [], "Priority": 0, "CmdUser": 10 * second}]
    assert script.idle_wall(chain, 2) == 20
