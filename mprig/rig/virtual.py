"""The virtual rig: namespaces `mprig-<rig>-<host>` on this machine, reached over SSH.

    up(name, paths)   build (or reuse) the rig, start sshd per host, provision with Ansible
    down(name)        tear it down and verify nothing remains (leftovers)
    status(name)      what exists now: hosts, links, endpoints, qdiscs, sshd state
    leftovers(name)   every namespace, process, link, qdisc, endpoint or state file left

State (keys, configs, pid files, the rendered inventory) lives in /run/mprig/<rig>/.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mprig import startup
from mprig.campaign.spec import Path as SpecPath
from mprig.errors import MprigError, RigBusy
from mprig.rig import inventory, netns, netns6, ns3link, provision, sshd, vm, vmprobe
from mprig.rig import layout as L
from mprig.rig.host import PathLink, Rig
from mprig.rig.layout import check_rig_name, layout
from mprig.rig.netns import Topology
from mprig.rig.ssh import SshHost

__all__ = ["down", "layout", "leftovers", "load", "state_dir", "status", "up"]

STATE_ROOT = Path(os.environ.get("MPRIG_STATE", "/run/mprig"))
LOCK_TIMEOUT = 300.0  # seconds a second `up`/`down` waits for the first one


def state_dir(name: str) -> Path:
    """/run/mprig/<rig>."""
    return STATE_ROOT / check_rig_name(name)


def _lock_path(name: str) -> Path:
    return STATE_ROOT / f"{name}.lock"


@contextlib.contextmanager
def rig_lock(name: str, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Serialize up/down of one rig (flock on /run/mprig/<rig>.lock)."""
    STATE_ROOT.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(_lock_path(name), "a") as f:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RigBusy(
                        f"rig {name} is being built or torn down by another process"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _mode() -> str:
    return "virtual-vm" if vmprobe.in_vm() else "virtual-native"


# Rigs handed out by this process, by name: `down` ends their hosts' sessions first.
_handed_out: dict[str, list[Rig]] = {}


def _make_rig(name: str, links: tuple[PathLink, ...]) -> Rig:
    state = state_dir(name)
    ctl = L.namespace(name, "ctl")
    hosts = {h: SshHost(h, h, state / "ssh_config", ctl) for h in L.hosts(links)}
    rig = Rig(name, dict(hosts), links, L.SERVER_ADDR, _mode())
    _handed_out.setdefault(name, []).append(rig)
    return rig


def load(name: str) -> Rig | None:
    """The rig `name` if it is up and healthy (every sshd alive), else None."""
    meta = state_dir(name) / "rig.json"
    try:
        links = tuple(PathLink(**p) for p in json.loads(meta.read_text())["paths"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if any(sshd.sshd_pid(state_dir(name), h) is None for h in L.hosts(links)):
        return None
    return _make_rig(name, links)


def up(
    name: str,
    paths: Sequence[SpecPath],
    *,
    provision_hosts: bool = True,
    link_types: dict[str, str] | None = None,
) -> Rig:
    """Build rig `name` for `paths` (reused if already up with the same layout).

    Args:
        provision_hosts: apply playbooks/rig.yml (MPTCP sysctls, limits, endpoints).
        link_types: spec path name -> client link type (netns.CLIENT_LINKS), default veth;
            paths with `engine: ns3` get TAPs for the ns-3 engine (rig/ns3link.py).
    """
    links = layout(paths)
    link_types = {**ns3link.link_types(paths), **(link_types or {})}
    with rig_lock(name):
        current = load(name)
        if current is not None and current.paths == links:
            return current
        _teardown(name)
        try:
            _build(name, links, provision_hosts, link_types)
        except BaseException:
            _teardown(name)
            raise
    rig = load(name)
    if rig is None:
        raise MprigError(f"rig {name}: built but sshd is not running; see {state_dir(name)}")
    return rig


def _build(
    name: str,
    links: tuple[PathLink, ...],
    provision_hosts: bool,
    link_types: dict[str, str] | None,
) -> None:
    topo = Topology(name, links)
    state = state_dir(name)
    state.mkdir(mode=0o700)
    netns.build(topo, link_types)
    netns6.build(topo)
    sshd.write_material(topo, state)
    sshd.start_daemons(topo, state)
    inv = inventory.write_inventory(name, links, state)
    if provision_hosts:
        startup.mark("rig build")
        provision.apply(inv, state, netns=topo.ns("ctl"))
        startup.mark("ansible")
    inodes = {ns: os.stat(f"/run/netns/{ns}").st_ino for ns in topo.namespaces}
    meta = {"name": name, "paths": [asdict(x) for x in links], "netns_inodes": inodes}
    (state / "rig.json").write_text(json.dumps(meta, indent=1) + "\n")


def down(name: str) -> None:
    """Tear rig `name` down; MprigError listing whatever still remains."""
    check_rig_name(name)
    with rig_lock(name):
        remaining = _teardown(name)
        _lock_path(name).unlink(missing_ok=True)
    if remaining:
        raise MprigError(f"rig {name}: teardown left " + "; ".join(remaining))


def _teardown(name: str) -> list[str]:
    """Kill the rig's processes, delete its namespaces and state; return leftovers."""
    for rig in _handed_out.pop(name, []):
        rig.close()
    inodes = _recorded_inodes(name)
    _kill_all(name, inodes)
    for ns in netns.existing_namespaces(name):
        netns.delete_namespace(ns)
    if not any(r.startswith("process") for r in _leftovers(name, inodes)):
        shutil.rmtree(state_dir(name), ignore_errors=True)  # kept for debugging otherwise
    return [r for r in _leftovers(name, inodes) if not r.startswith("lock file")]


def _recorded_inodes(name: str) -> set[int]:
    inodes = set()
    with contextlib.suppress(OSError, ValueError, KeyError):
        meta = json.loads((state_dir(name) / "rig.json").read_text())
        inodes = {int(i) for i in meta["netns_inodes"].values()}
    for ns in netns.existing_namespaces(name):
        with contextlib.suppress(OSError):
            inodes.add(os.stat(f"/run/netns/{ns}").st_ino)
    return inodes


def _kill_all(name: str, inodes: set[int]) -> None:
    """TERM, then KILL, every process of the rig (in its namespaces or using its state)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [pid for pid, _ in _rig_processes(name, inodes)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 2.0
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
            time.sleep(0.05)
        if not pids:
            return


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _rig_processes(name: str, inodes: set[int]) -> list[tuple[int, str]]:
    """(pid, command) of processes inside the rig's namespaces or naming its state dir."""
    marks = (f"{state_dir(name)}/".encode(), f"mprig-{name}-".encode())
    found = []
    mine = vm.ancestors()  # a shell that named the rig on its command line is not the rig's
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            ino = os.stat(entry / "ns" / "net").st_ino
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmd and (ino in inodes or any(m in cmd for m in marks)) and not _zombie(int(entry.name)):
            found.append((int(entry.name), cmd.replace(b"\0", b" ").decode(errors="replace")))
    return found


def leftovers(name: str) -> list[str]:
    """Everything of rig `name` that exists now; [] after a clean down()."""
    check_rig_name(name)
    return _leftovers(name, _recorded_inodes(name))


def _leftovers(name: str, inodes: set[int]) -> list[str]:
    found = [f"process {pid} ({cmd.strip()[:80]})" for pid, cmd in _rig_processes(name, inodes)]
    for ns in netns.existing_namespaces(name):
        found.append(f"namespace {ns}")
        found += [f"{what} in {ns}" for what in _ns_contents(ns)]
    if state_dir(name).exists():
        found.append(f"state dir {state_dir(name)}")
    if _lock_path(name).exists():
        found.append(f"lock file {_lock_path(name)}")
    return found


def _ns_contents(ns: str) -> list[str]:
    """Links, non-default qdiscs and MPTCP endpoints inside one namespace."""
    out = []
    for line in netns.ip(ns, "-o", "link", "show", check=False).splitlines():
        dev = line.split(":")[1].strip().split("@")[0]
        if dev != "lo":
            out.append(f"link {dev}")
    for line in netns.sh(["tc", "-n", ns, "qdisc", "show"], check=False).splitlines():
        if line and not line.startswith(("qdisc noqueue", "qdisc pfifo_fast")):
            out.append(f"qdisc {line.strip()}")
    for line in netns.ip(ns, "mptcp", "endpoint", "show", check=False).splitlines():
        if line.strip():
            out.append(f"mptcp endpoint {line.strip()}")
    return out


def status(name: str) -> dict[str, Any]:
    """What rig `name` looks like now (for `mprig rig status`)."""
    check_rig_name(name)
    rig = load(name)
    meta_paths: list[dict[str, Any]] = [asdict(x) for x in rig.paths] if rig else []
    hosts: dict[str, Any] = {}
    state = state_dir(name)
    for ns in netns.existing_namespaces(name):
        host = ns.removeprefix(L.namespace(name, ""))
        hosts[host] = _host_status(ns, host, state)
    return {
        "rig": name,
        "up": rig is not None,
        "mode": _mode(),
        "state_dir": str(state),
        "server_addr": L.SERVER_ADDR,
        "paths": meta_paths,
        "hosts": hosts,
    }


def _host_status(ns: str, host: str, state: Path) -> dict[str, Any]:
    addrs = netns.ip(ns, "-br", "addr", "show", check=False).splitlines()
    qdiscs = netns.sh(["tc", "-n", ns, "qdisc", "show"], check=False).splitlines()
    endpoints = netns.ip(ns, "mptcp", "endpoint", "show", check=False).splitlines()
    info: dict[str, Any] = {
        "namespace": ns,
        "links": [" ".join(a.split()) for a in addrs],
        "qdiscs": [q.strip() for q in qdiscs if q.strip()],
        "mptcp_endpoints": [e.strip() for e in endpoints if e.strip()],
    }
    if host != "ctl":
        pid = sshd.sshd_pid(state, host)
        info["mgmt_addr"] = L.mgmt_addr(host)
        info["sshd"] = f"running (pid {pid})" if pid else "not running"
    return info
