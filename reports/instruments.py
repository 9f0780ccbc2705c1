"""Which instrument measured what: the glossary (source, payload or wire bytes, definition
of every metric), throughput by instrument (the receiver's capture, with the sender's ss
and iperf3 beside it as cross-checks), and link utilisation checked against the path rate
in payload and wire bytes. Pure functions over `Results`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reports.results import Results, fmt_value, short_axis
from reports.stats import summary_ci
from reports.tables import NBSP, Table, fmt

DOCS = "docs/metrics.md"
CAPTURE = "receiver capture (plain TCP and MPTCP alike)"
MPTCP_CAPTURE = "receiver capture, MPTCP connection level (null for plain TCP)"
WIRE = "wire bytes: IP length + 14-byte Ethernet header"
# Capture timestamps over first to last segment count N segments over N - 1 gaps, and tbf
# or netem release on their own clock: wire rates this close to the path rate are the rate.
TIMING_SLACK = 0.005


@dataclass(frozen=True)
class Term:
    """One glossary entry."""

    term: str  # the label tables use
    column: str  # runs.parquet column (`<m>.<path>` for per-path ones)
    source: str  # the instrument
    counts: str  # payload bytes, wire bytes, packets, ...
    definition: str  # formula, in words


GLOSSARY = (
    Term(
        "Throughput",
        "throughput_bps",
        CAPTURE,
        "payload bytes",
        "payload bits of every data segment (retransmissions included) / first to last "
        "data segment; per path: `throughput_bps.<path>` (the papers' gThroughput)",
    ),
    Term(
        "Goodput",
        "goodput_bps",
        CAPTURE,
        "payload bytes",
        "bytes delivered in order at the connection level (plain TCP: payload less "
        "retransmitted bytes) / the same duration",
    ),
    Term(
        "LU",
        "link_util",
        CAPTURE,
        "payload bytes",
        "link utilisation: `throughput_bps.<path>` / the path's configured rate in the data "
        "direction, mean over paths (the papers' LU); headers make payload LU stay below "
        "100 % on a full link",
    ),
    Term(
        "Wire rate",
        "wire_bps.<path>",
        CAPTURE,
        WIRE,
        "the same segments counted as netem `rate` and tbf count them; above the path rate "
        "means the link let more through than configured",
    ),
    Term(
        "OOO-R",
        "ooo_ratio",
        MPTCP_CAPTURE,
        "packets",
        "packets stored in the connection-level out-of-order queue / non-duplicate packets "
        "reaching the connection level",
    ),
    Term(
        "OOO-BO",
        "ooo_max_bytes",
        MPTCP_CAPTURE,
        "payload bytes (KB = 1024 B)",
        "largest occupancy of the connection-level out-of-order queue",
    ),
    Term(
        "OOO mean",
        "ooo_mean_bytes",
        MPTCP_CAPTURE,
        "payload bytes (KB = 1024 B)",
        "time-weighted mean occupancy of that queue, first to last data segment",
    ),
    Term(
        "OOO arrivals",
        "ooo_arrivals",
        MPTCP_CAPTURE,
        "skbs",
        "arrivals the kernel's MPTcpExtOFOQueue counts (one per mapping released together)",
    ),
    Term(
        "Retransmitted",
        "retransmitted_packets",
        CAPTURE,
        "packets",
        "segments starting below the highest sequence number seen before, all subflows",
    ),
    Term(
        "Reinjected",
        "reinjected_bytes",
        MPTCP_CAPTURE,
        "payload bytes",
        "data bytes seen on more than one subflow (second copies)",
    ),
    Term(
        "Rcv buffer K",
        "rcvbuf_k_max_bytes",
        MPTCP_CAPTURE,
        "payload bytes",
        "receive buffer needed to complete each block of K contiguous packets, max",
    ),
    Term(
        "Block goodput p5",
        "goodput_k_p5_bps",
        MPTCP_CAPTURE,
        "payload bytes",
        "goodput per block of K contiguous packets (bytes since the previous block over the "
        "time since), 5th percentile over the blocks after the first second",
    ),
    Term(
        "ss acked",
        "ss_acked_bps",
        "sender's ss samples (cross-check)",
        "payload bytes",
        "bytes newly acknowledged between a socket's first and last sample x 8 / that "
        "time, summed over paths; its window is the sampler's, not the capture's",
    ),
    Term(
        "iperf3",
        "iperf3_bps",
        "iperf3's receiver report (cross-check)",
        "payload bytes",
        "bytes the application read / iperf3's test time (includes ramp-up and tail)",
    ),
    Term(
        "srtt",
        "srtt_ms.<path>",
        "sender's ss samples",
        "milliseconds",
        "mean smoothed RTT of the path's data subflows",
    ),
    Term(
        "cwnd",
        "cwnd_mean.<path>",
        "sender's ss samples",
        "segments",
        "mean congestion window of the path's data subflows (never judged)",
    ),
)


def glossary_markdown() -> str:
    """The glossary as a Markdown section."""
    lines = [
        "## Glossary",
        "",
        f"Definitions in detail: {DOCS}. Every rate and size is computed at the receiver "
        "unless the source says otherwise.",
        "",
        "| term | column | source | counts | definition |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {t.term} | `{t.column}` | {t.source} | {t.counts} | {t.definition} |" for t in GLOSSARY
    ]
    return "\n".join(lines) + "\n\n"


def _mbit(value: float) -> str:
    return fmt(value / 1e6, 2)


def _ratio(value: float, capture: float) -> str:
    if math.isnan(value) or math.isnan(capture) or capture == 0:
        return "–"
    return f"{value / capture:.3f}"


def instrument_table(results: Results) -> Table:
    """Per (variant, sweep point): the capture's throughput (the one every comparison uses)
    and, beside it, the sender's ss rate and iperf3's figure with their ratio to it."""
    import pandas as pd

    keys = ["variant", *results.axes]
    rows, data = [], []
    for key, group in results.complete.groupby(keys, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        cap = summary_ci(group.get("throughput_bps", pd.Series(dtype=float)))
        ss = _mean(group, "ss_acked_bps")
        ip = _mean(group, "iperf3_bps")
        cell = f"{_mbit(cap.mean)}{NBSP}±{NBSP}{_mbit((cap.high - cap.low) / 2)}"
        shown = cell if not math.isnan(cap.low) else _mbit(cap.mean)
        rows.append(
            [
                str(key[0]),
                *(fmt_value(v) for v in key[1:]),
                shown,
                _mbit(ss),
                _ratio(ss, cap.mean),
                _mbit(ip),
                _ratio(ip, cap.mean),
                str(cap.n),
            ]
        )
        data.append([*key, cap.mean, ss, ip, cap.n])
    columns = ["variant", *(short_axis(a) for a in results.axes)]
    columns += ["capture (Mbit/s)", "ss acked (Mbit/s)", "ss / capture", "iperf3 (Mbit/s)"]
    columns += ["iperf3 / capture", "n"]
    frame = pd.DataFrame(data, columns=[*keys, "capture_bps", "ss_acked_bps", "iperf3_bps", "n"])
    return Table(
        "instruments",
        "Throughput by instrument: receiver capture (used everywhere), ss and iperf3 beside it",
        frame,
        pd.DataFrame(rows, columns=columns),
        "capture: mean ± 95 % t half-width; ss and iperf3: means (cross-checks, never "
        "compared across variants)",
    )


def _mean(group: Any, column: str) -> float:
    if column not in group.columns:
        return math.nan
    values = group[column].dropna()
    return float(values.mean()) if len(values) else math.nan


@dataclass(frozen=True)
class LinkCheck:
    """A run and path whose payload or wire rate reaches the configured rate."""

    run_id: str
    path: str
    verdict: str  # "explained" or "flagged"
    detail: str  # the numbers behind the verdict


def link_checks(results: Results) -> list[LinkCheck]:
    """Every (run, path) with payload LU over 100 % or wire bytes over the rate: explained
    when the wire rate is within the capture's timing of the rate, flagged otherwise."""
    out = []
    frame = results.complete
    paths = [c.removeprefix("link_util.") for c in frame.columns if c.startswith("link_util.")]
    for record in frame.to_dict("records"):
        run = {str(k): v for k, v in record.items()}
        for path in paths:
            check = _link_check(run, path)
            if check is not None:
                out.append(check)
    return sorted(out, key=lambda c: (c.run_id, c.path))


def _link_check(run: dict[str, Any], path: str) -> LinkCheck | None:
    lu, payload, wire = (
        _num(run.get(f"{m}.{path}")) for m in ("link_util", "throughput_bps", "wire_bps")
    )
    if math.isnan(lu) or math.isnan(payload) or lu == 0:
        return None
    rate = payload / lu
    head = f"payload {_mbit(payload)} Mbit/s (LU {lu * 100:.1f} %)"
    if math.isnan(wire):
        if lu <= 1:
            return None
        return LinkCheck(
            str(run["run_id"]),
            path,
            "flagged",
            f"{head} on a {_mbit(rate)} Mbit/s path, no wire count (throughput "
            "not from the capture, or collected by an older mprig): not checked against the rate",
        )
    if lu <= 1 and wire <= rate:
        return None
    head += f", wire {_mbit(wire)} Mbit/s on a {_mbit(rate)} Mbit/s path"
    over = wire / rate - 1
    if over <= TIMING_SLACK:
        return LinkCheck(
            str(run["run_id"]),
            path,
            "explained",
            f"{head}: within {TIMING_SLACK * 100:.1f} % of the rate: the capture's "
            "first-to-last window counts N segments over N - 1 gaps",
        )
    return LinkCheck(
        str(run["run_id"]),
        path,
        "flagged",
        f"{head}: {over * 100:.1f} % more than configured on the wire: the link let more "
        "through than its rate (a tbf or netem burst, or the rate is not applied "
        "in this direction); see the bundle's tc -s qdisc snapshots",
    )


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)
