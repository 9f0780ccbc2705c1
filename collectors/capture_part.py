"""The capture part of a run's metrics: the receiver's pcap through the capture analyser
(collectors.analyze), reduced to the run's data connection and labelled by path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from collectors import metrics
from collectors.kernelofo import ofo_skbs
from collectors.runinfo import RunInfo
from collectors.runparts import Part
from mprig.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from collectors.analyze import ConnectionAnalysis, TcpFlow

# Wide columns of ConnectionAnalysis.timeseries() -> long-table metric names.
_SERIES = {
    "goodput_bps": "goodput_bps",
    "throughput_bps": "throughput_bps",
    "ooo_bytes_max": "ooo_bytes_max",
    "ooo_packets_max": "ooo_packets_max",
}


def capture_part(info: RunInfo, k_block: int, bin_s: float) -> Part:
    """Capture metrics of the run's data connection, from the receiver's capture: for MPTCP
    the connection-level replay, for plain TCP the same counters of its TCP flows (one
    instrument for both)."""
    from collectors.analyze import analyze_pcap

    part = Part()
    name = f"{info.receiver}.pcap"
    if not (info.bundle / name).is_file():
        if _captured(info):
            part.problems.append(f"{name}: missing")
        return part
    try:
        analysis = analyze_pcap(info.bundle / name, k_block=k_block, bin_s=bin_s)
    except UsageError as e:
        part.problems.append(str(e).replace(str(info.bundle / name), name))
        return part
    part.metrics["warnings"] = [w.replace(str(info.bundle / name), name) for w in analysis.warnings]
    part.metrics["warnings"] += [f"{name}: {w}" for w in analysis.series_notes()]
    part.metrics["partial"] = analysis.partial
    if not info.mptcp:
        part.metrics["warnings"] = [w for w in part.metrics["warnings"] if "no MPTCP" not in w]
        _fill_tcp(part, analysis.tcp_flows, info, name, bin_s)
        return part
    part.metrics["receiver_ooo"] = receiver_ooo(analysis.connections, info)
    conn = data_connection(analysis.connections, info)
    if conn is None:
        part.problems.append(f"{name}: no MPTCP connection carrying data to the {info.receiver}")
        return part
    _fill(part, conn, info)
    return part


def _captured(info: RunInfo) -> bool:
    capture = info.record.get("capture")
    hosts = capture.get("hosts") if isinstance(capture, dict) else None
    return hosts is None or info.receiver in hosts


def data_connection(conns: list[ConnectionAnalysis], info: RunInfo) -> ConnectionAnalysis | None:
    """The connection direction that carried the run's data to the receiver: the one with
    the most payload among those whose receiver end is the client (download) or the
    server (upload); iperf3's control connection and the reverse directions lose."""
    clients = set(info.client_addrs())
    towards = [c for c in conns if _towards_receiver(c, clients, info.receiver)]
    pool = towards or conns
    return max(pool, key=lambda c: sum(s.bytes for s in c.subflows), default=None)


def receiver_ooo(conns: list[ConnectionAnalysis], info: RunInfo) -> dict[str, int]:
    """Out-of-order packets and skbs (collectors.kernelofo) summed over every connection
    towards the receiver, as the receiver's namespace-wide MPTcpExtOFOQueue counts them
    (iperf3's control connection included)."""
    clients = set(info.client_addrs())
    towards = [c for c in conns if _towards_receiver(c, clients, info.receiver)]
    return {
        "ooo_packets": sum(int(c.raw["ooo_packets"]) for c in towards),
        "ooo_skbs": sum(ofo_skbs(c.arrivals) for c in towards),
    }


def _towards_receiver(conn: ConnectionAnalysis, clients: set[str], receiver: str) -> bool:
    if not conn.subflows or not clients:
        return False
    first = conn.subflows[0]
    return (first.dst in clients) == (receiver == "client")


def _fill(part: Part, conn: ConnectionAnalysis, info: RunInfo) -> None:
    summary = conn.summary()
    paths = subflow_paths(conn, info.client_addrs())
    subflows = [{**s, "path": paths.get(s["index"])} for s in summary.pop("subflows")]
    part.metrics |= summary
    part.metrics["connection"] = summary
    part.metrics["subflows"] = subflows
    part.metrics["path_throughput_bps"] = path_throughput(subflows)
    part.metrics["path_wire_bps"] = path_wire(subflows, conn.duration_s)
    part.series.append(long_series(conn, paths))


def path_wire(flows: list[dict[str, Any]], duration_s: float) -> dict[str, float]:
    """Path -> bits/s on the wire (IP length plus the Ethernet header, what a qdisc's rate
    counts) of its subflows or flows over DURATION_S."""
    from collectors.analyze import L2_HEADER

    out: dict[str, float] = {}
    for f in flows:
        wire = f.get("ip_bytes", 0) + L2_HEADER * f.get("packets", 0)
        rate = metrics.rate_bps(wire, duration_s)
        if f.get("path") is not None and rate is not None:
            out[f["path"]] = out.get(f["path"], 0.0) + rate
    return out


TCP_DATA_SHARE = 0.1  # a TCP flow with less than this share of the largest is control traffic


def _fill_tcp(part: Part, flows: list[TcpFlow], info: RunInfo, name: str, bin_s: float) -> None:
    """Plain TCP: the data flows towards the receiver (iperf3's control connection left
    out), counted as an MPTCP subflow is: payload over first to last data segment."""
    clients = info.client_addrs()
    towards = [f for f in flows if ((f.dst in clients) == (info.receiver == "client"))]
    top = max((f.bytes for f in towards), default=0)
    data = [f for f in towards if top and f.bytes >= TCP_DATA_SHARE * top]
    if not data:
        part.problems.append(f"{name}: no TCP data towards the {info.receiver}")
        return
    duration = (max(f.last_ns for f in data) - min(f.first_ns for f in data)) / 1e9
    total = sum(f.bytes for f in data)
    retrans = sum(f.retransmitted_bytes for f in data)
    rows = [{**f.counters(), "name": f.name, "path": clients.get(f.src) or clients.get(f.dst),
             "throughput_bps": metrics.rate_bps(f.bytes, duration)} for f in data]  # fmt: skip
    summary = {
        "protocol": "tcp",
        "packets": sum(f.packets for f in data),
        "bytes": total,
        "duration_s": duration,
        "throughput_bps": metrics.rate_bps(total, duration),
        "goodput_bps": metrics.rate_bps(total - retrans, duration),
        "retransmitted_packets": sum(f.retransmitted_packets for f in data),
    }
    part.metrics |= summary
    part.metrics["connection"] = summary
    part.metrics["subflows"] = rows
    part.metrics["path_throughput_bps"] = path_throughput(rows)
    part.metrics["path_wire_bps"] = path_wire(rows, duration)
    part.series.append(tcp_series(data, [r["path"] for r in rows], bin_s))


def tcp_series(flows: list[TcpFlow], paths: list[str | None], bin_s: float) -> pd.DataFrame:
    """Capture throughput of a plain TCP run per bin, as long rows: the total (no path) and
    per flow (its path and name), bins from the first data segment, widened as an MPTCP
    connection's are (collectors.analyze.MAX_BINS)."""
    import numpy as np
    import pandas as pd

    from collectors.analyze import MAX_BINS

    t0 = min(f.first_ns for f in flows)
    span = (max(f.last_ns for f in flows) - t0) / 1e9
    width = max(bin_s, span / MAX_BINS)
    n = metrics.nbins_for(0.0, span, width)
    arrays = [f.packets_array for f in flows]
    times = [(a["t_ns"] - t0) / 1e9 for a in arrays]
    start = np.arange(n) * width + t0 / 1e9
    lengths = np.concatenate([a["len"] for a in arrays])
    total = metrics.binned_rate_bps(np.concatenate(times), lengths, 0.0, width, n)
    pieces = [_rows(start, None, None, total)]
    for f, path, t, a in zip(flows, paths, times, arrays, strict=True):
        rate = metrics.binned_rate_bps(t, a["len"], 0.0, width, n)
        pieces.append(_rows(start, path, f.name, rate))
    return pd.concat(pieces, ignore_index=True)


def _rows(time: Any, path: str | None, subflow: str | None, value: Any) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({"time": time, "source": "capture", "metric": "throughput_bps",
                         "path": path, "subflow": subflow, "value": value})  # fmt: skip


def subflow_paths(conn: ConnectionAnalysis, client_addrs: dict[str, str]) -> dict[int, str]:
    """Subflow index -> path name (the path whose client address is one end)."""
    out = {}
    for s in conn.subflows:
        path = client_addrs.get(s.src) or client_addrs.get(s.dst)
        if path is not None:
            out[s.index] = path
    return out


def path_throughput(subflows: list[dict[str, Any]]) -> dict[str, float]:
    """Path -> summed throughput of its subflows, bits/s."""
    out: dict[str, float] = {}
    for s in subflows:
        if s.get("path") is not None and s.get("throughput_bps") is not None:
            out[s["path"]] = out.get(s["path"], 0.0) + float(s["throughput_bps"])
    return out


def long_series(conn: ConnectionAnalysis, paths: dict[int, str]) -> pd.DataFrame:
    """ConnectionAnalysis.timeseries() (wide, one row per bin) as long rows."""
    import pandas as pd

    wide = conn.timeseries()
    time = wide["t_s"].astype("float64") + conn.span_ns[0] / 1e9
    names = {s.index: s.name for s in conn.subflows}
    pieces = []
    for column in wide.columns.drop("t_s"):
        metric, _, index = column.partition(".")
        sf = int(index) if index else None
        pieces.append(
            pd.DataFrame(
                {
                    "time": time,
                    "source": "capture",
                    "metric": _SERIES.get(metric, metric),
                    "path": paths.get(sf) if sf is not None else None,
                    "subflow": names.get(sf) if sf is not None else None,
                    "value": wide[column].astype("float64"),
                }
            )
        )
    return pd.concat(pieces, ignore_index=True)
