"""RBPM (paper 002): the paper's equations on hand-computed numbers, the decision loop of
Algorithm 1, and the parsers the controller reads ss and ip with."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mprig.campaign.plan import Run
from mprig.campaign.spec import Capture, Direction, Traffic, Variant
from mprig.campaign.spec import Path as Path_
from mprig.rig.batch import Cmd, Done
from mprig.rig.host import PathLink
from mprig.run import commands, rbpm_run, run_attempt
from mprig.stack import rbpm, rbpm_policy, rbpm_ss
from mprig.stack.rbpm_policy import Subflow

MSS = 1448


def flow(key: str, rtt_ms: float, pkts: float, bw: float, active: bool = True) -> Subflow:
    return Subflow(key, f"10.0.0.{key[-1]}", rtt_ms, MSS, pkts, bw, active)


@pytest.mark.parametrize(
    ("rtt_i", "rtt_j", "k"),
    [
        (20, 200, 9),  # case A: a 20 ms subflow sends 10 windows in the slow one's 200 ms
        (20, 40, 1),  # ratio exactly 2: floor(2) - 1
        (20, 30, 0),  # ratio 1.5 < 2
        (60, 200, 2),  # floor(3.33) - 1
        (200, 20, 0),  # only subflows faster than j count
        (20, 20, 0),
        (0, 20, 0),  # no RTT yet
    ],
)
def test_eq2_out_of_order_windows(rtt_i: float, rtt_j: float, k: int) -> None:
    assert rbpm_policy.k_ooo(rtt_i, rtt_j) == k


# Case A at full pipes: 5 Mbit/s x 20 ms = 12 500 B = 9 packets; 1 Mbit/s x 200 ms = 17.
CASE_A = [flow(f"p{i}", 20, 9, 625_000) for i in (1, 2, 3)] + [flow("p4", 200, 17, 125_000)]
# Case B (RTT = 2 x one-way delay): 1 Mbit/s 200 ms, 8 Mbit/s 100 ms, 3 Mbit/s 60 ms,
# 2 Mbit/s 20 ms; o_i rounded from rate x RTT / MSS: 17, 69, 16, 4.
CASE_B = [
    flow("s1", 200, 17, 125_000),
    flow("s2", 100, 69, 1_000_000),
    flow("s3", 60, 16, 375_000),
    flow("s4", 20, 4, 250_000),
]


def test_eq3_required_buffer_case_a() -> None:
    # three fast subflows, k = 9 each: 3 x 9 x 9 x 1448
    assert rbpm_policy.required_bytes(CASE_A) == 351_864
    assert rbpm_policy.required_bytes(CASE_A[:3]) == 0  # equal RTTs: nothing arrives out of order


def test_eq3_required_buffer_case_b() -> None:
    # j = s1 (200 ms): k = 1, 2, 9 for s2, s3, s4 -> (69 + 2 x 16 + 9 x 4) x 1448
    assert rbpm_policy.required_bytes(CASE_B) == 137 * MSS
    # without s1, j = s2 (100 ms): k(60, 100) = 0, k(20, 100) = 4 -> 4 x 4 x 1448
    assert rbpm_policy.required_bytes(CASE_B[1:]) == 23_168


def test_eq5_max_min_scores() -> None:
    assert rbpm_policy.scores(CASE_A) == {"p1": 1.0, "p2": 1.0, "p3": 1.0, "p4": -1.0}
    got = rbpm_policy.scores(CASE_B)
    want = {"s1": -1.0, "s2": 1 - 80 / 180, "s3": 250 / 875 - 40 / 180, "s4": 125 / 875}
    assert got == pytest.approx(want)


def test_case_a_stops_the_slow_path_with_the_papers_200_kb_buffer() -> None:
    d = rbpm_policy.decide(CASE_A, 204_800)
    assert (d.action, d.targets, d.required, d.required_all) == (
        "backup",
        ("p4",),
        351_864,
        351_864,
    )


def test_case_b_stops_subflows_1_and_3_as_in_the_papers_figure_4() -> None:
    # after s1: 23 168 B needed, less than 25 000 free -> stop; s3 scores below s4 and s2
    assert rbpm_policy.decide(CASE_B, 150_000).targets == ("s1",)
    assert rbpm_policy.decide(CASE_B, 20_000).targets == ("s1", "s3", "s4")


def test_never_stops_the_last_active_subflow() -> None:
    two = [flow("a1", 10, 100, 1_000_000), flow("b2", 100, 10, 100_000)]
    assert rbpm_policy.decide(two, 0).targets == ("b2",)


@pytest.mark.parametrize(
    ("free", "action", "targets"),
    [
        (2 * 351_864 + 1, "nobackup", ("p4",)),  # free > 2 x what all four would need
        (2 * 351_864, "none", ()),  # hysteresis: between required and twice it, hold
        (204_800, "none", ()),  # the three left need nothing: p4 stays stopped
    ],
)
def test_reenables_all_when_free_exceeds_twice_the_requirement(
    free: int, action: str, targets: tuple[str, ...]
) -> None:
    stopped = [*CASE_A[:3], flow("p4", 200, 17, 125_000, active=False)]
    d = rbpm_policy.decide(stopped, free)
    assert (d.action, d.targets, d.required, d.required_all) == (action, targets, 0, 351_864)
    held = rbpm_policy.decide(stopped, free, may_enable=False)  # within the hold time after a stop
    assert (held.action, held.targets) == ("none", ())


# Real `ss -tinHMm` output on the client of a download over three paths (6.18), verbatim:
# iperf3's control connection (token 7fdc12bc) and its data connection (22bb34ec), whose
# subflow from 10.111.2.1 had just been marked backup (flag b).
SS_TEXT = (
    Path(__file__).parents[1] / "captures" / "test_rbpm" / "download_receiver.txt"
).read_text()
DATA = "10.111.2.1:51591"


def test_parse_ss_picks_the_connection_that_moved_data() -> None:
    conn, subs = rbpm_ss.connection(rbpm_ss.parse_ss(SS_TEXT))
    assert conn is not None
    mem = rbpm_ss.skmem(conn)
    assert (conn.token, conn.port, mem["r"], mem["rb"]) == ("22bb34ec", 56805, 28_296, 100_000)
    assert [(s.addr, s.port, s.peer, s.info["flags"], s.info.get("rcv_rtt")) for s in subs] == [
        ("10.111.3.1", 39001, "10.111.1.2", "Jjecv", "47"),
        ("10.111.2.1", 51591, "10.111.1.2", "Jjbec", "4"),
        ("10.111.1.1", 56805, "10.111.1.2", "Mmec", "1"),
    ]
    # in payload bytes: the data connection's subflows' largest rcv_ssthresh / rb
    assert rbpm.free_bytes("receiver", conn, subs) == pytest.approx(
        (100_000 - 28_296) * 62_890 / 100_000
    )
    assert rbpm.free_bytes("sender", conn, subs) == 48_640


def test_estimator_receiver_rate_times_rtt_is_packets_per_rtt() -> None:
    _, subs = rbpm_ss.connection(rbpm_ss.parse_ss(SS_TEXT))
    later = SS_TEXT.replace("bytes_received:73424", f"bytes_received:{73424 + 144_800}")
    _, subs2 = rbpm_ss.connection(rbpm_ss.parse_ss(later))
    est = rbpm.Estimator("receiver", window=0.5)
    assert est.subflows(100.0, subs, set()) == []  # not seen for a window yet
    flows = est.subflows(100.5, subs2, set())
    # 144 800 B in 0.5 s = 289 600 B/s; x 47 ms (rcv_rtt) / 1448 B = 9.4 packets per RTT
    assert [(f.key, f.rtt_ms, f.bw, round(f.pkts, 2), f.active) for f in flows] == [
        ("10.111.3.1:39001", 47.0, 289_600.0, 9.4, True),
        (DATA, 4.0, 0.0, 0.0, True),
        ("10.111.1.1:56805", 1.0, 0.0, 0.0, True),
    ]
    stopped = est.subflows(101.0, subs2, {"10.111.3.1:39001"})  # keeps its last values
    assert (stopped[0].bw, round(stopped[0].pkts, 2), stopped[0].active) == (289_600.0, 9.4, False)


def test_estimator_sender_uses_cwnd_and_srtt() -> None:
    _, subs = rbpm_ss.connection(rbpm_ss.parse_ss(SS_TEXT))
    est = rbpm.Estimator("sender", window=0.5)
    assert est.subflows(1.0, subs, set()) == []  # not seen for a window yet
    flows = est.subflows(1.5, subs, set())
    assert [(f.rtt_ms, f.pkts, round(f.bw)) for f in flows] == [
        (0.007, 10.0, round(10 * 1448 / 0.000007)),
        (0.009, 10.0, round(10 * 1448 / 0.000009)),
        (0.01, 10.0, round(10 * 1448 / 0.00001)),
    ]


def test_parse_endpoints() -> None:
    text = (
        "10.111.1.1 id 1 subflow dev h11xc1 \n"
        "10.111.2.1 id 2 subflow backup dev h11xc2 \n"
        "10.111.3.1 id 3 subflow dev h11xc3 \n"
    )
    assert rbpm_ss.parse_endpoints(text) == {
        "10.111.1.1": (1, False),
        "10.111.2.1": (2, True),
        "10.111.3.1": (3, False),
    }


def test_cli_help_teaches_by_example() -> None:
    with pytest.raises(SystemExit):
        rbpm.parse_args(["--help"])
    args = rbpm.parse_args(["--port", "5201", "--log", "x.jsonl"])
    assert (args.port, args.log, args.role, args.interval, args.window, args.hold) == (
        5201, "x.jsonl", "receiver", 0.1, 1.0, 1.0
    )  # fmt: skip


def test_runner_starts_the_controller_on_the_client_and_clears_flags_after() -> None:
    links = (
        PathLink("p1", "wired", "eth1", "10.1.1.2", "r1", "r1-c", "r1-s"),
        PathLink("p4", "wired", "eth4", "10.4.1.2", "r4", "r4-c", "r4-s"),
    )
    d = Direction(rate_mbit=5, delay_ms=10)
    paths = tuple(Path_(name=n, kind="wired", down=d, up=d) for n in ("p1", "p4"))
    variant = Variant(name="v", path_manager="rbpm")
    run = Run("r1", 0, 1, 0, variant, paths, Traffic(duration_s=5), Capture(snaplen=160))
    c = commands.build(run, links, server_addr="10.9.0.1")
    log = "/tmp/mprig-virtual/r1/client/rbpm.jsonl"
    args = ["--port", "5201", "--role", "receiver", "--interval", "0.1", "--log", log]
    args += ["--sender-ss", "/tmp/mprig-virtual/r1/server/ss.txt"]
    assert c.background == [("client", ["python3", "-c", rbpm_run.source(), *args], "rbpm.log")]
    assert c.teardown[-2:] == [
        ("client", ["ip", "mptcp", "endpoint", "change", "id", "1", "nobackup"]),
        ("client", ["ip", "mptcp", "endpoint", "change", "id", "2", "nobackup"]),
    ]
    shown = ("client", ["python3", "-c", "<mprig/stack/rbpm.py>", *args])
    assert shown in commands.for_run(run, links, server_addr="10.9.0.1")
    kernel = commands.build(dataclasses.replace(run, variant=Variant(name="k")), links)
    assert (kernel.background, len(kernel.teardown)) == ([], len(c.teardown) - 2)


def test_the_controller_source_runs_without_mprig() -> None:
    # what the client gets is stdlib only: python3 -c SOURCE --help works anywhere
    done = subprocess.run(
        [sys.executable, "-I", "-c", rbpm_run.source(), "--help"], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout.startswith("usage: mprig.stack.rbpm")) == (0, True)


def test_run_json_records_the_controller_by_name() -> None:
    argv = ["python3", "-c", rbpm_run.source(), "--port", "5201"]
    done = Done("client", Cmd(argv, log="/tmp/x/rbpm.log"), 0, "", "", 0.1, pid=7)
    assert run_attempt.logged(done) == {
        "host": "client",
        "argv": ["python3", "-c", "<mprig/stack/rbpm.py>", "--port", "5201"],
        "returncode": 0,
        "seconds": 0.1,
        "background": True,
    }


# Paper 002 case B natively (6.18; tbf 1, 8, 3, 2 Mbit/s, 100-packet queues, rmem 200 KB, Reno,
# no netem so no propagation delay), 6 s into a download, `ss -tinHMm` on the client and
# `ss -tinH` on the server, verbatim.
CASE_B_DIR = Path(__file__).parents[1] / "captures" / "test_rbpm"
CASE_B_RX = (CASE_B_DIR / "case_b_native_receiver.txt").read_text()
CASE_B_TX = (CASE_B_DIR / "case_b_native_sender.txt").read_text()


def test_free_buffer_is_in_payload_bytes_like_the_requirement() -> None:
    """Eq. 3 counts payload (o_i x MSS); ss's rb and r count kernel memory (truesize). The
    kernel turns free memory into window with the subflows' payload/truesize ratio, which
    ss shows as rcv_ssthresh / rb once a subflow's window has grown: 128 196 / 204 800."""
    conn, subs = rbpm_ss.connection(rbpm_ss.parse_ss(CASE_B_RX))
    assert conn is not None
    mem = rbpm_ss.skmem(conn)
    assert (mem["rb"], mem["r"]) == (204_800, 44_436)
    assert rbpm.payload_ratio(subs) == pytest.approx(128_196 / 204_800)
    assert rbpm.free_bytes("receiver", conn, subs) == pytest.approx(
        (204_800 - 44_436) * 128_196 / 204_800
    )


def test_receiver_rtt_misses_the_queueing_the_sender_sees() -> None:
    """Why the receiver's estimate stays low in case B: rcv_rtt is near the path's base
    RTT (12 ms on the 1 Mbit/s path) while the sender's smoothed RTT of the same subflow,
    the paper's RTT_i, includes its queue (286 ms). With the receiver's RTTs the slowest
    path is not the one with the largest RTT, so Eq. 2 gives k = 0 or 1."""
    _, subs = rbpm_ss.connection(rbpm_ss.parse_ss(CASE_B_RX))
    rx = {s.addr: float(s.info["rcv_rtt"]) for s in subs if "rcv_rtt" in s.info}
    # the server's data subflows (ss -tinH has no netid column): peer address -> srtt
    heads, infos = CASE_B_TX.splitlines()[0::2], CASE_B_TX.splitlines()[1::2]
    tx = {h.split()[4].strip("[]").removeprefix("::ffff:").rpartition("]")[0]:
          float(i.split(" rtt:")[1].split("/")[0])
          for h, i in zip(heads, infos, strict=True) if "bytes_sent:" in i
          and int(i.split("bytes_sent:")[1].split()[0]) > 100_000}  # fmt: skip
    assert rx == {"10.117.1.1": 12.0, "10.117.2.1": 21.674, "10.117.3.1": 16.257,
                  "10.117.4.1": 54.992}  # fmt: skip
    assert tx["10.117.1.1"] == 286.16


# The runner's ss sampler on the sender writes `# <unix time>` then `ss -tinHM`; the case B
# server fixture is `ss -tinH` (no netid column), which parse_ss reads the same way.
CASE_B_SAMPLES = f"# 1700000000.100000\n{CASE_B_TX}# 1700000000.200000\n{CASE_B_TX[:300]}"
SLOW = "10.117.1.1:45843"  # the 1 Mbit/s path's subflow (the initial one)


def test_last_sample_is_the_newest_complete_one() -> None:
    # the sample after the last header is still being written
    assert rbpm_ss.last_sample(CASE_B_SAMPLES) == (1_700_000_000.1, CASE_B_TX)
    assert rbpm_ss.last_sample(f"# 1.5\n{CASE_B_TX[:300]}") is None


def test_sender_subflows_by_the_receivers_key() -> None:
    """The server's subflows keyed by their peer address:port, which is how the client
    names its own end: the data connection's four, with srtt and cwnd."""
    tx = rbpm_ss.sender_subflows(CASE_B_TX)
    _, subs = rbpm_ss.connection(rbpm_ss.parse_ss(CASE_B_RX))
    keys = [f"{s.addr}:{s.port}" for s in subs]
    got = {k: (tx[k].info["rtt"], tx[k].info["cwnd"]) for k in keys}
    assert got == {
        "10.117.3.1:52489": ("35.285/24.734", "40"),
        "10.117.4.1:57783": ("38.775/26.425", "10"),
        "10.117.2.1:41743": ("24.182/18.887", "10"),
        SLOW: ("286.16/165.56", "130"),
    }


def test_case_b_sender_inputs_exceed_the_free_buffer_and_stop_the_1_mbit_path() -> None:
    """Issue 15 part 5: with the sender's srtt and cwnd (the paper's inputs) case B's
    requirement exceeds the client's free buffer and the 1 Mbit/s subflow is stopped.
    j = 286 ms: k = 10, 7, 6 for the 24, 35 and 39 ms subflows with cwnd 10, 40, 10."""
    conn, subs = rbpm_ss.connection(rbpm_ss.parse_ss(CASE_B_RX))
    assert conn is not None
    tx = rbpm_ss.sender_subflows(CASE_B_TX)
    est = rbpm.Estimator("receiver", window=0.5)
    assert est.subflows(100.0, subs, set(), tx) == []  # not seen for a window yet
    flows = est.subflows(100.5, subs, set(), tx)
    assert [(f.key, f.rtt_ms, f.pkts) for f in flows] == [
        ("10.117.3.1:52489", 35.285, 40.0),
        ("10.117.4.1:57783", 38.775, 10.0),
        ("10.117.2.1:41743", 24.182, 10.0),
        (SLOW, 286.16, 130.0),
    ]
    free = rbpm.free_bytes("receiver", conn, subs)
    d = rbpm_policy.decide(flows, free)
    assert (d.action, d.targets, d.required) == (
        "backup",
        (SLOW,),
        (10 * 10 + 7 * 40 + 6 * 10) * MSS,
    )
    assert (round(free), d.required > free) == (100_381, True)


def test_controller_marks_the_slow_endpoint_from_the_senders_samples() -> None:
    """One step of the controller on the case B fixtures: the client's ss and endpoints
    through its runner, the server's samples through the file it reads."""
    calls: list[list[str]] = []
    eps = "10.117.1.1 id 1 subflow dev c1 \n10.117.2.1 id 2 subflow dev c2 \n"

    def run(argv: list[str]) -> str:
        calls.append(argv)
        return CASE_B_RX if argv[0] == "ss" else eps if argv[-1] == "show" else ""

    log = io.StringIO()
    c = rbpm.Controller("receiver", 5700, log, run=run, window=0.5, sender_ss="/x/ss.txt")
    c.read = lambda path: CASE_B_SAMPLES if path == "/x/ss.txt" else ""
    c.step(1_700_000_000.3)
    c.step(1_700_000_000.8)
    assert calls[-1] == ["ip", "mptcp", "endpoint", "change", "id", "1", "backup"]
    last = json.loads(log.getvalue().splitlines()[-1])["decision"]
    assert (last["inputs"], last["targets"], last["endpoints"]) == ("sender", [SLOW], {SLOW: 1})


def test_controller_does_not_act_on_a_stale_sender_sample() -> None:
    log = io.StringIO()
    c = rbpm.Controller("receiver", 5700, log, run=lambda a: CASE_B_RX, sender_ss="/x")
    c.read = lambda path: CASE_B_SAMPLES
    c.step(1_700_000_005.0)  # the newest sample is 4.9 s old
    assert [json.loads(x)["event"] for x in log.getvalue().splitlines()] == ["no_sender_sample"]


def test_runner_points_a_download_controller_at_the_servers_sampler() -> None:
    links = (PathLink("p1", "wired", "eth1", "10.1.1.2", "r1", "r1-c", "r1-s"),)
    d = Direction(rate_mbit=5, delay_ms=10)
    paths = (Path_(name="p1", kind="wired", down=d, up=d),)
    run = Run("r1", 0, 1, 0, Variant(name="v", path_manager="rbpm"), paths,
              Traffic(duration_s=5), Capture(snaplen=160))  # fmt: skip
    argv = commands.build(run, links, server_addr="10.9.0.1").background[0][1]
    assert argv[argv.index("--sender-ss") + 1] == "/tmp/mprig-virtual/r1/server/ss.txt"
    up = dataclasses.replace(run, traffic=Traffic(duration_s=5, direction="upload"))
    assert "--sender-ss" not in commands.build(up, links).background[0][1]


def test_parse_ss_reads_ipv6_subflows_bound_to_a_device() -> None:
    # real `ss -tinHMm` of an MPTCP connection over two IPv6 paths: `[addr]%dev:port`
    fixture = Path(__file__).parents[1] / "captures" / "test_ss" / "mptcp_ipv6_two_paths_client.txt"
    socks = [s for s in rbpm_ss.parse_ss(fixture.read_text()) if s.netid == "tcp"]
    assert sorted((s.addr, s.port, s.peer) for s in socks) == [
        ("fd00:1:1::2", 43555, "fd00::1"),
        ("fd00:1:1::2", 47287, "fd00::1"),
        ("fd00:2:1::2", 53331, "fd00::1"),
        ("fd00:2:1::2", 60381, "fd00::1"),
    ]


def test_a_logged_step_gives_back_its_requirement() -> None:
    # CI's case: a 335 ms path beside 2 ms ones counts each fast subflow 156 times (Eq. 2),
    # so o_i logged to two decimals put the recomputed requirement 2.3 KB off the logged one
    flows = [
        Subflow("10.111.3.1:1", "10.111.3.1", 335.0, MSS, 6.376543, 27_592.3),
        Subflow("10.111.1.1:2", "10.111.1.1", 2.031, MSS, 0.204999, 139_894.9),
        Subflow("10.111.2.1:3", "10.111.2.1", 2.125, MSS, 0.214999, 146_102.2),
    ]
    d = rbpm_policy.decide(flows, 50_000)
    record = json.loads(json.dumps(rbpm._decision_record(d, flows, {}, {}, {})))
    logged = [
        Subflow(f["key"], f["addr"], f["rtt_ms"], f["mss"], f["pkts"], f["bw_Bps"])
        for f in record["subflows"]
    ]
    assert abs(rbpm_policy.required_bytes(logged) - record["required"]) <= 1
