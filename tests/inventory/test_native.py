"""clusterctl's own YAML inventory: values land in the model, precedence, and every error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from refusals import inventory_refusal

from clusterctl.errors import InventoryError
from clusterctl.inventory.loader import load_inventory

WriteFile = Callable[..., Path]
EXAMPLES = Path(__file__).resolve().parents[2] / "inventories" / "examples"


FULL = """
cluster: demo
defaults:
  user: ubuntu
  port: 22
  transport: ssh
  fabric: {type: ib, rate_gbps: 200, hcas: [mlx5_0, mlx5_1], within_rack_min: 0.8,
           across_racks_min: 0.5, latency_warn_us: 12, latency_error_us: 40}
  ssh: {key_file: ~/.ssh/id_ed25519, jump_host: bastion.example.com, options: {ConnectTimeout: 5}}
  stack: {driver: "550.54.15", cuda: 12.10, nccl: "2.21.5", kubernetes: "1.30.2", containerd: "1.7.18"}
groups:
  rack-a: {vars: {rack: a, user: racka, fabric: {rate_gbps: 400}}, hosts: [gpu-a1, gpu-a2]}
  big: {vars: {user: biguser, labels: {size: big}}, hosts: [gpu-a2]}
hosts:
  gpu-a1:
    address: 10.0.0.11
    port: 2201
    roles: [control-plane, worker]
    labels: {pool: training}
    transport: mock
    profile: demo/profiles/dgx-h100
    ssh: {options: {StrictHostKeyChecking: accept-new}}
  gpu-a2:
    user: hostuser
    labels: {pool: inference}
  gpu-b1:
    address: 10.0.1.11
    rack: 7
    ssh: {jump_host: null}
    vars: {nccl_socket_ifname: eth0, ansible_become_password: hunter2}
"""


def test_full_inventory_values(write: WriteFile, tmp_path: Path) -> None:
    (tmp_path / "demo/profiles/dgx-h100").mkdir(parents=True)
    inventory = load_inventory(write(FULL))

    assert inventory.name == "demo"
    assert inventory.format == "clusterctl"
    assert [h.name for h in inventory.hosts] == ["gpu-a1", "gpu-a2", "gpu-b1"]
    assert inventory.groups == {"rack-a": ("gpu-a1", "gpu-a2"), "big": ("gpu-a2",)}

    a1 = inventory.host("gpu-a1")
    assert (a1.address, a1.port, a1.user, a1.rack) == ("10.0.0.11", 2201, "racka", "a")
    assert a1.roles == ("control-plane", "worker")
    assert a1.transport == "mock"
    # The profile path is taken from the inventory's folder and stored absolute.
    assert a1.profile == str((tmp_path / "demo/profiles/dgx-h100").resolve())
    assert a1.fabric.type == "ib"
    assert a1.fabric.rate_gbps == 400  # group var beats defaults
    assert a1.fabric.hcas == ("mlx5_0", "mlx5_1")  # merged key by key, not replaced
    assert (a1.fabric.within_rack_min, a1.fabric.across_racks_min) == (0.8, 0.5)
    assert (a1.fabric.latency_warn_us, a1.fabric.latency_error_us) == (12, 40)
    assert a1.ssh.key_file == "~/.ssh/id_ed25519"
    assert a1.ssh.jump_host == "bastion.example.com"
    assert dict(a1.ssh.options) == {"ConnectTimeout": "5", "StrictHostKeyChecking": "accept-new"}
    # A version written as a YAML number keeps its text: 12.10 is not CUDA 12.1.
    assert a1.stack.pinned() == {
        "driver": "550.54.15",
        "cuda": "12.10",
        "nccl": "2.21.5",
        "kubernetes": "1.30.2",
        "containerd": "1.7.18",
    }
    assert dict(a1.labels) == {"pool": "training"}
    assert a1.source == f"{inventory.source}:14"


def test_precedence_defaults_then_groups_in_order_then_host(write: WriteFile, tmp_path: Path) -> None:
    (tmp_path / "demo/profiles/dgx-h100").mkdir(parents=True)
    inventory = load_inventory(write(FULL))
    a2 = inventory.host("gpu-a2")
    # defaults user=ubuntu < rack-a user=racka < big user=biguser < host user=hostuser
    assert a2.user == "hostuser"
    assert a2.groups == ("rack-a", "big")
    # labels merge across levels: big's size label stays next to the host's pool label
    assert dict(a2.labels) == {"size": "big", "pool": "inference"}
    assert a2.roles == ("worker",)
    assert a2.port == 22

    b1 = inventory.host("gpu-b1")
    assert b1.rack == "7"  # a number written for a rack name is still a name
    assert b1.user == "ubuntu"
    assert b1.groups == ()
    assert b1.ssh.jump_host is None  # an explicit null unsets the default bastion
    assert b1.ssh.key_file == "~/.ssh/id_ed25519"


def test_later_group_wins_over_earlier_group(write: WriteFile) -> None:
    path = write(
        """
        groups:
          first: {vars: {user: one, port: 2201}, hosts: [h]}
          second: {vars: {user: two}, hosts: [h]}
        hosts:
          h: {}
        """
    )
    host = load_inventory(path).host("h")
    assert (host.user, host.port) == ("two", 2201)


def test_secret_vars_are_masked(write: WriteFile, tmp_path: Path) -> None:
    (tmp_path / "demo/profiles/dgx-h100").mkdir(parents=True)
    host = load_inventory(write(FULL)).host("gpu-b1")
    free = dict(host.vars)
    assert free["nccl_socket_ifname"] == "eth0"
    assert free["ansible_become_password"] != "hunter2"
    assert "hunter2" not in repr(host)


def test_hosts_as_a_list_with_name(write: WriteFile) -> None:
    path = write(
        """
        hosts:
          - name: gpu-a1
            address: 10.0.0.11
          - gpu-a2
          - name: gpu-a3
            port: 2203
        """
    )
    inventory = load_inventory(path)
    assert [h.name for h in inventory.hosts] == ["gpu-a1", "gpu-a2", "gpu-a3"]
    assert inventory.host("gpu-a1").address == "10.0.0.11"
    assert inventory.host("gpu-a3").port == 2203
    assert inventory.host("gpu-a3").source == f"{path}:5"


def test_shell_metacharacters_in_group_names_and_users_are_data(write: WriteFile) -> None:
    path = write(
        """
        groups:
          "g;rm -rf /": {hosts: [gpu-a1]}
        hosts:
          gpu-a1: {address: 10.0.0.1, user: "`id`"}
        """
    )
    inventory = load_inventory(path)
    assert inventory.host("gpu-a1").user == "`id`"
    assert inventory.groups == {"g;rm -rf /": ("gpu-a1",)}


@pytest.mark.parametrize(
    ("entry", "line", "field"),
    [
        ('"gpu$(reboot)": {address: 10.0.0.1}', 3, "hosts.gpu$(reboot)"),
        ('"a b": {}', 3, "hosts.a b"),
        ('"gpu;id": {}', 3, "hosts.gpu;id"),
        ('gpu-a1: {address: "10.0.0.1; reboot"}', 3, "hosts.gpu-a1.address"),
        ('gpu-a1: {address: "10.0.0.1\\nevil"}', 3, "hosts.gpu-a1.address"),
        ("gpu-a1: {stack: {kubernetes: '1.36.2\"'}}", 3, "hosts.gpu-a1.stack.kubernetes"),
        ("gpu-a1: {stack: {containerd: '2.2.1 && id'}}", 3, "hosts.gpu-a1.stack.containerd"),
        # No digit first: nothing compares it, and bootstrap failed on every host ("cannot compare ...", exit 1).
        ("gpu-a1: {stack: {containerd: x}}", 3, "hosts.gpu-a1.stack.containerd"),
        ("gpu-a1: {stack: {kubernetes: latest}}", 3, "hosts.gpu-a1.stack.kubernetes"),
    ],
)
def test_names_addresses_and_versions_that_cannot_work_are_refused_at_load(
    write: WriteFile, entry: str, line: int, field: str
) -> None:
    # Quoted safely later, they would still fail on apply after a plan that said "ok".
    path = write(f"cluster: c\nhosts:\n  {entry}\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert caught.value.exit_code == 2
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), line, field)


def test_yaml_merge_keys_are_applied(write: WriteFile) -> None:
    path = write(
        """
        x-common: &common {user: admin, port: 2222}
        hosts:
          h: {<<: *common, port: 2200}
        """
    )
    # An unknown top-level key is still refused, even when it only holds an anchor.
    with pytest.raises(InventoryError, match="unknown field 'x-common'"):
        load_inventory(path)
    path = write(
        """
        defaults: &common {user: admin, port: 2222}
        hosts:
          h: {<<: *common, port: 2200}
        """
    )
    host = load_inventory(path).host("h")
    assert (host.user, host.port) == ("admin", 2200)


def test_example_inventory_loads() -> None:
    inventory = load_inventory(EXAMPLES / "clusterctl.yaml")
    assert inventory.name == "demo"
    assert len(inventory.hosts) == 3
    assert inventory.host("gpu-b1").fabric.rate_gbps == 400
    assert inventory.host("gpu-b1").ssh.jump_host == "bastion-b.example.com"


# --- errors -------------------------------------------------------------------------------------


def test_yaml_syntax_error_names_line_and_column(write: WriteFile) -> None:
    error = inventory_refusal(write("hosts:\n  gpu-a1:\n    address: 10.0.0.11\n   port: 22\n"))
    assert error.line == 4
    assert "not valid YAML" in str(error)
    assert "column" in str(error)


def test_a_control_character_is_a_yaml_error_naming_line_and_column(write: WriteFile) -> None:
    error = inventory_refusal(write("hosts:\n  gpu-a1:\n    address: 10.0.0.11\x01\n"))
    assert error.line == 3
    assert "not valid YAML: a character YAML does not allow (U+0001) at column 23." in str(error)


def test_unknown_field_suggests_the_close_one(write: WriteFile) -> None:
    path = write("hosts:\n  gpu-a1:\n    address: 10.0.0.11\n    prot: 22\n")
    error = inventory_refusal(path)
    assert str(error) == (f"{path}:4: field 'hosts.gpu-a1.prot': unknown field 'prot'. Did you mean 'port'?")


@pytest.mark.parametrize("port", ["0", "65536", "ssh", "22.5", "-1", "true", "[22]"])
def test_bad_port(write: WriteFile, port: str) -> None:
    path = write(
        f"""
        hosts:
          gpu-a1:
            address: 10.0.0.11
            port: {port}
        """
    )
    error = inventory_refusal(path)
    assert (error.line, error.field) == (4, "hosts.gpu-a1.port")
    assert "1 to 65535" in str(error) or "single value" in str(error)


def test_group_lists_unknown_host(write: WriteFile) -> None:
    path = write(
        """
        groups:
          rack-a:
            hosts: [gpu-a1, gpu-a3]
        hosts:
          gpu-a1: {}
          gpu-a2: {}
        """
    )
    error = inventory_refusal(path)
    assert (error.line, error.field) == (3, "groups.rack-a.hosts[1]")
    assert "'gpu-a3'" in str(error)
    assert "Did you mean 'gpu-a1'?" in str(error) or "Did you mean 'gpu-a2'?" in str(error)


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ("defaults:\n  fabric:\n    type: ib\n    rate_gpbs: 200\nhosts: {h: }\n", 4, "defaults.fabric.rate_gpbs",
         "Did you mean 'rate_gbps'?"),
        ("clustr: x\nhosts: {h: }\n", 1, "clustr", "Did you mean 'cluster'?"),
        ("defaults: {address: 10.0.0.1}\nhosts: {h: }\n", 1, "defaults.address", "only be set on a host"),
        ("hosts:\n  gpu-a1:\n    port: 22\n    port: 2222\n", 4, "hosts.gpu-a1.port", "duplicate key 'port'"),
        ("hosts:\n  gpu-a1:\n    roles: [worker, master]\n", 3, "hosts.gpu-a1.roles[1]",
         ("unknown role 'master'", "control-plane")),
        ("hosts:\n  h: {roles: []}\n", 2, "hosts.h.roles", "must not be empty"),
        ("defaults:\n  fabric: {type: infiniband}\nhosts: {h: }\n", 2, "defaults.fabric.type",
         ("unknown fabric type 'infiniband'", "'ib'")),
        ("hosts:\n  h:\n    transport: sshh\n", 3, "hosts.h.transport", "Did you mean 'ssh'?"),
        ("defaults: {transport: mock}\nhosts:\n  gpu-a1: {}\n", 3, "hosts.gpu-a1.profile",
         "no profile is named for the mock transport"),
        # The error points where the profile was written (defaults), not at the host.
        ("defaults:\n  transport: mock\n  profile: profiles/nowhere\nhosts:\n  gpu-a1: {}\n", 3, "defaults.profile",
         ("profiles/nowhere", "does not exist")),
        ("hosts:\n  - address: 10.0.0.1\n", 2, "hosts[0]", "no 'name:'"),
        ("hosts:\n  gpu-a1:\n    address: 10.0.0.11\n  gpu-a2: {}\n  gpu-a1:\n    address: 10.0.0.99\n", 5,
         "hosts.gpu-a1", ("duplicate host 'gpu-a1'", "line 2")),
        ("hosts:\n  - name: gpu-a1\n  - name: gpu-a2\n  - name: gpu-a1\n", 4, "hosts[2].name",
         ("duplicate host 'gpu-a1'", "line 2")),
        ("hosts: [a, b]\ndefaults: [user]\n", 2, "defaults", "must be a mapping"),
        ("hosts:\n  h: 10.0.0.1\n", 2, "hosts.h", "must be a mapping"),
        ("hosts:\n  h:\n    fabric: ib\n", 3, "hosts.h.fabric", "must be a mapping"),
        ("hosts:\n  h:\n    ssh: {options: [a]}\n", 3, "hosts.h.ssh.options", "must be a mapping"),
        ("hosts:\n  h:\n    address: {ip: 1}\n", 3, "hosts.h.address", "single value"),
        ("hosts: gpu-a1\n", 1, "hosts", "must be a mapping"),
        ("groups:\n  g: {hosts: h}\nhosts: {h: }\n", 2, "groups.g.hosts", "list of host names"),
        ("hosts:\n  h:\n    fabric: {within_rack_min: 90}\n", 3, "hosts.h.fabric.within_rack_min", "fraction"),
        ("hosts:\n  h:\n    fabric: {rate_gbps: fast}\n", 3, "hosts.h.fabric.rate_gbps", "number"),
        # NaN passes every range (each comparison with it is false), inf is no rate or timeout: YAML's, JSON's.
        ("hosts:\n  h:\n    fabric: {rate_gbps: .nan}\n", 3, "hosts.h.fabric.rate_gbps", "greater than 0, not 'nan'"),
        ("hosts:\n  h:\n    fabric: {rate_gbps: .inf}\n", 3, "hosts.h.fabric.rate_gbps", "greater than 0, not 'inf'"),
        ("hosts:\n  h:\n    fabric:\n      latency_warn_us: NaN\n", 4, "hosts.h.fabric.latency_warn_us",
         "greater than 0, not 'NaN'"),
        ("hosts:\n  h:\n    fabric: {within_rack_min: .nan}\n", 3, "hosts.h.fabric.within_rack_min", "fraction"),
    ],
)
def test_errors_name_line_field_and_what_is_wrong(write: WriteFile, text: str, line: int, field: str,
                                                  words: str | tuple[str, ...]) -> None:
    error = inventory_refusal(write(text))
    assert (error.line, error.field) == (line, field)
    for word in (words,) if isinstance(words, str) else words:
        assert word in str(error)


def test_empty_file_and_no_hosts(write: WriteFile) -> None:
    assert "empty" in str(inventory_refusal(write("# nothing yet\n")))
    error = inventory_refusal(write("cluster: x\n"))
    assert error.field == "hosts"
    assert "no 'hosts:'" in str(error)


def test_recursive_alias_is_refused(write: WriteFile) -> None:
    error = inventory_refusal(write("hosts: &a\n  h:\n    vars: {self: *a}\n"))
    assert "refers to itself" in str(error)


def test_unclosed_quote_points_at_where_it_opened(write: WriteFile) -> None:
    error = inventory_refusal(write('hosts:\n  gpu-a1: {address: "10.0.0.11}\n  gpu-a2: {}\n'))
    assert error.line == 2
    assert "quoted scalar" in str(error)
