"""Parse `ss -tinHM` samples into one row per socket per sample.

The sampler writes `# <unix time>` before each `ss -tinHM` run. Each socket is a line
`<netid> <state> <recv-q> <send-q> <local> <peer>` followed by an indented line of
`key:value` fields (`-i`). TCP subflows of an MPTCP connection carry `tcp-ulp-mptcp ...
token:<remote>(id:N)/<local>(id:N)`; the MPTCP socket's own line carries `token:<local>`,
so the local token ties subflows to their connection. Rates are in bits/s (`-n` prints
plain numbers; ss's human `1.2Mbps` form is accepted too), times in milliseconds, MPTCP
sequence numbers and tokens are hexadecimal in ss and integers here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from collectors.textparse import ParseError

if TYPE_CHECKING:
    import pandas as pd

# Column -> pandas dtype of the parsed table, in order.
COLUMNS: dict[str, str] = {
    "time": "float64",  # unix seconds of the sample
    "netid": "string",  # tcp (a subflow or plain TCP) or mptcp (the connection socket)
    "state": "string",  # ESTAB, SYN-SENT, ...
    "local_addr": "string",  # IPv4-mapped IPv6 shown as IPv4; scope (%if) dropped
    "local_port": "Int64",
    "peer_addr": "string",
    "peer_port": "Int64",
    "token": "UInt64",  # local MPTCP token: joins subflows (tcp) to their connection (mptcp)
    "cc": "string",  # congestion control (tcp)
    "cwnd": "Int64",  # segments
    "ssthresh": "Int64",  # segments; absent while in initial slow start
    "srtt_ms": "float64",
    "rttvar_ms": "float64",
    "minrtt_ms": "float64",
    "mss": "Int64",
    "delivery_rate_bps": "float64",
    "pacing_rate_bps": "float64",
    "bytes_sent": "Int64",
    "bytes_acked": "Int64",
    "bytes_received": "Int64",
    "bytes_retrans": "Int64",
    "retrans": "Int64",  # total retransmitted segments (the N in retrans:cur/N)
    "lost": "Int64",
    "unacked": "Int64",
    "send_q": "Int64",  # bytes queued or in flight on the socket (the Send-Q column)
    "notsent": "Int64",  # bytes written to the socket and not yet sent (`notsent:`)
    "mptcp_flags": "string",  # subflow flags: M(P_CAPABLE) J(OIN) B(ackup) e(stab) c(onn) v
    "subflows": "Int64",  # mptcp: additional subflows (ss counts joins, not the first)
    "write_seq": "UInt64",  # mptcp: next data sequence number to write
    "snd_una": "UInt64",  # mptcp: oldest unacknowledged data sequence number
    "rcv_nxt": "UInt64",  # mptcp: next data sequence number expected
    # the kernel's chronographs (tcpi_busy_time, _rwnd_limited, _sndbuf_limited), ms since
    # the socket began: busy is all the time with data queued or in flight, the two limits
    # are parts of it; ss prints a limit only when it is not 0 (here 0 beside a busy)
    "busy_ms": "Int64",
    "rwnd_limited_ms": "Int64",
    "sndbuf_limited_ms": "Int64",
}

# The runs.parquet columns `<m>.<path>` from the sender's samples (collectors/collect.py).
PATH_COLUMNS: tuple[str, ...] = ("srtt_ms", "cwnd_mean", "idle_share", "notsent_mean")
PATH_COLUMNS += ("rwnd_limited_share", "sndbuf_limited_share")

_INT_FIELDS = {"cwnd", "ssthresh", "mss", "bytes_sent", "bytes_acked", "bytes_received"}
_INT_FIELDS |= {"bytes_retrans", "lost", "unacked", "subflows", "notsent"}
_HEX_FIELDS = {"write_seq", "snd_una", "rcv_nxt"}
_SOCKET = ["local_port", "peer_addr", "peer_port"]  # one of the sender's sockets, in a path
_CHRONO_FIELDS = ("busy", "rwnd_limited", "sndbuf_limited")  # `busy:1660ms`, `x:12ms(0.7%)`
_RATE_FIELDS = {"delivery_rate": "delivery_rate_bps", "pacing_rate": "pacing_rate_bps"}
_STATES = {"ESTAB", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2", "TIME-WAIT", "CLOSE"}
_STATES |= {"CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING", "UNCONN", "UNKNOWN"}
_RATE = re.compile(r"^([0-9.]+(?:e[+-]?\d+)?)([KMG]?)bps$")
_SUBFLOW_TOKEN = re.compile(r"^[0-9a-f]+\(id:\d+\)/([0-9a-f]+)\(id:\d+\)$")
_MULT = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


@dataclass
class _Socket:
    time: float
    head: dict[str, object]
    info: dict[str, object] = field(default_factory=dict)


def parse_ss(text: str) -> pd.DataFrame:
    """Parse sampler output (`# time` headers, `ss -tinHM` bodies) into a table (COLUMNS)."""
    import pandas as pd

    rows = [s.head | s.info | {"time": s.time} for s in _sockets(text)]
    # Column by column with its dtype: 64-bit sequence numbers must never pass through float.
    return pd.DataFrame(
        {c: pd.array([r.get(c) for r in rows], dtype=t) for c, t in COLUMNS.items()}  # type: ignore[call-overload]
    )


# What bash prints for a child the stop signal killed ("Terminated", "Killed"): the
# runner stops the sampler with SIGTERM to its process group, and when `ss` dies before the
# sampler's bash does, bash reports it on the output the artifact holds. Usually the last
# line (a CI run's ss-server.txt); in 3 of 75 runs of a VM campaign bash outlived the signal
# by seconds and went on sampling, so the report can come between samples.
_STOPPED = ("Terminated", "Killed")


def _sockets(text: str) -> list[_Socket]:
    out: list[_Socket] = []
    now: float | None = None
    sample_start = 0  # index in out of the current sample's first socket
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.startswith("#"):
            now, sample_start = _sample_time(line, lineno), len(out)
        elif line.strip() in _STOPPED:
            del out[sample_start:]  # the sample its `ss` was printing may be cut short
        elif line[0] in " \t":
            if not out or out[-1].info:
                raise ParseError(lineno, "an ss info line without a socket line before it")
            out[-1].info = _info(line, lineno)
        elif now is None:
            raise ParseError(lineno, "socket line before the first '# <unix time>' header")
        else:
            out.append(_Socket(now, _head(line, lineno)))
    return out


def _sample_time(line: str, lineno: int) -> float:
    try:
        return float(line[1:].strip())
    except ValueError:
        raise ParseError(lineno, f"sample header is not '# <unix time>': {line!r}") from None


def _head(line: str, lineno: int) -> dict[str, object]:
    tok = line.split()
    if tok and tok[0] in _STATES:  # only one socket kind asked for: no netid column
        tok.insert(0, "tcp")
    if len(tok) < 6 or tok[1] not in _STATES:
        raise ParseError(lineno, f"not an ss socket line (netid state q q local peer): {line!r}")
    local_addr, local_port = _endpoint(tok[4], lineno)
    peer_addr, peer_port = _endpoint(tok[5], lineno)
    send_q = int(tok[3]) if tok[3].isdigit() else None
    return {"netid": tok[0], "state": tok[1], "local_addr": local_addr, "send_q": send_q,
            "local_port": local_port, "peer_addr": peer_addr, "peer_port": peer_port}  # fmt: skip


def _endpoint(text: str, lineno: int) -> tuple[str, int | None]:
    addr, sep, port = text.rpartition(":")
    if not sep:
        raise ParseError(lineno, f"address without a port: {text!r}")
    addr = addr.split("%")[0].strip("[]")  # `[v6]%dev`: the scope follows the bracket
    if addr.startswith("::ffff:") and "." in addr:
        addr = addr[len("::ffff:") :]
    return addr, int(port) if port.isdigit() else None


def _info(line: str, lineno: int) -> dict[str, object]:
    tok = line.split()
    out: dict[str, object] = {}
    if tok and ":" not in tok[0] and not tok[0].endswith("bps"):
        out["cc"] = tok[0]
    for i, t in enumerate(tok):
        key, sep, value = t.partition(":")
        if sep:
            _field(out, key, value, lineno)
        elif key in _RATE_FIELDS and i + 1 < len(tok):
            out[_RATE_FIELDS[key]] = _rate(tok[i + 1], lineno)
    return out


def _field(out: dict[str, object], key: str, value: str, lineno: int) -> None:
    try:
        if key in _INT_FIELDS:
            out[key] = int(value)
        elif key in _HEX_FIELDS:
            out[key] = int(value, 16)
        elif key in ("rtt", "minrtt"):
            _rtt(out, key, value)
        elif key == "retrans":
            out["retrans"] = int(value.partition("/")[2] or value)
        elif key == "token":
            _token(out, value)
        elif key == "flags":
            out["mptcp_flags"] = value
        elif key in _CHRONO_FIELDS:
            out[f"{key}_ms"] = int(value.partition("ms")[0])
            if key == "busy":
                out.setdefault("rwnd_limited_ms", 0)
                out.setdefault("sndbuf_limited_ms", 0)
    except ValueError:
        raise ParseError(lineno, f"bad ss field {key}:{value}") from None


def _rtt(out: dict[str, object], key: str, value: str) -> None:
    if key == "minrtt":
        out["minrtt_ms"] = float(value)
        return
    srtt, _, rttvar = value.partition("/")
    out["srtt_ms"] = float(srtt)
    out["rttvar_ms"] = float(rttvar) if rttvar else None


def _token(out: dict[str, object], value: str) -> None:
    m = _SUBFLOW_TOKEN.match(value)
    out["token"] = int(m.group(1) if m else value, 16)


def _rate(text: str, lineno: int) -> float:
    m = _RATE.match(text)
    if not m:
        raise ParseError(lineno, f"bad ss rate {text!r} (expected e.g. 29894192bps)")
    return float(m.group(1)) * _MULT[m.group(2)]


def data_subflows(frame: pd.DataFrame) -> pd.DataFrame:
    """The TCP rows of the connection that moved the most data (iperf3's control connection
    and other sockets are dropped). A plain TCP run has no token: its largest socket wins."""
    tcp = frame[frame["netid"] == "tcp"].copy()
    if tcp.empty:
        return tcp
    key = tcp["token"].astype("string").fillna(
        tcp["local_addr"] + ":" + tcp["local_port"].astype("string") + "-"
        + tcp["peer_addr"] + ":" + tcp["peer_port"].astype("string")
    )  # fmt: skip
    sock = tcp["local_addr"] + ":" + tcp["local_port"].astype("string") + "-" + tcp["peer_addr"]
    sock = sock + ":" + tcp["peer_port"].astype("string")
    moved = tcp["bytes_acked"].fillna(0) + tcp["bytes_received"].fillna(0)
    per_socket = moved.groupby([key, sock]).max()
    best = per_socket.groupby(level=0).sum().idxmax()
    return tcp[key == best]


def per_path(subflows: pd.DataFrame, client_addrs: dict[str, str]) -> pd.DataFrame:
    """Label each subflow row with its path: the path whose client address is one end.

    Args:
        client_addrs: client address -> path name (from run.json `links`).
    """
    out = subflows.copy()
    local = out["local_addr"].map(client_addrs)
    out["path"] = local.fillna(out["peer_addr"].map(client_addrs)).astype("string")
    return out


def path_summary(subflows: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    """Per path: mean smoothed RTT (ms) and mean cwnd (segments) over the samples, and
    more (docs/metrics.md, `ss_paths`)."""
    out: dict[str, dict[str, float | None]] = {}
    for path, rows in subflows.dropna(subset=["path"]).groupby("path"):
        out[str(path)] = {
            "srtt_ms": _mean(rows["srtt_ms"]),
            "cwnd_mean": _mean(rows["cwnd"]),
            "ssthresh_min": _mean(rows["ssthresh"].min()),
            "delivery_rate_bps_mean": _mean(rows["delivery_rate_bps"]),
            "retrans": _mean(rows["retrans"].max()),
            "acked_bps": acked_bps(rows),
            "samples": float(len(rows)),
            **_queue(rows),
            **_limited(rows),
        }
    return out


def _limited(rows: pd.DataFrame) -> dict[str, float | None]:
    """`rwnd_limited_share` and `sndbuf_limited_share`: the share of a path's busy time (the
    kernel's, summed over its sockets at their last sample) in which it was limited by the
    peer's receive window, or had sent all it was given with the writer blocked on a full
    send buffer (for an MPTCP subflow, the connection's). None where ss printed no busy time."""
    last = rows.dropna(subset=["busy_ms"]).groupby(_SOCKET)
    busy = float(last["busy_ms"].max().sum())
    if not busy:
        return {"rwnd_limited_share": None, "sndbuf_limited_share": None}
    return {
        f"{k}_share": float(last[f"{k}_ms"].max().sum()) / busy
        for k in ("rwnd_limited", "sndbuf_limited")
    }


def _queue(rows: pd.DataFrame) -> dict[str, float | None]:
    """How a path's subflow was fed, over the samples after it first carried data:
    `notsent_mean` (bytes the connection had handed it and it had not sent yet) and
    `idle_share` (share of samples with nothing queued or in flight, Send-Q 0). A bulk
    sender whose fast subflow idles while a slow one holds a backlog is blocked at the
    connection level: the shared window is held by data behind the slow path."""
    fed = rows[rows["bytes_acked"].fillna(0) > 0]
    idle = fed["send_q"].dropna()
    return {
        "notsent_mean": _mean(fed["notsent"].fillna(0)) if len(fed) else None,
        "idle_share": _mean((idle == 0).astype("float64")) if len(idle) else None,
    }


def acked_bps(rows: pd.DataFrame) -> float | None:
    """Sender-side throughput: bytes newly acknowledged between a socket's first and last
    sample, bits/s, summed over the sockets in `rows`; None with fewer than two samples."""
    total, seen = 0.0, False
    for _, sock in rows.dropna(subset=["bytes_acked"]).groupby(_SOCKET):
        span = float(sock["time"].max() - sock["time"].min())
        if span > 0:
            acked = int(sock["bytes_acked"].max()) - int(sock["bytes_acked"].min())
            total, seen = total + acked * 8 / span, True
    return total if seen else None


def _mean(values: object) -> float | None:
    """Mean of a Series, or a scalar, as a float; None for no value (NaN, NA)."""
    import pandas as pd

    if isinstance(values, pd.Series):
        values = values.astype("float64").mean()
    try:
        value = float(values)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if value != value else value
