"""Generate tests/captures/test_collect/tcp_download.pcap (deterministic): a plain TCP
download at the receiver (the client), with the addresses of the mptcp_download bundle so
it can stand in for that bundle's client.pcap in a plain TCP run.

    .venv/bin/python tests/captures/test_collect/make_tcp_download.py

The story: iperf3's control connection (client port 40000, 100 bytes each way), then the
data connection (client port 40001) on the wifi path: 100 segments of 1448 bytes spaced as
a 2 Mbit/s link sends 1502-byte frames (6.008 ms), then segment 10 again (a retransmission).
tests/unit/test_collect_instrument.py computes the expected figures from these numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from make_fixtures import Scenario, Sub, _records, write_pcap

CLIENT, SERVER = "10.55.1.1", "10.55.9.1"
SEG = 1448  # payload bytes per segment
GAP = (SEG + 40 + 14) * 8 / 2e6  # one 1502-byte frame at 2 Mbit/s: 6.008 ms
SEGMENTS = 100


def tcp_download() -> Scenario:
    sc = Scenario()
    ctl, data = Sub(CLIENT, SERVER, 40000), Sub(CLIENT, SERVER, 40001, isn_c=9000, isn_s=90000)
    for t, s in ((0.000, ctl), (0.010, data)):
        sc.at(t, s.pkt(False, "S", s.isn_c, 0, None))
        sc.at(t + 0.001, s.pkt(True, "SA", s.isn_s, s.isn_c + 1, None))
        sc.at(t + 0.002, s.pkt(False, "A", s.isn_c + 1, s.isn_s + 1, None))
    sc.at(0.005, ctl.pkt(False, "PA", ctl.isn_c + 1, ctl.isn_s + 1, None, 100))
    sc.at(0.006, ctl.pkt(True, "PA", ctl.isn_s + 1, ctl.isn_c + 101, None, 100))
    start = 0.020
    for i in range(SEGMENTS):
        sc.at(
            start + i * GAP,
            data.pkt(True, "PA", data.isn_s + 1 + i * SEG, data.isn_c + 1, None, SEG),
        )
    end = start + SEGMENTS * GAP
    sc.at(end, data.pkt(True, "PA", data.isn_s + 1 + 10 * SEG, data.isn_c + 1, None, SEG))
    return sc


if __name__ == "__main__":
    sc = tcp_download()
    sc.packets.sort(key=lambda tp: tp[0])  # capture order
    write_pcap(Path(__file__).resolve().parent / "tcp_download.pcap", _records(sc))
