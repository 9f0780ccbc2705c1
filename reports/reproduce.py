"""`mprig reproduce`: one paper at a time, run its campaigns (experiments/papers/) and write a
reproduction report: our numbers beside the paper's with the verdicts of
reports/references, the derived comparisons the papers make (MPTCP's gain over TCP per
sweep point), and the setup differences between the paper and this rig.

The builders are pure (results in, Markdown lines out); `reproduce` is the I/O edge and
reports/cmd_reproduce.py the command. Running and collecting go through the `mprig run` and
`mprig collect` commands, so this module depends on their command lines only.
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig.errors import UsageError
from reports.results import fmt_value
from reports.tables import sig

if TYPE_CHECKING:
    import pandas as pd

    from reports.references import Check
    from reports.results import Results

ROOT = Path(__file__).resolve().parents[1]
PAPERS_DIR = ROOT / "experiments" / "papers"
REPRODUCTIONS = ROOT / "reports" / "reproductions"  # committed core/full reproductions
# quick: CI-sized checks of the machinery (n = 3). core: the cells of each paper's headline
# claims at n = 5, sized for a 2-core host without KVM (about 2 h for all five papers).
# full: the papers' run lengths and repetitions over every cell (days without KVM).
PROFILES = ("quick", "core", "full")
COMMITTED = ("core", "full")  # profiles whose reproductions go to reports/reproductions


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

    seed: str
    title: str
    campaigns: tuple[str, ...]
    comparisons: tuple[Comparison, ...]
    differences: tuple[str, ...]  # setup differences, one paragraph each
    wifi: bool = False  # the paper's paths are Wi-Fi links driven by mprig/wifi.py


_NS3_WIFI = (
    "Radios: the paper simulated 802.11 in NS-3; the virtual rig emulates each Wi-Fi link "
    "with netem at the rate and loss mprig/wifi.py computes for the distance (table below): "
    "MAC retries, contention and per-frame fading become a fixed rate and i.i.d. residual "
    "loss, so retry jitter and loss bursts are absent. On a lab rig the same model drives an "
    "RF attenuator (attenuation = PL(d) - PL(physical distance)) over real radios instead.",
    "Stack: the paper's NS-3 MPTCP model against the running Linux kernel's upstream MPTCP. "
    "Reordering solutions are mprig/presets.py presets; each switches Linux's other "
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
            "limit first), so rates are divided by 10 and the RTT multiplied by 10 (base "
            "40 ms), which keeps the paper's buffer sizes meaningful; 6(b) has no verdict "
            "rows (its figures are absolute 1 Gbit/s rates), 6(c) compares with and without "
            "M1/M2, which upstream cannot switch. Each campaign file states its scaling.",
            "Fig. 7: the paper does not restate its 3G/Wi-Fi paths, so the campaign takes "
            "Fig. 4's; traffic tool blocks writes 8 KB blocks back to back with 200 KB "
            "receive and send buffers and records each block's delay (run.json summary, "
            "docs/metrics.md). The paper gives no numbers, so there is no verdict.",
        ),
    ),
}

# --- pure builders -----------------------------------------------------------------------


def campaign_file(stem: str, profile: str) -> Path:
    """experiments/papers/<stem>-<profile>.yaml."""
    return PAPERS_DIR / f"{stem}-{profile}.yaml"


def _axis_column(results: Results, axis: str) -> str | None:
    from reports.results import short_axis

    for column in results.axes:
        if short_axis(column) == axis:
            return column
    return None


def comparison_rows(results: Results, comp: Comparison) -> list[dict[str, str]]:
    """Per axis value: every variant's mean throughput (Mbit/s, see `throughput_bps`) and its
    gain over the baseline (%, a ratio of means, as reports.references computes a gain);
    runs that did not complete are left out."""
    column = _axis_column(results, comp.axis)
    done = results.complete.copy()
    if comp.variants:
        done = done[done["variant"].isin(comp.variants)]
    if column is None or done.empty:
        return []
    done["_mbit"] = throughput_bps(done) / 1e6
    means = done.groupby([column, "variant"])["_mbit"].mean()
    rows = []
    for value in sorted(done[column].dropna().unique()):
        row = {comp.axis: fmt_value(value)}
        base = means.get((value, comp.baseline), math.nan)
        for variant in dict.fromkeys(done["variant"]):
            mbit = means.get((value, variant), math.nan)
            row[f"{variant} Mbit/s"] = _fmt(mbit)
            if variant != comp.baseline:
                row[f"{variant} gain %"] = _fmt(100 * (mbit / base - 1) if base else math.nan)
        rows.append(row)
    return rows


def throughput_bps(runs: pd.DataFrame) -> pd.Series:
    """Per run: the metric the references judge, so a table cell and a verdict row print one
    number: the capture's aggregate throughput (`throughput_bps`), else the sum of the
    per-path throughputs (plain TCP runs), else iperf3's receiver rate."""
    import pandas as pd

    per_path = [c for c in runs.columns if c.startswith("throughput_bps.")]
    nan = pd.Series(float("nan"), index=runs.index)
    out = runs["throughput_bps"] if "throughput_bps" in runs.columns else nan
    out = out.fillna(runs[per_path].sum(axis=1, min_count=1) if per_path else nan)
    return out.fillna(runs["iperf3_bps"] if "iperf3_bps" in runs.columns else nan)


def _fmt(value: Any) -> str:
    """A measured number as every view prints it (reports.tables.sig); others as they are."""
    return sig(value) if isinstance(value, float) else str(value)


def finding_lines(rows: list[dict[str, str]], comp: Comparison) -> list[str]:
    """One sentence per sweep point and variant: above or below the baseline, by how much."""
    out = []
    base_key = f"{comp.baseline} Mbit/s"
    for row in rows:
        for key, value in row.items():
            if not key.endswith(" gain %") or row.get(base_key, "–") == "–" or value == "–":
                continue
            variant = key.removesuffix(" gain %")
            side = "below" if value.startswith("-") else "not below"
            out.append(
                f"- {comp.axis} = {row[comp.axis]}: {variant} {row[f'{variant} Mbit/s']} Mbit/s "
                f"against {row[base_key]} Mbit/s for {comp.baseline}: {side} it ({value} %)"
            )
    return out


def markdown_table(rows: list[dict[str, str]]) -> list[str]:
    """Rows of equal keys as a Markdown table."""
    if not rows:
        return []
    keys = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(r.get(k, "") for k in keys) + " |" for r in rows]
    return lines


def check_lines(checks: list[Check]) -> list[str]:
    """The references verdict table: ours beside the paper's, ours printed as the
    comparison tables print it (`_fmt`), so one number reads the same everywhere."""
    from reports.report import check_rows

    keep = ("id", "source", "paper_value", "bound", "ours", "ci", "window", "unit", "n",
            "n_needed", "verdict", "reason")  # fmt: skip
    rows = []
    for c, row in zip(checks, check_rows(checks), strict=True):
        row["ours"] = "–" if c.ours is None else _fmt(c.ours)
        rows.append({k: row[k] for k in keep})
    return markdown_table(rows)


def wifi_model_lines(distances: tuple[float, ...] = (10, 30, 50, 70, 80, 90, 100)) -> list[str]:
    """What the Wi-Fi model applies per distance for the papers' three PHY modes."""
    from mprig import wifi

    rows = []
    for standard, rate in (("11g", 54.0), ("11g", 6.0), ("11b", 2.0)):
        for d in distances:
            est = wifi.link(d, standard, rate)  # type: ignore[arg-type]
            rows.append(
                {
                    "PHY": f"{standard} {rate:g}",
                    "distance m": f"{d:g}",
                    "mean SNR dB": f"{est.mean_snr_db:.1f}",
                    "frame error": f"{est.frame_error:.3f}",
                    "netem rate Mbit/s": f"{est.netem_rate_mbit:.2f}",
                    "netem loss %": f"{est.loss_pct:.3g}",
                }
            )
    return markdown_table(rows)


def cc_lines(available: tuple[str, ...] | None) -> list[str]:
    """Congestion-control availability of the papers' controllers on the rig's kernel."""
    from mprig import presets

    if available is None:
        return ["(unknown: no host recorded net.ipv4.tcp_available_congestion_control)"]
    out = [f"Kernel offers: {' '.join(available)}.", ""]
    for name in ("uncoupled", "lia", "olia", "fully_coupled", "prr", "tcpdoor", "cwa"):
        c = presets.check_cc(name, available)
        status = "available" if c.available else f"unavailable: {c.reason}"
        out.append(f"- {presets.CC_PRESETS[name].paper_name} (`{name}`): {status}")
    return out


def preset_lines() -> list[str]:
    """Each reordering preset: its exact sysctls and how it differs from NS-3."""
    from mprig import presets

    out = []
    for p in presets.RECOVERY_PRESETS.values():
        knobs = ", ".join(f"{k.removeprefix('net.ipv4.')}={v}" for k, v in p.sysctls.items())
        out.append(f"- **{p.paper_name}** (`{p.name}`): {knobs}. {p.differs}")
    return out


def available_cc(results: list[Results]) -> tuple[str, ...] | None:
    """Congestion controls every recorded host offers, from run.json host facts."""
    common: set[str] | None = None
    order: list[str] = []
    for r in results:
        for bundle in r.bundles.values():
            for host in (bundle.get("hosts") or {}).values():
                text = (host.get("sysctls") or {}).get("net.ipv4.tcp_available_congestion_control")
                if text:
                    names = str(text).split()
                    order += [n for n in names if n not in order]
                    common = set(names) if common is None else common & set(names)
    return None if common is None else tuple(n for n in order if n in common)


@dataclass(frozen=True)
class CampaignOutcome:
    """One campaign of a paper: its results and reference checks, or why there are none."""

    stem: str
    profile: str
    results: Results | None
    checks: list[Check]
    missing: str = ""  # why there are no results


def render(plan: PaperPlan, outcomes: list[CampaignOutcome], cc: tuple[str, ...] | None) -> str:
    """The reproduction report of one paper, as Markdown."""
    from reports import orderings

    lines = [f"# Reproduction of seed {plan.seed}: {plan.title}", ""]
    for o in outcomes:
        lines += _campaign_section(plan, o)
    lines += orderings.lines(
        orderings.judge_all(plan.seed, [c for o in outcomes for c in o.checks])
    )
    lines += ["## Setup differences", "", *[f"- {d}" for d in plan.differences], ""]
    lines += ["### Congestion control on this rig", "", *cc_lines(cc), ""]
    if plan.wifi:
        lines += ["### Reordering presets", "", *preset_lines(), ""]
        lines += ["### Wi-Fi model applied per distance (mprig/wifi.py)", "", *wifi_model_lines()]
    return "\n".join(lines) + "\n"


def _campaign_section(plan: PaperPlan, o: CampaignOutcome) -> list[str]:
    name = f"{o.stem}-{o.profile}"
    lines = [f"## {name}", ""]
    if o.results is None:
        cmd = f"mprig reproduce {plan.seed} --profile {o.profile} --run"
        if not campaign_file(o.stem, o.profile).is_file():
            return [*lines, f"Not part of the {o.profile} profile: {o.missing}.", ""]
        return [*lines, f"No results: {o.missing}. Run `{cmd}`.", ""]
    r = o.results
    lines += [f"{len(r.complete)} of {len(r.runs)} runs complete ({r.root}).", ""]
    for comp in (c for c in plan.comparisons if c.campaign == o.stem):
        rows = comparison_rows(r, comp)
        lines += (
            [f"### {comp.title}", "", comp.claim, ""] if comp.claim else [f"### {comp.title}", ""]
        )
        lines += [*(markdown_table(rows) or ["(no complete runs)"]), ""]
        lines += [*finding_lines(rows, comp), ""] if rows else []
    if o.checks:
        lines += ["### Against the paper (reports/references)", "", *check_lines(o.checks), ""]
    return lines


# --- I/O edge ----------------------------------------------------------------------------


def load_outcome(stem: str, profile: str, results_root: Path) -> CampaignOutcome:
    """Read a campaign's results and check its references; missing results are reported."""
    from reports import references
    from reports.results import load

    root = results_root / f"{stem}-{profile}"
    if not campaign_file(stem, profile).is_file():
        why = f"no {campaign_file(stem, profile).name}; `--profile full` runs it"
        return CampaignOutcome(stem, profile, None, [], why)
    if not (root / "campaign.json").is_file():
        return CampaignOutcome(stem, profile, None, [], f"{root} does not exist")
    try:
        results = load(root)
    except UsageError as e:
        return CampaignOutcome(stem, profile, None, [], str(e))
    return CampaignOutcome(stem, profile, results, references.load_for(results))


LOCAL_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


def _local_cc() -> tuple[str, ...] | None:
    """This machine's congestion controls, when no run recorded the rig's."""
    from mprig import presets

    try:
        return presets.parse_available_cc(LOCAL_CC.read_text())
    except OSError:
        return None


def _mprig(*args: str) -> int:
    """Run an mprig command in a child process (its own errors print there)."""
    return subprocess.run([sys.executable, "-m", "mprig.cli", *args], check=False).returncode


def run_campaigns(plan: PaperPlan, profile: str, results_root: Path) -> None:
    """`mprig run` then `mprig collect` each campaign of the paper; bad input stops."""
    for stem in plan.campaigns:
        if not campaign_file(stem, profile).is_file():
            continue  # not part of this profile (the report says so)
        status = _mprig("run", str(campaign_file(stem, profile)), "--results", str(results_root))
        if status == 2:
            raise UsageError(f"mprig run {campaign_file(stem, profile)} rejected its input")
        _mprig("collect", str(results_root / f"{stem}-{profile}"))


def verdict_summary(seed: str, outcomes: list[CampaignOutcome]) -> dict[str, Any]:
    """Verdict counts, in all and per campaign, and one record per reference checked."""
    from reports import orderings
    from reports.report import verdict_counts

    checks = [c for o in outcomes for c in o.checks]
    return {
        "counts": verdict_counts(checks),
        "orderings": orderings.as_json(orderings.judge_all(seed, checks)),
        "campaigns": {f"{o.stem}-{o.profile}": verdict_counts(o.checks) for o in outcomes},
        "checks": [
            {
                "id": c.id,
                "campaign": f"{o.stem}-{o.profile}",
                "verdict": c.verdict,
                "paper": c.entry.ref.value if c.entry else None,
                "ours": c.ours,
                "low": _json_number(c.low),
                "high": _json_number(c.high),
                "window": [_json_number(x) for x in c.window] if c.window else None,
                "n": c.n,
                "n_base": c.n_base,
                "n_needed": c.n_needed,
                "reason": c.reason,
            }
            for o in outcomes
            for c in o.checks
        ],
    }


def _json_number(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else x


def environment(outcomes: list[CampaignOutcome]) -> dict[str, Any]:
    """What the runs ran on, read from their run.json: kernels, tool versions, rig mode,
    whether the VM had KVM or software emulation ("unrecorded" where run.json says not) and
    the congestion controls every host offered (None: unrecorded), which
    reports/reproduce_committed.py needs to judge a committed reproduction again."""
    seen: dict[str, set[str]] = {"kernels": set(), "rig_modes": set(), "acceleration": set()}
    tools: dict[str, set[str]] = {}
    runs: dict[str, dict[str, Any]] = {}
    for o in outcomes:
        if o.results is None:
            continue
        r = o.results
        offered = available_cc([r])  # per campaign: BPF ones are loaded for its variants
        runs[f"{o.stem}-{o.profile}"] = {
            "runs": len(r.runs),
            "complete": len(r.complete),
            "congestion_controls": None if offered is None else list(offered),
        }
        for bundle in r.bundles.values():
            seen["rig_modes"].add(str(bundle.get("rig_mode", "unrecorded")))
            vm = bundle.get("vm") if isinstance(bundle.get("vm"), dict) else {}
            accel = bundle.get("acceleration") or (vm or {}).get("accel") or "unrecorded"
            seen["acceleration"].add(str(accel))
            for host in (bundle.get("hosts") or {}).values():
                seen["kernels"].add(str(host.get("kernel", "unrecorded")))
                for tool, version in (host.get("tools") or {}).items():
                    tools.setdefault(str(tool), set()).add(str(version))
    cc = available_cc([o.results for o in outcomes if o.results is not None])
    return {
        **{k: sorted(v) for k, v in seen.items()},
        "tools": {k: sorted(v) for k, v in sorted(tools.items())},
        "campaigns": runs,
        "congestion_controls": None if cc is None else list(cc),  # what every host offered
    }


def metrics_frame(outcomes: list[CampaignOutcome]) -> pd.DataFrame:
    """Every run of the paper's campaigns, one row each, with its campaign's name."""
    import pandas as pd

    frames = []
    for o in outcomes:
        if o.results is not None:
            frames.append(o.results.runs.assign(campaign=f"{o.stem}-{o.profile}"))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _figure_lines(plan: PaperPlan, outcomes: list[CampaignOutcome], out: Path) -> list[str]:
    from reports import figures

    lines = []
    for o in outcomes:
        if o.results is None or o.results.complete.empty:
            continue
        for plot in figures.axis_figures(o.results, out / "figures" / o.stem):
            lines.append(f"![{o.stem}: {plot.title}](figures/{o.stem}/{plot.png.name})")
    return ["## Figures", "", *lines, ""] if lines else []


def write_reproduction(
    plan: PaperPlan, outcomes: list[CampaignOutcome], cc: tuple[str, ...] | None, out: Path
) -> Path:
    """OUT/: metrics.parquet and .csv, report.md (+ figures/), environment.json and
    verdicts.json; every file written atomically. Returns OUT/report.md."""
    import json

    from mprig import fsio

    out.mkdir(parents=True, exist_ok=True)
    metrics = metrics_frame(outcomes)
    with fsio.atomic_path(out / "metrics.parquet") as tmp:
        metrics.to_parquet(tmp)
    fsio.write_text(out / "metrics.csv", metrics.to_csv(index=False))
    summary = {"seed": plan.seed, "profile": outcomes[0].profile if outcomes else ""}
    env = {**summary, **environment(outcomes)}
    fsio.write_text(out / "environment.json", json.dumps(env, indent=1, sort_keys=True) + "\n")
    return write_judgement(plan, outcomes, cc, out)


def write_judgement(
    plan: PaperPlan, outcomes: list[CampaignOutcome], cc: tuple[str, ...] | None, out: Path
) -> Path:
    """OUT/verdicts.json and report.md (+ figures/) from OUTCOMES: from results, or from a
    committed reproduction's own files (reports/reproduce_committed.py). Returns report.md."""
    import json

    from mprig import fsio

    summary = {"seed": plan.seed, "profile": outcomes[0].profile if outcomes else ""}
    verdicts = {**summary, **verdict_summary(plan.seed, outcomes)}
    fsio.write_text(out / "verdicts.json", json.dumps(verdicts, indent=1) + "\n")
    text = render(plan, outcomes, cc) + "\n".join(_figure_lines(plan, outcomes, out))
    return fsio.write_text(out / "report.md", text)


def reproduce(seed: str, profile: str, results_root: Path, out: Path, run: bool) -> Path:
    """Optionally run a paper's campaigns, then write OUT/<seed>/ (core and full profiles)
    or OUT/<seed>-quick/: metrics, report, environment, verdicts. Returns its report.md."""
    if seed not in PAPERS:
        raise UsageError(f"seed {seed!r}: no such paper (papers: {', '.join(PAPERS)})")
    plan = PAPERS[seed]
    if run:
        run_campaigns(plan, profile, results_root)
    outcomes = [load_outcome(stem, profile, results_root) for stem in plan.campaigns]
    cc = available_cc([o.results for o in outcomes if o.results is not None]) or _local_cc()
    name = seed if profile in COMMITTED else f"{seed}-{profile}"
    return write_reproduction(plan, outcomes, cc, out / name)


DOCS_BEGIN = "<!-- reproductions: generated by `make papers-docs` from reports/reproductions -->"
DOCS_END = "<!-- reproductions: end -->"


def _committed(reproductions: Path) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Per seed with a committed reproduction: its verdicts.json and environment.json."""
    import json

    out = {}
    for seed in PAPERS:
        verdicts = reproductions / seed / "verdicts.json"
        if verdicts.is_file():
            env = reproductions / seed / "environment.json"
            out[seed] = (json.loads(verdicts.read_text()), json.loads(env.read_text()))
    return out


def docs_section(reproductions: Path = REPRODUCTIONS) -> str:
    """The numbers section of docs/papers.md: per committed reproduction, its verdict
    counts and environment, its orderings and its compared reference rows, read from
    verdicts.json and environment.json."""
    from reports.refstats import VERDICTS

    committed = _committed(reproductions)
    lines = [DOCS_BEGIN, "", "| seed | profile | " + " | ".join(VERDICTS) + " | rig |"]
    lines.append("|" + "---|" * (len(VERDICTS) + 3))
    for seed in PAPERS:
        if seed not in committed:
            lines.append(f"| {seed} | – | " + " | ".join("–" for _ in VERDICTS) + " | not run |")
            continue
        v, e = committed[seed]
        counts = " | ".join(str(v["counts"].get(k, 0)) for k in VERDICTS)
        rig = ", ".join(
            [*e.get("rig_modes", []), *e.get("acceleration", []), *e.get("kernels", [])]
        )
        lines.append(f"| {seed} | {v.get('profile', '')} | {counts} | {rig} |")
    verdicts = {seed: v for seed, (v, _) in committed.items()}
    lines += ordering_lines(verdicts)
    lines += checked_lines(verdicts)
    lines += ["", "Per reference: `reports/reproductions/<seed>/report.md`; a seed without a "
              "committed reproduction runs with `make papers-core` (about 2 h for all five) or "
              "`make reproduce SEED=<seed>` (the full profile: days without KVM).", "",
              DOCS_END]  # fmt: skip
    return "\n".join(lines)


def ordering_lines(verdicts: dict[str, dict[str, Any]]) -> list[str]:
    """The orderings judged in the committed reproductions (verdicts.json `orderings`)."""
    rows = [
        f"| {seed} | {o['title']} | {', '.join(o['steps'])} | {o['verdict']} |"
        for seed, v in verdicts.items()
        for o in v.get("orderings", [])
    ]
    head = ["", "| seed | ordering the paper shows | steps | verdict |", "|---|---|---|---|"]
    return [*head, *rows] if rows else []


def checked_lines(verdicts: dict[str, dict[str, Any]]) -> list[str]:
    """Every reference row a committed reproduction could compare (verdicts.json `checks`
    other than not comparable): the paper's value, ours with its 95 % interval, n, verdict."""
    rows = []
    for v in verdicts.values():
        for c in v["checks"]:
            if c["verdict"] == "not comparable" or c["ours"] is None:
                continue
            ci = "" if c["low"] is None else f" [{_fmt(c['low'])}, {_fmt(c['high'])}]"
            paper = _fmt(float(c["paper"])) if c["paper"] is not None else "–"
            rows.append(
                f"| {c['id']} | {paper} | {_fmt(c['ours'])}{ci} | {c['n']} | {c['verdict']} |"
            )
    head = ["", "| reference | paper | ours [95 % CI] | n | verdict |", "|---|---|---|---|---|"]
    return [*head, *rows] if rows else []


def update_docs(path: Path, reproductions: Path = REPRODUCTIONS) -> bool:
    """Rewrite PATH's generated section; True when it changed."""
    from mprig import fsio

    text = path.read_text()
    if DOCS_BEGIN not in text or DOCS_END not in text:
        raise UsageError(f"{path}: no generated section ({DOCS_BEGIN} ... {DOCS_END})")
    head, rest = text.split(DOCS_BEGIN, 1)
    tail = rest.split(DOCS_END, 1)[1]
    new = head + docs_section(reproductions) + tail
    if new != text:
        fsio.write_text(path, new)
    return new != text
