"""A real two-path MPTCP transfer recorded on the kernel by tests/captures/make_real_capture.py
(2 000 000 bytes client -> server, subflows over 20 and 5 Mbit/s TBF links, tcpdump -i any
on the receiver: Linux SLL2, snaplen 200). The invariants hold for any correct replay;
the exact counts pin this recording."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collectors.analyze import CaptureAnalysis, analyze_pcap

PCAP = (
    Path(__file__).resolve().parents[1]
    / "captures"
    / "test_collectors_real"
    / "two_path_upload.pcap"
)
SENT = 2_000_000


@pytest.fixture(scope="module")
def result() -> CaptureAnalysis:
    return analyze_pcap(PCAP, bin_s=0.05)


def test_everything_sent_is_delivered_once(result: CaptureAnalysis) -> None:
    assert (result.partial, result.warnings) == (False, [])
    (conn,) = result.connections
    s = conn.summary()
    assert (s["delivered_bytes"], s["bytes"], s["unmapped_bytes"], s["duplicate_packets"]) == (
        SENT,
        SENT,
        0,
        0,
    )
    assert [(sf["join"], sf["dport"]) for sf in s["subflows"]] == [(False, 5201), (True, 5201)]
    assert sum(sf["bytes"] for sf in s["subflows"]) == SENT
    assert s["flags"] == {
        "missing_handshake": False,
        "fallback": False,
        "checksum": False,
        "capture_truncated": False,
        "timestamps_backwards": False,
        "timestamp_jumps": False,
        "timestamp_outliers": False,
        "partial": False,
    }
    assert s["mptcp_options"]["data_fin"] >= 1
    assert s["mptcp_options"]["add_addr"] >= 1


def test_queue_drains_and_series_add_up(result: CaptureAnalysis) -> None:
    (conn,) = result.connections
    occ = conn.occupancy()
    assert (int(occ["ooo_bytes"].iloc[-1]), int(occ["delivered_bytes"].iloc[-1])) == (0, SENT)
    ts = conn.timeseries()
    assert float(ts["goodput_bps"].sum() * 0.05 / 8) == pytest.approx(SENT)
    assert float(ts["throughput_bps"].sum() * 0.05 / 8) == pytest.approx(SENT)
    per_sf = ts["throughput_bps.0"] + ts["throughput_bps.1"]
    assert np.allclose(per_sf, ts["throughput_bps"])


def test_recorded_reordering(result: CaptureAnalysis) -> None:
    (conn,) = result.connections
    s = conn.summary()
    keys = ("packets", "ooo_packets", "ooo_max_bytes", "ooo_max_packets", "retransmitted_packets")
    assert tuple(s[k] for k in keys) == (1526, 902, 568872, 420, 42)
    assert [sf["retransmitted_packets"] for sf in s["subflows"]] == [0, 42]


NETEM = [PCAP.with_name("two_path_netem_vm.pcap"), PCAP.with_name("two_path_netem_vm_2.pcap")]


def kernel_counter(pcap: Path, name: str) -> int:
    """A receiver-side MPTcpExt delta saved beside a netem capture (nstat -az)."""
    text = pcap.with_suffix(".nstat.txt").read_text()
    (value,) = [int(line.split()[1]) for line in text.splitlines() if line.split()[:1] == [name]]
    return value


@pytest.mark.parametrize("pcap", NETEM, ids=lambda p: p.stem)
def test_netem_capture_matches_the_kernel_counters(pcap: Path) -> None:
    # 3 000 000 bytes over netem paths (10 and 40 ms, 0.5 % loss each) in the VM, two
    # recordings; the receiver's kernel counted its MPTCP out-of-order queue and duplicate
    # data meanwhile (the second recording has segments released together after subflow
    # losses, which the kernel coalesces: see ooo_arrivals in docs/metrics.md).
    res = analyze_pcap(pcap)
    (conn,) = res.connections
    s = conn.summary()
    assert (s["delivered_bytes"], s["unmapped_bytes"], res.partial) == (3_000_000, 0, False)
    ofo = kernel_counter(pcap, "MPTcpExtOFOQueue")
    assert abs(s["ooo_arrivals"] - ofo) <= 0.02 * ofo
    assert s["duplicate_packets"] == kernel_counter(pcap, "MPTcpExtDuplicateData")
