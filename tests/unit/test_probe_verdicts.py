"""mprig.rig.probe's pure parts: verdicts, the server log, and MP_CAPABLE option parsing."""

from __future__ import annotations

from typing import Any

import pytest
from scapy.layers.inet import IP, TCP

from mprig.rig.probe import classify, parse_server_log
from mprig.rig.probe_agent import MP_CAPABLE_SYN, parse_syn, tcp_options_have_mp_capable

SEQ = 1000


def synack(ack: int = SEQ + 1, mp: bool = True, flags: str = "SA") -> dict[str, Any]:
    return {"flags": flags, "seq": 77, "ack": ack, "mp_capable": mp}


def at_server(seq: int = SEQ, mp: bool = True) -> dict[str, Any]:
    return {"src": "10.1.1.2", "sport": 40000, "seq": seq, "mp_capable": mp}


@pytest.mark.parametrize(
    ("server", "answer", "expected"),
    [
        (at_server(), synack(), ("returned", "the SYN-ACK carried MP_CAPABLE")),
        (at_server(mp=False), synack(mp=False),
         ("stripped", "the SYN reached the server without MP_CAPABLE")),
        (at_server(), synack(mp=False), ("stripped", "the SYN-ACK came back without MP_CAPABLE")),
        (at_server(seq=5), synack(), ("seq-rewritten", "client sent ISN 1000, server saw 5")),
        (None, synack(ack=9), ("seq-rewritten", "SYN-ACK acknowledges 9, expected 1001")),
        (None, None, ("no-answer", "the SYN never reached the server")),
        (at_server(), None, ("no-answer", "no SYN-ACK came back")),
        (at_server(), synack(flags="RA"), ("reset", "answered with RA")),
        (None, {"error": "no ARP answer from next hop 10.1.1.1 on wlan0"},
         ("no-answer", "no ARP answer from next hop 10.1.1.1 on wlan0")),
    ],
)  # fmt: skip
def test_classify(
    server: dict[str, Any] | None, answer: dict[str, Any] | None, expected: tuple[str, str]
) -> None:
    assert classify(SEQ, server, answer) == expected


def test_parse_server_log_keeps_first_syn_per_source() -> None:
    log = (
        '{"ready": 5299}\n'
        '{"src": "10.1.1.2", "sport": 4000, "seq": 1, "mp_capable": true, "if": "p1"}\n'
        '{"src": "10.1.1.2", "sport": 4000, "seq": 1, "mp_capable": true, "if": "p1"}\n'
        "Traceback (most recent call last):\n"
        '{"src": "10.2.1.2", "sport": 4001, "seq": 2, "mp_capable": false, "if": "p2"}\n'
    )
    assert parse_server_log(log).syns == {
        ("10.1.1.2", 4000): {"src": "10.1.1.2", "sport": 4000, "seq": 1, "mp_capable": True,
                             "if": "p1"},
        ("10.2.1.2", 4001): {"src": "10.2.1.2", "sport": 4001, "seq": 2, "mp_capable": False,
                             "if": "p2"},
    }  # fmt: skip


def test_mp_capable_found_among_other_options() -> None:
    with_mptcp = TCP(options=[("MSS", 1400), ("NOP", None), ("WScale", 7), (30, MP_CAPABLE_SYN)])
    built = TCP(bytes(with_mptcp))  # as received: dataofs filled in
    raw = bytes(built)[20 : built.dataofs * 4]
    assert tcp_options_have_mp_capable(raw) is True
    # MP_JOIN (subtype 1) is MPTCP but not MP_CAPABLE; NOPs where a middlebox blanked it.
    assert tcp_options_have_mp_capable(b"\x1e\x0c\x10\x00" + b"\x00" * 8) is False
    assert tcp_options_have_mp_capable(b"\x01\x01\x01\x01") is False


def test_parse_syn_reads_the_server_side_view() -> None:
    pkt = IP(src="10.2.1.2", dst="10.0.0.1") / TCP(
        sport=4001, dport=5299, flags="S", seq=42, options=[(30, MP_CAPABLE_SYN)]
    )
    assert parse_syn(bytes(pkt), 5299) == {
        "src": "10.2.1.2", "sport": 4001, "seq": 42, "mp_capable": True,
    }  # fmt: skip
    assert parse_syn(bytes(pkt), 80) is None
    ack = IP(dst="10.0.0.1") / TCP(dport=5299, flags="SA")
    assert parse_syn(bytes(ack), 5299) is None
