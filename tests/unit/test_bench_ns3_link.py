"""bench/ns3_link reads what a UDP iperf3 server received."""

from __future__ import annotations

from pathlib import Path

from bench.ns3_link import _received_mbit

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def test_received_rate_comes_from_sum_received_of_a_real_udp_server() -> None:
    """Recorded from Debian's iperf3 3.12 (`iperf3 -s -1 -J` against `-u -b 2M -t 1`):
    its `end.sum` says 0 bytes for UDP, `end.sum_received` the 2 Mbit/s that arrived."""
    text = (CAPTURES / "iperf3_udp_server.json").read_text()
    assert _received_mbit(text) == 2.0
    assert _received_mbit("not json") == 0.0
