"""`mprig analyze`: connection-level reordering and buffer metrics of MPTCP captures."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mprig.cli.argtypes import bounded_float, bounded_int

EPILOG = """\
examples:
  mprig analyze results/smoke/<run>/client.pcap
  mprig analyze a.pcap b.pcapng --json > metrics.json
  mprig analyze client.pcap --k 50 --bin 0.5     receive buffer per 50 packets, 0.5 s bins

Metrics are computed at the receiver of each data direction of each MPTCP connection
(definitions and units: docs/metrics.md). Exit status: 0 (also when warnings were printed
or a capture is cut short: its numbers are then flagged partial), 2 when a file cannot be
read as a capture.
"""

TEXT_KEYS = (
    "packets",
    "bytes",
    "delivered_bytes",
    "ooo_packets",
    "ooo_ratio",
    "ooo_max_bytes",
    "ooo_max_packets",
    "ooo_mean_bytes",
    "goodput_bps",
    "throughput_bps",
    "retransmitted_packets",
    "reinjected_bytes",
    "duplicate_packets",
    "unmapped_bytes",
    "rcvbuf_k_max_bytes",
    "goodput_k_p5_bps",
    "rfc4737_reordered_ratio",
    "rfc4737_extent_max",
)


K_TYPE = bounded_int(1, 1_000_000, "packets per block; no capture mprig records holds more")
BIN_TYPE = bounded_float(0.001, 3600.0, "seconds; finer than 1 ms is below timestamp noise")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "analyze",
        help="reordering, OOO queue, goodput and buffer metrics of MPTCP captures",
        description="Replay MPTCP captures at the receiver and print metrics per connection.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("pcaps", nargs="+", metavar="PCAP", help="pcap or pcapng capture files")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument(
        "--k",
        type=K_TYPE,
        default=100,
        metavar="K",
        help="packets per block for the receive-buffer metric (default 100)",
    )
    p.add_argument(
        "--bin",
        type=BIN_TYPE,
        default=0.1,
        metavar="SECONDS",
        help="goodput/throughput bin width (default 0.1)",
    )
    p.set_defaults(func=run)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "-" if value is None else str(value)


def _print_text(path: str, summaries: list[dict[str, Any]]) -> None:
    print(f"{path}: {len(summaries)} MPTCP connection direction(s)")
    for s in summaries:
        print(f"  connection {s['connection']} (v{s['version']}, token {s['token_receiver']})")
        for key in TEXT_KEYS:
            print(f"    {key:<24} {_fmt(s[key])}")
        raised = [k for k, v in s["flags"].items() if v]
        print(f"    {'flags':<24} {', '.join(raised) or '-'}")
        for sf in s["subflows"]:
            print(
                f"    subflow {sf['index']} {sf['name']}: {sf['packets']} pkts, "
                f"{_fmt(sf['throughput_bps'])} bit/s, {sf['retransmitted_packets']} retrans, "
                f"{sf['ooo_packets']} ooo"
            )


def check_capture(path: str) -> None:
    """A capture must be a regular file: a FIFO would block the reader forever."""
    from mprig.errors import UsageError, escape
    from mprig.safeio import check_regular

    try:
        check_regular(path, "capture")
    except OSError as e:
        raise UsageError(f"{escape(path)}: cannot read the capture: {e.strerror}") from None


def run(args: argparse.Namespace) -> int:
    from collectors.analyze import analyze_pcap
    from mprig.errors import UsageError

    if args.k < 1 or args.bin <= 0:
        raise UsageError(f"--k must be >= 1 and --bin > 0, got {args.k} and {args.bin}")
    docs = []
    for path in args.pcaps:
        check_capture(path)
        result = analyze_pcap(path, k_block=args.k, bin_s=args.bin)
        for w in result.warnings:
            print(f"mprig: warning: {w}", file=sys.stderr)
        summaries = [c.summary() for c in result.connections]
        if args.json:
            docs.append(
                {
                    "file": path,
                    "partial": result.partial,
                    "connections": summaries,
                    "warnings": result.warnings,
                }
            )
        else:
            _print_text(path, summaries)
    if args.json:
        json.dump(docs, sys.stdout, indent=1)
        print()
    return 0
