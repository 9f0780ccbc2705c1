"""The ss sampler (mprig/run/ss_agent.py) prints what `ss -tinHM` prints (prefix h23): on
the running kernel, an MPTCP connection over two veth paths (10.123.{1,2}.0/24) between a
client and a server namespace; its two subflows and its MPTCP socket seen by `ss` itself
just before and just after one of the sampler's samples. Every field of every socket must
agree: the same fields, a value `ss` showed both times is the sampler's value, and a value
that moved between the two `ss` runs lies between them when it only grows (counters, times
since the last packet) and has the same form otherwise (an RTT, a window). With the
connection idle, while it moves data, and over IPv6 (fd00:123:1::/64, one subflow); on the
client and on the dual-stack server, whose sockets are IPv4-mapped as iperf3's are.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nslink import mptcp_hosts, mptcp_state, ns, policy_route, veth_pair, wait_listening

from collectors import ss as ss_parse
from mprig.run import capture

TAG = f"h23{os.getpid() % 10000}"
CLIENT, SERVER = f"{TAG}c", f"{TAG}s"
SERVER_ADDR = "10.123.1.2"
PORT = 5201
FILTER = f"( sport = :{PORT} or dport = :{PORT} )"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")

# One MPTCP connection: the server reads until the client stops and keeps the socket; the
# client sends BYTES (all of it at once, or 20 Mbit/s for 8 s with "slow"), then waits.
PEER = """
import socket, sys, time
mode = sys.argv[1]
family = socket.AF_INET6 if mode == "server" or ":" in sys.argv[2] else socket.AF_INET
s = socket.socket(family, socket.SOCK_STREAM, 262)
if mode == "server":  # dual-stack, as iperf3: IPv4 peers as IPv4-mapped IPv6 sockets
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", PORT)); s.listen(1)
    c, _ = s.accept()
    while c.recv(1 << 16):
        pass
    time.sleep(60)
else:
    s.bind((sys.argv[3], 0)); s.connect((sys.argv[2], PORT))
    if mode == "slow":
        for _ in range(80):
            s.sendall(bytes(25000)); time.sleep(0.01)
    else:
        s.sendall(bytes(4 << 20))
    time.sleep(60)
""".replace("PORT", str(PORT))


@pytest.fixture(scope="module")
def rig() -> Iterator[None]:
    with mptcp_hosts(CLIENT, SERVER, subflows=2):
        for i in (1, 2):
            caddr = f"10.123.{i}.1"
            veth_pair((CLIENT, f"{TAG}c{i}", caddr), (SERVER, f"{TAG}s{i}", f"10.123.{i}.2"))
            policy_route(CLIENT, i, f"{TAG}c{i}", caddr, "10.123.0.0/16", endpoint=i > 1)
        for host, end in ((CLIENT, "c1"), (SERVER, "s1")):  # IPv6 on path 1 only
            addr = f"fd00:123:1::{1 if host == CLIENT else 2}/64"
            ns(host, "ip", "addr", "add", addr, "dev", f"{TAG}{end}", "nodad")
        yield


def connection(mode: str, v6: bool) -> list[subprocess.Popen[bytes]]:
    ex = ["ip", "netns", "exec"]
    srv = subprocess.Popen([*ex, SERVER, sys.executable, "-c", PEER, "server"])
    wait_listening(SERVER, PORT, srv)
    ends = ["fd00:123:1::2", "fd00:123:1::1"] if v6 else [SERVER_ADDR, "10.123.1.1"]
    cli = subprocess.Popen([*ex, CLIENT, sys.executable, "-c", PEER, mode, *ends])
    return [srv, cli]


def ss_now(host: str = CLIENT) -> str:
    return ns(host, "ss", "-tinHM", FILTER)


def sampler_once(tmp: Path, host: str) -> str:
    """One sample of the sampler in the client (a 10 s interval, stopped after the first:
    a sample is one write, and SIGTERM ends the sampler between two samples)."""
    argv = ["ip", "netns", "exec", host, *capture.ss_sampler_argv(10.0, ports=[PORT])]
    out = tmp / f"ss-{host}.txt"
    with out.open("w") as f:
        p = subprocess.Popen(argv, stdout=f)
    deadline = time.monotonic() + 30
    while not out.stat().st_size and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 0, out.read_text()
    return out.read_text()


def sockets(text: str) -> dict[tuple[str, str, str], dict[str, str]]:
    """(netid, local, peer) -> field -> value, from ss text (the `# time` lines left out)."""
    out: dict[tuple[str, str, str], dict[str, str]] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line[0] in " \t":
            assert key is not None, text
            out[key] = fields(line)
        else:
            tok = line.split()
            key = (tok[0], tok[4], tok[5])
            out[key] = {}
    return out


def fields(line: str) -> dict[str, str]:
    """key -> value of an info line; a bare word (the CC, `app_limited`) is its own key;
    `send 10bps` and the other rates as key -> rate."""
    tok = line.split()
    out: dict[str, str] = {}
    i = 0
    while i < len(tok):
        key, sep, value = tok[i].partition(":")
        if not sep and i + 1 < len(tok) and tok[i + 1].endswith("bps"):
            out[key], i = tok[i + 1], i + 2
            continue
        out[key if sep else f"word:{key}"] = value
        i += 1
    return out


def numbers(value: str) -> list[float]:
    """The numbers in a value (`0.5/0.25`, `10,7`, `12bps`, hex MPTCP sequences kept apart)."""
    import re

    return [float(x) for x in re.findall(r"[0-9.]+", value)]


def agree(before: str, got: str, after: str) -> list[str]:
    """What the sampler's sample disagrees with ss about; empty when it agrees."""
    b, g, a = sockets(before), sockets(got), sockets(after)
    problems = []
    if set(b) != set(a):
        pytest.skip("a socket came or went between the two ss runs")  # not the sampler's fault
    if set(g) != set(b):
        return [f"sockets: ss {sorted(b)}, sampler {sorted(g)}"]
    for sock, bf in b.items():
        af, gf = a[sock], g[sock]
        for key in sorted(set(bf) | set(af) | set(gf)):
            bv, gv, av = bf.get(key), gf.get(key), af.get(key)
            if bv == av:
                ok = gv == bv
            elif key in MOVING:
                ok = between(bv, gv, av, hexa=key in HEX)
            elif gv is None:  # went anywhere: there in the same form, or absent as in one
                ok = None in (bv, av)
            else:
                ok = len(numbers(gv)) == len(numbers(bv or av or ""))
            if not ok:
                problems.append(f"{sock} {key}: ss {bv!r} then {av!r}, sampler {gv!r}")
    return problems


HEX = {"write_seq", "snd_una", "rcv_nxt", "seq", "sfseq", "maplen"}
# Fields that only grow while a connection lives (counters, times since the last packet):
# a value that moved between the two ss runs must lie between them. Others that moved (the
# RTT, cwnd, rates) may have gone anywhere in between; they must be there in the same form.
MOVING = HEX | {
    *("bytes_sent", "bytes_acked", "bytes_received", "bytes_retrans", "segs_out", "segs_in"),
    *("data_segs_out", "data_segs_in", "delivered", "lastsnd", "lastrcv", "lastack", "busy"),
    *("dsack_dups", "reord_seen", "rcv_ooopack"),
}


def between(lo: str | None, got: str | None, hi: str | None, hexa: bool) -> bool:
    """A value that moved: the sampler's is one of the two, or lies between them number by
    number (a field ss leaves out when zero counts as 0)."""
    if got in (lo, hi):
        return True
    if got is None:
        return False
    conv = (lambda v: [float(int(v, 16))]) if hexa else numbers
    lo_n, got_n, hi_n = (conv(v or "0") for v in (lo, got, hi))
    if not (len(lo_n) == len(got_n) == len(hi_n)):
        return len(got_n) in (len(lo_n), len(hi_n))  # a field that appeared, as a counter
    return all(min(x, z) <= y <= max(x, z) for x, y, z in zip(lo_n, got_n, hi_n, strict=True))


def settle(want_subflows: int = 2, limit: float = 20.0, nudge_after: float = 5.0) -> None:
    """Until the connection shows `want_subflows` subflows. The in-kernel PM tries a join
    once per connection: a join that never showed within `nudge_after` seconds (seen once
    in make test beside the VM tests, no second subflow in 20 s) is asked for again by
    adding the client's path-2 endpoint anew, which makes the PM try on live connections.
    What decides a join is printed either way (pytest shows it when the test fails)."""
    start = time.monotonic()
    nudged = False
    while time.monotonic() < start + limit:
        text = ss_now()
        subs = [s for s in ss_parse.parse_ss(f"# 0\n{text}").itertuples() if s.netid == "tcp"]
        joined = "subflows:" in text or want_subflows == 1  # ss counts the joins
        if len(subs) >= want_subflows and "mptcp" in text.split() and joined:
            return
        if not nudged and time.monotonic() > start + nudge_after:
            print(f"no join after {nudge_after:.0f} s:\n{text}\n{mptcp_state(CLIENT, SERVER)}")
            renew_endpoint()
            nudged = True
        time.sleep(0.2)
    raise AssertionError(
        f"no MPTCP connection with {want_subflows} subflows:\n{ss_now()}\n"
        + mptcp_state(CLIENT, SERVER)
    )


def endpoint_ids() -> list[int]:
    """The ids of the client's MPTCP endpoints."""
    return [
        int(i) for i in re.findall(r"\bid (\d+)", ns(CLIENT, "ip", "mptcp", "endpoint", "show"))
    ]


def renew_endpoint() -> None:
    """The client's subflow endpoint on path 2 again, under a new id (one the PM of a live
    connection has not used)."""
    ids = endpoint_ids()
    for i in ids:
        ns(CLIENT, "ip", "mptcp", "endpoint", "delete", "id", str(i))
    endpoint = ["10.123.2.1", "dev", f"{TAG}c2", "id", str(max(ids, default=2) + 1), "subflow"]
    ns(CLIENT, "ip", "mptcp", "endpoint", "add", *endpoint)


def quiet(limit: float = 30.0) -> None:
    """Until the 4 MB are across: two ss runs half a second apart agree on every field but
    the times since the last packet."""
    clock = ("lastsnd", "lastrcv", "lastack")
    deadline, last = time.monotonic() + limit, None
    while time.monotonic() < deadline:
        now = {
            k: {f: v for f, v in fs.items() if f not in clock}
            for k, fs in sockets(ss_now()).items()
        }
        if now == last:
            return
        last = now
        time.sleep(0.5)
    raise AssertionError(f"the connection still moves data after {limit:.0f} s:\n{ss_now()}")


@pytest.mark.parametrize("mode", ["idle", "slow", "idle-v6"])
def test_the_sampler_prints_what_ss_prints(rig: None, mode: str, tmp_path: Path) -> None:
    """On both ends: the client's IPv4 (or IPv6) sockets, the server's IPv4-mapped ones."""
    v6 = mode.endswith("v6")
    procs = connection("slow" if mode == "slow" else "fast", v6)
    try:
        settle(want_subflows=1 if v6 else 2)
        if mode == "slow":
            time.sleep(1)  # data moving
        else:
            quiet()
        for host in (CLIENT, SERVER):
            before = ss_now(host)
            got = sampler_once(tmp_path, host)
            after = ss_now(host)
            assert "tcp-ulp-mptcp" in got and "mptcp" in got.split()
            assert ("[fd00:123:1::" in got) == v6 and ("[::ffff:10.123." in got) == (
                host == SERVER and not v6
            )
            assert not agree(before, got, after), "\n".join(agree(before, got, after))
            # and the collector reads it as it reads ss: the same columns, the same sockets
            assert list(ss_parse.parse_ss(got).columns) == list(ss_parse.COLUMNS)
            assert len(ss_parse.parse_ss(got)) == len(sockets(before))
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_join_asked_for_again_comes(rig: None) -> None:
    """settle()'s remedy works on this kernel: a connection opened while the client had no
    subflow endpoint has one subflow; with the endpoint added anew it gets its join."""
    for i in endpoint_ids():
        ns(CLIENT, "ip", "mptcp", "endpoint", "delete", "id", str(i))
    procs = connection("fast", v6=False)
    try:
        settle(want_subflows=1)
        time.sleep(1)
        assert "subflows:" not in ss_now()  # nothing to join with
        renew_endpoint()
        settle(want_subflows=2, limit=10, nudge_after=float("inf"))
    finally:
        for p in procs:
            p.kill()
            p.wait()
