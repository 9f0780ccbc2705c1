"""The probe's data step (mprig.rig.probe, mprig.rig.probe_agent): which data segments carry a DSS
mapping, on packets crafted with scapy as a middlebox would leave them, and the verdict of a
transfer from what the client and the server saw."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from scapy.layers.inet import IP, TCP

from mprig.rig.probe import classify_transfer, parse_server_log
from mprig.rig.probe_agent import parse_segment, payload, tcp_options_map_data

PORT = 5299
# DSS (RFC 8684 3.3): subtype 2, flags A (data ack) and M (mapping), 4-byte data ack and DSN,
# subflow sequence number, data-level length, no checksum.
DSS_MAP = bytes([0x20, 0x05]) + struct.pack("!IIIH", 7, 1001, 1, 1400)
DSS_ACK_ONLY = bytes([0x20, 0x01]) + struct.pack("!I", 7)  # a data ack, no mapping
# MP_CAPABLE on the first data segment (3.1): version 1, flags, both keys, data-level length.
MPC_DATA = bytes([0x01, 0x81]) + b"k" * 16 + struct.pack("!H", 1400)
MPC_ACK = bytes([0x01, 0x81]) + b"k" * 16  # the third ACK: keys only


def segment(mptcp: bytes | None, data: bytes = b"x" * 100, flags: str = "A") -> bytes:
    options: list[Any] = [("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]
    if mptcp is not None:
        options.append((30, mptcp))
    pkt = IP(src="10.2.1.2", dst="10.0.0.1") / TCP(
        sport=40001, dport=PORT, flags=flags, seq=1, options=options
    ) / data  # fmt: skip
    return bytes(pkt)


@pytest.mark.parametrize(
    ("mptcp", "data", "expected"),
    [
        (DSS_MAP, b"x" * 100, {"data": {"src": "10.2.1.2", "sport": 40001, "len": 100,
                                        "mapped": True}}),
        (MPC_DATA, b"x" * 100, {"data": {"src": "10.2.1.2", "sport": 40001, "len": 100,
                                         "mapped": True}}),
        # a middlebox removed the option (nft `reset tcp option mptcp` leaves NOPs)
        (None, b"x" * 100, {"data": {"src": "10.2.1.2", "sport": 40001, "len": 100,
                                     "mapped": False}}),
        (DSS_ACK_ONLY, b"x" * 100, {"data": {"src": "10.2.1.2", "sport": 40001, "len": 100,
                                             "mapped": False}}),
        (MPC_ACK, b"", None),  # the third ACK: no data, not a data segment
        (DSS_MAP, b"", None),
    ],
    ids=["dss", "mp-capable-with-data", "stripped", "data-ack-only", "third-ack", "pure-ack"],
)  # fmt: skip
def test_parse_segment_says_whether_data_is_mapped(
    mptcp: bytes | None, data: bytes, expected: dict[str, Any] | None
) -> None:
    assert parse_segment(segment(mptcp, data), PORT) == expected


def test_a_blanked_option_maps_nothing() -> None:
    # the kind and length kept, the content zeroed: subtype 0 without a data-level length
    assert tcp_options_map_data(b"\x1e\x0c" + b"\x00" * 10) is False
    assert tcp_options_map_data(b"\x01\x01\x1e" + bytes([len(DSS_MAP) + 2]) + DSS_MAP) is True


def test_ethernet_padding_is_not_data() -> None:
    frame = segment(DSS_MAP, b"") + b"\x00" * 6  # a short frame padded to 60 bytes
    assert parse_segment(frame, PORT) is None


def xfer(**kw: Any) -> dict[str, Any]:
    return {"sport": 40001, "sent": 48000, "echoed": 48000, "intact": True, "mptcp": True, **kw}


def segs(mapped: int, bare: int = 0) -> list[dict[str, Any]]:
    one = {"src": "10.2.1.2", "sport": 40001, "len": 1400}
    return [{**one, "mapped": True}] * mapped + [{**one, "mapped": False}] * bare


CONN = {"probe": "1", "peer": ["10.2.1.2", 40001], "bytes": 48000, "mptcp": True}


@pytest.mark.parametrize(
    ("transfer", "conn", "segments", "expected"),
    [
        (xfer(), CONN, segs(34), ("ok", "MP_CAPABLE handshake, 48000 bytes echoed, 34 data "
                                        "segments on this path, each with a DSS mapping")),
        (xfer(mptcp=False), CONN, segs(0, 34), ("dss-stripped", "34 of 34 data segments on "
                                               "this path reached the server without a DSS "
                                               "mapping")),
        (xfer(), CONN, segs(30, 4), ("dss-stripped", "4 of 34 data segments on this path "
                                     "reached the server without a DSS mapping")),
        (xfer(mptcp=False), CONN, segs(34), ("fallback", "the connection fell back to TCP "
                                             "(client side)")),
        (xfer(), {**CONN, "mptcp": False}, segs(34),
         ("fallback", "the connection fell back to TCP (server side)")),
        (xfer(sport=None, error="TimeoutError: timed out"), None, segs(1),
         ("data-failed", "the transfer failed: TimeoutError: timed out")),
        (xfer(echoed=1400), CONN, segs(34), ("data-failed", "1400 of 48000 bytes came back "
                                             "(short)")),
        (xfer(intact=False), CONN, segs(34), ("data-failed", "48000 of 48000 bytes came back "
                                              "(altered)")),
        (xfer(), CONN, segs(1), ("dss-stripped", "only 1 data segment of the transfer crossed "
                                 "this path (DSS-bearing packets dropped?)")),
    ],
    ids=["ok", "all-stripped", "some-stripped", "client-fallback", "server-fallback",
         "timeout", "short", "altered", "dss-dropped"],
)  # fmt: skip
def test_classify_transfer(
    transfer: dict[str, Any],
    conn: dict[str, Any] | None,
    segments: list[dict[str, Any]],
    expected: tuple[str, str],
) -> None:
    assert classify_transfer(transfer, conn, segments) == expected


def test_a_transfer_whose_syn_came_without_mp_capable_fell_back() -> None:
    # After MPTCP SYNs were lost, the kernel opens new connections as plain TCP for a while
    # (net.mptcp.blackhole_timeout): every data segment then comes without DSS, and the
    # verdict says why instead of blaming the path's DSS handling.
    verdict, detail = classify_transfer(xfer(mptcp=False), CONN, segs(0, 34), False)
    assert (verdict, detail.split(":")[0]) == (
        "fallback", "the transfer's SYN reached the server without MP_CAPABLE",
    )  # fmt: skip
    assert classify_transfer(xfer(), CONN, segs(34), True)[0] == "ok"


def test_server_log_groups_data_by_subflow_and_connections_by_probe() -> None:
    log = (
        '{"ready": 5299}\n'
        '{"data": {"src": "10.2.1.2", "sport": 40001, "len": 100, "mapped": true}, "if": "p"}\n'
        '{"data": {"src": "10.2.1.2", "sport": 40001, "len": 90, "mapped": false}, "if": "p"}\n'
        '{"data": {"src": "10.1.1.2", "sport": 40002, "len": 80, "mapped": true}, "if": "q"}\n'
        '{"conn": {"probe": "mprig-probe 1", "peer": ["10.2.1.2", 40001], "bytes": 190,'
        ' "mptcp": true}}\n'
    )
    seen = parse_server_log(log)
    assert {k: [s["len"] for s in v] for k, v in seen.data.items()} == {
        ("10.2.1.2", 40001): [100, 90],
        ("10.1.1.2", 40002): [80],
    }
    assert seen.conns == {"1": {"probe": "mprig-probe 1", "peer": ["10.2.1.2", 40001],
                                "bytes": 190, "mptcp": True}}  # fmt: skip


def test_payload_names_its_probe_and_has_the_size_asked() -> None:
    assert (payload(3, 48000)[:14], len(payload(3, 48000))) == (b"mprig-probe 3\n", 48000)
