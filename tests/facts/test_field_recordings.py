"""Real outputs of the cluster stack gathered from public issues and notes (the READMEs of tests/fixtures/<format>
name each source): what a user checks in them, read right."""

from __future__ import annotations

from fixture_files import read_fixture

from clusterctl.facts.kernel_log import parse_kernel_log


def _events(name: str) -> list[tuple[str, int, str | None, int | None]]:
    return [(e.kind, e.line, e.pci, e.code) for e in parse_kernel_log(read_fixture("kernel-log", name)).events]


def test_an_xid_attributed_to_a_mig_instance_is_read() -> None:
    assert _events("nvidia-driver-doc-xid94-95-mig-gpu-i.log") == [
        ("xid", 1, "0000:01:00", 94), ("xid", 2, "0000:01:00", 94), ("xid", 3, "0000:01:00", 95)]
    (mig, *_) = parse_kernel_log(read_fixture("kernel-log", "nvidia-driver-doc-xid94-95-mig-gpu-i.log")).events
    assert mig.message.startswith("pid=7194, Contained: CE User Channel") and "GPU-I:05" in mig.text
    both = parse_kernel_log("NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid=9, name=a, Graphics Exception\n")
    assert [(e.pci, e.code) for e in both.events] == [("0000:3b:00", 13)]


def test_dmesg_T_of_a_535_driver_with_three_gpus() -> None:
    assert _events("akash244-dmesg-T-xid43-31-94-535.log") == [
        ("xid", 4, "0000:00:05", 43), ("xid", 5, "0000:00:05", 43), ("xid", 8, "0000:00:07", 31),
        ("xid", 11, "0000:00:08", 94)]
    log = parse_kernel_log(read_fixture("kernel-log", "akash244-dmesg-T-xid43-31-94-535.log"))
    assert log.source == "dmesg" and log.events[2].timestamp == "Mon Aug  5 03:54:13 2024"


def test_a_gpu_off_the_bus_in_dmesg_and_in_both_syslog_styles() -> None:
    assert _events("akash209-dmesg-T-xid79-fallen-off-bus-535.log") == [
        ("xid", 3, "0000:a1:00", 79), ("fallen-off-bus", 4, "0000:a1:00.0", None)]
    iso = parse_kernel_log(read_fixture("kernel-log", "rsyslog-iso-xid79-154-595.log"))
    assert [(e.kind, e.code) for e in iso.events] == [("xid", 79), ("fallen-off-bus", None), ("xid", 154)]
    assert iso.events[0].timestamp == "2026-06-01T15:55:06.218036+03:00"
    assert iso.events[2].message == "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    classic = parse_kernel_log(read_fixture("kernel-log", "syslog-xid79-154-595.log"))
    assert classic.source == "syslog" and [e.code for e in classic.events] == [79, None, 154]
    assert classic.events[0].timestamp == "Jun 01 20:11:11"


def test_an_old_driver_without_the_pci_prefix() -> None:
    (xid,) = parse_kernel_log(read_fixture("kernel-log", "pastebin-syslog-kernel-dmesg-xid31-no-pci-prefix.log")).events
    assert (xid.pci, xid.code, xid.message) == ("0000:01:00", 31, "Ch 0000000b, engmask 00000120, intr 10000000")


def test_a_gpu_off_the_bus_without_an_xid_is_named_from_the_messages_first_line() -> None:
    log = parse_kernel_log(read_fixture("kernel-log", "nvsentinel155-dmesg-fallen-off-bus-no-xid-570.log"))
    (fallen,) = log.events
    assert (fallen.kind, fallen.line, fallen.pci, fallen.timestamp) == ("fallen-off-bus", 3, "0000:b3:00.0",
                                                                        "1843.308145")
    # The same message as journalctl prints it, each line stamped: the address still comes from its first line.
    journal = "".join(f"Feb 14 05:03:41 gpu-1 kernel: {line.strip()}\n"
                      for line in read_fixture("kernel-log", "nvsentinel155-dmesg-fallen-off-bus-no-xid-570.log")
                      .splitlines()[:3])
    (again,) = parse_kernel_log(journal.replace("[ 1843.308145] ", "")).events
    assert (again.pci, again.timestamp, again.line) == ("0000:b3:00.0", "Feb 14 05:03:41", 3)
    # A GPU named once does not name a later, unrelated line.
    later = parse_kernel_log("NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: fallen off the bus\n"
                             "nvidia: fallen off the bus\n")
    assert [e.pci for e in later.events] == ["0000:b3:00.0", None]


def test_containerd_versions_of_distribution_packages() -> None:
    from clusterctl.facts.containerd import parse_containerd_version
    from clusterctl.facts.stack import parse_stack

    for name, version in (("containerd-version-ubuntu-24.04-1.7.24.txt", "1.7.24"),
                          ("containerd-version-ubuntu-20.04-eks-ami-1.7.2.txt", "1.7.2"),
                          ("containerd-version-debian12.txt", "1.6.20")):
        text = read_fixture("containerd", name)
        assert parse_containerd_version(text) == version
        assert parse_stack(f"### containerd\n{text}").containerd == version  # survey's stack reads it alike


def test_journalctl_short_precise_timestamps_are_kept() -> None:
    plain = parse_kernel_log(read_fixture("kernel-log", "bottlerocket2900-journalctl-short-precise.log"))
    assert plain.source == "syslog" and plain.events == () and plain.lines == 4
    precise = parse_kernel_log(read_fixture("kernel-log", "DERIVED-journalctl-short-precise-xid79-154-595.log"))
    assert [(e.code, e.timestamp) for e in precise.events] == [
        (79, "Jun 01 20:11:11.218036"), (None, "Jun 01 20:11:11.218036"), (154, "Jun 01 20:11:11.218036")]
