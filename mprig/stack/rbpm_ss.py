"""RBPM's view of `ss -tinHMm` output, pure: the MPTCP connection and its subflows, their
skmem, srtt and cwnd, and `ip mptcp endpoint show`. Standard library only:
mprig.run.rbpm_run.source() inlines this module into the controller it ships to the client,
in place of mprig/stack/rbpm.py's import of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SsSocket:
    """One socket of `ss -tinHMm` output (the fields RBPM reads)."""

    netid: str  # tcp (a subflow) or mptcp (the connection)
    addr: str  # local address
    port: int  # local port
    token: str  # local MPTCP token: ties subflows to their connection
    info: dict[str, str]  # every key:value of the info line (skmem kept whole)
    peer: str = ""  # peer address
    peer_port: int = 0  # peer port


_SKMEM = re.compile(r"skmem:\(([^)]*)\)")
_TOKEN = re.compile(r"^(?:[0-9a-f]+\(id:\d+\)/)?([0-9a-f]+)(?:\(id:\d+\))?$")


def _local(text: str) -> tuple[str, int]:
    addr, _, port = text.rpartition(":")
    addr = addr.split("%")[0].strip("[]").removeprefix("::ffff:")  # `[v6]%dev:port`
    return addr, int(port) if port.isdigit() else 0


def _info(line: str) -> dict[str, str]:
    out = {}
    m = _SKMEM.search(line)
    if m:
        out["skmem"] = m.group(1)
    for tok in _SKMEM.sub("", line).split():
        key, sep, value = tok.partition(":")
        if sep:
            out[key] = value
    return out


def parse_ss(text: str) -> list[SsSocket]:
    """Sockets of `ss -tinHMm` (or `ss -tinH`) output: a socket line, then its indented
    info line."""
    out: list[SsSocket] = []
    head: list[str] | None = None
    for line in text.splitlines():
        if line[:1] in (" ", "\t") and head is not None:
            info = _info(line)
            m = _TOKEN.match(info.get("token", ""))
            addr, port = _local(head[4])
            token = m.group(1) if m else ""
            out.append(SsSocket(head[0], addr, port, token, info, *_local(head[5])))
            head = None
        elif line.strip():
            head = line.split()
            if head[0].isupper():  # `ss -t` alone prints no netid column: a TCP socket
                head = ["tcp", *head]
            if len(head) < 6:
                head = None
    return out


def skmem(sock: SsSocket) -> dict[str, int]:
    """The socket's memory counters: r (receive memory in use), rb (receive buffer), ..."""
    items = (re.match(r"([a-z]+)(\d+)$", p) for p in sock.info.get("skmem", "").split(","))
    return {m.group(1): int(m.group(2)) for m in items if m}


def connection(sockets: Sequence[SsSocket]) -> tuple[SsSocket | None, list[SsSocket]]:
    """The MPTCP connection that moved the most bytes and its established subflows."""
    conns = {s.token: s for s in sockets if s.netid == "mptcp" and s.token}
    subs = [s for s in sockets if s.netid == "tcp" and s.token in conns]

    def moved(token: str) -> int:
        return sum(
            ss_int(s, "bytes_received") + ss_int(s, "bytes_acked") for s in subs if s.token == token
        )

    if not conns:
        return None, []
    best = max(conns, key=moved)
    return conns[best], [s for s in subs if s.token == best]


def ss_int(sock: SsSocket, key: str) -> int:
    try:
        return int(sock.info.get(key, "0"))
    except ValueError:
        return 0


def ss_float(sock: SsSocket, key: str) -> float:
    try:
        return float(sock.info.get(key, "0").partition("/")[0])
    except ValueError:
        return 0.0


def last_sample(text: str) -> tuple[float, str] | None:
    """The newest complete sample of the ss sampler's output (a `# <unix time>` line, then
    ss's lines): its time and ss text. The sample after the last header may be half written."""
    heads = [m.start() for m in re.finditer(r"^# ", text, re.M)]
    if len(heads) < 2:
        return None
    header, _, body = text[heads[-2] : heads[-1]].partition("\n")
    try:
        return float(header[2:].strip()), body
    except ValueError:
        return None


def sender_subflows(text: str) -> dict[str, SsSocket]:
    """The sender's subflows in ss output, keyed the way the receiver keys its own: the
    peer's address:port (the client's local end)."""
    return {f"{s.peer}:{s.peer_port}": s for s in parse_ss(text) if s.netid == "tcp"}


def parse_endpoints(text: str) -> dict[str, tuple[int, bool]]:
    """`ip mptcp endpoint show`: local address -> (endpoint id, backup flag)."""
    out = {}
    for line in text.splitlines():
        tok = line.split()
        if "id" in tok and tok.index("id") + 1 < len(tok):
            out[tok[0]] = (int(tok[tok.index("id") + 1]), "backup" in tok)
    return out
