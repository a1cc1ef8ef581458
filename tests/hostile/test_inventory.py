"""Hostile inventories: huge or broken ranges, addresses that are commands, missing keys, and
the ad-hoc host lists pdsh and Ansible users type instead of an inventory file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterctl.errors import BadValue
from clusterctl.hostlist import MAX_RANGE_HOSTS, expand
from clusterctl.inventory.loader import load_inventory

from .conftest import DEMO


def test_an_incomplete_ini_range_is_an_error_like_ansibles(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ini = tmp_path / "hosts.ini"
    ini.write_text("[gpu]\nz[1:]\n")
    ran = cli("-i", str(ini), "inventory", "show")
    assert ran.code == 2
    assert f"{ini}:2:" in ran.err and "incomplete" in ran.err


def test_a_range_past_the_limit_fails_at_once(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ini = tmp_path / "hosts.ini"
    ini.write_text("[gpu]\nbig[1:2000000000]\n")
    ran = cli("-i", str(ini), "inventory", "check")
    assert ran.code == 2 and f"limit of {MAX_RANGE_HOSTS:,}" in ran.err


def test_an_endless_inventory_stops_at_the_limit(cli) -> None:  # type: ignore[no-untyped-def]
    """``-i /dev/zero`` (a device, no size to check first) used to be read whole: gigabytes, then
    'internal error: MemoryError'."""
    ran = cli("-i", "/dev/zero", "inventory", "show")
    assert ran.code == 2 and ran.out == ""
    assert ran.err.startswith("error: /dev/zero: larger than the 16 MiB limit for inventory input."), ran.err


def test_an_endless_limit_file_stops_at_the_limit(cli) -> None:  # type: ignore[no-untyped-def]
    # '--limit @/dev/zero' was read whole: all the memory there was, then 'internal error: MemoryError'.
    ran = cli("-i", DEMO, "-l", "@/dev/zero", "inventory", "show")
    assert ran.code == 2 and ran.out == ""
    assert ran.err.startswith("error: --limit @/dev/zero: larger than the 16 MiB limit for inventory input."), ran.err


def test_a_big_range_loads_in_linear_work(tmp_path: Path) -> None:
    # 60,000 hosts in one group: membership used to be a list scan per host (minutes).
    ini = tmp_path / "hosts.ini"
    ini.write_text("[gpu]\nbig[1:60000]\n[gpu:vars]\nclusterctl_rack=a\n")
    inventory = load_inventory(ini)
    assert len(inventory.hosts) == 60000
    assert inventory.groups["gpu"][-1] == "big60000"
    assert "ungrouped" not in inventory.groups or not inventory.groups["ungrouped"]


def test_check_names_addresses_and_key_files_that_cannot_work(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "cluster: bad\nhosts:\n"
        '  gpu-a1-: {roles: [control-plane]}\n'
        '  gpu-a2: {address: 10.0.0.2, ssh: {key_file: /nonexistent/id_ed25519}}\n'
        '  gpu-a3: {address: 10.0.0.3, ssh: {jump_host: "admin@bastion.example.com:2222,10.0.0.9"}}\n'
    )
    ran = cli("-i", str(inv), "-o", "json", "inventory", "check")
    warnings = json.loads(ran.out)["warnings"]
    # A host reached by its name, which is no host name (an inventory's address is refused at load, below).
    assert any("gpu-a1-" in w and "not a host name or IP address" in w for w in warnings)
    # An address no host could have (a shell command) is refused when the inventory loads.
    inv.write_text('cluster: bad\nhosts:\n  gpu-a1: {address: "10.0.0.1; rm -rf /"}\n')
    refused = cli("-i", str(inv), "inventory", "check")
    assert refused.code == 2 and f"{inv}:3" in refused.err and "hosts.gpu-a1.address" in refused.err
    assert any("gpu-a2" in w and "/nonexistent/id_ed25519 does not exist" in w for w in warnings)
    assert not any("gpu-a3" in w for w in warnings)


def test_warnings_keep_brackets_and_are_not_wrapped_by_clusterctl(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = tmp_path / "inv.yaml"
    inv.write_text("cluster: c\nhosts:\n  gpu-with-a-rather-long-name-01: {address: 10.0.0.1}\n")
    ran = cli("-i", str(inv), "inventory", "check")
    assert "(set 'roles: [control-plane]' on a host)." in ran.err
    assert ran.err.count("\n") == 1
    assert "1 host, 1 warning" in ran.out


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("gpu-[01-03,07],login1", ["gpu-01", "gpu-02", "gpu-03", "gpu-07", "login1"]),
        ("a,b,", ["a", "b"]),
        ("gpu[01:02]", ["gpu01", "gpu02"]),
        ("n[1-2]-ib[0-1]", ["n1-ib0", "n1-ib1", "n2-ib0", "n2-ib1"]),
    ],
)
def test_ad_hoc_host_lists_expand_like_pdsh_and_ansible(spec: str, names: list[str]) -> None:
    assert expand(spec) == names


@pytest.mark.parametrize("spec", ["gpu[1-", "gpu[a-b]", "gpu[5-1]", "gpu[1-99999999]"])
def test_broken_host_lists_are_refused(spec: str) -> None:
    with pytest.raises(BadValue):
        expand(spec)


def test_an_ad_hoc_list_works_as_an_inventory(cli) -> None:  # type: ignore[no-untyped-def]
    ran = cli("-i", "gpu-[01-02],root@login1:2222", "-o", "json", "inventory", "show")
    assert ran.code == 0, ran.err
    hosts = {h["host"]: h for h in json.loads(ran.out)["hosts"]}
    assert list(hosts) == ["gpu-01", "gpu-02", "login1"]
    assert hosts["login1"]["user"] == "root" and hosts["login1"]["port"] == 2222
    assert cli("-i", "x;rm -rf /,", "inventory", "show").code == 2


def test_an_ad_hoc_port_out_of_range_is_refused_as_an_inventory_files_port(cli) -> None:  # type: ignore[no-untyped-def]
    # 'gpu1:70000' reached 'inventory show' as port 70000, which no connection can use.
    ran = cli("-i", "gpu1:70000,", "inventory", "show")
    assert ran.code == 2 and "from 1 to 65535" in ran.err and "'70000'" in ran.err


def test_check_takes_jump_hosts_as_ssh_reaches_them(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A bare or zoned IPv6 hop, which the SSH transport reaches, was warned about as unreachable.
    inv = tmp_path / "inv.yaml"
    inv.write_text("cluster: c\nhosts:\n  gpu-a1: {address: 10.0.0.1, roles: [control-plane], ssh: "
                   '{jump_host: "ssh://admin@bastion:2222,fe80::1,[fe80::1%eth0]:22"}}\n')
    ran = cli("-i", str(inv), "-o", "json", "inventory", "check")
    assert ran.code == 0 and json.loads(ran.out)["warnings"] == [], ran.err


@pytest.mark.parametrize("name", ["-oProxyCommand", ".hidden", "a..b", ":::"])
def test_an_ad_hoc_host_is_named_by_the_inventory_files_rule(cli, name: str) -> None:  # type: ignore[no-untyped-def]
    # A name such as '-foo' reaches commands (kubectl drain NAME) as an option: inventory files refuse it.
    ran = cli("-i", f"{name},", "inventory", "show")
    assert ran.code == 2 and repr(name) in ran.err and "letters, digits" in ran.err
    assert "Traceback" not in ran.err


@pytest.mark.parametrize(
    ("field", "line"),
    [("rack", '  gpu-a1: {address: 10.0.0.1, rack: "b\\e[2J\\e]0;pwned\\a"}'),
     ("cluster", 'cluster: "lab\\e[31m"'),
     ("user", '  gpu-a1: {address: 10.0.0.1, user: "ubuntu\\nroot"}')],
)
def test_a_terminal_escape_or_newline_in_an_inventory_value_is_refused_not_printed(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, field: str, line: str
) -> None:
    """A rack or cluster name holding ``ESC [2J`` reached 'inventory show' and 'survey' tables raw: it
    cleared the user's screen. It is refused when the inventory loads, shown as an escape."""
    inv = tmp_path / "inv.yaml"
    text = "cluster: c\nhosts:\n  gpu-a1: {address: 10.0.0.1}\n"
    inv.write_text(line + "\nhosts:\n  gpu-a1: {address: 10.0.0.1}\n" if field == "cluster" else
                   text.replace("  gpu-a1: {address: 10.0.0.1}", line))
    ran = cli("-i", str(inv), "inventory", "show")
    assert ran.code == 2 and ran.out == "", ran.out
    assert "\x1b" not in ran.err and "control character" in ran.err and f"{inv}:" in ran.err, ran.err


@pytest.mark.parametrize(
    ("argv", "said"),
    [(("power", "status", "gpu-a3"), "gpu-a3 has no BMC in the inventory. Add a 'bmc:' entry"),
     (("tune-nccl", "--format", "bogus"), "unknown --format 'bogus'. Use one of: conf")],
)
def test_an_errors_hint_is_a_sentence_of_its_own(cli, argv: tuple[str, ...], said: str) -> None:  # type: ignore[no-untyped-def]
    """A message without its full stop ran into its hint: "... in the inventory Add a 'bmc:' entry"."""
    ran = cli("-i", DEMO, *argv)
    assert ran.code == 2 and said in " ".join(ran.err.split()), ran.err


@pytest.mark.parametrize(
    ("address", "loads"),
    [("::1", True), ("::ffff:10.0.0.1", True), ("gpu-a1.example.com.", True), ("fe80::1%eth0", True),
     ("gpu-a1-", False), ("[::1]", False), ("_gpu", False), ("fe80::1%eth0;id", False), (":::", False),
     ("gpu..a1", False), ("gpu-.example.com", False), ("gpu.-a1", False), ("g" * 64 + ".example.com", False),
     ("g" * 63 + ".example.com", True)],
)
def test_an_address_is_refused_at_load_exactly_when_no_connection_could_use_it(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, address: str, loads: bool
) -> None:
    # Load and 'inventory check' held two rules: '::1' was refused at load, while 'gpu-a1-' and '[::1]'
    # loaded (every connection to them failed later) and an absolute name 'gpu-a1.example.com.' was warned about.
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"cluster: c\nhosts:\n  gpu-a1: {{address: {address!r}, roles: [control-plane]}}\n")
    ran = cli("-i", str(inv), "-o", "json", "inventory", "check")
    if loads:
        assert ran.code == 0 and json.loads(ran.out)["warnings"] == [], ran.err
    else:
        assert ran.code == 2 and ran.out == "", ran.out
        assert f"{inv}:3" in ran.err and "hosts.gpu-a1.address" in ran.err
        assert f"{address!r} is not a host name or IP address" in ran.err, ran.err


@pytest.mark.parametrize("jump", ["bastion:70000", "bastion:0", "bastion;id", "-oProxyCommand=id", "[fe80::1",
                                  "ok-bastion,gpu-a1-"])
def test_a_jump_host_no_connection_could_use_is_refused_at_load(cli, tmp_path: Path, jump: str) -> None:  # type: ignore[no-untyped-def]
    # It loaded, 'inventory check' only warned, and every command failed each host at connect time.
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"cluster: c\nhosts:\n  gpu-a1:\n    address: 10.0.0.1\n    ssh: {{jump_host: {jump!r}}}\n")
    ran = cli("-i", str(inv), "inventory", "show")
    assert ran.code == 2 and ran.out == "", ran.out
    assert f"{inv}:5" in ran.err and "hosts.gpu-a1.ssh.jump_host" in ran.err, ran.err
    ini = tmp_path / "hosts.ini"
    ini.write_text(f"[gpu]\ngpu-a1 ansible_host=10.0.0.1 ansible_ssh_common_args='-J {jump}'\n")
    ran = cli("-i", str(ini), "inventory", "show")
    assert ran.code == 2 and f"{ini}:2" in ran.err and "ansible_ssh_common_args" in ran.err, ran.err


def test_a_bidi_override_in_a_host_key_is_shown_as_an_escape(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # U+202E turns the rest of the line around on a terminal; the error's field printed it raw.
    inv = tmp_path / "inv.yaml"
    inv.write_text('all:\n  hosts:\n    "x\\u202ey":\n')
    ran = cli("-i", str(inv), "inventory", "show")
    assert ran.code == 2
    assert "\u202e" not in ran.err and "field 'x\\u202ey'" in ran.err


def test_an_apt_repository_name_apt_would_ignore_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # apt reads only sources.list.d files named in ASCII letters, digits, '_', '-' and '.': 'café' loaded, and apt
    # then skipped its file without an error.
    inv = tmp_path / "inv.yaml"
    inv.write_text('hosts:\n  n1: {}\nbootstrap:\n  apt_repos:\n    - {name: "caf\u00e9", url: "https://r.example.com/u",'
                   ' suites: [jammy], components: [main]}\n')
    ran = cli("-i", str(inv), "inventory", "check")
    assert ran.code == 2
    assert f"{inv}:5: field 'bootstrap.apt_repos[0].name': repository name 'caf\u00e9' may only use ASCII" in ran.err


def test_a_host_name_outside_ascii_is_told_which_letters(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # "may only use letters" refused 'h\u00e9llo', whose every character is a letter.
    ini = tmp_path / "hosts.ini"
    ini.write_text("[gpu]\nh\u00e9llo ansible_host=10.0.0.1\n")
    ran = cli("-i", str(ini), "inventory", "show")
    assert ran.code == 2 and "a host name 'h\u00e9llo' may only use ASCII letters, digits," in ran.err
