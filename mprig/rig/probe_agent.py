"""Remote half of `mprig probe`, sent to rig hosts as `python3 -c <this file> MODE ARGS`.

Self-contained on purpose (a lab host has Python, and scapy on the client, but not mprig):

    server PORT        listen on PORT with an MPTCP socket (so the kernel answers an
                       MP_CAPABLE SYN with an MP_CAPABLE SYN-ACK) and print one JSON line per
                       SYN received on any interface: {"src", "sport", "seq", "mp_capable"},
                       one per data segment received: {"data": {"src", "sport", "len",
                       "mapped"}} (mapped: it carried a DSS mapping, or the MP_CAPABLE that
                       maps the first data), and per accepted connection, once it has echoed
                       everything back: {"conn": {"probe", "peer", "bytes", "mptcp"}}
    client JSON T SIZE for each probe {"if", "src", "dst", "port", "sport", "seq"} send one
                       SYN carrying MP_CAPABLE out of that interface with scapy, then open a
                       real MPTCP connection from the probe's address, send SIZE bytes and
                       read them back; print one JSON list: per probe {"syn": the SYN-ACK (or
                       RST) that came back, or null; "transfer": {"sport", "sent", "echoed",
                       "intact", "mptcp"} or {"error"}}
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any

IPPROTO_MPTCP = 262
SOL_MPTCP = 284
MPTCP_INFO = 1
ETH_P_IP = 0x0800
MPTCP_KIND = 30
# MP_CAPABLE in a SYN, MPTCP v1 (RFC 8684 section 3.1): subtype 0, version 1, flag H (HMAC-SHA256)
MP_CAPABLE_SYN = b"\x01\x01"


def mptcp_options(options: bytes) -> list[bytes]:
    """Every MPTCP option (kind 30, whole option bytes) in raw TCP option bytes."""
    found, i = [], 0
    while i < len(options):
        kind = options[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(options) or options[i + 1] < 2:
            break
        length = options[i + 1]
        if kind == MPTCP_KIND and length >= 3:
            found.append(options[i : i + length])
        i += length
    return found


def tcp_options_have_mp_capable(options: bytes) -> bool:
    """Whether raw TCP option bytes contain an MPTCP MP_CAPABLE (kind 30, subtype 0)."""
    return any(opt[2] >> 4 == 0 for opt in mptcp_options(options))


def tcp_options_map_data(options: bytes) -> bool:
    """Whether the options map a data segment onto the data sequence: a DSS with its M flag
    (RFC 8684 3.3), or the MP_CAPABLE with a data-level length on the first data (3.1)."""
    for opt in mptcp_options(options):
        subtype = opt[2] >> 4
        if subtype == 2 and len(opt) >= 4 and opt[3] & 0x04:
            return True
        if subtype == 0 and len(opt) >= 22:
            return True
    return False


def parse_segment(frame: bytes, port: int) -> dict[str, Any] | None:
    """What the server agent records of an IPv4 packet (no link header) to `port`: a SYN
    {"src", "sport", "seq", "mp_capable"}, a data segment {"data": {"src", "sport", "len",
    "mapped"}}, or None (anything else)."""
    if len(frame) < 20 or frame[0] >> 4 != 4 or frame[9] != socket.IPPROTO_TCP:
        return None
    ihl = (frame[0] & 0x0F) * 4
    total = struct.unpack("!H", frame[2:4])[0]
    tcp = frame[ihl:total]
    if len(tcp) < 20:
        return None
    sport, dport, seq = struct.unpack("!HHI", tcp[:8])
    flags, offset = tcp[13], (tcp[12] >> 4) * 4
    src = socket.inet_ntoa(frame[12:16])
    if dport != port:
        return None
    if flags & 0x12 == 0x02:  # SYN without ACK
        mp = tcp_options_have_mp_capable(tcp[20:offset])
        return {"src": src, "sport": sport, "seq": seq, "mp_capable": mp}
    if len(tcp) > offset:
        mapped = tcp_options_map_data(tcp[20:offset])
        return {"data": {"src": src, "sport": sport, "len": len(tcp) - offset, "mapped": mapped}}
    return None


def parse_syn(frame: bytes, port: int) -> dict[str, Any] | None:
    """The SYN to `port` in an IPv4 packet (no link header), or None."""
    record = parse_segment(frame, port)
    return record if record is not None and "seq" in record else None


def still_mptcp(sock: socket.socket) -> bool:
    """Whether an MPTCP socket still speaks MPTCP (a fallen-back one refuses MPTCP_INFO)."""
    try:
        sock.getsockopt(SOL_MPTCP, MPTCP_INFO, 256)
    except OSError:
        return False
    return True


def recv_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def echo(conn: socket.socket, peer: Any, lock: threading.Lock) -> None:
    """Read a probe connection to its end, send it all back, report it."""
    with conn:
        conn.settimeout(30)
        mptcp: bool | str
        try:
            data = recv_all(conn)
            conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
            mptcp = still_mptcp(conn)
            recv_all(conn)
        except OSError as e:
            data, mptcp = b"", f"error: {e}"
        probe = data.split(b"\n", 1)[0].decode(errors="replace")
        record = {"probe": probe, "peer": list(peer), "bytes": len(data), "mptcp": mptcp}
        with lock:
            print(json.dumps({"conn": record}), flush=True)


def accept_loop(listener: socket.socket, lock: threading.Lock) -> None:
    while True:
        conn, peer = listener.accept()
        threading.Thread(target=echo, args=(conn, peer, lock), daemon=True).start()


def server(port: int) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(64)
    sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    lock = threading.Lock()
    threading.Thread(target=accept_loop, args=(listener, lock), daemon=True).start()
    print(json.dumps({"ready": port}), flush=True)
    while True:
        frame, where = sniffer.recvfrom(65535)
        if where[2] == socket.PACKET_OUTGOING:
            continue
        record = parse_segment(frame, port)
        if record is not None:
            with lock:
                print(json.dumps({**record, "if": where[0]}), flush=True)


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


def payload(probe: int, size: int) -> bytes:
    """What a transfer sends: a line naming the probe, then a pattern up to `size` bytes."""
    head = f"mprig-probe {probe}\n".encode()
    body = bytes(range(256)) * (size // 256 + 1)
    return (head + body)[: max(size, len(head))]


def transfer(index: int, p: dict[str, Any], size: int, timeout: float) -> dict[str, Any]:
    """A real MPTCP connection from the probe's address: send, read the echo, compare."""
    sent = payload(index, size)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    sock.settimeout(timeout)
    sport = None
    with sock:
        try:
            sock.bind((p["src"], 0))
            sport = sock.getsockname()[1]
            sock.connect((p["dst"], p["port"]))
            # All of it at once: the first flight leaves on this path's subflow before the
            # path manager can join others.
            sock.sendall(sent)
            sock.shutdown(socket.SHUT_WR)
            got = recv_all(sock)
        except OSError as e:
            return {"sport": sport, "error": f"{type(e).__name__}: {e}"}
        mptcp = still_mptcp(sock)
    return {"sport": sport, "sent": len(sent), "echoed": len(got), "intact": got == sent,
            "mptcp": mptcp}  # fmt: skip


def client(probes: list[dict[str, Any]], timeout: float, size: int) -> None:
    out = []
    for i, p in enumerate(probes):
        syn = probe_one(p, timeout)
        out.append({"syn": syn, "transfer": transfer(i, p, size, 4 * timeout)})
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]))
    else:
        client(json.loads(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
