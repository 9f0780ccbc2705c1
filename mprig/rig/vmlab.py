"""The VM lab (issue 17): the lab path end to end where no lab hardware is at hand.

One QEMU guest (the "lab machine") boots the kernel `make kernel-vm` built with the upstream
patch series; inside it the lab's hosts (client, ap, cell, server) are namespaces with their
own sshd, checked host keys and a generated inventory (the virtual rig's builder), the Wi-Fi
hop is two mac80211_hwsim radios. From there on everything is what a lab does:

- `lab_inventory` copies the rendered inventory and adds what a lab engineer writes into
  group_vars: the kernel role's expectations (kernel_expected_release, kernel_required_sysctls)
  and the Wi-Fi path's attenuator, the `txpower` driver on the AP's radio;
- `provision` runs `ansible-playbook playbooks/site.yml -i <that inventory>` (hostapd WPA2 on
  the AP, wpa_supplicant on the client, the kernel role in verify mode), then waits until the
  station is associated;
- `mprig run --inventory <that inventory>` (from the controller namespace) runs campaigns as
  on a lab rig: preflight probe, attenuator instead of netem on the radio, verified teardown.

Why one guest and namespace hosts rather than three VMs: hwsim radios exist inside one
kernel (cross-VM 802.11 needs wmediumd/vwifi, not in Debian 12), and three software-emulated
guests on 2 cores would measure the emulator. hwsim does not attenuate: the txpower driver
makes real `iw` calls that read back, but the signal does not change (a stand-in for an RF
attenuator, named so in run.json's attenuator "ap:lan0 txpower" and in docs/lab.md).

    python -m mprig.rig.vmlab up --rig lab --campaign c.yaml --inventory DIR --release R
    ip netns exec mprig-lab-ctl mprig run c.yaml --inventory DIR
    python -m mprig.rig.vmlab down --rig lab
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from mprig.errors import HostError, MprigError
from mprig.rig import hwsim, provision, virtual
from mprig.rig import layout as L
from mprig.rig.host import Rig

# Sysctls whose presence proves the booted kernel is the patched one (0002: proactive_sched).
REQUIRED_SYSCTLS = ("net.mptcp.enabled", "net.mptcp.proactive_sched")
MAX_DBM = 20  # hwsim's channels allow 20 dBm: the power that stands for 0 dB of attenuation


def lab_vars(rig: Rig, release: str, sysctls: tuple[str, ...]) -> dict[str, Any]:
    """What a lab engineer adds to the rendered inventory's group_vars/all.yml: the kernel
    expectations and, on the Wi-Fi path (if the campaign has one), the AP radio's attenuator."""
    attenuators = {
        link.name: {
            "driver": "txpower",
            "host": link.router,
            "interface": link.router_client_if,
            "max_dbm": MAX_DBM,
            "physical_m": 1.0,
        }
        for link in [link for link in rig.paths if link.kind == "wifi"][:1]  # the hwsim hop
    }
    return {
        "kernel_expected_release": release,
        "kernel_required_sysctls": list(sysctls),
        "mprig_attenuators": attenuators,
    }


def lab_inventory(rig: Rig, dest: Path, release: str, sysctls: tuple[str, ...]) -> Path:
    """Copy the rig's rendered inventory to dest and add the lab's group_vars (lab_vars)."""
    shutil.copytree(virtual.state_dir(rig.name) / "inventory", dest, dirs_exist_ok=True)
    group_vars = dest / "group_vars" / "all.yml"
    text = group_vars.read_text()
    extra = yaml.safe_dump(lab_vars(rig, release, sysctls), sort_keys=False)
    group_vars.write_text(f"{text.rstrip()}\n\n# --- the VM lab (mprig.rig.vmlab) ---\n{extra}")
    return dest


RECAP = re.compile(r"^(\S+)\s*:\s*((?:\w+=\d+\s*)+)$", re.M)


def parse_recap(output: str) -> dict[str, dict[str, int]]:
    """host -> {ok, changed, unreachable, failed, ...} from ansible-playbook's PLAY RECAP."""
    tail = output.rsplit("PLAY RECAP", 1)[-1] if "PLAY RECAP" in output else ""
    return {
        host: {k: int(v) for k, v in (kv.split("=") for kv in counts.split())}
        for host, counts in RECAP.findall(tail)
    }


def provision_lab(rig: Rig, inventory: Path, *, timeout: float = 1800.0) -> str:
    """ansible-playbook site.yml on the lab inventory, from the controller namespace."""
    return provision.apply(
        inventory,
        virtual.state_dir(rig.name),
        netns=L.namespace(rig.name, "ctl"),
        playbook="site.yml",
        extra=("--vault-password-file", str(hwsim.VAULT_PASSWORD_FILE)),
        timeout=timeout,
    )


def wait_associated(rig: Rig, wait: float = 60.0) -> str:
    """`iw dev <wifi if> link` on the client once it shows the association."""
    wifi = next(link for link in rig.paths if link.kind == "wifi")
    deadline = time.monotonic() + wait
    while "Connected to" not in (link := hwsim.associated(rig, wifi)):
        if time.monotonic() > deadline:
            raise HostError("client", f"{wifi.client_if} did not associate in {wait:.0f} s")
        time.sleep(0.5)
    return link


def up(
    name: str, campaign: Path, inventory: Path, release: str, sysctls: tuple[str, ...]
) -> dict[str, Any]:
    """Build the lab (hwsim Wi-Fi), write its inventory, provision it; what a test checks."""
    from mprig.campaign.spec import load_campaign

    paths = load_campaign(campaign).paths
    rig = virtual.up(name, paths, link_types=hwsim.link_types(paths), provision_hosts=False)
    lab_inventory(rig, inventory, release, sysctls)
    t0 = time.monotonic()
    output = provision_lab(rig, inventory)
    seconds = round(time.monotonic() - t0, 1)
    wifi = any(link.kind == "wifi" for link in rig.paths)
    link = wait_associated(rig) if wifi else ""
    return {"recap": parse_recap(output), "provision_s": seconds, "link": link}


def main(argv: list[str] | None = None) -> int:
    """`up` prints up()'s JSON; `down` tears the lab down (MprigError lists leftovers)."""
    p = argparse.ArgumentParser(prog="python -m mprig.rig.vmlab")
    p.add_argument("action", choices=("up", "down"))
    p.add_argument("--rig", required=True)
    p.add_argument("--campaign", type=Path)
    p.add_argument("--inventory", type=Path)
    p.add_argument("--release", default="", help="kernel_expected_release (default: any)")
    p.add_argument("--sysctl", action="append", help="kernel_required_sysctls (repeatable)")
    args = p.parse_args(argv)
    try:
        if args.action == "down":
            virtual.down(args.rig)
            return 0
        sysctls = tuple(args.sysctl or REQUIRED_SYSCTLS)
        print(json.dumps(up(args.rig, args.campaign, args.inventory, args.release, sysctls)))
    except MprigError as e:
        print(f"mprig vmlab: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
