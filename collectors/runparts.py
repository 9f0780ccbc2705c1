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
    transfer, bulk.json as recorded (and no iperf3 figures)."""
    part = Part()
    if info.tool == "bulk":
        return bulk_part(info, part)
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
            "tcp_info_scope": r.tcp_info_scope, "congestion": r.congestion}  # fmt: skip


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
