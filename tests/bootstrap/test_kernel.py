"""The kernel phase: its parsers on recorded outputs, and what it plans from them."""

from __future__ import annotations

from pathlib import Path

from refusals import refusal

from clusterctl.bootstrap.phase import PhaseContext
from clusterctl.bootstrap.phases.kernel import FSTAB, MODULES_FILE, SYSCTL_FILE, Kernel
from clusterctl.changes import ChangeKind
from clusterctl.facts.kernel import (
    KernelFacts,
    comment_out_swap,
    fstab_swap_lines,
    parse_kernel_probe,
    parse_lsmod,
    parse_swapon_show,
    parse_sysctl,
)
from clusterctl.inventory.model import Host, Inventory
from clusterctl.transport.local import LocalTransport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_parsers_on_recorded_outputs() -> None:
    modules = parse_lsmod(read("lsmod-debian-docker-host.txt"))
    assert {"overlay", "br_netfilter", "bridge"} <= set(modules)
    values, missing = parse_sysctl(read("sysctl-debian12-bridge-loaded.txt"))
    assert values == {"net.ipv4.ip_forward": "0", "net.bridge.bridge-nf-call-iptables": "1",
                      "net.bridge.bridge-nf-call-ip6tables": "1"} and missing == ()
    values, missing = parse_sysctl(read("sysctl-debian12-missing-key.txt"))
    assert missing == ("net.nosuch.bridge-nf-call-iptables",)
    assert parse_swapon_show(read("swapon-show-three-areas.txt")) == ("/dev/dm-1", "/dev/sdb3", "/dev/dm-7")
    assert parse_swapon_show("") == ()
    assert refusal(parse_lsmod, "Module Size Used by\noverlay big 0\n").line == 2


def test_fstab_swap_lines_are_commented_with_the_original_kept() -> None:
    fstab = read("fstab-ubuntu-curtin-swap-img.txt")
    (swap,) = fstab_swap_lines(fstab)
    assert swap.text == "/swap.img\tnone\tswap\tsw\t0\t0"
    done = comment_out_swap(fstab)
    assert "# clusterctl: swap off for the kubelet: /swap.img\tnone\tswap\tsw\t0\t0\n" in done
    assert fstab_swap_lines(done) == () and comment_out_swap(done) == done
    assert done.replace("# clusterctl: swap off for the kubelet: ", "") == fstab


def ctx() -> PhaseContext:
    host = Host(name="n1", transport="local")
    return PhaseContext(host, LocalTransport(host), Inventory(name="lab", hosts=(host,)))


def test_fresh_host_plan_and_nothing_to_do_once_done() -> None:
    fresh = KernelFacts(modules=("overlay",), sysctl={"net.ipv4.ip_forward": "0"},
                        sysctl_missing=("net.bridge.bridge-nf-call-iptables",), swaps=("/swap.img",),
                        files={MODULES_FILE: None, SYSCTL_FILE: None, FSTAB: read("fstab-ubuntu-curtin-swap-img.txt")})
    changes = [c for c in Kernel().plan(ctx(), fresh) if not c.is_noop]
    commands = [c.command for c in changes if c.kind is ChangeKind.RUN_COMMAND]
    assert commands == ["modprobe br_netfilter",
                        "sysctl -w net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1 "
                        "net.ipv4.ip_forward=1", "swapoff -a"]
    assert [c.undo_command for c in changes if c.command == "swapoff -a"] == ["swapon -a"]
    files = {c.path: (c.content or b"").decode() for c in changes if c.kind is ChangeKind.WRITE_FILE}
    assert files[MODULES_FILE].splitlines()[-2:] == ["overlay", "br_netfilter"]
    assert "net.ipv4.ip_forward = 1" in files[SYSCTL_FILE]
    done = KernelFacts(modules=("overlay", "br_netfilter"), sysctl=dict.fromkeys(
        ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables", "net.ipv4.ip_forward"), "1"),
        sysctl_missing=(), swaps=(), files={MODULES_FILE: files[MODULES_FILE], SYSCTL_FILE: files[SYSCTL_FILE],
                                            FSTAB: files[FSTAB]})
    assert [c for c in Kernel().plan(ctx(), done) if not c.is_noop] == []


def test_probe_output_is_split_back() -> None:
    text = ("@@clusterctl@@ modules\n" + read("lsmod-debian-docker-host.txt") + "@@clusterctl@@ sysctl\n"
            + read("sysctl-debian12-missing-key.txt") + "@@clusterctl@@ swaps\n@@clusterctl@@ file:/etc/fstab\n"
            "# empty\n@@clusterctl@@ file:/etc/sysctl.d/99-clusterctl-kubernetes.conf\n"
            "cat: /etc/sysctl.d/99-clusterctl-kubernetes.conf: No such file or directory\n")
    facts = parse_kernel_probe(text)
    assert facts.swaps == () and "br_netfilter" in (facts.modules or ())
    assert facts.files == {"/etc/fstab": "# empty\n", "/etc/sysctl.d/99-clusterctl-kubernetes.conf": None}


def test_a_host_without_lsmod_is_warned_about_in_the_words_every_reader_uses() -> None:
    """The shell's ``sh: 1: lsmod: not found`` was shown as it came; the facts package's one rule names it."""
    state = parse_kernel_probe("@@clusterctl@@ modules\nsh: 1: lsmod: not found\n@@clusterctl@@ swaps\n")
    (finding,) = Kernel().findings(ctx(), state)
    assert (finding.code, state.modules) == ("KERNEL_MODULES_UNKNOWN", None)
    assert finding.message.startswith("cannot list kernel modules (lsmod: command not found)")


def test_a_missing_file_is_missing_when_cat_names_itself_by_its_full_path() -> None:
    """sudo's secure_path or a wrapper runs ``/usr/bin/cat``, and GNU cat names itself as called (seen
    over the isolated sshd hosts): the file is missing, not empty, or the journal would call a file
    bootstrap created "changed" and reset would keep it."""
    text = ("@@clusterctl@@ file:/etc/modules-load.d/clusterctl-kubernetes.conf\n"
            "/usr/bin/cat: /etc/modules-load.d/clusterctl-kubernetes.conf: No such file or directory\n"
            "@@clusterctl@@ file:/etc/fstab\n/usr/bin/cat: is not a path but a line of this file\n")
    facts = parse_kernel_probe(text)
    assert facts.files == {"/etc/modules-load.d/clusterctl-kubernetes.conf": None,
                           "/etc/fstab": "/usr/bin/cat: is not a path but a line of this file\n"}
