"""Capture analysis: one pass of the compiled core over a pcap/pcapng file, then the
metrics of every MPTCP connection per data direction (the receiver's view).

    result = analyze_pcap("client.pcap", k_block=100, bin_s=0.1)
    for conn in result.connections:
        print(conn.summary()["ooo_ratio"], conn.timeseries().head())
"""

from __future__ import annotations

import builtins
import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from collectors import metrics
from collectors.reorder import rfc4737, rfc5236
from mprig.errors import ToolMissing, UsageError

if TYPE_CHECKING:
    import pandas as pd

# One non-duplicate chunk of data reaching the connection level (see collectors/_core.c).
ARRIVAL_DTYPE = np.dtype(
    [
        ("t_ns", "<i8"),  # capture time, ns since the epoch
        ("dsn", "<u8"),  # relative data sequence number of the first byte
        ("dlv_bytes", "<u8"),  # cumulative in-order bytes delivered after the arrival
        ("ooo_bytes", "<u8"),  # out-of-order queue occupancy after the arrival, bytes
        ("len", "<u4"),  # bytes in the chunk
        ("dlv_pkts", "<u4"),  # cumulative in-order packets delivered after the arrival
        ("ooo_pkts", "<u4"),  # out-of-order queue occupancy after the arrival, packets
        ("sf", "<u2"),  # connection-local subflow index
        ("flags", "<u2"),  # 1: stored out of order
    ]
)
# One TCP segment with payload in the data direction, retransmissions included.
PACKET_DTYPE = np.dtype([("t_ns", "<i8"), ("len", "<u4"), ("sf", "<u2"), ("flags", "<u2")])
F64 = npt.NDArray[np.float64]
NS = 1e9
MAX_BINS = 100_000  # rows of timeseries() at most (see ConnectionAnalysis.series_bin_s)
# Blocks ending in the connection's first second are slow start, not the steady state that
# goodput_k_p5_bps describes (docs/metrics.md).
KBLOCK_WARMUP_S = 1.0
MAX_K = 1_000_000  # --k: packets per block (as the CLI's bound, mprig/cli/argtypes.py)
MIN_BIN_S, MAX_BIN_S = 0.001, 3600.0  # --bin: a millisecond to an hour (as the CLI's)


def _endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


@dataclass(frozen=True)
class Subflow:
    """Counters of one subflow for data sent in the connection's data direction."""

    index: int  # position in the connection, in order of appearance
    src: str  # data sender address
    dst: str  # data receiver address
    sport: int  # sender port
    dport: int  # receiver port
    join: bool  # started with MP_JOIN (False: the initial MP_CAPABLE subflow)
    backup: bool  # backup flag from MP_JOIN or MP_PRIO
    packets: int  # TCP segments with payload, retransmissions included
    bytes: int  # payload bytes of those segments
    retransmitted_packets: int  # segments starting below the highest byte seen before
    ooo_packets: int  # segments whose data went into the out-of-order queue
    duplicate_packets: int  # segments whose mapped data was all delivered or queued already
    reinjected_bytes: int  # bytes first received on another subflow
    unmapped_bytes: int  # bytes no DSS mapping ever covered
    ip_bytes: int = 0  # IP length of those segments: payload plus IP and TCP headers

    @property
    def name(self) -> str:
        """`src:port->dst:port` of the data direction."""
        return f"{_endpoint(self.src, self.sport)}->{_endpoint(self.dst, self.dport)}"


@dataclass
class ConnectionAnalysis:
    """One MPTCP connection in one data direction, seen by the receiver."""

    raw: dict[str, Any]  # counters from the compiled core
    file_flags: dict[str, bool]  # capture-wide flags (truncated options, backwards time)
    k_block: int = 100  # K of the receive-buffer-per-K-packets metric
    bin_s: float = 0.1  # width of the goodput/throughput bins, seconds
    subflows: list[Subflow] = field(init=False)

    def __post_init__(self) -> None:
        names = {f.name for f in Subflow.__dataclass_fields__.values()}
        self.subflows = [
            Subflow(**{k: v for k, v in s.items() if k in names}) for s in self.raw["subflows"]
        ]

    @cached_property
    def arrivals(self) -> npt.NDArray[np.void]:
        """Connection-level arrivals (ARRIVAL_DTYPE), in arrival order."""
        return np.frombuffer(self.raw["arrivals"], dtype=ARRIVAL_DTYPE)

    @cached_property
    def packets(self) -> npt.NDArray[np.void]:
        """Data segments of every subflow (PACKET_DTYPE), in capture order."""
        return np.frombuffer(self.raw["data_packets"], dtype=PACKET_DTYPE)

    @property
    def label(self) -> str:
        """The initial subflow's data direction, e.g. `10.0.0.1:5201->10.0.1.2:40000`."""
        return self.subflows[0].name if self.subflows else f"connection {self.raw['connection']}"

    @cached_property
    def span_ns(self) -> tuple[int, int]:
        """First and last data segment times of the direction."""
        t = self.packets["t_ns"]
        return (int(t[0]), int(t[-1])) if len(t) else (0, 0)

    @property
    def duration_s(self) -> float:
        """Data transfer duration: first to last data segment, seconds."""
        return (self.span_ns[1] - self.span_ns[0]) / NS

    def _times(self, t_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return np.asarray((t_ns - self.span_ns[0]) / NS, dtype=np.float64)

    def subflow_throughput_bps(self) -> dict[str, float | None]:
        """Payload bits per second per subflow name, over the connection's duration."""
        return {s.name: metrics.rate_bps(s.bytes, self.duration_s) for s in self.subflows}

    def link_utilisation(self, rates_bps: dict[str, float]) -> dict[str, float | None]:
        """Throughput over configured rate per address in rates_bps, summing the subflows
        that have the address at either end (they share that path)."""
        nbytes: dict[str, int] = {}
        for s in self.subflows:
            for addr in {s.src, s.dst} & rates_bps.keys():
                nbytes[addr] = nbytes.get(addr, 0) + s.bytes
        by_addr = {a: metrics.rate_bps(b, self.duration_s) for a, b in nbytes.items()}
        return metrics.link_utilisation(by_addr, rates_bps)

    def flags(self) -> dict[str, bool]:
        """Conditions that make the numbers less trustworthy."""
        return {
            "missing_handshake": bool(self.raw["missing_handshake"]),
            "fallback": bool(self.raw["fallback"]),
            "checksum": bool(self.raw["checksum"]),
            **self.file_flags,
        }

    def _reordering(self) -> dict[str, Any]:
        a = self.arrivals
        r47 = rfc4737(a["dsn"], a["len"])
        r52 = rfc5236(a["dsn"])
        return {
            "rfc4737_reordered_ratio": r47.reordered_ratio,
            "rfc4737_extent_mean": r47.extent_mean,
            "rfc4737_extent_max": r47.extent_max,
            "rfc4737_n_reordering": {str(k): v for k, v in r47.n_reordering.items()},
            "rfc5236_reorder_density": {str(k): v for k, v in r52.reorder_density.items()},
            "rfc5236_buffer_occupancy_density": {
                str(k): v for k, v in r52.buffer_occupancy_density.items()
            },
        }

    @cached_property
    def _kblock_arrays(self) -> tuple[F64, npt.NDArray[np.uint64], F64]:
        """Per block of k_block contiguous packets (paper 001's measure): completion time (s
        from the first packet), receive buffer needed (bytes), goodput since the previous
        block (bit/s)."""
        a = self.arrivals
        ends, need = metrics.k_blocks(
            a["dlv_pkts"].astype(np.uint64), a["dlv_bytes"], a["ooo_bytes"], self.k_block
        )
        t = self._times(a["t_ns"])
        goodput = metrics.block_goodput_bps(t, a["dlv_bytes"], ends, 0.0)
        return t[ends.astype(np.int64)], need, goodput

    def rcvbuf_k(self) -> npt.NDArray[np.uint64]:
        """Receive buffer needed per block of k_block contiguous packets, bytes."""
        return self._kblock_arrays[1]

    def kblocks(self) -> pd.DataFrame:
        """One row per completed block of k_block contiguous packets: completion time,
        receive buffer needed, goodput since the previous block."""
        import pandas as pd

        t_end, need, goodput = self._kblock_arrays
        return pd.DataFrame({"t_s": t_end, "rcvbuf_bytes": need, "goodput_bps": goodput})

    def _occupancy_mean(self) -> float:
        a = self.arrivals
        return metrics.time_weighted_mean(
            self._times(a["t_ns"]), a["ooo_bytes"], self._times(np.array([self.span_ns[1]]))[0]
        )

    def _counts(self) -> dict[str, Any]:
        r, sfs = self.raw, self.subflows
        nondup = len(self.arrivals)
        return {
            "packets": sum(s.packets for s in sfs),
            "bytes": sum(s.bytes for s in sfs),
            "delivered_bytes": int(r["delivered_bytes"]),
            "ooo_packets": int(r["ooo_packets"]),
            "ooo_arrivals": int(r["ooo_arrivals"]),
            "ooo_ratio": metrics.ratio(int(r["ooo_packets"]), nondup),
            "ooo_max_bytes": int(r["ooo_max_bytes"]),
            "ooo_max_packets": int(r["ooo_max_packets"]),
            "retransmitted_packets": sum(s.retransmitted_packets for s in sfs),
            "reinjected_bytes": int(r["reinjected_bytes"]),
            "duplicate_packets": int(r["duplicate_packets"]),
            "unmapped_bytes": sum(s.unmapped_bytes for s in sfs),
        }

    def _subflow_rows(self) -> list[dict[str, Any]]:
        tp = self.subflow_throughput_bps()
        return [{"name": s.name, **s.__dict__, "throughput_bps": tp[s.name]} for s in self.subflows]

    def summary(self) -> dict[str, Any]:
        """Every scalar metric of the connection direction, JSON-ready (docs/metrics.md)."""
        counts = self._counts()
        rcvbuf = self.rcvbuf_k()
        return {
            "connection": self.label,
            "version": int(self.raw["version"]),
            "token_receiver": f"{int(self.raw['token_receiver']):08x}",
            "subflows": self._subflow_rows(),
            **counts,
            "ooo_mean_bytes": self._occupancy_mean(),
            "duration_s": self.duration_s,
            "goodput_bps": metrics.rate_bps(counts["delivered_bytes"], self.duration_s),
            "throughput_bps": metrics.rate_bps(counts["bytes"], self.duration_s),
            "k_block": self.k_block,
            "rcvbuf_k_max_bytes": int(rcvbuf.max()) if len(rcvbuf) else None,
            "rcvbuf_k_blocks": len(rcvbuf),
            "goodput_k_p5_bps": metrics.block_goodput_low_bps(
                self._kblock_arrays[0], self._kblock_arrays[2], KBLOCK_WARMUP_S, 0.05
            ),
            **self._reordering(),
            "mptcp_options": {
                k: int(self.raw[k])
                for k in (
                    "mappings",
                    "data_fin",
                    "add_addr",
                    "remove_addr",
                    "mp_prio",
                    "mp_fail",
                    "mp_fastclose",
                    "mp_tcprst",
                )
            },
            "flags": self.flags(),
        }

    @property
    def series_bin_s(self) -> float:
        """The bin width of timeseries(): bin_s, widened so that no series has more than
        MAX_BINS rows (a capture whose clock jumps would otherwise ask for billions)."""
        return max(self.bin_s, self.duration_s / MAX_BINS)

    def timeseries(self) -> pd.DataFrame:
        """Per bin of series_bin_s seconds from the first data segment: goodput, throughput
        (all and per subflow, bits/s) and the largest out-of-order occupancy in the bin."""
        import pandas as pd

        a, p = self.arrivals, self.packets
        ta, tp = self._times(a["t_ns"]), self._times(p["t_ns"])
        bin_s = self.series_bin_s
        n = metrics.nbins_for(0.0, self.duration_s, bin_s)
        delivered = np.diff(a["dlv_bytes"], prepend=np.uint64(0))
        cols: dict[str, Any] = {
            "t_s": np.arange(n) * bin_s,
            "goodput_bps": metrics.binned_rate_bps(ta, delivered, 0.0, bin_s, n),
            "throughput_bps": metrics.binned_rate_bps(tp, p["len"], 0.0, bin_s, n),
        }
        for s in self.subflows:
            m = p["sf"] == s.index
            cols[f"throughput_bps.{s.index}"] = metrics.binned_rate_bps(
                tp[m], p["len"][m], 0.0, bin_s, n
            )
        cols["ooo_bytes_max"] = metrics.binned_level_max(ta, a["ooo_bytes"], 0.0, bin_s, n)
        cols["ooo_packets_max"] = metrics.binned_level_max(ta, a["ooo_pkts"], 0.0, bin_s, n)
        return pd.DataFrame(cols)

    def occupancy(self) -> pd.DataFrame:
        """Every connection-level arrival: time, DSN, size, subflow, queue occupancy after."""
        import pandas as pd

        a = self.arrivals
        return pd.DataFrame(
            {
                "t_s": self._times(a["t_ns"]),
                "dsn": a["dsn"],
                "len": a["len"],
                "subflow": a["sf"],
                "out_of_order": (a["flags"] & 1).astype(bool),
                "ooo_bytes": a["ooo_bytes"],
                "ooo_packets": a["ooo_pkts"],
                "delivered_bytes": a["dlv_bytes"],
            }
        )


L2_HEADER = 14  # Ethernet header: what a qdisc on a veth or Ethernet link counts beyond IP


@dataclass(frozen=True)
class TcpFlow:
    """One direction with payload of a TCP flow outside any MPTCP connection (plain TCP),
    counted by the same replay as an MPTCP subflow."""

    src: str  # data sender address
    dst: str  # data receiver address
    sport: int  # sender port
    dport: int  # receiver port
    packets: int  # segments with payload, retransmissions included
    bytes: int  # their payload bytes
    ip_bytes: int  # their IP length (payload plus IP and TCP headers)
    retransmitted_packets: int  # segments starting below the highest byte seen before
    retransmitted_bytes: int  # their payload bytes
    first_ns: int  # first data segment
    last_ns: int  # last data segment
    data_packets: builtins.bytes = field(default=b"", repr=False)  # PACKET_DTYPE records

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> TcpFlow:
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})

    @property
    def packets_array(self) -> npt.NDArray[np.void]:
        """Data segments (PACKET_DTYPE), in capture order."""
        return np.frombuffer(self.data_packets, dtype=PACKET_DTYPE)

    def counters(self) -> dict[str, Any]:
        """The flow's counters, JSON-ready (without the packet records)."""
        return {k: v for k, v in self.__dict__.items() if k != "data_packets"}

    @property
    def name(self) -> str:
        return f"{_endpoint(self.src, self.sport)}->{_endpoint(self.dst, self.dport)}"


@dataclass
class CaptureAnalysis:
    """Every MPTCP connection direction of one capture file."""

    path: str  # the capture analysed
    connections: list[ConnectionAnalysis]  # one per (connection, data direction) with data
    warnings: list[str]  # messages naming the file and packet index / byte offset
    partial: bool  # the file ended early or is corrupt past some point
    counters: dict[str, int]  # file-level packet counts (packets, tcp_packets, ...)
    tcp_flows: list[TcpFlow] = field(default_factory=list)  # plain TCP directions with data

    def series_notes(self) -> list[str]:
        """What the time series of each connection could not show at the asked bin width."""
        return [
            f"{c.label}: series bins widened from {c.bin_s:g} s to {c.series_bin_s:.3g} s: "
            f"the data spans {c.duration_s:.0f} s (at most {MAX_BINS} bins)"
            for c in self.connections
            if c.series_bin_s > c.bin_s
        ]


def _warning(path: str, index: int, offset: int, message: str) -> str:
    return f"{path}: packet {index} (offset {offset}): {message}"


def _file_flags(raw: dict[str, Any]) -> dict[str, bool]:
    return {
        "capture_truncated": bool(raw["truncated_options"] or raw["truncated_headers"]),
        "timestamps_backwards": bool(raw["timestamps_backwards"]),
        "timestamp_jumps": bool(raw["timestamp_jumps"]),
        "timestamp_outliers": bool(raw["timestamp_outliers"]),
        "partial": bool(raw["partial"]),
    }


def _run_core(path: str) -> dict[str, Any]:
    try:
        from collectors import _core
    except ImportError as e:
        raise ToolMissing(
            "the compiled capture core collectors/_core is not built: run `make setup` "
            "(pip install -e . compiles collectors/_core.c; needs gcc and python3-dev)"
        ) from e

    try:
        raw: dict[str, Any] = _core.analyze(path)
    except OSError as e:
        raise UsageError(f"{path}: cannot read the capture: {e.strerror or e}") from e
    except ValueError as e:
        raise UsageError(f"{path}: {e}") from e
    return raw


def check_options(k_block: int, bin_s: float) -> None:
    """UsageError unless --k is an integer in [1, MAX_K] and --bin a finite number of seconds
    in [MIN_BIN_S, MAX_BIN_S] (the CLI may check more strictly; both checks apply)."""
    if isinstance(k_block, bool) or not isinstance(k_block, int | np.integer):
        raise UsageError(f"--k must be a whole number of packets, got {k_block!r}")
    if not 1 <= k_block <= MAX_K:
        raise UsageError(f"--k must be between 1 and {MAX_K} packets, got {k_block}")
    if isinstance(bin_s, bool) or not isinstance(bin_s, int | float | np.floating):
        raise UsageError(f"--bin must be a number of seconds, got {bin_s!r}")
    if not math.isfinite(bin_s) or not MIN_BIN_S <= bin_s <= MAX_BIN_S:
        raise UsageError(
            f"--bin must be a finite number of seconds between {MIN_BIN_S:g} and "
            f"{MAX_BIN_S:g}, got {bin_s}"
        )


def analyze_pcap(
    path: str | os.PathLike[str], *, k_block: int = 100, bin_s: float = 0.1
) -> CaptureAnalysis:
    """Read a capture once and return the metrics of every MPTCP connection in it."""
    check_options(k_block, bin_s)
    name = os.fspath(path)
    raw = _run_core(name)
    flags = _file_flags(raw)
    conns = [ConnectionAnalysis(c, flags, k_block, bin_s) for c in raw["connections"]]
    warnings = [_warning(name, *w) for w in raw["warnings"]]
    extra = int(raw["warnings_total"]) - len(raw["warnings"])
    if extra > 0:
        warnings.append(f"{name}: {extra} more warnings not shown")
    if not conns:
        warnings.append(
            f"{name}: no MPTCP connection with data found "
            f"({raw['packets']} packets, {raw['tcp_packets']} TCP)"
        )
    counters = {k: int(v) for k, v in raw.items() if isinstance(v, int | bool)}
    flows = [TcpFlow.from_raw(f) for f in raw.get("tcp_flows", [])]
    return CaptureAnalysis(name, conns, warnings, bool(raw["partial"]), counters, flows)
