"""The ss sampler as one process, sent to the sender as `python3 -I -S -c <this file>
INTERVAL_US PORT...` (mprig/run/capture.py builds the argv).

Every INTERVAL_US microseconds, on a fixed schedule, it writes a `# <unix time>` header and
then what `ss -tinHM '( sport = :PORT or dport = :PORT ... )'` prints: the TCP sockets
(MPTCP subflows among them) and the MPTCP sockets of the traffic ports, read from the
kernel's sock_diag netlink interface. Until SIGTERM (or SIGINT, SIGHUP), which ends it
between two samples, so that the last sample is whole.

Why not `ss` itself: under VM emulation one `ss` costs 0.3 s idle and 0.6-0.8 s beside a
50 Mbit/s flow (an exec and 17 shared libraries), so a 0.1 s sampler ran it back to back
and took the guest from 79 % to 96 % busy; one netlink dump from a process that stays costs
a small part of that.

The text follows iproute2 6.1's ss field for field (misc/ss.c: sock_state_print,
inet_addr_print, tcp_show_info, tcp_stats_print, mptcp_subflow_info, mptcp_stats_print),
in its order and formats, so that collectors/ss.py and mprig/stack/rbpm_ss.py read it as
they read ss; tests/integration/test_ss_agent_native.py compares the two on live TCP and
MPTCP connections. Self-contained on purpose (a lab host has Python, not mprig).
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import struct
import sys
import time

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY, TCPDIAG_GETSOCK = 20, 18
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
IPPROTO_TCP, IPPROTO_MPTCP = 6, 262
# linux/inet_diag.h: response attributes, the request's protocol attribute, ULP info
A_INFO, A_VEGASINFO, A_CONG, A_DCTCPINFO, A_BBRINFO, A_ULP_INFO = 2, 3, 4, 9, 16, 19
REQ_PROTOCOL = 3
ULP_NAME, ULP_MPTCP = 1, 3
# ss -i asks for tcp_info, the congestion control's own info and its name
EXT = (1 << (A_INFO - 1)) | (1 << (A_VEGASINFO - 1)) | (1 << (A_CONG - 1))
# ss's default states: all but LISTEN (10), CLOSE (7), TIME-WAIT (6) and SYN-RECV (3)
STATES = 0xFFF & ~((1 << 10) | (1 << 7) | (1 << 6) | (1 << 3))
STATE_NAMES = ("UNKNOWN", "ESTAB", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2",
               "TIME-WAIT", "UNCONN", "CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING")  # fmt: skip

NLMSG = struct.Struct("=IHHII")
REQ = struct.Struct("=BBBxI48x")  # inet_diag_req_v2, the socket id left empty (a dump)
REQ_V1 = struct.Struct("=BxxB48xIxxxx")  # inet_diag_req: family, ext, states (dbs 0)
MSG = struct.Struct("=BBBB2s2s16s16sI8sIIIII")  # inet_diag_msg; ports are big-endian
PORTS = struct.Struct("!HH")  # its source and destination ports, at offset 4
RTA = struct.Struct("=HH")
# struct tcp_info as of Linux 6.1 (linux/tcp.h); newer kernels append fields, older ones
# send fewer (zero-filled here, as ss does)
TCP_INFO = struct.Struct("=8B24I4Q6IQ3Q2I2Q4I")
TCP_FIELDS = (  # noqa: SIM905 (the struct's fields as the header lists them)
    "state ca_state retransmits probes backoff options wscale app_limited "
    "rto ato snd_mss rcv_mss unacked sacked lost retrans fackets last_data_sent "
    "last_ack_sent last_data_recv last_ack_recv pmtu rcv_ssthresh rtt rttvar snd_ssthresh "
    "snd_cwnd advmss reordering rcv_rtt rcv_space total_retrans pacing_rate "
    "max_pacing_rate bytes_acked bytes_received segs_out segs_in notsent_bytes min_rtt "
    "data_segs_in data_segs_out delivery_rate busy_time rwnd_limited sndbuf_limited "
    "delivered delivered_ce bytes_sent bytes_retrans dsack_dups reord_seen rcv_ooopack "
    "snd_wnd"
).split()
TCPI_OPT_WSCALE = 4
MPTCP_INFO = struct.Struct("=6B2xII3Q")  # struct mptcp_info up to rcv_nxt (linux/mptcp.h)
VEGAS = struct.Struct("=IIII")  # tcpvegas_info: enabled, rttcnt, rtt, minrtt
DCTCP = struct.Struct("=HHIII")  # tcp_dctcp_info: enabled, ce_state, alpha, ab_ecn, ab_tot
BBR = struct.Struct("=IIIII")  # tcp_bbr_info: bw_lo, bw_hi, min_rtt, pacing_gain, cwnd_gain
# MPTCP subflow attributes (linux/mptcp.h) and the flag letters ss prints, in its order
SF_TOKEN_REM, SF_TOKEN_LOC, SF_MAP_SEQ, SF_MAP_SFSEQ, SF_SSN_OFFSET = 1, 2, 4, 5, 6
SF_MAP_DATALEN, SF_FLAGS, SF_ID_REM, SF_ID_LOC = 7, 8, 9, 10
SF_LETTERS = "MmJjBbecv"  # bits 0..8: MCAP_REM, MCAP_LOC, JOIN_REM, ..., MAPVALID
CATCH_UP = 3  # a sampler this many intervals behind starts a new schedule (no burst)
STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def attrs(data: bytes | memoryview, pos: int = 0) -> dict[int, bytes]:
    """Netlink attributes from `pos` on: type (nested flag dropped) -> payload."""
    out = {}
    while pos + RTA.size <= len(data):
        length, kind = RTA.unpack_from(data, pos)
        if length < RTA.size:
            break
        out[kind & 0x3FFF] = bytes(data[pos + RTA.size : pos + length])
        pos += (length + 3) & ~3
    return out


def u32(raw: bytes) -> int:
    return int.from_bytes(raw[:4], sys.byteorder)


def num(value: float) -> str:
    """C's %g."""
    return f"{value:g}"


def bps(value: float) -> str:
    """ss -n's rates: %.0f bits/s."""
    return f"{value:.0f}"


def address(family: int, raw: bytes, port: int, ifindex: int) -> str:
    if family == socket.AF_INET:
        text = socket.inet_ntop(socket.AF_INET, raw[:4])
    elif raw == bytes(16):
        text = "*"
    else:
        text = "[" + socket.inet_ntop(socket.AF_INET6, raw) + "]"
    if ifindex:
        try:
            text += "%" + socket.if_indextoname(ifindex)
        except OSError:
            text += f"%if{ifindex}"
    return f"{text}:{port}"


def tcp_text(a: dict[int, bytes]) -> str:
    """The info line of a TCP socket (tcp_show_info and tcp_stats_print, without -o and -m)."""
    out: list[str] = []
    raw = a.get(A_INFO)
    if raw is not None:
        raw = raw[: TCP_INFO.size].ljust(TCP_INFO.size, b"\0")
        i = dict(zip(TCP_FIELDS, TCP_INFO.unpack(raw), strict=True))
        out += tcp_stats(i, a)
    ulp = attrs(a[A_ULP_INFO]) if A_ULP_INFO in a else {}
    if ULP_NAME in ulp:
        out.append("tcp-ulp-" + ulp[ULP_NAME].rstrip(b"\0").decode())
    if ULP_MPTCP in ulp:
        out += subflow(attrs(ulp[ULP_MPTCP]))
    return " ".join(out)


def plain(i: dict[str, int], names: str) -> list[str]:
    """`name:value` for each of `names` ("field" or "field=name") that is not zero."""
    return [f"{name}:{i[key]}" for key, name in pairs(names) if i[key]]


@functools.cache
def pairs(names: str) -> tuple[tuple[str, str], ...]:
    """("field", "name") of each of `names`, parsed once (a sample asks a dozen times per
    socket, and under emulation every Python step counts)."""
    return tuple((k, v or k) for k, _, v in (n.partition("=") for n in names.split()))


def tcp_stats(i: dict[str, int], a: dict[int, bytes]) -> list[str]:
    """tcp_stats_print's fields, in its order."""
    out = timing(i, a)
    out += plain(i, "snd_mss=mss pmtu rcv_mss=rcvmss advmss snd_cwnd=cwnd")
    if i["snd_ssthresh"] and i["snd_ssthresh"] < 0xFFFF:
        out.append(f"ssthresh:{i['snd_ssthresh']}")
    out += plain(i, "bytes_sent bytes_retrans bytes_acked bytes_received segs_out segs_in "
                    "data_segs_out data_segs_in")  # fmt: skip
    out += cc_info(a)
    rtt = i["rtt"]
    if A_VEGASINFO in a:
        enabled, _, vrtt, _ = VEGAS.unpack(a[A_VEGASINFO][: VEGAS.size].ljust(VEGAS.size, b"\0"))
        if enabled and vrtt and vrtt != 0x7FFFFFFF:
            rtt = vrtt
    if rtt > 0 and i["snd_mss"] and i["snd_cwnd"]:
        out.append(f"send {bps(i['snd_cwnd'] * i['snd_mss'] * 8000000.0 / rtt)}bps")
    out += plain(i, "last_data_sent=lastsnd last_data_recv=lastrcv last_ack_recv=lastack")
    return out + rates(i) + tail(i)


def timing(i: dict[str, int], a: dict[int, bytes]) -> list[str]:
    """The congestion control's name, window scales and timers."""
    out = [a[A_CONG].split(b"\0")[0].decode()] if A_CONG in a else []
    if i["options"] & TCPI_OPT_WSCALE:
        out.append(f"wscale:{i['wscale'] & 0xF},{i['wscale'] >> 4}")
    if i["rto"] and i["rto"] != 3000000:
        out.append("rto:" + num(i["rto"] / 1000))
    out += plain(i, "backoff")
    if i["rtt"]:
        out.append(f"rtt:{num(i['rtt'] / 1000)}/{num(i['rttvar'] / 1000)}")
    if i["ato"]:
        out.append("ato:" + num(i["ato"] / 1000))
    return out


def cc_info(a: dict[int, bytes]) -> list[str]:
    """dctcp's and bbr's own info, as ss prints them."""
    out = []
    if A_DCTCPINFO in a:
        d = DCTCP.unpack(a[A_DCTCPINFO][: DCTCP.size].ljust(DCTCP.size, b"\0"))
        if d[0]:
            out.append(f"dctcp:(ce_state:{d[1]},alpha:{d[2]},ab_ecn:{d[3]},ab_tot:{d[4]})")
        else:
            out.append("dctcp:fallback_mode")
    if A_BBRINFO in a:
        lo, hi, min_rtt, pacing, cwnd = BBR.unpack(a[A_BBRINFO][: BBR.size].ljust(BBR.size, b"\0"))
        text = f"bbr:(bw:{bps(((hi << 32) | lo) * 8.0)}bps,mrtt:{num(min_rtt / 1000.0)}"
        text += f",pacing_gain:{num(pacing / 256.0)}" if pacing else ""
        text += f",cwnd_gain:{num(cwnd / 256.0)}" if cwnd else ""
        out.append(text + ")")
    return out


def rates(i: dict[str, int]) -> list[str]:
    out = []
    unset = (1 << 64) - 1
    if i["pacing_rate"] and i["pacing_rate"] != unset:
        text = f"pacing_rate {bps(i['pacing_rate'] * 8.0)}bps"
        if i["max_pacing_rate"] and i["max_pacing_rate"] != unset:
            text += f"/{bps(i['max_pacing_rate'] * 8.0)}bps"
        out.append(text)
    if i["delivery_rate"]:
        out.append(f"delivery_rate {bps(i['delivery_rate'] * 8.0)}bps")
    out += plain(i, "delivered delivered_ce")
    if i["app_limited"] & 1:
        out.append("app_limited")
    busy = i["busy_time"]
    if busy:
        out.append(f"busy:{busy // 1000}ms")
        for key in ("rwnd_limited", "sndbuf_limited"):
            if i[key]:
                out.append(f"{key}:{i[key] // 1000}ms({100.0 * i[key] / busy:.1f}%)")
    return out


def tail(i: dict[str, int]) -> list[str]:
    """Losses, reordering and the receive side."""
    out = plain(i, "unacked")
    if i["retrans"] or i["total_retrans"]:
        out.append(f"retrans:{i['retrans']}/{i['total_retrans']}")
    out += plain(i, "lost")
    out += plain(i, "sacked") if i["state"] != 10 else []  # not for a listener
    out += plain(i, "dsack_dups fackets")
    out += [f"reordering:{i['reordering']}"] if i["reordering"] != 3 else []
    out += plain(i, "reord_seen")
    out += ["rcv_rtt:" + num(i["rcv_rtt"] / 1000)] if i["rcv_rtt"] else []
    out += plain(i, "rcv_space rcv_ssthresh notsent_bytes=notsent")
    if i["min_rtt"] and i["min_rtt"] != 0xFFFFFFFF:
        out.append("minrtt:" + num(i["min_rtt"] / 1000))
    return out + plain(i, "rcv_ooopack snd_wnd")


def subflow(sf: dict[int, bytes]) -> list[str]:
    """An MPTCP subflow's part of the info line (mptcp_subflow_info)."""
    out = []
    flags = u32(sf[SF_FLAGS]) if SF_FLAGS in sf else 0
    if flags:
        out.append("flags:" + "".join(c for b, c in enumerate(SF_LETTERS) if flags >> b & 1))
    if all(k in sf for k in (SF_TOKEN_REM, SF_TOKEN_LOC, SF_ID_REM, SF_ID_LOC)):
        rem, loc = u32(sf[SF_TOKEN_REM]), u32(sf[SF_TOKEN_LOC])
        out.append(f"token:{rem:04x}(id:{sf[SF_ID_REM][0]})/{loc:04x}(id:{sf[SF_ID_LOC][0]})")
    if SF_MAP_SEQ in sf:
        out.append(f"seq:{int.from_bytes(sf[SF_MAP_SEQ][:8], sys.byteorder):x}")
    for key, name in (
        (SF_MAP_SFSEQ, "sfseq"),
        (SF_SSN_OFFSET, "ssnoff"),
        (SF_MAP_DATALEN, "maplen"),
    ):
        if key in sf:
            out.append(f"{name}:{u32(sf[key]):x}")
    return out


def mptcp_text(a: dict[int, bytes]) -> str:
    """The info line of an MPTCP socket (mptcp_stats_print)."""
    if A_INFO not in a:
        return ""
    raw = a[A_INFO][: MPTCP_INFO.size].ljust(MPTCP_INFO.size, b"\0")
    sub, sig, acc, sub_max, sig_max, acc_max, flags, token, wseq, una, nxt = MPTCP_INFO.unpack(raw)
    out = [f"{name}:{v}" for name, v in (("subflows", sub), ("add_addr_signal", sig),
           ("add_addr_accepted", acc), ("subflows_max", sub_max),
           ("add_addr_signal_max", sig_max), ("add_addr_accepted_max", acc_max)) if v]  # fmt: skip
    out += ["fallback"] if flags & 1 else []
    out += ["remote_key"] if flags & 2 else []
    out += [f"{name}:{v:x}" for name, v in (("token", token), ("write_seq", wseq),
            ("snd_una", una), ("rcv_nxt", nxt)) if v]  # fmt: skip
    return " ".join(out)


class Sampler:
    """One netlink socket, kept; `sample()` is one `ss -tinHM` over the traffic ports."""

    def __init__(self, ports: set[int]) -> None:
        self.ports = ports
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
        self.seq = 0

    def request(self, kind: int, body: bytes) -> list[tuple[bytes, dict[int, bytes]]] | None:
        """(inet_diag_msg, attributes) of each socket of the traffic ports a dump request
        returns; None when the kernel refuses it."""
        self.seq += 1
        head = NLMSG.pack(NLMSG.size + len(body), kind, NLM_F_REQUEST | NLM_F_DUMP, self.seq, 0)
        self.sock.sendto(head + body, (0, 0))
        out: list[tuple[bytes, dict[int, bytes]]] = []
        while True:
            data = memoryview(self.sock.recv(1 << 17))
            pos = 0
            while pos + NLMSG.size <= len(data):
                length, kind, _, seq, _ = NLMSG.unpack_from(data, pos)
                if length < NLMSG.size:
                    return out
                msg = data[pos + NLMSG.size : pos + length]
                pos += (length + 3) & ~3
                if seq != self.seq:
                    continue
                if kind == NLMSG_DONE:
                    return out
                if kind == NLMSG_ERROR:
                    return None
                sport, dport = PORTS.unpack_from(msg, 4)
                if sport in self.ports or dport in self.ports:  # the others left unparsed
                    out.append((bytes(msg[: MSG.size]), attrs(msg, MSG.size)))

    def tcp(self) -> list[tuple[bytes, dict[int, bytes]]]:
        """The TCP sockets of both families from one walk of the kernel's established-socket
        hash (the old TCPDIAG_GETSOCK request asks for every family): a dump costs that
        walk, which ss's two requests pay twice (2 ms natively where a namespace shares the
        kernel's 262144 buckets; a rig host has 1024 of its own, mprig/rig/netns.py). IPv4
        first, as ss prints them."""
        got = self.request(TCPDIAG_GETSOCK, REQ_V1.pack(socket.AF_INET, EXT, STATES))
        if got is None:  # a kernel without the old request: one dump per family, as ss
            got = [
                *self.dump(socket.AF_INET, IPPROTO_TCP),
                *self.dump(socket.AF_INET6, IPPROTO_TCP),
            ]
        return sorted(got, key=lambda m: m[0][0] != socket.AF_INET)

    def dump(self, family: int, protocol: int) -> list[tuple[bytes, dict[int, bytes]]]:
        """One family and protocol, as ss asks (the extended protocol attribute for MPTCP).
        A refusal is nothing to show (no IPv6, no MPTCP diag), except IPv4 TCP."""
        body = REQ.pack(family, protocol if protocol < 256 else 0, EXT, STATES)
        if protocol > 255:
            body += RTA.pack(RTA.size + 4, REQ_PROTOCOL) + protocol.to_bytes(4, sys.byteorder)
        got = self.request(SOCK_DIAG_BY_FAMILY, body)
        if got is None and (family, protocol) == (socket.AF_INET, IPPROTO_TCP):
            raise OSError("the kernel answers no TCP socket dump (sock_diag, tcp_diag)")
        return got or []

    def sample(self) -> str:
        lines = [f"# {time.time():.6f}"]
        mptcp = [
            *self.dump(socket.AF_INET, IPPROTO_MPTCP),
            *self.dump(socket.AF_INET6, IPPROTO_MPTCP),
        ]
        for netid, info, socks in (("tcp", tcp_text, self.tcp()), ("mptcp", mptcp_text, mptcp)):
            for msg, a in socks:
                fam, state, _, _, sport, dport, src, dst, ifindex, _, _, rq, wq, *_ = MSG.unpack(
                    msg
                )
                sport, dport = int.from_bytes(sport, "big"), int.from_bytes(dport, "big")
                name = STATE_NAMES[state] if state < len(STATE_NAMES) else "UNKNOWN"
                local = address(fam, src, sport, ifindex)
                lines.append(f"{netid}   {name} {rq:<6d} {wq:<6d} {local} "
                             f"{address(fam, dst, dport, 0)}")  # fmt: skip
                lines.append("\t " + info(a))
        return "\n".join(lines) + "\n"


def write(text: str) -> None:
    data = text.encode()
    while data:
        data = data[os.write(1, data) :]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not all(a.isdigit() for a in argv):
        print("usage: ss_agent INTERVAL_US PORT...", file=sys.stderr)
        return 2
    step = int(argv[0]) / 1e6
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP)  # a stop is taken between two samples
    try:
        sampler = Sampler({int(p) for p in argv[1:]})
        due = time.monotonic()
        while True:
            write(sampler.sample())
            now = time.monotonic()
            due += step
            if due < now - CATCH_UP * step:
                due = now
            if signal.sigtimedwait(STOP, max(due - now, 0.0)) is not None:
                return 0
    except OSError as e:  # goes to the artifact's log, as ss's own errors did
        print(f"mprig-ss: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
