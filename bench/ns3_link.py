"""The highest offered rate an ns-3 link engine holds in real time on this machine, with one
link and with two at once (issue 16 part 4; docs/ns3-engine.md).

Per link: two namespaces joined by the engine's TAPs (as the rig's ns3 paths are), 802.11g
at 54 Mbit/s, 10 m. For each offered rate, iperf3 sends UDP from the router side to the
client side for SECONDS; the engine's lag (p95, max) and the delivered rate are recorded.
A rate is held when the lag stays within mprig.rig.ns3link's limits. Needs root and
`make ns3-engine`; prints one JSON line per (links, rate).

    nice -n 19 python -m bench.ns3_link [--rates 2,5,10,20] [--seconds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mprig.rig import ns3link

PREFIX = "mprig-ns3bench"  # namespaces of this bench only


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def ns(i: int, side: str) -> str:
    return f"{PREFIX}-{side}{i}"


@contextlib.contextmanager
def links(count: int) -> Iterator[None]:
    """`count` pairs of namespaces with a TAP each (10.i.1.0/24), deleted at the end."""
    try:
        for i in range(1, count + 1):
            client_mac, router_mac = ns3link.tap_macs(i)
            for side, mac, addr in (("c", client_mac, "2"), ("r", router_mac, "1")):
                sh("ip", "netns", "add", ns(i, side))
                sh("ip", "-n", ns(i, side), "link", "set", "lo", "up")
                sh("ip", "-n", ns(i, side), "tuntap", "add", "dev", "tap0", "mode", "tap")
                sh("ip", "-n", ns(i, side), "link", "set", "tap0", "address", mac)
                sh("ip", "-n", ns(i, side), "addr", "add", f"10.{i}.1.{addr}/24", "dev", "tap0")
                sh("ip", "-n", ns(i, side), "link", "set", "tap0", "up")
        yield
    finally:
        for i in range(1, count + 1):
            for side in ("c", "r"):
                subprocess.run(["ip", "netns", "delete", ns(i, side)], check=False)


def engine_argv(i: int) -> list[str]:
    client_mac, router_mac = ns3link.tap_macs(i)
    return [
        "ip", "netns", "exec", ns(i, "r"), str(ns3link.BINARY), "--standard=11g", "--rate=54",
        "--distance=10", f"--seed={i}", f"--clientNetns=/run/netns/{ns(i, 'c')}",
        "--clientTap=tap0", "--routerTap=tap0", f"--clientMac={client_mac}",
        f"--routerMac={router_mac}",
    ]  # fmt: skip


def one_point(count: int, rate: float, seconds: float, out: Path) -> dict[str, Any]:
    """Engines up, UDP at `rate` Mbit/s on every link at once, engines stopped."""
    engines = [ns3link.start(engine_argv(i), f"b{i}", out) for i in range(1, count + 1)]
    try:
        for e in engines:
            ns3link.wait_ready(e)
        servers = [
            subprocess.Popen(
                ["ip", "netns", "exec", ns(i, "c"), "iperf3", "-s", "-1", "-J"],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(1, count + 1)
        ]
        time.sleep(0.5)
        clients = [
            subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns(i, "r"),
                    "iperf3",
                    "-u",
                    "-c",
                    f"10.{i}.1.2",
                    "-b",
                    f"{rate}M",
                    "-t",
                    f"{seconds:g}",
                    "-l",
                    "1400",
                ],
                stdout=subprocess.DEVNULL,
            )
            for i in range(1, count + 1)
        ]
        for c in clients:
            c.wait(seconds + 30)
        got = [_received_mbit(s.communicate(timeout=30)[0]) for s in servers]
        summary = ns3link.verdict({e.path: ns3link.stop(e) for e in engines})
    finally:
        for e in engines:
            ns3link.kill(e)
    keys = ("lag_p95_ms", "lag_max_ms", "realtime")
    return {"links": count, "offered_mbit": rate, "received_mbit": got,
            **{k: summary[k] for k in keys}}  # fmt: skip


def _received_mbit(text: str) -> float:
    """What a UDP iperf3 server received, from its JSON: `end.sum_received` (iperf3 3.12's
    server reports 0 bytes in `end.sum` for UDP)."""
    with contextlib.suppress(ValueError, KeyError):
        return round(json.loads(text)["end"]["sum_received"]["bits_per_second"] / 1e6, 2)
    return 0.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", default="2,5,10,20", help="offered Mbit/s per link")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--links", default="1,2")
    args = p.parse_args()
    ns3link.check()
    with tempfile.TemporaryDirectory() as tmp:
        for count in (int(x) for x in args.links.split(",")):
            with links(count):
                for rate in (float(x) for x in args.rates.split(",")):
                    print(json.dumps(one_point(count, rate, args.seconds, Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
