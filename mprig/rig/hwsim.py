"""A real 802.11 hop in the virtual rig, where the kernel has mac80211_hwsim (VM mode here).

Two simulated radios are loaded, one is moved into the AP's namespace and one into the
client's (`iw phy <phy> set netns name <ns>`), and renamed to the interface names the rig
layout uses (router side `lan0`, client side `wlan0`), so every other part of the rig (netem on
lan0, policy routing and MPTCP endpoints on wlan0) is unchanged. hostapd (WPA2-PSK) on the AP
and wpa_supplicant on the client are then configured by the same wifi_ap and wifi_client roles
a lab uses: `up()` builds the rig with this link type and converges playbooks/site.yml.

    from mprig.rig import hwsim
    rig = hwsim.up("virtual", paths)        # VM mode; the first wifi path is 802.11
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from mprig import datafiles
from mprig.campaign.spec import Path as SpecPath
from mprig.errors import HostError, ToolMissing
from mprig.rig import layout as L
from mprig.rig import netns, provision, virtual
from mprig.rig.host import PathLink, Rig
from mprig.rig.netns import Topology

LINK_TYPE = "hwsim"  # key in netns.CLIENT_LINKS
# The virtual rig's Wi-Fi passphrase is vault-encrypted like a lab's; its password file is an
# example committed on purpose (the virtual rig's radios exist only inside one kernel).
VAULT_PASSWORD_FILE = datafiles.INVENTORY / "virtual" / "vault-password"


def available() -> bool:
    """Whether this kernel can provide simulated radios."""
    from mprig.rig import vmprobe

    return vmprobe.hwsim_available()


def ensure_radios(count: int = 2) -> None:
    """Load mac80211_hwsim with `count` radios unless it is loaded already."""
    if Path("/sys/module/mac80211_hwsim").exists():
        return
    if not available():
        raise ToolMissing(
            "mac80211_hwsim is not available in this kernel: run the rig in VM mode "
            "(Debian's stock kernel has it) or use veth Wi-Fi links"
        )
    netns.sh(["modprobe", "mac80211_hwsim", f"radios={count}"])


def parse_phys(iw_phy: str) -> list[str]:
    """Phy names in `iw phy` output, in numeric order."""
    phys = re.findall(r"^Wiphy (\S+)$", iw_phy, re.M)
    return sorted(phys, key=lambda p: int(re.sub(r"\D", "", p) or 0))


def phy_interface(iw_dev: str, phy: str) -> str | None:
    """The interface `iw dev` lists under phy#N for `phy` (phyN), or None."""
    index = phy.removeprefix("phy")
    block = re.search(rf"^phy#{index}\n((?:[ \t]+.*\n?)*)", iw_dev, re.M)
    name = re.search(r"Interface (\S+)", block.group(1)) if block else None
    return name.group(1) if name else None


def root_phys() -> list[str]:
    """Wireless phys still in the root namespace (not yet given to a rig), in order."""
    return parse_phys(netns.sh(["iw", "phy"], check=False))


def _phy_netdev(ns: str, phy: str) -> str:
    """The interface of `phy` inside namespace ns."""
    out = netns.in_ns(ns, "iw", "dev")
    name = phy_interface(out, phy)
    if name is None:
        raise HostError(ns, f"no interface for {phy} after moving it in: {out.strip()!r}")
    return name


def give_radio(ns: str, ifname: str) -> None:
    """Move the first free radio into ns and name its interface `ifname` (left up)."""
    phys = root_phys()
    if not phys:
        raise HostError("localhost", "no free mac80211_hwsim radio: load it with radios=2 or more")
    phy = phys[0]
    netns.sh(["iw", "phy", phy, "set", "netns", "name", ns])
    dev = _phy_netdev(ns, phy)
    netns.ip(ns, "link", "set", dev, "down")
    if dev != ifname:
        netns.ip(ns, "link", "set", dev, "name", ifname)
    netns.ip(ns, "link", "set", ifname, "up")


def hwsim_client_link(topo: Topology, link: PathLink, a: L.PathAddrs) -> None:
    """Client link builder: an 802.11 hop between the client and the path's AP router."""
    ensure_radios()
    client, router = topo.ns("client"), topo.ns(link.router)
    give_radio(router, link.router_client_if)
    give_radio(client, link.client_if)
    netns.addr(client, link.client_if, a.client_addr)
    netns.addr(router, link.router_client_if, a.router_client_addr)
    netns.offloads_off(client, link.client_if)
    netns.offloads_off(router, link.router_client_if)


netns.CLIENT_LINKS.setdefault(LINK_TYPE, hwsim_client_link)


def link_types(paths: Sequence[SpecPath]) -> dict[str, str]:
    """{path name: "hwsim"} for the first wifi path (the one through host ap)."""
    wifi = [p.name for p in paths if p.kind == "wifi"][:1]
    return dict.fromkeys(wifi, LINK_TYPE)


def converge(rig: Rig, *, timeout: float = 1200.0) -> str:
    """Apply playbooks/site.yml to the rig's hosts over SSH; returns ansible's output.

    Under software emulation (VM mode) this takes 5-8 minutes on an idle 2-core host and
    passed 10 on a loaded one: hence the generous timeout."""
    state = virtual.state_dir(rig.name)
    return provision.apply(
        state / "inventory",
        state,
        netns=L.namespace(rig.name, "ctl"),
        playbook="site.yml",
        extra=("--vault-password-file", str(VAULT_PASSWORD_FILE)),
        timeout=timeout,
    )


def associated(rig: Rig, link: PathLink) -> str:
    """`iw dev <if> link` on the client (contains "Connected to" once associated)."""
    return rig.hosts["client"].run(["iw", "dev", link.client_if, "link"]).stdout


def up(name: str, paths: Sequence[SpecPath], *, wait: float = 30.0) -> Rig:
    """Build rig `name` with an 802.11 first wifi path, converge site.yml, wait to associate."""
    # site.yml applies the mptcp and server roles too: rig.yml would only repeat them.
    rig = virtual.up(name, paths, link_types=link_types(paths), provision_hosts=False)
    converge(rig)
    wifi = next(link for link in rig.paths if link.name in link_types(paths))
    deadline = time.monotonic() + wait
    while "Connected to" not in associated(rig, wifi):
        if time.monotonic() > deadline:
            raise HostError("client", f"{wifi.client_if} did not associate in {wait:.0f} s")
        time.sleep(0.5)
    return rig
