"""The tool-output parts of one run's metrics: iperf3, ss and nstat, each read from its
artifact in the bundle. Each part returns its metrics, its time series and the problems it
met (as `file: message`), so one unreadable artifact costs only its own metrics."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collectors import iperf3, nstat, ss
from collectors.runinfo import RunInfo
from collectors.textparse import ParseError
from mprig.run import traffic

if TYPE_CHECKING:
    import pandas as pd

# Series taken from ss samples into timeseries.parquet (source "ss").
SS_SERIES: tuple[str, ...] = ("cwnd", "ssthresh", "srtt_ms", "rttvar_ms", "delivery_rate_bps")
SS_SERIES += ("pacing_rate_bps", "bytes_acked", "retrans")


@dataclass
class Part:
    """What one artifact family contributed to a run."""

    metrics: dict[str, Any] = field(default_factory=dict)
    series: list[pd.DataFrame] = field(default_factory=list)  # long-form time series pieces
    problems: list[str] = field(default_factory=list)  # "file: message" or "file:line: ..."


def read_text(bundle: Path, name: str, part: Part) -> str | None:
    """An artifact's text, or None (and a problem) if it is missing or unreadable."""
    try:
        return (bundle / name).read_text(errors="replace")
    except FileNotFoundError:
        part.problems.append(f"{name}: missing")
    except OSError as e:
        part.problems.append(f"{name}: unreadable ({e.strerror})")
    return None


def iperf3_part(info: RunInfo) -> Part:
    """`iperf3_bps` (receiver side) and the receiver's interval series; for a bulk
    transfer, bulk.json as recorded (and no iperf3 figures); nothing for blocks, requests
    and cbr (their own parts)."""
    part = Part()
    if info.tool == "bulk":
        return bulk_part(info, part)
    if info.tool in ("blocks", "requests", "cbr"):
        part.metrics["iperf3_bps"] = None
        return part
    results: dict[str, iperf3.Iperf3Result | None] = {}
    for role in ("client", "server"):
        name = f"iperf3-{role}.json"
        text = read_text(info.bundle, name, part)
        results[role] = None
        if text is not None:
            try:
                results[role] = iperf3.parse_iperf3(text, mptcp=info.mptcp)
            except ParseError as e:
                part.problems.append(str(e.in_file(name)))
    part.metrics["iperf3_bps"] = iperf3.receiver_bps(results["client"], results["server"])
    part.metrics["iperf3"] = {r: _iperf3_summary(res) for r, res in results.items() if res}
    client = results["client"]
    if client is not None and client.start_unix is not None and len(client.intervals):
        part.series.append(_iperf3_series(client))
    return part


BLOCK_QUANTILES = (("p50", "p50_ms"), ("p95", "p95_ms"), ("p99", "p99_ms"), ("max", "max_ms"))


def blocks_part(info: RunInfo) -> Part:
    """Application-level block delay (seed 004 Fig. 7) from the receiver's per-block log:
    `block_delay_<q>_s` and `blocks_missing` (against the sender's count), and every
    block's delay as a series (source "blocks") for its distribution."""
    part = Part()
    text = read_text(info.bundle, traffic.BLOCKS_LOG, part)
    sent = _blocks_sent(info, part)
    if text is None:
        return part
    try:
        d = traffic.parse_blocks(text, sent)
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except KeyError as e:
        why = f"a line has no {e.args[0]!r}"
        part.problems.append(f"{traffic.BLOCKS_LOG}: not the receiver's per-block log ({why})")
        return part
    except (ValueError, TypeError) as e:
        part.problems.append(f"{traffic.BLOCKS_LOG}: not the receiver's per-block log ({e})")
        return part
    part.metrics |= {f"block_delay_{q}_s": getattr(d, f) / 1e3 for q, f in BLOCK_QUANTILES}
    part.metrics["blocks_missing"] = d.missing if sent is not None else None
    part.metrics["blocks"] = {"received": d.n, "sent": sent, "missing": d.missing}
    part.series.append(_blocks_series(rows))
    return part


def _blocks_sent(info: RunInfo, part: Part) -> int | None:
    """The sender's block count from blocks-sent.json, or None (and a problem)."""
    text = read_text(info.bundle, traffic.BLOCKS_SENT, part)
    if text is None:
        return None
    try:
        return int(json.loads(text)["blocks"])
    except (ValueError, KeyError, TypeError) as e:
        part.problems.append(f"{traffic.BLOCKS_SENT}: not the sender's count ({e})")
        return None


def _blocks_series(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    recv = pd.Series([r["recv_ns"] for r in rows], dtype="int64")  # float64 would lose ns
    delay = recv - pd.Series([r["sent_ns"] for r in rows], dtype="int64")
    return pd.DataFrame(
        {
            "time": recv / 1e9,
            "source": "blocks",
            "metric": "block_delay_s",
            "path": None,
            "subflow": None,
            "value": delay / 1e9,
        }
    )


def bulk_part(info: RunInfo, part: Part) -> Part:
    """bulk.json (bytes, sha256 both ends, receiver seconds) into metrics.json `bulk`."""
    text = read_text(info.bundle, "bulk.json", part)
    part.metrics["iperf3_bps"] = None
    if text is None:
        return part
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        part.problems.append(f"bulk.json: not the runner's bulk record ({e})")
        return part
    part.metrics["bulk"] = doc
    return part


def _iperf3_summary(r: iperf3.Iperf3Result) -> dict[str, Any]:
    return {"error": r.error, "sender": r.sender, "sent_bytes": r.sent_bytes,
            "sent_bps": r.sent_bps, "received_bytes": r.received_bytes,
            "received_bps": r.received_bps, "retransmits": r.retransmits,
            "tcp_info_scope": r.tcp_info_scope, "congestion": r.congestion,
            "note": r.note}  # fmt: skip


def _iperf3_series(r: iperf3.Iperf3Result) -> pd.DataFrame:
    import pandas as pd

    iv = r.intervals
    assert r.start_unix is not None
    return pd.DataFrame(
        {
            "time": r.start_unix + iv["end"].astype("float64"),
            "source": "iperf3",
            "metric": "iperf3_bps",
            "path": None,
            "subflow": None,
            "value": iv["bits_per_second"].astype("float64"),
        }
    )


def ss_part(info: RunInfo) -> Part:
    """Per path `srtt_ms` and `cwnd_mean` (and more, in metrics.json) from the sender's
    ss samples, and their per-subflow series."""
    part = Part()
    name = f"ss-{info.sender}.txt"
    text = read_text(info.bundle, name, part)
    if text is None:
        return part
    try:
        frame = ss.parse_ss(text)
    except ParseError as e:
        part.problems.append(str(e.in_file(name)))
        return part
    subflows = ss.per_path(ss.data_subflows(frame), info.client_addrs())
    part.metrics["paths"] = ss.path_summary(subflows)
    if len(subflows):
        part.series.append(_ss_series(subflows))
    return part


def _ss_series(subflows: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    key = (
        subflows["local_addr"] + ":" + subflows["local_port"].astype("string") + "-"
        + subflows["peer_addr"] + ":" + subflows["peer_port"].astype("string")
    )  # fmt: skip
    pieces = [
        pd.DataFrame(
            {
                "time": subflows["time"],
                "source": "ss",
                "metric": metric,
                "path": subflows["path"],
                "subflow": key,
                "value": subflows[metric].astype("float64"),
            }
        ).dropna(subset=["value"])
        for metric in SS_SERIES
    ]
    return pd.concat(pieces, ignore_index=True)


def nstat_part(info: RunInfo) -> Part:
    """MPTcpExt* and TcpExt* deltas per host (`nstat-<host>-before/after.txt`)."""
    part = Part()
    deltas: dict[str, dict[str, int]] = {}
    for host in (info.receiver, info.sender):
        before = _counters(info.bundle, f"nstat-{host}-before.txt", part)
        after = _counters(info.bundle, f"nstat-{host}-after.txt", part)
        if before is None or after is None:
            continue
        try:
            deltas[host] = nstat.select(nstat.delta(before, after))
        except ParseError as e:
            part.problems.append(str(e.in_file(f"nstat-{host}-after.txt")))
    part.metrics["nstat"] = deltas
    return part


def _counters(bundle: Path, name: str, part: Part) -> dict[str, int] | None:
    text = read_text(bundle, name, part)
    if text is None:
        return None
    try:
        return nstat.parse_nstat(text)
    except ParseError as e:
        part.problems.append(str(e.in_file(name)))
        return None
