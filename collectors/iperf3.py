"""Parse iperf3 `--json` output (client or server) into a result record.

iperf3 3.12 has no `--mptcp`; mprig runs it under `mptcpize`, which iperf3 cannot see. With
MPTCP, the TCP_INFO figures iperf3 reports (retransmits, snd_cwnd, rtt) come from
getsockopt(TCP_INFO) on the MPTCP socket, which the kernel answers for the first subflow
only (net/mptcp/sockopt.c, mptcp_getsockopt_first_sf_only): `tcp_info_scope` says so, and
per-subflow figures come from ss instead. Throughput figures are unaffected.

The receiver-side rate: the client's `end.sum_received` is always the receiving end's own
count (in normal mode the server sends it back; with -R the client is the receiver). The
server's own JSON has `sum_received.bytes == 0` when it was the sender.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from collectors.textparse import ParseError

if TYPE_CHECKING:
    import pandas as pd

INTERVAL_COLUMNS: dict[str, str] = {
    "start": "float64",  # seconds since the test start
    "end": "float64",
    "bytes": "Int64",  # bytes moved in the interval, all streams
    "bits_per_second": "float64",
    "retransmits": "Int64",  # sender only; see tcp_info_scope
    "omitted": "boolean",  # inside iperf3 -O (warm-up, excluded from end sums)
}


@dataclass(frozen=True)
class Iperf3Result:
    """One end's iperf3 --json output."""

    role: str  # "client" or "server"
    error: str | None  # iperf3's own error text ("unable to connect ...", "interrupt ...")
    reverse: bool  # -R: the server sent
    sender: bool  # this end sent the data
    protocol: str | None  # TCP or UDP
    num_streams: int | None
    duration_s: float | None  # -t as asked
    start_unix: float | None  # test start time (whole seconds, from iperf3)
    sent_bytes: int | None  # end.sum_sent
    sent_bps: float | None
    received_bytes: int | None  # end.sum_received (0 on a sending server)
    received_bps: float | None
    retransmits: int | None  # end.sum_sent.retransmits
    congestion: str | None  # sender_tcp_congestion or receiver_tcp_congestion
    tcp_info_scope: str  # "connection" (TCP) or "first_subflow" (MPTCP through mptcpize)
    intervals: pd.DataFrame  # INTERVAL_COLUMNS, one row per reporting interval (sums)
    # what was left out to read the file, which held more than its JSON document (iperf3
    # stopped while or after writing writes another); None: one whole document
    note: str | None = None

    @property
    def complete(self) -> bool:
        """No error and an end summary with data."""
        return self.error is None and self.received_bytes is not None


def parse_iperf3(text: str, *, mptcp: bool = False) -> Iperf3Result:
    """Parse iperf3 --json output: its one document, or the first whole one of several
    (`note` says which). `mptcp`: iperf3 ran under mptcpize."""
    doc, note = _load(text)
    start, end = doc.get("start") or {}, doc.get("end") or {}
    test = start.get("test_start") or {}
    sent, received = end.get("sum_sent") or end.get("sum") or {}, end.get("sum_received") or {}
    role = "server" if "accepted_connection" in start else "client"
    reverse = bool(test.get("reverse", 0))
    return Iperf3Result(
        role=role,
        error=doc.get("error"),
        reverse=reverse,
        sender=(role == "server") == reverse,
        protocol=test.get("protocol"),
        num_streams=test.get("num_streams"),
        duration_s=_float(test.get("duration")),
        start_unix=_float((start.get("timestamp") or {}).get("timesecs")),
        sent_bytes=sent.get("bytes"),
        sent_bps=_float(sent.get("bits_per_second")),
        received_bytes=received.get("bytes"),
        received_bps=_float(received.get("bits_per_second")),
        retransmits=sent.get("retransmits"),
        congestion=end.get("sender_tcp_congestion") or end.get("receiver_tcp_congestion"),
        tcp_info_scope="first_subflow" if mptcp else "connection",
        intervals=_intervals(doc.get("intervals") or []),
        note=note,
    )


def _load(text: str) -> tuple[dict[str, Any], str | None]:
    """The document and, when the text holds more than it, what was left out."""
    if not text.strip():
        why = "iperf3 did not run, or was stopped before it wrote its JSON"
        raise ParseError(None, f"empty iperf3 output ({why})")
    try:
        return _checked(json.loads(text)), None
    except json.JSONDecodeError as e:
        if (found := _first_whole(text)) is None:
            raise ParseError(e.lineno, f"not iperf3 JSON: {e.msg} (column {e.colno})") from None
    doc, start, end = found
    return _checked(doc), _left_out(text, start, end)


def _checked(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict) or not {"start", "intervals", "end"} & doc.keys():
        raise ParseError(None, "JSON without iperf3's start/intervals/end keys")
    return doc


# iperf3 starts its document with "start", an object (inner objects have a number there);
# a TERM while iperf3 writes cuts the document off, even mid-line, where the interrupt one
# begins
DOCUMENT_START = re.compile(r'\{\s*"start"\s*:\s*\{')


def _first_whole(text: str) -> tuple[Any, int, int] | None:
    """The first iperf3 document in text that reads whole, and its span."""
    decoder = json.JSONDecoder()
    for m in DOCUMENT_START.finditer(text):
        try:
            doc, end = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        return doc, m.start(), end
    return None


def _left_out(text: str, start: int, end: int) -> str:
    """What reading the document at text[start:end] leaves out, as line ranges."""

    def line(i: int) -> int:
        return text.count("\n", 0, i) + 1

    spans = [f"1-{line(start - 1)}"] if text[:start].strip() else []
    if rest := text[end:].strip():
        spans.append(f"{line(text.index(rest, end))}-{line(len(text.rstrip()))}")
    return (
        f"read the whole JSON document at lines {line(start)}-{line(end)}; left out lines"
        f" {' and '.join(spans)} (iperf3 writes more when it is stopped while or after writing)"
    )


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _intervals(items: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    sums = [i.get("sum") or {} for i in items]
    return pd.DataFrame(
        {
            c: pd.array([s.get(c) for s in sums], dtype=t)  # type: ignore[call-overload]
            for c, t in INTERVAL_COLUMNS.items()
        }
    )


def receiver_bps(client: Iperf3Result | None, server: Iperf3Result | None) -> float | None:
    """iperf3's receiver-side throughput (bits/s) from whichever end has it."""
    if client is not None and client.received_bytes:
        return client.received_bps
    if server is not None and not server.sender and server.received_bytes:
        return server.received_bps
    return None
