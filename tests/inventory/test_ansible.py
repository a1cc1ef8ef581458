"""Ansible INI and YAML inventories read as Ansible reads them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from clusterctl.errors import ExitCode, InventoryError
from clusterctl.inventory.ansible import expand_host_range
from clusterctl.inventory.ansible_vars import parse_ssh_args
from clusterctl.inventory.loader import load_inventory

WriteFile = Callable[..., Path]
FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = Path(__file__).resolve().parents[2] / "inventories" / "examples"

INI = """
# comment
[all:vars]
ansible_user=ubuntu
ansible_ssh_private_key_file=~/.ssh/id_ed25519
ansible_ssh_common_args='-o ProxyJump=bastion.example.com -o ConnectTimeout=5'
clusterctl_fabric_type = ib

[kube_control_plane]
cp1 ansible_host=10.0.0.1 ansible_port=2201 clusterctl_rack=a

[kube_node]
cp1
gpu[01:03] ansible_user="gpu admin"   # trailing comment
edge ansible_host=10.9.0.1 ansible_ssh_common_args="-J jump@edge-bastion:2222"
proxied ansible_ssh_common_args='-o ProxyCommand="ssh -W %h:%p -q bastion"'
laptop ansible_connection=local
db01:2222

[rack_b]
gpu[02:03]

[rack_b:vars]
rack=b
ansible_user=rackuser

[gpus:children]
rack_b

[gpus:vars]
ansible_user=gpususer
clusterctl_fabric_rate_gbps=400
"""


def test_ini_inventory(write: WriteFile) -> None:
    path = write(INI, "hosts.ini")
    inventory = load_inventory(path)
    assert inventory.format == "ansible-ini"
    assert [h.name for h in inventory.hosts] == [
        "cp1", "gpu01", "gpu02", "gpu03", "edge", "proxied", "laptop", "db01",
    ]  # fmt: skip
    cp1 = inventory.host("cp1")
    assert (cp1.address, cp1.port, cp1.user, cp1.rack) == ("10.0.0.1", 2201, "ubuntu", "a")
    assert cp1.roles == ("control-plane", "worker")
    assert cp1.ssh.key_file == "~/.ssh/id_ed25519"
    assert cp1.ssh.jump_host == "bastion.example.com"
    assert cp1.ssh.options == (("ConnectTimeout", "5"),)
    assert cp1.fabric.type == "ib"
    assert cp1.source == f"{path}:9"

    assert inventory.host("gpu01").user == "gpu admin"  # quoted value, trailing comment dropped
    assert inventory.host("gpu01").roles == ("worker",)
    assert inventory.host("edge").ssh.jump_host == "jump@edge-bastion:2222"
    assert inventory.host("proxied").ssh.jump_host == "bastion"
    assert inventory.host("laptop").transport == "local"
    assert inventory.host("db01").port == 2222

    assert inventory.groups["kube_node"] == ("cp1", "gpu01", "gpu02", "gpu03", "edge", "proxied", "laptop", "db01")
    assert inventory.groups["rack_b"] == ("gpu02", "gpu03")
    # Children: hosts of rack_b are hosts of gpus.
    assert inventory.groups["gpus"] == ("gpu02", "gpu03")
    assert "ungrouped" not in inventory.groups


def test_ini_group_var_precedence(write: WriteFile) -> None:
    inventory = load_inventory(write(INI, "hosts.ini"))
    gpu02 = inventory.host("gpu02")
    # all < gpus (parent) < rack_b (child) < host line
    assert gpu02.user == "gpu admin"
    assert gpu02.rack == "b"
    assert gpu02.fabric.rate_gbps == 400  # from the parent group
    assert gpu02.groups == ("kube_node", "rack_b", "gpus")


def test_ini_child_group_beats_parent(write: WriteFile) -> None:
    path = write(
        """
        [parent:children]
        child
        [parent:vars]
        ansible_user=parent
        ansible_port=2200
        [child]
        h1
        [child:vars]
        ansible_user=child
        [all:vars]
        ansible_user=everyone
        """,
        "hosts.ini",
    )
    host = load_inventory(path).host("h1")
    assert (host.user, host.port) == ("child", 2200)


def test_ungrouped_hosts(write: WriteFile) -> None:
    inventory = load_inventory(write("solo ansible_host=10.0.0.5\n[g]\nother\n", "hosts"))
    assert inventory.groups["ungrouped"] == ("solo",)
    assert inventory.host("solo").address == "10.0.0.5"


def test_yaml_inventory(write: WriteFile) -> None:
    path = write(
        """
        all:
          vars:
            ansible_user: ubuntu
            ansible_ssh_common_args: "-o ProxyJump=bastion"
          hosts:
            lone: {ansible_host: 10.0.0.9}
          children:
            k8s_cluster:
              vars: {ansible_port: 2200}
              children:
                kube_control_plane:
                  hosts:
                    cp1: {ansible_host: 10.0.0.1, clusterctl_rack: a}
                kube_node:
                  vars: {ansible_user: worker}
                  hosts:
                    gpu[1:2]:
                      ansible_ssh_private_key_file: /keys/gpu
                      clusterctl_profile: null
                    cp1:
        """,
        "hosts.yml",
    )
    inventory = load_inventory(path)
    assert inventory.format == "ansible-yaml"
    assert [h.name for h in inventory.hosts] == ["lone", "cp1", "gpu1", "gpu2"]
    cp1 = inventory.host("cp1")
    assert (cp1.address, cp1.port, cp1.user, cp1.rack) == ("10.0.0.1", 2200, "worker", "a")
    assert cp1.roles == ("control-plane", "worker")
    assert cp1.ssh.jump_host == "bastion"
    gpu1 = inventory.host("gpu1")
    assert (gpu1.user, gpu1.port, gpu1.ssh.key_file) == ("worker", 2200, "/keys/gpu")
    lone = inventory.host("lone")
    assert (lone.user, lone.port) == ("ubuntu", None)
    assert inventory.groups["k8s_cluster"] == ("cp1", "gpu1", "gpu2")
    assert inventory.groups["ungrouped"] == ("lone",)


def test_clusterctl_variables(write: WriteFile, tmp_path: Path) -> None:
    (tmp_path / "profiles/h100").mkdir(parents=True)
    host_vars = [
        "clusterctl_roles=control-plane,worker",
        "clusterctl_fabric_type=roce",
        "clusterctl_fabric_rate_gbps=100",
        "clusterctl_transport=mock",
        "clusterctl_profile=profiles/h100",
        "clusterctl_stack_nccl=2.21.5",
        "nccl_socket_ifname=eth0",
        "ansible_become_password=secret123",
    ]
    path = write("[nodes]\nn1 " + " ".join(host_vars) + "\n", "hosts.ini")
    host = load_inventory(path).host("n1")
    assert host.roles == ("control-plane", "worker")
    assert (host.fabric.type, host.fabric.rate_gbps) == ("roce", 100)
    assert host.transport == "mock"
    assert host.profile == str((tmp_path / "profiles/h100").resolve())
    assert host.stack.nccl == "2.21.5"
    free = dict(host.vars)
    assert free["nccl_socket_ifname"] == "eth0"
    assert "secret123" not in repr(host)
    assert "clusterctl_roles" not in free  # interpreted variables are not repeated as free vars


def test_real_terraform_ini_template_is_refused_at_its_placeholder_host() -> None:
    # An unrendered template names no host: '${control}' is refused where it stands (exit 2),
    # never carried into commands and node names as if it were one.
    with pytest.raises(InventoryError) as caught:
        load_inventory(FIXTURES / "stackhpc-tf-demo-inventory.tpl")
    assert caught.value.exit_code == ExitCode.USAGE
    assert caught.value.line == 7
    assert "${control}" in str(caught.value)


def test_the_terraform_templates_proxycommand_is_a_jump_through_its_destination() -> None:
    # ProxyCommand "ssh USER@PROXY -W %h:%p" from the same template: the destination comes before -W.
    jump, options = parse_ssh_args('-C -o ControlMaster=auto -o ControlPersist=60s '
                                   '-o ProxyCommand="ssh admin@10.0.0.9 -W %h:%p"')
    assert jump == "admin@10.0.0.9"
    assert dict(options) == {"ControlMaster": "auto", "ControlPersist": "60s"}


def test_real_yaml_inventory_template_is_refused_at_its_placeholder_address() -> None:
    with pytest.raises(InventoryError) as caught:
        load_inventory(FIXTURES / "kcaylor-rcd-cui-inventory.yaml")
    assert caught.value.line == 6 and "ansible_host" in str(caught.value)


def test_real_kubespray_sample_ini_without_hosts() -> None:
    with pytest.raises(InventoryError) as caught:
        load_inventory(FIXTURES / "kubespray-sample-inventory.ini")
    assert caught.value.exit_code == ExitCode.USAGE
    assert "lists no hosts" in str(caught.value)
    assert str(caught.value).startswith(str(FIXTURES / "kubespray-sample-inventory.ini"))


def test_real_kubespray_sample_yaml_with_text_for_hosts() -> None:
    path = FIXTURES / "kubespray-sample-inventory.yml"
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    error = caught.value
    assert (error.file, error.line, error.field) == (str(path), 20, "etcd.hosts")
    assert "must be a mapping" in str(error)


@pytest.mark.parametrize("name", ["ansible-hosts.ini", "ansible-hosts.yaml"])
def test_examples_load(name: str) -> None:
    inventory = load_inventory(EXAMPLES / name)
    gpu_a2 = inventory.host("gpu-a2")
    assert (gpu_a2.address, gpu_a2.port, gpu_a2.rack) == ("10.0.0.12", 2222, "a")
    assert inventory.host("gpu-a1").roles == ("control-plane", "worker")


def test_example_ini_rack_b_goes_through_its_own_bastion() -> None:
    inventory = load_inventory(EXAMPLES / "ansible-hosts.ini")
    assert [h.name for h in inventory.hosts] == ["gpu-a1", "gpu-a2", "gpu-b01", "gpu-b02"]
    assert inventory.host("gpu-b02").ssh.jump_host == "admin@bastion-b.example.com"
    assert inventory.host("gpu-b02").fabric.rate_gbps == 400
    assert inventory.host("gpu-a1").fabric.rate_gbps == 200


@pytest.mark.parametrize(
    ("text", "field"),
    [("[g]\ngpu;reboot\n", "gpu;reboot"), ("[g]\n'a b' x=1\n", "a b"),
     ("[g]\ngpu1 ansible_host='$(rm -rf /)'\n", "ansible_host"),
     ("[g]\ngpu1 clusterctl_stack_kubernetes='1.36\"'\n", "clusterctl_stack_kubernetes")],
)
def test_shell_metacharacters_in_ini_names_addresses_and_versions_are_refused(
    write: WriteFile, text: str, field: str
) -> None:
    caught = error_of(write(text, "hosts.ini"))
    assert caught.line == 2 and caught.field == field


@pytest.mark.parametrize("command", ["nc -X connect -x proxy.example:3128 %h %p", "corkscrew proxy 8080 %h %p"])
def test_a_proxycommand_that_is_not_a_jump_is_refused_never_dropped(write: WriteFile, command: str) -> None:
    # Dropping it would connect directly, around the proxy the user set.
    caught = error_of(write(f"[g]\ngpu1 ansible_ssh_common_args='-o ProxyCommand=\"{command}\"'\n", "hosts.ini"))
    assert caught.line == 2 and caught.field == "ansible_ssh_common_args"
    assert "ProxyCommand" in str(caught) and "ProxyJump" in str(caught)


# --- errors -------------------------------------------------------------------------------------


def error_of(path: Path) -> InventoryError:
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert caught.value.exit_code == 2
    assert caught.value.file == str(path)
    return caught.value


def test_ini_bad_port_on_host_line(write: WriteFile) -> None:
    path = write("[g]\nh1\nh2 ansible_host=10.0.0.2 ansible_port=22x\n", "hosts.ini")
    error = error_of(path)
    assert (error.line, error.field) == (3, "ansible_port")
    assert str(error).startswith(f"{path}:3: field 'ansible_port': host 'h2': port must be")


def test_ini_bad_port_in_group_vars_points_at_the_var(write: WriteFile) -> None:
    path = write("[g]\nh1\n\n[g:vars]\nansible_user=u\nansible_port=99999\n", "hosts.ini")
    error = error_of(path)
    assert (error.line, error.field) == (6, "ansible_port")
    assert "host 'h1'" in str(error)


def test_yaml_bad_port(write: WriteFile) -> None:
    path = write("all:\n  hosts:\n    h1:\n      ansible_port: ssh\n", "hosts.yml")
    error = error_of(path)
    assert (error.line, error.field) == (4, "ansible_port")


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("[g]\nh1 ansible_host\n", 2, "expected 'name=value'"),
        ("[g:var]\nx=1\n", 1, "Did you mean 'vars'?"),
        ("[g\nh1\n", 1, "section header"),
        ("[g:vars]\njust-a-word\n", 2, "expected 'name=value'"),
        ("[g]\nh1 ansible_user='unclosed\n", 2, "quotes"),
        ("[g]\nh[05:01]\n", 2, "backwards"),
        ("[g]\nh1 clusterctl_roles=master\n", 2, "Did you mean 'control-plane'?"),
        ("[g]\nh1 clusterctl_fabric_type=ethernett\n", 2, "Did you mean 'ethernet'?"),
        ("[g]\nh1 ansible_connection=winrm\n", 2, "not supported"),
        ("[g]\nh1 clusterctl_transport=mock\n", 2, "no profile"),
        ("[g]\nh1 clusterctl_transport=mock clusterctl_profile=nowhere\n", 2, "does not exist"),
        ("[a:children]\nb\n[b:children]\na\n[b]\nh1\n", 1, "loop"),
        # Ansible refuses 'all' under a group's children too (all holds every group); it made all's hosts the group's.
        ("[all]\nh1\n[x:children]\nall\n[x]\nh2\n", 1, "all -> x -> all"),
    ],
)
def test_ini_errors(write: WriteFile, text: str, line: int, words: str) -> None:
    error = error_of(write(text, "hosts.ini"))
    assert error.line == line
    assert words in str(error)


def test_yaml_errors(write: WriteFile) -> None:
    error = error_of(write("all:\n  childs: {}\n", "hosts.yml"))
    assert (error.line, error.field) == (2, "all.childs")
    assert "Did you mean 'children'?" in str(error)
    error = error_of(write("all:\n  hosts:\n    h1: {}\n    h1: {}\n", "hosts.yml"))
    assert error.line == 4
    assert "duplicate host 'h1'" in str(error)


def test_host_ranges() -> None:
    assert expand_host_range("gpu[01:04]") == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert expand_host_range("gpu[8:10]") == ["gpu8", "gpu9", "gpu10"]
    assert expand_host_range("n[a:c].lab") == ["na.lab", "nb.lab", "nc.lab"]
    assert expand_host_range("r[1:2]n[1:3:2]") == ["r1n1", "r1n3", "r2n1", "r2n3"]
    assert expand_host_range("gpu[1]") == ["gpu[1]"]


@pytest.mark.parametrize(
    ("args", "jump"),
    [
        ("-o ProxyJump=bastion", "bastion"),
        ('-o "ProxyJump bastion"', "bastion"),
        ("-oProxyJump=u@b:2222", "u@b:2222"),
        ("-J bastion", "bastion"),
        ("-Jbastion", "bastion"),
        ('-o ProxyCommand="ssh -W %h:%p -q bastion"', "bastion"),
        ('-o ProxyCommand="ssh -q admin@10.1.1.1 -W [%h]:%p"', "admin@10.1.1.1"),
        ('-o ProxyCommand="ssh -W %h:%p -p 2222 -l ops bastion"', "ops@bastion:2222"),
        ("-o StrictHostKeyChecking=no", None),
    ],
)
def test_jump_host_from_ssh_args(args: str, jump: str | None) -> None:
    assert parse_ssh_args(args)[0] == jump


@pytest.mark.parametrize("command", [
    "ssh -i keys/bastion.pem -W %h:%p -q admin@10.1.1.1",  # a jump would log in to the bastion with other keys
    "ssh -o User=ops -W %h:%p bastion",
    "ssh -F other_config -W %h:%p bastion",
    "ssh -W 10.1.1.5:22 bastion",  # a fixed target: a jump would reach each host's own address instead
    "ssh bastion nc %h %p",
])
def test_proxy_command_whose_options_a_jump_cannot_carry_is_refused_not_dropped(command: str) -> None:
    from clusterctl.inventory.values import BadValue

    with pytest.raises(BadValue, match="is not supported") as caught:
        parse_ssh_args(f'-o ProxyCommand="{command}"')
    assert "IdentityFile" in str(caught.value.hint)


def test_proxy_command_that_is_not_a_jump_is_refused_by_the_args_parser() -> None:
    from clusterctl.inventory.values import BadValue

    with pytest.raises(BadValue, match="ProxyCommand 'nc -x proxy:1080 %h %p' is not supported"):
        parse_ssh_args('-o ProxyCommand="nc -x proxy:1080 %h %p" -o StrictHostKeyChecking=no')




@pytest.mark.parametrize("rate", ["nan", "inf", "-inf"])
def test_ini_rate_that_is_no_number_is_refused(write: WriteFile, rate: str) -> None:
    error = error_of(write(f"[g]\nh1 clusterctl_fabric_rate_gbps={rate}\n", "hosts.ini"))
    assert (error.line, error.field) == (2, "clusterctl_fabric_rate_gbps")
    assert f"rate_gbps must be a number greater than 0, not '{rate}'" in str(error)
