"""Remote half of `mprig probe`, sent to rig hosts as `python3 -c <this file> MODE ARGS`.

Self-contained on purpose (a lab host has Python, and scapy on the client, but not mprig):

    server PORT        listen on PORT with an MPTCP socket (so the kernel answers an
                       MP_CAPABLE SYN with an MP_CAPABLE SYN-ACK) and print one JSON line per
                       SYN received on any interface: {"src", "sport", "seq", "mp_capable"}
    client JSON        for each probe {"if", "src", "dst", "port", "sport", "seq"} send one
                       SYN carrying MP_CAPABLE out of that interface with scapy and print one
                       JSON list: per probe the SYN-ACK (or RST) that came back, or null
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
from typing import Any

IPPROTO_MPTCP = 262
ETH_P_IP = 0x0800
MPTCP_KIND = 30
# MP_CAPABLE in a SYN, MPTCP v1 (RFC 8684 section 3.1): subtype 0, version 1, flag H (HMAC-SHA256)
MP_CAPABLE_SYN = b"\x01\x01"


def tcp_options_have_mp_capable(options: bytes) -> bool:
    """Whether raw TCP option bytes contain an MPTCP MP_CAPABLE (kind 30, subtype 0)."""
    i = 0
    while i < len(options):
        kind = options[i]
        if kind == 0:
            return False
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(options) or options[i + 1] < 2:
            return False
        length = options[i + 1]
        if kind == MPTCP_KIND and length >= 3 and options[i + 2] >> 4 == 0:
            return True
        i += length
    return False


def parse_syn(frame: bytes, port: int) -> dict[str, Any] | None:
    """The SYN to `port` in an IPv4 packet (no link header), or None."""
    if len(frame) < 20 or frame[0] >> 4 != 4 or frame[9] != socket.IPPROTO_TCP:
        return None
    ihl = (frame[0] & 0x0F) * 4
    tcp = frame[ihl:]
    if len(tcp) < 20:
        return None
    sport, dport, seq = struct.unpack("!HHI", tcp[:8])
    flags, offset = tcp[13], (tcp[12] >> 4) * 4
    if dport != port or flags & 0x12 != 0x02:  # SYN without ACK
        return None
    src = socket.inet_ntoa(frame[12:16])
    return {
        "src": src,
        "sport": sport,
        "seq": seq,
        "mp_capable": tcp_options_have_mp_capable(tcp[20:offset]),
    }


def server(port: int) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(64)
    sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    print(json.dumps({"ready": port}), flush=True)
    while True:
        frame, where = sniffer.recvfrom(65535)
        if where[2] == socket.PACKET_OUTGOING:
            continue
        syn = parse_syn(frame, port)
        if syn is not None:
            print(json.dumps({**syn, "if": where[0]}), flush=True)


def next_hop(src: str, dst: str) -> str:
    """The gateway policy routing picks for traffic from src to dst (dst when on-link)."""
    words = subprocess.run(
        ["ip", "-4", "route", "get", dst, "from", src],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return words[words.index("via") + 1] if "via" in words else dst


def probe_one(p: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import ARP, Ether
    from scapy.sendrecv import AsyncSniffer, sendp, srp1

    gw = next_hop(p["src"], p["dst"])
    arp = srp1(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=gw, psrc=p["src"]),
               iface=p["if"], timeout=timeout, verbose=False)  # fmt: skip
    if arp is None:
        return {"error": f"no ARP answer from next hop {gw} on {p['if']}"}

    def from_server(pkt: Any) -> bool:
        return bool(
            pkt.haslayer(TCP) and pkt[IP].src == p["dst"] and pkt[TCP].sport == p["port"]
            and pkt[TCP].dport == p["sport"]
        )  # fmt: skip

    sniff = AsyncSniffer(iface=p["if"], lfilter=from_server, count=1)
    sniff.start()
    time.sleep(0.2)
    opts = [("MSS", 1400), ("SAckOK", b""), ("WScale", 7), (MPTCP_KIND, MP_CAPABLE_SYN)]
    syn = TCP(sport=p["sport"], dport=p["port"], flags="S", seq=p["seq"], window=64240,
              options=opts)  # fmt: skip
    sendp(Ether(dst=arp[ARP].hwsrc) / IP(src=p["src"], dst=p["dst"]) / syn,
          iface=p["if"], verbose=False)  # fmt: skip
    sniff.join(timeout=timeout)
    got = sniff.stop() if sniff.running else sniff.results
    if not got:
        return None
    tcp = got[0][TCP]
    raw = bytes(tcp)[20 : tcp.dataofs * 4]
    return {"flags": str(tcp.flags), "seq": tcp.seq, "ack": tcp.ack,
            "mp_capable": tcp_options_have_mp_capable(raw)}  # fmt: skip


def client(probes: list[dict[str, Any]], timeout: float) -> None:
    print(json.dumps([probe_one(p, timeout) for p in probes]), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]))
    else:
        client(json.loads(sys.argv[2]), float(sys.argv[3]))
