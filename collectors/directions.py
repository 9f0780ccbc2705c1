"""Whether higher is better, per runs.parquet metric: what reports and regressions read.

Keys are base names: a per-path column `link_util.wifi` takes the direction of
`link_util`. "neutral" metrics describe the run (cwnd depends on the path, not on how well
the stack did) and never count as a regression.
"""

from __future__ import annotations

from typing import Final, Literal

Direction = Literal["higher", "lower", "neutral"]

METRIC_DIRECTIONS: Final[dict[str, Direction]] = {
    "throughput_bps": "higher",
    "goodput_bps": "higher",
    "iperf3_bps": "higher",
    "link_util": "higher",
    "ooo_ratio": "lower",
    "ooo_max_bytes": "lower",
    "ooo_max_packets": "lower",
    "ooo_mean_bytes": "lower",
    "ooo_arrivals": "lower",
    "retransmitted_packets": "lower",
    "duplicate_packets": "lower",
    "reinjected_bytes": "lower",
    "unmapped_bytes": "lower",
    "rcvbuf_k_max_bytes": "lower",
    "goodput_k_p5_bps": "higher",
    "srtt_ms": "lower",
    "cwnd_mean": "neutral",
    # How the sender fed its subflows (collectors/ss.py): they explain goodput, which is
    # judged; an app-limited workload idles by design.
    "idle_share": "neutral",
    "notsent_mean": "neutral",
    "rwnd_limited_share": "neutral",
    "sndbuf_limited_share": "neutral",
    # How the sender repaired losses (nstat): they explain goodput too.
    "sender_timeouts": "neutral",
    "sender_fast_recoveries": "neutral",
    "block_delay_p50_s": "lower",
    "block_delay_p95_s": "lower",
    "block_delay_p99_s": "lower",
    "block_delay_max_s": "lower",
    "blocks_missing": "lower",
    "request_time_p50_s": "lower",
    "request_time_p95_s": "lower",
    "request_time_p99_s": "lower",
    "request_time_mean_s": "lower",
    "requests_completed": "higher",
    "request_failures": "lower",
    "frame_delay_p50_s": "lower",
    "frame_delay_p95_s": "lower",
    "frame_delay_p99_s": "lower",
    "frame_miss_ratio": "lower",
    "frame_misses": "lower",
    "ping_p50_ms": "lower",  # latency under load: the probe's RTT quantiles and loss
    "ping_p95_ms": "lower",
    "ping_p99_ms": "lower",
    "ping_loss_pct": "lower",
    "owd_up_p50_ms": "lower",  # the probe's one-way delays (one clock, or synchronised ones)
    "owd_down_p50_ms": "lower",
    "jain_index": "higher",  # competing flows (collectors/cross.py): fairness across them
    "main_share": "neutral",  # the connection's share: its right value depends on the setup
    "cross_bps": "neutral",  # a competing flow's throughput describes the run
    # Cross-checks of throughput_bps (another instrument, or the same bytes with headers):
    # judging them too would count one change twice.
    "ss_acked_bps": "neutral",
    "wire_bps": "neutral",
}


def direction(column: str) -> Direction | None:
    """Direction of a runs.parquet column (`srtt_ms.cell` -> `srtt_ms`); None if not a
    metric column."""
    if column in METRIC_DIRECTIONS:
        return METRIC_DIRECTIONS[column]
    base = column.split(".", 1)[0]
    return METRIC_DIRECTIONS.get(base) if "." in column else None
