"""Inventory rendering (virtual rig) and loading (lab) without touching the network."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mprig import datafiles
from mprig.campaign.spec import Direction
from mprig.campaign.spec import Path as SpecPath
from mprig.errors import UsageError
from mprig.rig import inventory as I
from mprig.rig import layout as L
from mprig.rig.host import PathLink
from mprig.rig.ssh import SshHost

D = Direction(rate_mbit=10)
SMOKE = L.layout(
    [
        SpecPath(name="wifi", kind="wifi", down=D, up=D),
        SpecPath(name="cell", kind="cellular", down=D, up=D),
    ]
)


def test_committed_virtual_inventory_is_the_rendered_default_rig() -> None:
    committed = (I.VIRTUAL_INVENTORY / "hosts.yml").read_text()
    assert committed == I.render_inventory("virtual", SMOKE, Path("/run/mprig/virtual"))


def test_groups_and_host_vars_of_a_four_path_rig() -> None:
    links = L.layout(
        [
            SpecPath(name="wifi", kind="wifi", down=D, up=D),
            SpecPath(name="cell", kind="cellular", down=D, up=D),
            SpecPath(name="wifi2", kind="wifi", down=D, up=D),
            SpecPath(name="wired", kind="wired", down=D, up=D),
        ]
    )
    data = yaml.safe_load(I.render_inventory("h2x", links, Path("/run/mprig/h2x")))
    children = data["all"]["children"]
    assert {g: sorted(v["hosts"]) for g, v in children.items()} == {
        "mptcp_client": ["client"],
        "mptcp_server": ["server"],
        "wifi_ap": ["ap"],
        "cellular": ["cell"],
        "impairment": ["ap", "cell", "r3", "r4"],
    }
    assert children["impairment"]["hosts"]["r4"] == {
        "ansible_host": "10.254.0.24",
        "mprig_data_interfaces": ["lan0", "wan0"],
    }
    assert children["mptcp_server"]["hosts"]["server"]["mprig_data_interfaces"] == [
        "p1", "p2", "p3", "p4",
    ]  # fmt: skip
    assert children["mptcp_client"]["hosts"]["client"]["mptcp_endpoints"] == [
        {"address": f"10.{i}.1.2", "dev": dev, "flags": ["subflow"]}
        for i, dev in enumerate(["wlan0", "wwan0", "wlan1", "eth1"], start=1)
    ]
    assert data["all"]["vars"]["ansible_ssh_common_args"] == "-F /run/mprig/h2x/ssh_config"


def hostvars_of(text: str) -> dict[str, dict[str, object]]:
    """What `ansible-inventory --list` would report as hostvars (flattened by hand)."""
    data = yaml.safe_load(text)["all"]
    out: dict[str, dict[str, object]] = {}
    for group in data["children"].values():
        for host, hv in group["hosts"].items():
            out.setdefault(host, dict(data["vars"])).update(hv or {})
    return out


def test_rig_from_inventory_builds_ssh_hosts_and_paths() -> None:
    text = I.render_inventory("lab1", SMOKE, Path("/run/mprig/lab1"))
    rig = I.rig_from_inventory(Path("lab"), {"_meta": {"hostvars": hostvars_of(text)}})
    assert (rig.name, rig.mode, rig.server_addr, rig.paths) == ("lab1", "lab", "10.0.0.1", SMOKE)
    assert sorted(rig.hosts) == ["ap", "cell", "client", "server"]
    client = rig.hosts["client"]
    assert isinstance(client, SshHost)
    assert client.ssh_argv("true") == [
        "ssh",
        "-F",
        "/run/mprig/lab1/ssh_config",
        "client",
        "--",
        "true",
    ]


def test_inventory_without_client_is_refused() -> None:
    with pytest.raises(UsageError, match="hosts named client and server"):
        I.rig_from_inventory(Path("inv"), {"_meta": {"hostvars": {"server": {}}}})


def test_lab_ssh_config_checks_host_keys() -> None:
    text = I.lab_ssh_config_text(
        {"client": {"ansible_host": "192.0.2.10", "ansible_user": "lab"}}, Path("/run/mprig/x")
    )
    assert text.splitlines()[:3] == ["Host client", "    HostName 192.0.2.10", "    User lab"]
    assert "    StrictHostKeyChecking yes" in text.splitlines()


def test_path_links_round_trip_through_inventory() -> None:
    paths = yaml.safe_load(I.render_inventory("v", SMOKE, Path("/s")))["all"]["vars"]["mprig_paths"]
    assert tuple(PathLink(**p) for p in paths) == SMOKE


def lab_hostvars() -> dict[str, dict[str, object]]:
    return hostvars_of(I.render_inventory("lab1", SMOKE, Path("/run/mprig/lab1")))


def test_data_interfaces_come_from_the_inventory() -> None:
    rig = I.rig_from_inventory(Path("lab"), {"_meta": {"hostvars": lab_hostvars()}})
    assert rig.data_ifs == {
        "client": ("wlan0", "wwan0"),
        "server": ("p1", "p2"),
        "ap": ("lan0", "wan0"),
        "cell": ("lan0", "wan0"),
    }


@pytest.mark.parametrize(
    ("host", "value", "message"),
    [
        ("server", None, "lab: host server: mprig_data_interfaces is missing: list the"
         " interfaces that carry experiment traffic (captures run on each of them, never"
         " on -i any)"),
        ("client", [], "lab: host client: mprig_data_interfaces is empty: list the"
         " interfaces that carry experiment traffic (captures run on each of them, never"
         " on -i any)"),
        ("client", "wlan0", "lab: host client: mprig_data_interfaces must be a list of"
         " interface names, got 'wlan0'"),
        ("client", ["wlan0"], "lab: host client: mprig_data_interfaces lacks wwan0, the"
         " client interface of path cell (its subflow would not be captured)"),
        ("client", ["wlan0", "wwan0", "any"], "lab: host client: mprig_data_interfaces:"
         " 'any' is not a data interface name (1-15 of A-Z a-z 0-9 _ . : @ -, not starting"
         " with -; never any or lo)"),
        ("ap", ["lan0", "-w/tmp/x"], "lab: host ap: mprig_data_interfaces: '-w/tmp/x' is"
         " not a data interface name (1-15 of A-Z a-z 0-9 _ . : @ -, not starting with -;"
         " never any or lo)"),
    ],
)  # fmt: skip
def test_an_inventory_without_usable_data_interfaces_names_the_host(
    host: str, value: object, message: str
) -> None:
    hostvars = lab_hostvars()
    if value is None:
        del hostvars[host]["mprig_data_interfaces"]
    else:
        hostvars[host]["mprig_data_interfaces"] = value
    with pytest.raises(UsageError) as e:
        I.rig_from_inventory(Path("lab"), {"_meta": {"hostvars": hostvars}})
    assert str(e.value) == message


@pytest.mark.slow
def test_the_example_lab_inventory_names_every_hosts_data_interfaces() -> None:
    lab = datafiles.INVENTORY / "lab.example"
    data = I.load_inventory(lab)
    links = tuple(PathLink(**p) for p in data["_meta"]["hostvars"]["client"]["mprig_paths"])
    assert I.data_interfaces(lab, data["_meta"]["hostvars"], links) == {
        "client": ("wlan0", "wwan0"),
        "server": ("eth1",),
        "ap": ("wlan0", "eth1"),
        "rwifi": ("eth1", "eth2"),
        "rcell": ("eth1", "eth2"),
    }
