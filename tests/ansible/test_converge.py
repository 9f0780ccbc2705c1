"""playbooks/site.yml converges on the virtual rig over SSH, and a second run changes nothing.

Natively (this module) the Wi-Fi hop is a veth, so wifi_ap and wifi_client only keep the
policy routing; tests/integration/test_wifi_vm.py converges the same play in VM mode (through
`mprig run` of a campaign with `rig: {wifi: hwsim}`), where the hop is 802.11
(mac80211_hwsim), hostapd and wpa_supplicant really run and the station associates.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mprig.campaign.spec import Direction
from mprig.campaign.spec import Path as SpecPath
from mprig.rig import hwsim, provision, virtual
from mprig.rig import layout as L
from mprig.rig.host import Rig

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = "h7conv"
D = Direction(rate_mbit=10)
PATHS = (
    SpecPath(name="wifi", kind="wifi", down=D, up=D),
    SpecPath(name="cell", kind="cellular", down=D, up=D),
)
FILES = Path(__file__).with_name("files")
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def recap(output: str) -> dict[str, tuple[int, int, int]]:
    """PLAY RECAP per host: (changed, unreachable, failed)."""
    return {m[1]: (int(m[3]), int(m[4]), int(m[5])) for m in RECAP.finditer(output)}


@pytest.fixture(scope="module")
def converged() -> Iterator[tuple[Rig, str, str]]:
    virtual.down(NAME)
    rig = virtual.up(NAME, PATHS)
    try:
        yield rig, hwsim.converge(rig), hwsim.converge(rig)
    finally:
        virtual.down(NAME)


def test_first_run_succeeds_on_every_host(converged: tuple[Rig, str, str]) -> None:
    first = recap(converged[1])
    assert sorted(first) == ["ap", "cell", "client", "server"]
    assert [(host, u, f) for host, (_, u, f) in sorted(first.items())] == [
        ("ap", 0, 0), ("cell", 0, 0), ("client", 0, 0), ("server", 0, 0)
    ]  # fmt: skip


def test_second_run_changes_nothing(converged: tuple[Rig, str, str]) -> None:
    assert recap(converged[2]) == {h: (0, 0, 0) for h in ("ap", "cell", "client", "server")}


def test_state_the_roles_keep(converged: tuple[Rig, str, str]) -> None:
    rig = converged[0]
    client, cell = rig.hosts["client"], rig.hosts["cell"]
    rules = client.run(["ip", "-4", "rule", "show"]).stdout
    assert re.findall(r"from (10\.\d\.1\.2) lookup (\d+)", rules) == [
        ("10.1.1.2", "101"),
        ("10.2.1.2", "102"),
    ]
    routes = client.run(["ip", "-4", "route", "show", "table", "101"]).stdout.split()
    assert routes[:5] == ["default", "via", "10.1.1.1", "dev", "wlan0"]
    offloads = cell.run(["ethtool", "-k", "lan0"]).stdout
    assert re.findall(r"^(tcp-segmentation-offload|generic-segmentation-offload): (\w+)",
                      offloads, re.M) == [("tcp-segmentation-offload", "off"),
                                          ("generic-segmentation-offload", "off")]  # fmt: skip
    assert client.run(["sysctl", "-n", "net.ipv4.tcp_no_metrics_save"]).stdout.strip() == "1"


def test_site_yml_registers_the_bpf_programs_a_campaign_names_on_the_senders(
    converged: tuple[Rig, str, str],
) -> None:
    from mprig.stack import bpfcc

    rig = converged[0]
    state = virtual.state_dir(rig.name)
    had_prr = "prr" in bpfcc.loaded()
    try:
        _converge_with_prr(rig, state)
    finally:
        if not had_prr:  # leave the machine as found (test_bpf_cc_role registers prr itself)
            bpfcc.unload(["prr"])


def _converge_with_prr(rig: Rig, state: Path) -> None:
    out = provision.apply(
        state / "inventory",
        state,
        netns=L.namespace(rig.name, "ctl"),
        playbook="site.yml",
        extra=(
            "--vault-password-file", str(hwsim.VAULT_PASSWORD_FILE), "--limit", "client,server",
            "-e", '{"bpf_cc_programs": ["prr"], "bpf_cc_manage_packages": false}',
        ),
    )  # fmt: skip
    assert {h: (u, f) for h, (_, u, f) in recap(out).items()} == {
        "client": (0, 0),
        "server": (0, 0),
    }
    assert out.count("TASK [bpf_cc : Register the programs that are not loaded]") == 2  # 2 plays
    for host in ("client", "server"):
        offered = rig.hosts[host].run(["sysctl", "-n", "net.ipv4.tcp_available_congestion_control"])
        assert "prr" in offered.stdout.split()


def test_cellular_modem_mode_against_an_mmcli_test_double(
    converged: tuple[Rig, str, str], tmp_path: Path
) -> None:
    """No LTE modem here: tests/ansible/files/fake-mmcli stands in for ModemManager's mmcli."""
    fake = tmp_path / "fake-mmcli"
    shutil.copy(FILES / "fake-mmcli", fake)
    state = virtual.state_dir(NAME)

    def play() -> str:
        return provision.apply(
            state / "inventory", state, netns=L.namespace(NAME, "ctl"),
            playbook=str(FILES / "cellular-modem.yml"), extra=("-e", f"cellular_mmcli={fake}"),
        )  # fmt: skip

    first, second = play(), play()
    assert (recap(first), recap(second)) == ({"client": (1, 0, 0)}, {"client": (0, 0, 0)})
    calls = (tmp_path / "fake-mmcli.state.calls").read_text()
    assert calls == "-m any --timeout 60 --simple-connect=apn=internet.example,ip-type=ipv4\n"
    assert '"msg": "client: lte signal 67 %"' in first
