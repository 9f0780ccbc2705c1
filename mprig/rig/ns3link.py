"""The virtual rig's ns-3 link engine (issue 16 parts 3-4; docs/ns3-engine.md).

A path with `engine: ns3` gets TAP devices instead of a veth pair between the client and its
router (`tap_client_link`, link type "ns3" in netns.CLIENT_LINKS), with fixed Ethernet
addresses. For each run, `running()` starts oracle/ns3/build/wifi_rt in the router's
namespace, in its own process group: it attaches to both TAPs and carries every frame across
a real-time ns-3 802.11 link (an AP and a station at the run's distance, PHY mode and
calibration, seeded from the run's seed). When the traffic is over it is stopped with
SIGTERM and its last line gives the real-time lag and the packets it handled; the log goes
into the run's bundle as `ns3-<path>.log`. A runner that dies takes the engine with it
(PR_SET_PDEATHSIG), and the rig's teardown kills whatever runs in its namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any

from mprig.campaign import wifi
from mprig.campaign.spec import Path
from mprig.errors import HostError, ToolMissing
from mprig.rig import layout as L
from mprig.rig import netns
from mprig.rig.host import PathLink

LINK_TYPE = "ns3"  # key in netns.CLIENT_LINKS
REPO = FsPath(__file__).resolve().parents[2]
BINARY = REPO / "oracle" / "ns3" / "build" / "wifi_rt"
READY = "mprig-engine ready"  # printed once the station is associated
SUMMARY = "mprig-engine {"  # the last line: the engine's summary as JSON
READY_TIMEOUT_S = 20.0  # association takes one beacon interval of simulated time
STOP_TIMEOUT_S = 10.0

# The real-time verdict. 95th percentile: the kernels see a link whose RTT under load is a
# few ms to a few tens of ms; a lag of 10 ms on one sample in twenty changes the timing TCP
# sees by as much as the link itself. Maximum: a stall longer than Linux's minimum RTO
# (200 ms) can fire a retransmission timeout that the simulated link did not cause.
LAG_P95_LIMIT_MS = 10.0
LAG_MAX_LIMIT_MS = 200.0


def tap_macs(index: int) -> tuple[str, str]:
    """(client TAP, router TAP) Ethernet addresses of the path at 1-based `index`."""
    return f"02:6d:70:{index:02x}:01:02", f"02:6d:70:{index:02x}:01:01"


def _tap(ns: str, dev: str, mac: str, address: str) -> None:
    netns.ip(ns, "tuntap", "add", "dev", dev, "mode", "tap")
    netns.ip(ns, "link", "set", dev, "address", mac)
    netns.addr(ns, dev, address)
    netns.ip(ns, "link", "set", dev, "up")
    netns.offloads_off(ns, dev)


def tap_client_link(topo: netns.Topology, link: PathLink, a: L.PathAddrs) -> None:
    """The client link of an ns3 path: a persistent TAP on each side, joined only while an
    engine runs (until then the link has no carrier)."""
    client_mac, router_mac = tap_macs(a.index)
    _tap(topo.ns("client"), link.client_if, client_mac, a.client_addr)
    _tap(topo.ns(link.router), link.router_client_if, router_mac, a.router_client_addr)


netns.CLIENT_LINKS[LINK_TYPE] = tap_client_link


def link_types(paths: Sequence[Path]) -> dict[str, str]:
    """Spec path name -> client link type for the paths an ns-3 engine carries."""
    return {p.name: LINK_TYPE for p in paths if p.engine == "ns3"}


def channel_args(path: Path) -> list[str]:
    """wifi_rt's channel flags for a path: standard, fixed PHY mode, the calibration's path
    loss (as the netem model and the oracle use it), Nakagami fading, NIST errors."""
    radio = wifi.radio_for(path.channel_model)
    return [
        f"--standard={path.wifi_standard or '11g'}",
        "--manager=constant",
        f"--rate={path.down.rate_mbit:g}",
        f"--exponent={radio.exponent:g}",
        f"--referenceLoss={radio.reference_loss_db:g}",
        f"--distance={path.distance_m:g}",
    ]


def engine_argv(rig: str, path: Path, link: PathLink, index: int, seed: int) -> list[str]:
    """The engine's command for one path of one run (ns-3 RngRun: seed x 8 + path index,
    so two paths of a run draw different fading)."""
    client_mac, router_mac = tap_macs(index)
    return [
        "ip", "netns", "exec", L.namespace(rig, link.router), str(BINARY),
        *channel_args(path),
        f"--seed={seed * L.MAX_PATHS + index}",
        f"--clientNetns=/run/netns/{L.namespace(rig, 'client')}",
        f"--clientTap={link.client_if}",
        f"--routerTap={link.router_client_if}",
        f"--clientMac={client_mac}",
        f"--routerMac={router_mac}",
    ]  # fmt: skip


def parse_summary(text: str) -> dict[str, Any]:
    """The engine's summary (its last `mprig-engine {...}` line); ValueError if absent."""
    lines = [ln for ln in text.splitlines() if ln.startswith(SUMMARY)]
    if not lines:
        raise ValueError("the engine printed no summary (killed, or crashed)")
    doc = json.loads(lines[-1].removeprefix("mprig-engine "))
    if not isinstance(doc, dict):
        raise ValueError(f"engine summary is not an object: {lines[-1]!r}")
    return doc


def verdict(per_path: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """run.json `engine`: the worst lag over the paths, packets handled, and whether the
    run stayed real-time (LAG_P95_LIMIT_MS, LAG_MAX_LIMIT_MS)."""
    lag_max = max(float(s["lag_max_ms"]) for s in per_path.values())
    lag_p95 = max(float(s["lag_p95_ms"]) for s in per_path.values())
    packets = sum(int(n) for s in per_path.values() for n in s["packets"].values())
    realtime = lag_p95 <= LAG_P95_LIMIT_MS and lag_max <= LAG_MAX_LIMIT_MS
    return {
        "kind": "ns3",
        "lag_max_ms": round(lag_max, 3),
        "lag_p95_ms": round(lag_p95, 3),
        "packets": packets,
        "realtime": realtime,
        "limits": {"lag_p95_ms": LAG_P95_LIMIT_MS, "lag_max_ms": LAG_MAX_LIMIT_MS},
        "paths": per_path,
    }


# -- processes (the I/O edge) ---------------------------------------------------------------


@dataclass
class Engine:
    """One running engine process."""

    path: str  # spec path name
    proc: subprocess.Popen[bytes]
    log: FsPath  # ns3-<path>.log in the run's staging directory


@dataclass
class Engines:
    """The engines of one run; `summary` is run.json `engine` once they stopped."""

    running: list[Engine] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def check() -> None:
    """The engine binary is built (ToolMissing saying how otherwise)."""
    if not os.access(BINARY, os.X_OK):
        raise ToolMissing(
            f"{BINARY} is not built: run `make ns3-engine` (installs libns3-dev, g++)"
        )


def start(argv: list[str], path: str, staging: FsPath) -> Engine:
    """Start one engine in its own process group, its output into the bundle."""
    log = staging / f"ns3-{path}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    return Engine(path, proc, log)


def _tail(log: FsPath) -> str:
    with contextlib.suppress(OSError):
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
    return "(no log)"


def wait_ready(e: Engine, timeout: float = READY_TIMEOUT_S) -> None:
    """Until the station is associated; HostError with the log's tail otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if READY in e.log.read_text(errors="replace"):
            return
        if e.proc.poll() is not None:
            break
        time.sleep(0.05)
    why = f"exited {e.proc.returncode}" if e.proc.poll() is not None else "not ready in time"
    raise HostError("localhost", f"ns-3 engine of path {e.path} {why}: {_tail(e.log)}")


def stop(e: Engine) -> dict[str, Any]:
    """SIGTERM the engine's group, wait, return its summary (HostError without one)."""
    if e.proc.poll() is not None:
        raise HostError(
            "localhost", f"ns-3 engine of path {e.path} died during the run: {_tail(e.log)}"
        )
    os.killpg(e.proc.pid, signal.SIGTERM)
    try:
        e.proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill(e)
    try:
        return parse_summary(e.log.read_text(errors="replace"))
    except ValueError as err:
        raise HostError("localhost", f"ns-3 engine of path {e.path}: {err}") from None


def kill(e: Engine) -> None:
    """SIGKILL the engine's group if it still runs, and reap it."""
    if e.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(e.proc.pid, signal.SIGKILL)
        e.proc.wait()


def _targets(rig: Any, paths: Sequence[Path]) -> list[tuple[Path, PathLink, int]]:
    """(spec path, rig link, 1-based index) of each ns3 path; HostError if the rig lacks it."""
    links = {link.name: link for link in rig.paths}
    out = []
    for p in (p for p in paths if p.engine == "ns3"):
        link = links.get(p.name)
        if link is None or link.engine != "ns3" or not rig.mode.startswith("virtual"):
            raise HostError(rig.name, f"path {p.name}: engine ns3 needs a virtual rig with TAPs")
        out.append((p, link, L.path_index(rig.paths, link)))
    return out


@contextlib.contextmanager
def running(rig: Any, paths: Sequence[Path], seed: int, staging: FsPath) -> Iterator[Engines]:
    """The run's engines, ready (station associated) inside the block; stopped at its end
    with their summary in `Engines.summary`, killed whatever happens."""
    engines = Engines()
    targets = _targets(rig, paths)
    if not targets:
        yield engines
        return
    check()
    try:
        for p, link, index in targets:
            argv = engine_argv(rig.name, p, link, index, seed)
            engines.running.append(start(argv, p.name, staging))
        for e in engines.running:
            wait_ready(e)
        yield engines
        engines.summary = verdict({e.path: stop(e) for e in engines.running})
    finally:
        for e in engines.running:
            kill(e)
