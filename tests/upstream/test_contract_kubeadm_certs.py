"""``kubeadm certs check-expiration``, simulated and real, on the same files: the states clusterctl meets.

The real kubeadm runs in a ``Sandbox`` (it reads the fixed paths under ``/etc/kubernetes``): once to
make a control plane's certificates and kubeconfigs (``kubeadm init phase certs all`` and
``kubeadm init phase kubeconfig all``), then ``certs check-expiration`` on that folder with files
taken away. The mock host gets the same file names (``SimulatedHost``), so both answer for the
same state: before ``kubeadm init`` (nothing there, as after ``kubeadm reset``), a whole control
plane, one with certificates missing, an external CA (its key gone), a CA certificate gone, and a
half-joined node (the kubelet's files and the cluster CA only). They must agree on the exit code,
on what clusterctl's parser reads of the tables and on kubeadm's error line; ``certs renew all``
(``clusterctl certs renew``'s line) on its line for each certificate as well.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from contract import Answer, SimulatedHost
from sandbox import Sandbox
from toolset import KUBERNETES_NEWEST, KUBERNETES_OLDEST

from clusterctl.facts.kubeadm_certs import COMMAND, parse_check_expiration

RENEW = "kubeadm certs renew all"

Tool = Callable[[str, str], Path]
MADE = "/var/lib/clusterctl-contract/kubernetes"
CONFIG = b"""apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 10.0.0.1
nodeRegistration:
  name: cp1
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v{release}
"""
#: Each state: the files of a whole control plane taken away (None: all of them).
STATES: dict[str, tuple[str, ...] | None] = {
    "before init (or after reset)": None,
    "a whole control plane": (),
    "certificates missing": ("pki/front-proxy-client.crt", "super-admin.conf"),
    "an external CA": ("pki/ca.key",),
    "the etcd CA certificate gone": ("pki/etcd/ca.crt",),
    "the etcd CA gone, key and all": ("pki/etcd/ca.crt", "pki/etcd/ca.key"),
    "the front-proxy CA certificate gone": ("pki/front-proxy-ca.crt",),
}
#: A half-joined node: what ``kubeadm join`` of a worker leaves (``kubelet.conf`` and the cluster's CA).
HALF_JOINED = ("kubelet.conf", "pki/ca.crt")


class Pki:
    """A control plane's files made by the real kubeadm of one release, kept in its sandbox."""

    def __init__(self, release: str, folder: Path, upstream_tool: Tool) -> None:
        self.release = release
        self.folder = folder
        self.real = Sandbox(folder / "real", {"kubeadm": upstream_tool("kubeadm", release)})
        made = self.real.run(f"set -e; mkdir -p {MADE}; cat > {MADE}.yaml; "
                             f"kubeadm init phase certs all --config {MADE}.yaml; "
                             f"kubeadm init phase kubeconfig all --config {MADE}.yaml; "
                             f"cp -a /etc/kubernetes/. {MADE}/; rm -rf /etc/kubernetes",
                             CONFIG.replace(b"{release}", release.encode()))
        assert made.exit_code == 0, made.output
        listed = self.real.run(f"cd {MADE} && find . -type f | sort")
        self.files = tuple(line.removeprefix("./") for line in listed.stdout.split())
        assert "pki/etcd/ca.crt" in self.files and "super-admin.conf" in self.files, self.files

    def check(self, name: str, kept: tuple[str, ...], command: str = COMMAND) -> tuple[Answer, Answer]:
        """``command`` on the simulated and the real host, each with only ``kept``."""
        sim = SimulatedHost(self.folder / name, {"kubeadm": f"{self.release}-1.1"},
                            {f"/etc/kubernetes/{f}": b"(kept)\n" for f in kept})
        copies = "".join(f"mkdir -p /etc/kubernetes/{Path(f).parent}; cp {MADE}/{f} /etc/kubernetes/{f}; "
                         for f in kept)
        real = self.real.run(f"set -e; cd /; rm -rf /etc/kubernetes; mkdir -p /etc/kubernetes; {copies}"
                             f"set +e; {command}")
        return sim.run(command), real


@pytest.fixture(scope="module", params=(KUBERNETES_NEWEST, KUBERNETES_OLDEST))
def pki(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pki:
    from real_tools import find_tool

    return Pki(str(request.param), tmp_path_factory.mktemp("pki"), find_tool)


def kubeadm_error(answer: Answer) -> str:
    return next((line for line in answer.stderr.splitlines() if line.startswith("error: ")), "")


def read(answer: Answer) -> tuple[object, ...]:
    """What clusterctl reads of a table, less the dates (the simulator's certificates have a history of
    their own: issued 30 days ago unless renewed)."""
    parsed = parse_check_expiration(answer.stdout)
    return (tuple((c.name, c.authority, c.externally_managed) for c in parsed.certificates),
            tuple((c.name, c.externally_managed) for c in parsed.authorities), parsed.missing)


def renew_lines(answer: Answer) -> list[str]:
    """kubeadm's line for each certificate: renewed, ``MISSING!``, or not renewed (an external CA)."""
    return [line for line in answer.stdout.splitlines() if line.endswith("renewed") or line.startswith("MISSING! ")]


def agree(pki: Pki, name: str, kept: tuple[str, ...], command: str = COMMAND) -> tuple[Answer, Answer]:
    sim, real = pki.check(name, kept, command)
    assert sim.exit_code == real.exit_code, f"{name}: exit {sim.exit_code} simulated, {real.exit_code} real\n" \
        f"simulated: {sim.output}\nreal: {real.output}"
    assert kubeadm_error(sim) == kubeadm_error(real), name
    if command == RENEW:
        assert renew_lines(sim) == renew_lines(real), f"{name}\nsimulated: {sim.output}\nreal: {real.output}"
    elif real.exit_code == 0:
        assert read(sim) == read(real), name
    return sim, real


@pytest.mark.parametrize("name", STATES)
def test_check_expiration_answers_alike_on_the_same_files(pki: Pki, name: str) -> None:
    gone = STATES[name]
    kept = () if gone is None else tuple(f for f in pki.files if f not in gone)
    sim, real = agree(pki, name, kept)
    if gone is None:
        # Nothing there: every row !MISSING!, exit 0, the very same table (tabwriter's padding too).
        assert real.exit_code == 0 and sim.stdout == real.stdout, real.output
        assert len(parse_check_expiration(real.stdout).missing) == 14
    if name == "the etcd CA certificate gone":
        assert real.exit_code == 1
        assert kubeadm_error(real).startswith("error: Error checking external CA condition for etcd/ca certificate "
                                              "authority: failure loading certificate for etcd CA"), real.stderr


@pytest.mark.parametrize("name", STATES)
def test_renew_all_answers_alike_on_the_same_files(pki: Pki, name: str) -> None:
    gone = STATES[name]
    kept = () if gone is None else tuple(f for f in pki.files if f not in gone)
    _sim, real = agree(pki, f"renew {name}", kept, RENEW)
    if gone is None:  # nothing to renew: every certificate MISSING!, and still exit 0
        assert real.exit_code == 0 and len(renew_lines(real)) == 11, real.output
    if name == "an external CA":
        assert any(line.startswith("Detected external ca, ") for line in renew_lines(real)), real.output


def test_a_half_joined_node_fails_alike(pki: Pki) -> None:
    """The cluster CA without its key and without the API server's certificates: kubeadm cannot tell."""
    _sim, real = agree(pki, "half-joined", HALF_JOINED)
    assert real.exit_code == 1 and "failure loading key for apiserver" in kubeadm_error(real), real.stderr


def test_a_simulated_kubeadm_that_fails_before_init_is_caught(pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    """The contract can fail: the old simulated answer (``ca.crt: no such file``, exit 1) is told apart."""
    from clusterctl.mock.tools import kubeadm, kubeadm_certs

    def old(ctx: object) -> object:
        return kubeadm_certs.ToolResult("", "error: open /etc/kubernetes/pki/ca.crt: no such file or directory\n", 1)

    monkeypatch.setattr(kubeadm, "COMMANDS", tuple((w, old if w == ("certs", "check-expiration") else a)
                                                   for w, a in kubeadm.COMMANDS))
    sim, real = pki.check("old", ())
    assert (sim.exit_code, real.exit_code) == (1, 0)
