"""The BPF congestion controls on the running kernel (prefix h9): each builds, registers,
appears in tcp_available_congestion_control and is the algorithm of a real MPTCP
connection's subflows; and prr keeps its window under random loss where reno halves it.

Two namespaces joined by two veth pairs (10.91.1.0/24, 10.91.2.0/24), each client side
shaped to 20 Mbit/s with tbf to keep the CPU cost low. The server announces its second
address, so the client's kernel path manager opens the second subflow.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hostload import HostLoad
from nslink import mptcp_hosts, ns, sh, veth_pair, wait_listening

from collectors.ss import data_subflows, parse_ss
from mprig.stack import bpfcc, cc_allowed

TAG = f"h9{os.getpid() % 10000}"
CLIENT, SERVER = f"{TAG}c", f"{TAG}s"
PATHS = (("10.91.1.1", "10.91.1.2"), ("10.91.2.1", "10.91.2.2"))
PORTS = iter(range(5301, 5400))  # one iperf3 port per transfer: no earlier socket is sampled

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, BPF)")


def _link_up(i: int, client_addr: str, server_addr: str) -> None:
    cif, sif = f"{TAG}c{i}", f"{TAG}s{i}"
    veth_pair((CLIENT, cif, client_addr), (SERVER, sif, server_addr))
    ns(CLIENT, "tc", "qdisc", "add", "dev", cif, "root", "tbf", "rate", "20mbit", "burst",
       "20kb", "limit", "200kb")  # fmt: skip


@pytest.fixture(scope="module")
def rig() -> Iterator[None]:
    """Client and server namespaces over two paths; removed (with all they hold) after."""
    with mptcp_hosts(CLIENT, SERVER, subflows=2):
        for i, (client_addr, server_addr) in enumerate(PATHS, start=1):
            _link_up(i, client_addr, server_addr)
        ns(SERVER, "ip", "mptcp", "endpoint", "add", PATHS[1][1], "dev", f"{TAG}s2", "signal")
        yield


@pytest.fixture(scope="module")
def programs() -> Iterator[list[str]]:
    """prr and door registered and allowed in namespaces; unregistered after (only those
    this module registered)."""
    names = list(bpfcc.available())
    new = bpfcc.ensure_loaded(names)
    try:
        with cc_allowed.allow(names):
            yield names
    finally:
        bpfcc.unload(new)


def transfer(cc: str, seconds: int, mptcp: bool, probe: Callable[[], None] = lambda: None) -> str:
    """One iperf3 upload client -> server with `cc` as the client's default; `ss -tinHM`
    samples of this transfer's established sockets, every 0.1 s, in the parser's format."""
    ns(CLIENT, "sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={cc}")
    wrap = ["mptcpize", "run"] if mptcp else []
    port = str(next(PORTS))
    server_cmd = ["ip", "netns", "exec", SERVER, *wrap, "iperf3", "-s", "-1", "-p", port]
    server = subprocess.Popen(server_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = server
    try:
        wait_listening(SERVER, port, server)
        iperf = ["ip", "netns", "exec", CLIENT, *wrap, "iperf3", "-c", PATHS[0][1], "-p", port]
        client = subprocess.Popen([*iperf, "-t", str(seconds)], stdout=subprocess.DEVNULL)
        samples = []
        while client.poll() is None:
            text = ns(CLIENT, "ss", "-tinHM", "dport", "=", f":{port}")
            samples.append(f"# {time.time()}\n{text}")
            probe()
            time.sleep(0.1)
        assert client.wait() == 0
    finally:
        for proc in (client, server):
            proc.kill()
            proc.wait()
    return "".join(samples)


def slots_in_use(name: str) -> list[int]:
    """Per connection in a coupled program's shared map (`<name>_conns`): how many subflow
    slots are in use. The newest map of that name is the loaded program's (older ones
    linger while sockets hold them)."""
    maps = json.loads(sh("bpftool", "--json", "map", "list"))
    newest = max(m["id"] for m in maps if m.get("name") == f"{name}_conns")
    dump = json.loads(sh("bpftool", "--json", "map", "dump", "id", str(newest)))
    return [sum(s["used"] for s in e["formatted"]["value"]["slot"]) for e in dump]


@pytest.mark.parametrize("name", ["prr", "door", "lia", "cwa", "olia", "fccc", "door_fccc"])
def test_program_is_selected_by_mptcp_subflows(rig: None, programs: list[str], name: str) -> None:
    assert name in bpfcc.loaded()
    assert name in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    shared: list[list[int]] = []
    coupled = name in ("lia", "cwa", "olia", "fccc", "door_fccc")
    probe = (lambda: shared.append(slots_in_use(name))) if coupled else (lambda: None)
    subflows = data_subflows(parse_ss(transfer(name, 2, mptcp=True, probe=probe)))
    established = subflows[subflows["state"] == "ESTAB"]
    assert sorted(set(established["local_addr"])) == [PATHS[0][0], PATHS[1][0]]
    assert sorted(set(established["cc"])) == [name]
    if coupled:  # the two subflows share one connection entry in the program's map
        assert [2] in shared


def _drop_one_in(n: int) -> None:
    """nftables in the server namespace drops one full-sized data segment in n, at random."""
    ns(SERVER, "nft", "add", "table", "inet", TAG)
    ns(SERVER, "nft", "add", "chain", "inet", TAG, "in", "{ type filter hook input priority 0; }")
    rule = ["meta", "l4proto", "tcp", "meta", "length", ">", "1000", "numgen", "random", "mod"]
    ns(SERVER, "nft", "add", "rule", "inet", TAG, "in", *rule, str(n), "==", "0", "drop")


def test_prr_keeps_cwnd_under_loss_where_reno_halves_it(rig: None, programs: list[str]) -> None:
    _drop_one_in(50)
    try:
        medians, ssthresh = {}, {}
        for cc in ("reno", "prr"):
            rows = data_subflows(parse_ss(transfer(cc, 4, mptcp=False)))
            rows = rows[rows["state"] == "ESTAB"].dropna(subset=["ssthresh"])
            assert sorted(set(rows["cc"])) == [cc]
            assert rows["retrans"].max() > 0  # losses happened and were repaired
            medians[cc] = float(rows["cwnd"].median())
            ssthresh[cc] = float((rows["ssthresh"] / rows["cwnd"]).median())
    finally:
        ns(SERVER, "nft", "delete", "table", "inet", TAG)
    # Reno with 2 % loss settles near sqrt(3/2p) ~ 9 segments; prr does not reduce on
    # fast recovery, so its window keeps growing by a segment a round trip (the round trip
    # growing with its own queue, up to the tbf's 200 kB). Over 2 s that growth left prr's
    # median only 2.9-7.8 times Reno's (a CI run failed at 2.94); over 4 s 6.3-7.5 times,
    # 4.0-10.9 with two CPU hogs beside it.
    assert medians["reno"] < 20 and medians["prr"] > 3 * medians["reno"], medians
    # prr's ssthresh follows its window (set to cwnd on each recovery); reno's is a half.
    assert ssthresh["prr"] > 0.9 and ssthresh["reno"] < 0.9, ssthresh


BN = {"client": f"{TAG}bc", "router": f"{TAG}br", "server": f"{TAG}bs"}
BN_SERVER = "10.92.3.2"
# Four subflows through the one bottleneck, two on each path: uncoupled Reno then takes
# about 4/5 of it against one TCP flow, a coupled CC at most the TCP flow's half. With two
# subflows (2/3 against 1/2) the gap was narrower than one run's spread.
BN_CLIENT_ADDRS = (("10.92.1.1", 1), ("10.92.2.1", 2), ("10.92.1.3", 1), ("10.92.2.3", 2))
BN_SUBFLOWS = len(BN_CLIENT_ADDRS)


def _veth(a: str, b: str, n: str) -> None:
    """A veth pair: <a><n> in namespace a, <b><n> in namespace b."""
    sh("ip", "link", "add", f"{a}{n}", "netns", a, "type", "veth", "peer", f"{b}{n}", "netns", b)


def _bn_links() -> None:
    """client =(two paths)= router -(20 Mbit/s tbf, 30 kB queue)- server."""
    c, r, s = BN["client"], BN["router"], BN["server"]
    for i in (1, 2):
        _veth(c, r, str(i))
        sh("ip", "-n", c, "addr", "add", f"10.92.{i}.1/24", "dev", f"{c}{i}")
        sh("ip", "-n", r, "addr", "add", f"10.92.{i}.254/24", "dev", f"{r}{i}")
    _veth(r, s, "3")
    sh("ip", "-n", r, "addr", "add", "10.92.3.254/24", "dev", f"{r}3")
    sh("ip", "-n", s, "addr", "add", f"{BN_SERVER}/24", "dev", f"{s}3")
    for host, devs in ((c, ("1", "2")), (r, ("1", "2", "3")), (s, ("3",))):
        for d in devs:
            sh("ip", "-n", host, "link", "set", f"{host}{d}", "up")
            ns(host, "ethtool", "-K", f"{host}{d}", "tso", "off", "gso", "off", "gro", "off")


def _bn_routes() -> None:
    c, r, s = BN["client"], BN["router"], BN["server"]
    ns(r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    sh("ip", "-n", c, "route", "add", "default", "via", "10.92.1.254", "dev", f"{c}1")
    sh("ip", "-n", c, "route", "add", "default", "via", "10.92.2.254", "dev", f"{c}2", "table", "2")
    sh("ip", "-n", s, "route", "add", "default", "via", "10.92.3.254")
    ns(r, "tc", "qdisc", "add", "dev", f"{r}3", "root", "tbf", "rate", "20mbit", "burst", "20kb",
       "limit", "30kb")  # fmt: skip
    for host in (c, s):
        limit = str(BN_SUBFLOWS)
        ns(host, "ip", "mptcp", "limits", "set", "subflows", limit, "add_addr_accepted", limit)
    # The initial subflow leaves from 10.92.1.1; one more from each other client address.
    for addr, path in BN_CLIENT_ADDRS[1:]:
        if not addr.endswith(".1"):
            sh("ip", "-n", c, "addr", "add", f"{addr}/24", "dev", f"{c}{path}")
        if path == 2:
            sh("ip", "-n", c, "rule", "add", "from", addr, "table", "2")
        ns(c, "ip", "mptcp", "endpoint", "add", addr, "dev", f"{c}{path}", "subflow")


@pytest.fixture
def bottleneck() -> Iterator[None]:
    """A two-path MPTCP client (four subflows) whose paths meet at one 20 Mbit/s bottleneck."""
    try:
        for host in BN.values():
            sh("ip", "netns", "add", host)
            sh("ip", "-n", host, "link", "set", "lo", "up")
        _bn_links()
        _bn_routes()
        yield
    finally:
        for host in BN.values():
            subprocess.run(["ip", "netns", "del", host], capture_output=True, check=False)


def _established_subflows(host: str, port: str) -> int:
    """Established TCP sockets of `host` towards the server's `port`: the subflows of
    iperf3's control and data connections (both MPTCP under mptcpize)."""
    out = ns(host, "ss", "-tnH", "state", "established", "dport", "=", f":{port}")
    return len(out.splitlines())


def mptcp_share(cc: str, seconds: int) -> float:
    """MPTCP (all its subflows on `cc`) against one Reno TCP flow through the bottleneck, at
    the same time: the MPTCP connection's fraction of the two received rates.

    MPTCP starts first and the TCP flow only once all subflows are established: started
    the other way round, the join SYN meets a full 30 kB queue, can be lost, and the
    connection then competes on one subflow (a CI run measured LIA at 0.46 and uncoupled
    Reno at 0.52, both what one subflow takes, where two-subflow runs give 0.27 and 0.55).
    MPTCP then runs alone for under a second of the 30, which raises its share by < 0.02."""
    c, s = BN["client"], BN["server"]
    ports = {"mptcp": str(next(PORTS)), "tcp": str(next(PORTS))}
    procs = []
    try:
        for kind, port in ports.items():
            wrap = ["mptcpize", "run"] if kind == "mptcp" else []
            argv = ["ip", "netns", "exec", s, *wrap, "iperf3", "-s", "-1", "-p", port]
            procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))
            wait_listening(s, port, procs[-1])
        for kind, port in ports.items():  # a socket takes the default cc when it is made
            algorithm = cc if kind == "mptcp" else "reno"
            ns(c, "sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={algorithm}")
            wrap = ["mptcpize", "run"] if kind == "mptcp" else []
            argv = ["ip", "netns", "exec", c, *wrap, "iperf3", "-c", BN_SERVER, "-p", port, "-J"]
            procs.append(subprocess.Popen([*argv, "-t", str(seconds)], stdout=subprocess.PIPE))
            if kind == "mptcp":
                deadline = time.monotonic() + 20
                want = 2 * BN_SUBFLOWS  # iperf3's control and data connections
                while _established_subflows(c, port) < want and time.monotonic() < deadline:
                    time.sleep(0.05)
                up = _established_subflows(c, port)
                if up != want:
                    procs[-1].kill()
                    said = procs[-1].communicate()[0].decode(errors="replace")[-2000:]
                    pytest.fail(f"{cc}: {up} of {want} subflows (control, data) came up in "
                                f"20 s; the MPTCP client said: {said!r}")  # fmt: skip
        rates = {}
        for kind, proc in zip(ports, procs[2:], strict=True):
            out, _ = proc.communicate(timeout=seconds + 30)
            rates[kind] = json.loads(out)["end"]["sum_received"]["bits_per_second"]
    finally:
        for proc in procs:
            proc.kill()
            proc.communicate()  # closes the clients' pipes when a check above failed
    return rates["mptcp"] / (rates["mptcp"] + rates["tcp"])


def _coupling_verdict(shares: dict[str, float]) -> dict[str, bool]:
    """Four uncoupled Reno subflows take about 3/4 of the bottleneck against one TCP flow;
    coupled ones the TCP flow's half (RFC 6356's "do no harm"). A coupled CC passes when its
    share is nearer that half than the uncoupled share Reno took in the same round (under
    the midpoint of the two) and under 0.6, which Reno has never come down to here: the
    check tells coupling from its absence, with the rig's own noise (LIA 0.39-0.58 over
    rounds beside the VM tests) on the coupled side. False for "reno" when the rig does not
    show what coupling fixes (Reno under 0.62, a midpoint under 0.56)."""
    verdict = {"reno": shares["reno"] >= 0.62}
    bound = min(0.6, (0.5 + shares["reno"]) / 2)
    for cc in ("lia", "olia"):
        verdict[cc] = shares[cc] < bound
    return verdict


@pytest.mark.slow
def test_coupled_ccs_take_about_the_tcp_flows_share_where_reno_takes_more(
    bottleneck: None, programs: list[str]
) -> None:
    """One round of 30 s per CC (with 15 s the start-up phase makes the shares vary by
    +-0.15); a round that fails is judged again by the median of three rounds.

    Measured here, 11 rounds (5 earlier, 6 on 2026-12-01, 3 of them beside a CPU hog):
    Reno 0.69-0.77, LIA 0.40-0.50, OLIA 0.28-0.51. Beside the VM tests in CI: stop 38's
    round gave LIA 0.575 (Reno 0.758), stop 43's three rounds LIA 0.39 and two over 0.55
    (median 0.555, Reno 0.714), and both failed the old bound of 0.55, which put the noise
    of a busy host on the wrong side. A LIA that did not couple takes Reno's 0.7 in every
    round, so its median fails as its single round did."""
    rounds = [{cc: mptcp_share(cc, 30) for cc in ("reno", "lia", "olia")}]
    if not all(_coupling_verdict(rounds[0]).values()):
        rounds += [{cc: mptcp_share(cc, 30) for cc in ("reno", "lia", "olia")} for _ in "ab"]
    median = {cc: statistics.median(r[cc] for r in rounds) for cc in ("reno", "lia", "olia")}
    verdict = _coupling_verdict(median)
    assert verdict == {"reno": True, "lia": True, "olia": True}, (median, rounds)


def test_the_coupling_verdict_fails_a_cc_that_does_not_couple() -> None:
    """The verdict on crafted shares: LIA taking Reno's share, or more than 0.6 where Reno
    took 0.8, or over the midpoint where Reno took 0.62, fails; a rig whose uncoupled Reno
    shows nothing to fix fails; the quiet machine's round and the two CI rounds of a busy
    host (stop 38, stop 43's median) pass."""
    assert _coupling_verdict({"reno": 0.73, "lia": 0.70, "olia": 0.45})["lia"] is False
    assert _coupling_verdict({"reno": 0.80, "lia": 0.62, "olia": 0.45})["lia"] is False
    assert _coupling_verdict({"reno": 0.62, "lia": 0.45, "olia": 0.57})["olia"] is False
    assert _coupling_verdict({"reno": 0.58, "lia": 0.40, "olia": 0.40})["reno"] is False
    assert all(_coupling_verdict({"reno": 0.732, "lia": 0.427, "olia": 0.459}).values())
    assert all(_coupling_verdict({"reno": 0.758, "lia": 0.575, "olia": 0.416}).values())
    assert all(_coupling_verdict({"reno": 0.714, "lia": 0.555, "olia": 0.353}).values())


def _tbf(dev: str, rate: str, burst: str, limit: str) -> None:
    ns(CLIENT, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", burst,
       "limit", limit)  # fmt: skip


@pytest.fixture
def uneven(rig: None) -> Iterator[None]:
    """Path 2 slower, with its full queue twice path 1's delay: 20 Mbit/s and 150 kB
    (60 ms) against 5 Mbit/s and 75 kB (120 ms); restored after."""
    _tbf(f"{TAG}c1", "20mbit", "20kb", "150kb")
    _tbf(f"{TAG}c2", "5mbit", "10kb", "75kb")
    try:
        yield
    finally:
        for i in (1, 2):
            _tbf(f"{TAG}c{i}", "20mbit", "20kb", "200kb")


def rtt_ratios(samples: str) -> list[float]:
    """Per ss sample of the data connection: max srtt / min srtt over its two subflows."""
    rows = data_subflows(parse_ss(samples))
    rows = rows[rows["state"] == "ESTAB"]
    per_sample = rows.groupby("time")["srtt_ms"].agg(["max", "min", "count"])
    both = per_sample[per_sample["count"] == 2]
    return list(both["max"] / both["min"])


@pytest.mark.slow
def test_cwa_narrows_the_subflows_rtt_ratio(uneven: None, programs: list[str]) -> None:
    # lia lets both queues fill (median ratio near 2: 1.92-2.14 in four 10 s transfers on
    # 2026-11-30); cwa cuts the slow subflow (1.28-1.62 in the same four: cwa/lia 0.60-0.83).
    # One pair judged against 0.8 failed 2 of those 4 times; three pairs, alternated, are
    # judged by the median of their three cwa/lia ratios against 0.88 (about two of one
    # pair's standard deviations over the mean 0.75; a cwa that did nothing, 1.0).
    pairs: list[dict[str, tuple[float, str, HostLoad]]] = []
    for _ in range(3):
        pair = {}
        for cc in ("lia", "cwa"):
            load = HostLoad()
            r = rtt_ratios(transfer(cc, 10, mptcp=True))
            assert len(r) > 50, (cc, _course(r))
            pair[cc] = (sorted(r)[len(r) // 2], _course(r), load.stop())
        pairs.append(pair)
    rel = sorted(p["cwa"][0] / p["lia"][0] for p in pairs)
    assert rel[1] < 0.88, (rel, pairs)


def _course(ratios: list[float]) -> str:
    """The samples' count and the median ratio of each fifth of the transfer, so a failure
    tells a queue that never filled from a slow start or a late cut."""
    n = len(ratios)
    fifths = [sorted(ratios[i * n // 5 : (i + 1) * n // 5]) for i in range(5)]
    medians = " ".join(f"{f[len(f) // 2]:.2f}" if f else "-" for f in fifths)
    return f"{n} samples; median by fifth: {medians}"


def test_doctor_reports_every_program_loadable() -> None:
    from mprig.cli import doctor

    checks = doctor.bpf_cc_checks()
    assert [c.name for c in checks] == [f"cc {n} (BPF)" for n in bpfcc.available()]
    details = {"loaded", "builds and registers (loaded at campaign start)"}
    assert [(c.ok, c.detail in details, c.required) for c in checks] == [(True, True, False)] * len(
        bpfcc.available()
    )
