"""What reproducing each paper means on this rig: its campaigns, the comparisons it draws
(throughput per variant along a sweep, gains over a baseline) and the setup differences
between the paper and the virtual rig, and where its files live. Data only, light to import
(the command line imports it to build `mprig reproduce --help`); reports/reproduce.py runs
and reports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPERS_DIR = ROOT / "experiments" / "papers"
REPRODUCTIONS = ROOT / "reports" / "reproductions"  # committed core/full reproductions
# quick: CI-sized checks of the machinery (n = 3). core: the cells of each paper's headline
# claims at n = 5, sized for a 2-core host without KVM (about 2.5 h for all five papers).
# full: the papers' run lengths and repetitions over every cell (days without KVM).
PROFILES = ("quick", "core", "full")
COMMITTED = ("core", "full")  # profiles whose reproductions go to reports/reproductions


def campaign_file(stem: str, profile: str) -> Path:
    """experiments/papers/<stem>-<profile>.yaml."""
    return PAPERS_DIR / f"{stem}-{profile}.yaml"


@dataclass(frozen=True)
class Comparison:
    """A table the paper draws: throughput per variant along one sweep axis, and the gain of
    every other variant over `baseline`."""

    campaign: str  # campaign stem (experiments/papers/<stem>-<profile>.yaml)
    axis: str  # short axis name as reports.results.short_axis gives it, e.g. p2.down.delay_ms
    baseline: str  # variant the gains are relative to
    title: str
    claim: str = ""  # what the paper says about this comparison
    variants: tuple[str, ...] = ()  # the variants shown (default: every variant)


@dataclass(frozen=True)
class PaperPlan:
    """What reproducing one paper means on this rig."""

    paper: str  # its id, 000..004 (shared PAPERS.md)
    title: str
    campaigns: tuple[str, ...]
    comparisons: tuple[Comparison, ...]
    differences: tuple[str, ...]  # setup differences, one paragraph each
    wifi: bool = False  # the paper's paths are Wi-Fi links driven by mprig/campaign/wifi.py


_NS3_WIFI = (
    "Radios: the paper simulated 802.11 in NS-3; the virtual rig emulates each Wi-Fi link "
    "with netem at the rate and loss mprig/campaign/wifi.py computes for the distance "
    "(table below): "
    "MAC retries, contention and per-frame fading become a fixed rate and i.i.d. residual "
    "loss, so retry jitter and loss bursts are absent. On a lab rig the same model drives an "
    "RF attenuator (attenuation = PL(d) - PL(physical distance)) over real radios instead.",
    "Stack: the paper's NS-3 MPTCP model against the running Linux kernel's upstream MPTCP. "
    "Reordering solutions are mprig/campaign/presets.py presets; each switches Linux's other "
    "mechanisms off, and the notes below say how each still differs from the NS-3 model.",
    "TCP-DOOR and PR-R change the sender's response to reordering: mprig builds them as BPF "
    "congestion controls (door, prr; docs/bpf.md) on per-subflow Reno. PR-R keeps cwnd on "
    "the third duplicate ACK as the paper's; Linux's PRR still paces the recovery by packet "
    "conservation. TCP-DOOR reacts to the reordering Linux detects (SACK/D-SACK, undo) "
    "instead of the paper's ADSN/TPSN option, which no Linux peer sends.",
)

PAPERS: dict[str, PaperPlan] = {
    "000": PaperPlan(
        "000",
        "PR-R: packet reordering response for MPTCP (Alheid et al.)",
        ("000-table1", "000-scenario1", "000-scenario2"),
        (
            Comparison(
                "000-table1",
                "p2.delay_ms",
                "tcp_best",
                "Table I, Linux column: gain of coupled MPTCP (stock recovery) over TCP on the "
                "best path, by p2's delay (p1's 10 ms + the difference)",
                "Paper: gain 94 / 89 / 23 % at a difference of 0 / 100 / 500 ms.",
                ("mptcp", "tcp_best"),
            ),
            Comparison(
                "000-table1",
                "p2.delay_ms",
                "tcp_best_dsack",
                "Table I, NS-3 column: gain of coupled MPTCP with D-SACK over TCP with D-SACK "
                "on the best path, by p2's delay (p1's 10 ms + the difference)",
                "Paper: gain 90 / 80 / 20 % at a difference of 0 / 100 / 500 ms.",
                ("mptcp_dsack", "tcp_best_dsack"),
            ),
            Comparison(
                "000-scenario1",
                "wifi1.distance_m",
                "tcp_wifi1",
                "Scenario 1: gThroughput by distance (both subflows at the same distance)",
            ),
            Comparison(
                "000-scenario2",
                "wifi2.down.loss_pct",
                "tcp_wifi1",
                "Scenario 2: gThroughput by drop rate of subflow 2 (%)",
            ),
        ),
        (
            *_NS3_WIFI,
            "Congestion control: the paper ran coupled congestion control (RFC 6356 LIA) under "
            "every row. NoPR and D-SACK run it here (BPF lia: variants nopr_lia, dsack_lia); "
            "PR-R and TCP-DOOR are BPF congestion controls of their own (Reno per subflow) and "
            "a subflow runs one algorithm, so their coupled rows run BPF programs combining "
            "the response with LIA's increase (prr_lia, door_lia: variants prr_lia, "
            "tcpdoor_lia). The uncoupled nopr/dsack/tcpdoor/prr variants compare the four like "
            "for like on the rig (the tables below), not against the paper.",
            "SACK: every recovery preset has SACK on (D-SACK needs it, and it is the signal "
            "TCP-DOOR detects reordering from), so the variants differ in recovery only.",
            "Table I: the paper gives neither rates nor queue sizes for the Linux study it "
            "quotes; the campaign uses two 10 Mbit/s paths with 100-packet queues, both with "
            "the paper's 10 ms backbone delay, and adds the difference to the second path "
            "(both directions). The Linux column runs the stock kernel's recovery (D-SACK on, "
            "with timestamps, RACK and F-RTO), the NS-3 column D-SACK alone (the dsack preset), "
            "each against TCP on the best path with the same recovery.",
        ),
        wifi=True,
    ),
    "001": PaperPlan(
        "001",
        "CWA-MPTCP and a proactive scheduler (Zhou, Song, Shi)",
        ("001-cwa",),
        (
            Comparison(
                "001-cwa",
                "p2.delay_ms",
                "lia",
                "Goodput (iperf3's receiver rate) by the second path's one-way delay (ms)",
                "Paper: CWA's goodput approaches the 6 Mbit/s aggregate; original (coupled) "
                "MPTCP's stays close to the slow path's 2 Mbit/s.",
            ),
        ),
        (
            "Stack: the paper extended NS-2's MPTCP model; the rig runs upstream Linux MPTCP "
            "with CWA as a BPF congestion control (cwa: LIA's increase, Reno's decrease, "
            "Algorithm 1 every 0.5 s on the subflows' smoothed RTTs, which stand in for the "
            "paper's end-to-end path delays). 'Original MPTCP' is the BPF lia.",
            "Paths: the paper's averages (4.0 and 2.0 Mbit/s) at fixed rates; it gives no "
            "delays, so path 1 has 10 ms one way and path 2's delay is the sweep.",
            "Receive buffer: 100 MSS as in the paper (rmem 290000: Linux advertises half of it).",
            "The proactive scheduler (Algorithm 2, wired paths) needs a scheduler hook mainline "
            "kernels do not expose to BPF: it is a kernel patch (kernel-configs/patches), not "
            "run on the virtual rig's stock kernel. The cooperative relay scenario (Figs. 6-8) "
            "has no campaign.",
        ),
    ),
    "002": PaperPlan(
        "002",
        "RBPM: receive-buffer-based path management (IM 2017)",
        ("002-case-a", "002-case-b"),
        (),
        (
            "Stack: the paper ran the multipath-tcp.org kernel v0.89 inside NS-3 DCE; the rig "
            "runs the current upstream MPTCP. Opportunistic retransmission and penalisation "
            "(off in the paper) have no switch upstream.",
            "Path manager: fullmesh in the paper; upstream's kernel path manager with one "
            "subflow endpoint per client interface gives the same four subflows.",
            "RBPM: the paper's path manager deactivates a path; here mprig's controller "
            "(docs/rbpm.md) runs on the client beside the kernel path manager and marks the "
            "worst subflow backup (MP_PRIO), so the server's scheduler stops using it while "
            "others can send, and clears the flag when the buffer frees up; its decisions are "
            "in each run's rbpm.jsonl.",
        ),
    ),
    "003": PaperPlan(
        "003",
        "Reordering solutions x congestion control over Wi-Fi (Alheid et al., WD 2016)",
        tuple(f"003-scenario{n}" for n in range(1, 5)),
        tuple(
            Comparison(
                f"003-scenario{n}",
                "wifi1.distance_m",
                "tcp_wifi1",
                f"Scenario {n}: gThroughput by distance",
            )
            for n in range(1, 5)
        ),
        (
            *_NS3_WIFI,
            "Congestion control: Un-CC is per-subflow Reno; Co-CC is mprig's BPF lia (RFC 6356, "
            "state shared per MPTCP connection); FC-CC is mprig's BPF fccc (the NS-3 model's "
            "Fully_Coupled: 1/cwnd_total per packet acked, a loss takes cwnd_total/2 from the "
            "subflow). TCP-DOOR runs on Un-CC (BPF door, Reno per subflow), on Co-CC (BPF "
            "door_lia) and on FC-CC (BPF door_fccc: door's responses over fccc's decrease and "
            "increase; full profile only, as the quick profile runs FC-CC with NoPR and D-SACK).",
        ),
        wifi=True,
    ),
    "004": PaperPlan(
        "004",
        "How hard can it be? A deployable Multipath TCP (Raiciu et al., NSDI 2012)",
        ("004-fig4", "004-fig6a", "004-fig6b", "004-fig6c", "004-fig7"),
        (
            Comparison(
                "004-fig4",
                "rmem",
                "tcp_wifi",
                "Fig. 4: throughput by receive buffer (bytes), Wi-Fi 8 Mbit/s + 3G 2 Mbit/s",
                "Paper (2012 kernel, regular MPTCP): TCP over Wi-Fi beats MPTCP below 400 KB, "
                "and even 370 KB do not fill both pipes.",
            ),
            Comparison(
                "004-fig6a",
                "rmem",
                "tcp_wifi",
                "Fig. 6(a): throughput by receive buffer, Wi-Fi + 3G 50 kbit/s",
                "Paper: below 400 KB regular MPTCP is flow-controlled whenever the 3G path "
                "loses a packet; M1+M2 give 10x around 200 KB.",
            ),
            Comparison(
                "004-fig6b",
                "rmem",
                "tcp_fast",
                "Fig. 6(b) scaled by 10: throughput by receive buffer, wired 100 Mbit/s + "
                "10 Mbit/s (the paper's 1 Gbit/s + 100 Mbit/s), base RTT 40 ms",
                "Paper: MPTCP+M1,2 uses both links with 250 KB; regular MPTCP stays below TCP "
                "over the fast link until the buffer is at least 2 MB.",
            ),
            Comparison(
                "004-fig6c",
                "rmem",
                "tcp_link1",
                "Fig. 6(c) scaled by 10: throughput by receive buffer, three wired 100 Mbit/s "
                "links, base RTT 40 ms",
                "Paper: regular MPTCP and MPTCP+M1,2 perform equally at every buffer size; TCP "
                "over one link is the floor MPTCP should not fall below.",
            ),
        ),
        (
            "Stack: the paper measured its own 2012 Linux implementation (the multipath-tcp.org "
            "line) with and without M1 (opportunistic retransmission) and M2 (penalisation); "
            "the rig runs today's upstream MPTCP, which has no switch for either, so 'regular "
            "MPTCP' here is whatever upstream does by default.",
            "Links: the paper emulated its Wi-Fi-like and 3G-like paths too; the campaigns "
            "use its rates, base RTTs and buffers (converted to netem limits in packets).",
            "Receive buffer: the sweep sets net.ipv4.tcp_rmem's maximum; Linux counts skb "
            "overhead against it, so the advertised window is smaller than the buffer.",
            "Fig. 6(b) and 6(c): a rig cannot measure MPTCP at 1 Gbit/s (netem and capture "
            "limit first), so 6(c)'s rates are divided by 10 and its RTT multiplied by 10 "
            "(base 40 ms), 6(b)'s by 100 (10 + 1 Mbit/s, base 400 ms: at a tenth its large "
            "buffers put the emulated rig at its CPU limit), which keeps the paper's buffer "
            "sizes meaningful; 6(b) has no verdict rows (its figures are absolute 1 Gbit/s "
            "rates), 6(c) compares with and without M1/M2, which upstream cannot switch. "
            "Each campaign file states its scaling.",
            "Fig. 7: the paper does not restate its 3G/Wi-Fi paths, so the campaign takes "
            "Fig. 4's; traffic tool blocks writes 8 KB blocks back to back with 200 KB "
            "receive and send buffers and records each block's delay (run.json summary, "
            "docs/metrics.md). The paper gives no numbers, so there is no verdict.",
        ),
    ),
}
