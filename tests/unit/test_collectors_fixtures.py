"""Receiver replay on the synthetic fixtures of tests/captures/make_fixtures.py, each value
computed by hand from the scenario's packet list (times in seconds after the first SYN,
payloads of 1000 bytes unless said otherwise)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from collectors.analyze import analyze_pcap
from collectors.capture_part import subflow_paths

HERE = Path(__file__).resolve().parents[1] / "captures" / "test_collectors_fixtures"
COUNT_KEYS = (
    "packets",
    "bytes",
    "delivered_bytes",
    "ooo_packets",
    "ooo_max_bytes",
    "ooo_max_packets",
    "retransmitted_packets",
    "reinjected_bytes",
    "duplicate_packets",
    "unmapped_bytes",
)
NO_FLAGS = {
    "missing_handshake": False,
    "fallback": False,
    "checksum": False,
    "capture_truncated": False,
    "timestamps_backwards": False,
    "timestamp_jumps": False,
    "timestamp_outliers": False,
    "partial": False,
}


def summaries(name: str, **kw: Any) -> list[dict[str, Any]]:
    result = analyze_pcap(HERE / name, **kw)
    return [c.summary() for c in result.connections]


def one(name: str, **kw: Any) -> dict[str, Any]:
    (s,) = summaries(name, **kw)
    return s


def counts(s: dict[str, Any]) -> tuple[int, ...]:
    return tuple(s[k] for k in COUNT_KEYS)


def subflow_counts(s: dict[str, Any]) -> list[tuple[Any, ...]]:
    keys = (
        "name",
        "packets",
        "retransmitted_packets",
        "ooo_packets",
        "duplicate_packets",
        "reinjected_bytes",
        "unmapped_bytes",
    )
    return [tuple(sf[k] for k in keys) for sf in s["subflows"]]


S0 = "10.0.0.1:5201->10.0.1.2:40001"
S1 = "10.0.0.1:5201->10.0.2.2:40002"
REORDER_FILES = [
    "reorder_two_subflows.pcap",
    "reorder_two_subflows_ns.pcap",
    "reorder_two_subflows.pcapng",
    "reorder_two_subflows_obsolete_pb.pcapng",
    "reorder_two_subflows_sll2.pcap",
    "reorder_two_subflows_be.pcap",
    "reorder_two_subflows_rawip.pcap",
    "reorder_two_subflows_vlan.pcap",
    "reorder_two_subflows_seqwrap.pcap",
    "noise_and_reorder.pcap",
]


@pytest.mark.parametrize("name", REORDER_FILES)
def test_reordering_between_two_subflows(name: str) -> None:
    # Arrivals (DSN): 1, 2001*, 3001*, 1001 (drains 2001, 3001), 4001, 6001*, 5001 (drains).
    s = one(name, k_block=3)
    assert s["connection"] == S0
    assert counts(s) == (7, 7000, 7000, 3, 2000, 2, 0, 0, 0, 0)
    assert subflow_counts(s) == [(S0, 4, 0, 3, 0, 0, 0), (S1, 3, 0, 0, 0, 0, 0)]
    assert (s["ooo_ratio"], s["ooo_arrivals"]) == (pytest.approx(3 / 7), 3)
    # Occupancy 1000 B on [0.11, 0.12), 2000 on [0.12, 0.13), 1000 on [0.15, 0.16); span 0.06 s.
    assert s["ooo_mean_bytes"] == pytest.approx(40 / 0.06)
    assert s["duration_s"] == pytest.approx(0.06)
    assert s["goodput_bps"] == pytest.approx(7000 * 8 / 0.06)
    assert s["throughput_bps"] == pytest.approx(7000 * 8 / 0.06)
    assert [sf["throughput_bps"] for sf in s["subflows"]] == pytest.approx(
        [4000 * 8 / 0.06, 3000 * 8 / 0.06]
    )
    # Blocks of 3: completed at arrival 4 (max buffer 4000) and arrival 7 (3000).
    assert (s["rcvbuf_k_max_bytes"], s["rcvbuf_k_blocks"]) == (4000, 2)
    assert s["goodput_k_p5_bps"] is None  # both blocks end in the first second (slow start)
    assert s["rfc4737_reordered_ratio"] == pytest.approx(2 / 7)
    assert (s["rfc4737_extent_mean"], s["rfc4737_extent_max"]) == (1.5, 2)
    assert s["rfc4737_n_reordering"] == pytest.approx({"1": 2 / 7, "2": 1 / 7, "3": 0.0})
    assert s["rfc5236_reorder_density"] == pytest.approx(
        {"-1": 3 / 7, "0": 2 / 7, "1": 1 / 7, "2": 1 / 7}
    )
    assert s["rfc5236_buffer_occupancy_density"] == pytest.approx(
        {"0": 4 / 7, "1": 2 / 7, "2": 1 / 7}
    )
    assert s["flags"] == NO_FLAGS
    assert s["mptcp_options"]["mappings"] == 7


def test_reordering_timeseries_and_occupancy() -> None:
    (conn,) = analyze_pcap(HERE / "reorder_two_subflows.pcap", bin_s=0.05).connections
    ts = conn.timeseries()
    assert list(ts.columns) == [
        "t_s", "goodput_bps", "throughput_bps", "throughput_bps.0", "throughput_bps.1",
        "ooo_bytes_max", "ooo_packets_max",
    ]  # fmt: skip
    # Bin [0, 0.05): arrivals at 0.10..0.14 deliver 5000 B; bin [0.05, 0.1): 2000 B at 0.16.
    assert ts["goodput_bps"].tolist() == pytest.approx([5000 * 8 / 0.05, 2000 * 8 / 0.05])
    assert ts["throughput_bps"].tolist() == pytest.approx([5000 * 8 / 0.05, 2000 * 8 / 0.05])
    assert ts["throughput_bps.0"].tolist() == pytest.approx([3000 * 8 / 0.05, 1000 * 8 / 0.05])
    assert ts["ooo_bytes_max"].tolist() == [2000.0, 1000.0]
    occ = conn.occupancy()
    assert occ["dsn"].tolist() == [1, 2001, 3001, 1001, 4001, 6001, 5001]
    assert occ["ooo_bytes"].tolist() == [0, 1000, 2000, 0, 0, 1000, 0]
    assert occ["out_of_order"].tolist() == [False, True, True, False, False, True, False]
    assert occ["subflow"].tolist() == [0, 0, 0, 1, 1, 0, 1]


def test_k_blocks_series() -> None:
    (conn,) = analyze_pcap(HERE / "reorder_two_subflows.pcap", k_block=3).connections
    kb = conn.kblocks()
    # Block 1 completes with P2 at 0.13 s (4000 B delivered, 0.03 s after the first data),
    # block 2 with P6 at 0.16 s (3000 B more in 0.03 s).
    assert kb["t_s"].tolist() == pytest.approx([0.03, 0.06])
    assert kb["rcvbuf_bytes"].tolist() == [4000, 3000]
    assert kb["goodput_bps"].tolist() == pytest.approx([4000 * 8 / 0.03, 3000 * 8 / 0.03])


def test_link_utilisation_by_subflow_address() -> None:
    (conn,) = analyze_pcap(HERE / "reorder_two_subflows.pcap").connections
    util = conn.link_utilisation({"10.0.1.2": 1e6, "10.0.2.2": 2e6, "192.0.2.1": 1e6})
    assert util == pytest.approx(
        {"10.0.1.2": 4000 * 8 / 0.06 / 1e6, "10.0.2.2": 3000 * 8 / 0.06 / 2e6}
    )
    # Both subflows end at the server address: they share its rate.
    shared = conn.link_utilisation({"10.0.0.1": 2e6})
    assert shared == pytest.approx({"10.0.0.1": 7000 * 8 / 0.06 / 2e6})


def test_subflow_loss_and_retransmission() -> None:
    # Subflow 0 loses P2; P3 waits in subflow reassembly, P4 (subflow 1) is queued out of
    # order; the retransmitted P2 releases P2 and P3 at 0.13; P3 is then sent again.
    s = one("subflow_loss_retransmission.pcap")
    assert counts(s) == (5, 5000, 4000, 1, 1000, 1, 2, 0, 0, 0)
    assert subflow_counts(s) == [(S0, 4, 2, 0, 0, 0, 0), (S1, 1, 0, 1, 0, 0, 0)]
    assert s["ooo_ratio"] == 0.25
    assert s["rfc4737_reordered_ratio"] == 0.5


def test_reinjection_on_the_other_subflow() -> None:
    # P2 is reinjected on subflow 0 at 0.12; the original arrives on subflow 1 at 0.13.
    s = one("reinjection_other_subflow.pcap")
    assert counts(s) == (4, 4000, 3000, 1, 1000, 1, 0, 1000, 1, 0)
    assert subflow_counts(s) == [(S0, 3, 0, 1, 0, 0, 0), (S1, 1, 0, 0, 1, 1000, 0)]
    assert s["ooo_ratio"] == pytest.approx(1 / 3)
    assert s["ooo_arrivals"] == 1  # the late original is below rcv_nxt: not an OFO arrival


def test_one_mapping_over_several_segments() -> None:
    s = one("mapping_over_segments.pcap")
    assert counts(s) == (4, 4000, 4000, 0, 0, 0, 0, 0, 0, 0)
    assert s["mptcp_options"]["mappings"] == 2


def test_late_mapping_and_bytes_never_mapped() -> None:
    # P1 has no mapping until P2 brings one for 2000 bytes; P3 is never mapped.
    (conn,) = analyze_pcap(HERE / "late_mapping.pcap").connections
    s = conn.summary()
    assert counts(s) == (3, 3000, 2000, 0, 0, 0, 0, 0, 0, 1000)
    occ = conn.occupancy()
    assert occ["t_s"].tolist() == pytest.approx([0.01, 0.01])  # both reach MPTCP with P2
    assert occ["dsn"].tolist() == [1, 1001]


def test_32bit_dsn_wrap() -> None:
    s = one("dsn_wrap_32bit.pcap")
    assert counts(s) == (3, 3000, 3000, 1, 1000, 1, 0, 0, 0, 0)
    assert s["rfc4737_reordered_ratio"] == pytest.approx(1 / 3)


def _token(key: int, h: Any) -> str:
    return str(h(key.to_bytes(8, "big")).hexdigest()[:8])


def test_v0_handshake_sha1_token() -> None:
    s = one("v0_handshake.pcap")
    assert (s["version"], s["token_receiver"]) == (0, _token(0x1111_2222_3333_4444, hashlib.sha1))
    assert counts(s) == (2, 2000, 2000, 0, 0, 0, 0, 0, 0, 0)
    assert [sf["join"] for sf in s["subflows"]] == [False, True]


def test_v1_handshake_sha256_token() -> None:
    s = one("reorder_two_subflows.pcap")
    assert (s["version"], s["token_receiver"]) == (1, _token(0x1111_2222_3333_4444, hashlib.sha256))


def test_dss_with_checksum() -> None:
    s = one("dss_checksum.pcap")
    assert counts(s) == (2, 2000, 2000, 0, 0, 0, 0, 0, 0, 0)
    assert s["flags"] == {**NO_FLAGS, "checksum": True}


def test_fallback_by_infinite_mapping() -> None:
    s = one("fallback_infinite_mapping.pcap")
    assert counts(s) == (4, 4000, 4000, 0, 0, 0, 0, 0, 0, 0)
    assert s["flags"] == {**NO_FLAGS, "fallback": True}


def test_ipv6_subflow() -> None:
    s = one("ipv6_subflow.pcap")
    assert counts(s) == (2, 2000, 2000, 1, 1000, 1, 0, 0, 0, 0)
    assert [sf["name"] for sf in s["subflows"]] == [S0, "[fd00::1]:5201->[fd00:2::2]:40002"]


def test_ipv6_initial_subflow_joined_by_ipv4() -> None:
    (conn,) = analyze_pcap(HERE / "ipv6_initial_ipv4_join.pcap").connections
    s = conn.summary()
    assert counts(s) == (3, 3000, 3000, 1, 1000, 1, 0, 0, 0, 0)
    assert subflow_counts(s) == [
        ("[fd00::1]:5201->[fd00:1:1::2]:40001", 2, 0, 0, 0, 0, 0),
        ("10.0.0.1:5201->10.2.1.2:40002", 1, 0, 1, 0, 0, 0),  # P2 came first: out of order
    ]
    # each subflow is put on its path by the client address the rig gave it
    paths = subflow_paths(conn, {"fd00:1:1::2": "wifi", "10.2.1.2": "cell"})
    assert paths == {0: "wifi", 1: "cell"}


def test_both_directions_and_mp_capable_with_data() -> None:
    up, down = summaries("both_directions_mpc_data.pcap")
    assert (up["connection"], counts(up)) == (
        "10.0.1.2:40001->10.0.0.1:5201",
        (2, 1200, 1200, 0, 0, 0, 0, 0, 0, 0),
    )
    assert up["mptcp_options"]["mappings"] == 2
    assert (down["connection"], counts(down)) == (S0, (1, 300, 300, 0, 0, 0, 0, 0, 0, 0))
    assert down["goodput_bps"] is None  # one packet: no duration to divide by


def test_port_reuse_starts_a_new_connection() -> None:
    # Connection 1: one segment then DATA_FIN/FIN; connection 2 on the same 4-tuple with new
    # ISNs and keys: its second segment overtakes the first on the one subflow, so subflow
    # reassembly holds it (no connection-level reordering) and the first counts as a
    # retransmission (it starts below the highest byte seen).
    first, second = summaries("port_reuse.pcap")
    assert counts(first) == (1, 1000, 1000, 0, 0, 0, 0, 0, 0, 0)
    assert counts(second) == (2, 2000, 2000, 0, 0, 0, 1, 0, 0, 0)
    assert (first["mptcp_options"]["data_fin"], second["mptcp_options"]["data_fin"]) == (1, 0)


def test_cli_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    from mprig.cli.main import main

    path = HERE / "reorder_two_subflows.pcap"
    assert main(["analyze", str(path), "--k", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        f"{path}: 1 MPTCP connection direction(s)",
        f"  connection {S0} (v1, token 57c03b94)",
        "    packets                  7",
    ]
    assert "    ooo_ratio                0.428571" in lines
    assert "    rcvbuf_k_max_bytes       4000" in lines
    assert lines[-2:] == [
        f"    subflow 0 {S0}: 4 pkts, 533333 bit/s, 0 retrans, 3 ooo",
        f"    subflow 1 {S1}: 3 pkts, 400000 bit/s, 0 retrans, 0 ooo",
    ]


def test_signalling_options_are_counted() -> None:
    s = one("signalling_options.pcap")
    assert s["mptcp_options"] == {
        "mappings": 1,
        "data_fin": 0,
        "add_addr": 1,
        "remove_addr": 1,
        "mp_prio": 1,
        "mp_fail": 1,
        "mp_fastclose": 1,
        "mp_tcprst": 1,
    }
    assert [sf["backup"] for sf in s["subflows"]] == [True]  # set by MP_PRIO


def test_one_segment_filling_many_gaps() -> None:
    s = one("many_gaps.pcap")
    # packets, bytes, delivered, ooo packets, ooo max bytes/packets, retransmitted,
    # reinjected (the 700 queued bytes seen again on subflow 0), duplicates, unmapped
    assert counts(s) == (71, 2110, 1410, 70, 700, 70, 0, 700, 0, 0)


def test_segments_released_together_count_once_for_the_kernel() -> None:
    s = one("held_release_one_skb.pcap")
    assert counts(s) == (4, 4000, 4000, 3, 3000, 3, 1, 0, 0, 0)
    assert s["ooo_arrivals"] == 1  # one skb of one mapping entering the OFO queue
