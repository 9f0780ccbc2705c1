"""Preflight probe: does MPTCP survive each client path? (the middlebox study of paper 004)

For every path of a rig, two steps. First the client sends one SYN carrying MP_CAPABLE out of
that path's interface (scapy, from the path's address, with an ISN it chose), while the server
listens with an MPTCP socket and records every SYN as it arrives: that shows option stripping
and ISN rewriting on the handshake. Then the client opens a real MPTCP connection from the
path's address, sends TRANSFER_BYTES and reads them back (the server echoes), while the server
records every data segment of it: that shows whether data crosses the path with its DSS
mappings, both ways, without falling back to TCP. One verdict per path:

    ok             MP_CAPABLE handshake intact, the data came back intact, every data segment
                   on this path carried a DSS mapping and neither end fell back to TCP
    stripped       MP_CAPABLE was removed from the SYN (seen at the server) or from the SYN-ACK
    seq-rewritten  the server saw another initial sequence number than the client sent, or
                   the SYN-ACK acknowledges another one (a sequence-randomising middlebox)
    no-answer      no SYN-ACK: the SYN (or its answer) was dropped on the way
    reset          the server's side answered with RST (nothing listening, or a firewall)
    dss-stripped   data segments reached the server without a DSS mapping (options removed
                   from data packets), or none on this path carried one (DSS packets dropped)
    fallback       the connection fell back to plain TCP (an MPTCP option lost after the SYN)
    data-failed    the transfer failed, timed out, or the echo came back short or altered

The remote halves live in mprig/rig/probe_agent.py and run as `python -c <source>` on the hosts.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mprig.errors import HostError
from mprig.rig.host import Host, PathLink, Rig

PROBE_PORT = 5299  # server port the probe listens on (an MPTCP socket, only while probing)
TRANSFER_BYTES = 48_000  # more than one initial window: several DSS segments on the path
VERDICTS = (
    "ok", "stripped", "seq-rewritten", "no-answer", "reset", "dss-stripped", "fallback",
    "data-failed",
)  # fmt: skip


@dataclass(frozen=True)
class PathProbe:
    """The probe's outcome on one path."""

    path: str  # spec path name
    client_if: str  # interface the SYN left through
    verdict: str  # one of VERDICTS
    detail: str  # one line saying what was seen
    sent_seq: int  # ISN the client put in the SYN
    server_seq: int | None  # ISN as the server saw it (None: the SYN never arrived)
    syn_mp_capable: bool | None  # the SYN arrived at the server carrying MP_CAPABLE
    synack_mp_capable: bool | None  # the SYN-ACK arrived at the client carrying MP_CAPABLE
    data_segments: int | None = None  # data segments of the transfer the server saw here
    mapped_segments: int | None = None  # of which carried a DSS mapping


def agent_source() -> str:
    """Source of the remote agent, sent with `python -c`."""
    return Path(__file__).with_name("probe_agent.py").read_text()


def classify(
    sent_seq: int, at_server: dict[str, Any] | None, answer: dict[str, Any] | None
) -> tuple[str, str]:
    """(verdict, detail) from the SYN as the server saw it and the answer the client got."""
    if answer is not None and "error" in answer:
        return "no-answer", str(answer["error"])
    if at_server is not None and at_server["seq"] != sent_seq:
        return "seq-rewritten", f"client sent ISN {sent_seq}, server saw {at_server['seq']}"
    if answer is None:
        where = "the SYN never reached the server" if at_server is None else "no SYN-ACK came back"
        return "no-answer", where
    if "R" in answer["flags"]:
        return "reset", f"answered with {answer['flags']}"
    if answer["ack"] != (sent_seq + 1) % 2**32:
        return "seq-rewritten", f"SYN-ACK acknowledges {answer['ack']}, expected {sent_seq + 1}"
    if at_server is not None and not at_server["mp_capable"]:
        return "stripped", "the SYN reached the server without MP_CAPABLE"
    if not answer["mp_capable"]:
        return "stripped", "the SYN-ACK came back without MP_CAPABLE"
    return "returned", "the SYN-ACK carried MP_CAPABLE"


def classify_transfer(
    xfer: dict[str, Any],
    conn: dict[str, Any] | None,
    segments: list[dict[str, Any]],
    syn_mp_capable: bool | None = None,
) -> tuple[str, str]:
    """(verdict, detail) of the data step, from the client's view of the transfer, the
    server's view of the connection (None: never accepted), the data segments the server
    saw on the path's subflow and whether the transfer's own SYN reached it with
    MP_CAPABLE (None: not seen)."""
    if syn_mp_capable is False:
        return "fallback", "the transfer's SYN reached the server without MP_CAPABLE: " \
            "the client's kernel did not try MPTCP (net.mptcp.enabled, or its fallback " \
            "after lost MPTCP SYNs: net.mptcp.blackhole_timeout, " \
            "syn_retrans_before_tcp_fallback) or a middlebox stripped it"  # fmt: skip
    if "error" in xfer:
        return "data-failed", f"the transfer failed: {xfer['error']}"
    bare = sum(not s["mapped"] for s in segments)
    if bare:
        return "dss-stripped", f"{bare} of {len(segments)} data segments on this path " \
            "reached the server without a DSS mapping"  # fmt: skip
    fell_back = [who for who, ok in (("client", xfer["mptcp"]), ("server", (conn or {}).get(
        "mptcp", True))) if ok is not True]  # fmt: skip
    if fell_back:
        return "fallback", f"the connection fell back to TCP ({' and '.join(fell_back)} side)"
    if xfer["echoed"] != xfer["sent"] or not xfer["intact"]:
        how = "altered" if xfer["echoed"] == xfer["sent"] else "short"
        return "data-failed", f"{xfer['echoed']} of {xfer['sent']} bytes came back ({how})"
    if len(segments) < 2:
        return "dss-stripped", f"only {len(segments)} data segment of the transfer crossed " \
            "this path (DSS-bearing packets dropped?)"  # fmt: skip
    return "ok", f"MP_CAPABLE handshake, {xfer['sent']} bytes echoed, {len(segments)} " \
        "data segments on this path, each with a DSS mapping"  # fmt: skip


@dataclass(frozen=True)
class ServerLog:
    """What the server agent printed."""

    syns: dict[tuple[str, int], dict[str, Any]]  # (src, sport) -> first SYN seen
    data: dict[tuple[str, int], list[dict[str, Any]]]  # (src, sport) -> its data segments
    conns: dict[str, dict[str, Any]]  # probe index -> the connection the server echoed


def parse_server_log(text: str) -> ServerLog:
    """The server agent's JSON lines (anything else is ignored)."""
    log = ServerLog({}, {}, {})
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if "sport" in record:
            log.syns.setdefault((record["src"], record["sport"]), record)
        elif isinstance(record.get("data"), dict):
            d = record["data"]
            log.data.setdefault((d["src"], d["sport"]), []).append(d)
        elif isinstance(record.get("conn"), dict):
            c = record["conn"]
            log.conns.setdefault(str(c["probe"]).removeprefix("mprig-probe "), c)
    return log


def _wait_ready(server: Host, log: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = server.run(["cat", "--", log], check=False).stdout
        if '"ready"' in text:
            return
        if server.run(["test", "-s", f"{log}.rc"], check=False).returncode == 0:
            break
        time.sleep(0.2)
    tail = server.run(["tail", "-n", "3", "--", log], check=False).stdout.strip()
    raise HostError(server.name, f"probe listener did not start: {tail or 'no output'}")


def _wait_conns(server: Host, log: str, count: int, timeout: float = 5.0) -> None:
    """Until the server agent has reported `count` echoed connections (it reports each one
    once the client has closed it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.run(["cat", "--", log], check=False).stdout.count('{"conn"') >= count:
            return
        time.sleep(0.2)


def _probes(
    links: Sequence[PathLink], server_addr: str, port: int, rng: random.Random
) -> list[dict[str, Any]]:
    return [
        {"if": link.client_if, "src": link.client_addr, "dst": server_addr, "port": port,
         "sport": rng.randrange(20000, 60000), "seq": rng.randrange(2**32)}
        for link in links
    ]  # fmt: skip


def _answers(client: Host, rc: int, stdout: str, stderr: str) -> list[dict[str, Any]]:
    """The client agent's JSON list; its last error line (not our script) when it failed."""
    lines = stdout.strip().splitlines()
    if rc != 0 or not lines:
        err = (stderr.strip().splitlines() or [f"exit status {rc}"])[-1]
        hint = " (is scapy installed? python3-scapy)" if "scapy" in err else ""
        raise HostError(client.name, f"probe agent failed: {err}{hint}")
    answers: list[dict[str, Any]] = json.loads(lines[-1])
    return answers


def python_for(rig: Rig) -> str:
    """The interpreter on the rig's hosts: ours on the virtual rig (same filesystem)."""
    return sys.executable if rig.mode.startswith("virtual") else "python3"


def probe(
    rig: Rig,
    *,
    port: int = PROBE_PORT,
    timeout: float = 3.0,
    python: str | None = None,
    seed: int | None = None,
    size: int = TRANSFER_BYTES,
) -> list[PathProbe]:
    """Probe every path of `rig`; one PathProbe per path, in path order."""
    py = python or python_for(rig)
    server, client = rig.hosts["server"], rig.hosts["client"]
    log = f"/tmp/mprig-probe-{rig.name}-{port}.log"
    probes = _probes(rig.paths, rig.server_addr, port, random.Random(seed))
    listener = server.start([py, "-c", agent_source(), "server", str(port)], log=log)
    try:
        _wait_ready(server, log)
        argv = [py, "-c", agent_source(), "client", json.dumps(probes), str(timeout), str(size)]
        done = client.run(argv, timeout=30 + len(probes) * (6 * timeout + 5), check=False)
        answers = _answers(client, done.returncode, done.stdout, done.stderr)
        _wait_conns(server, log, sum("error" not in a["transfer"] for a in answers))
    finally:
        seen = parse_server_log(listener.stop().stdout)
        server.run(["rm", "-f", "--", log, f"{log}.pid", f"{log}.rc"], check=False)
    return [
        _result(str(i), link, p, seen, a)
        for i, (link, p, a) in enumerate(zip(rig.paths, probes, answers, strict=True))
    ]


def _result(
    index: str, link: PathLink, p: dict[str, Any], seen: ServerLog, answer: dict[str, Any]
) -> PathProbe:
    # Behind a NAT the server sees another source: fall back to the (unchanged) ISN.
    by_seq = {record["seq"]: record for record in seen.syns.values()}
    at_server = seen.syns.get((p["src"], p["sport"])) or by_seq.get(p["seq"])
    syn, xfer = answer["syn"], answer["transfer"]
    verdict, detail = classify(p["seq"], at_server, syn)
    conn = seen.conns.get(index)
    # The server's own view of the subflow's tuple (a NAT may have changed it).
    tuple_at_server = tuple(conn["peer"]) if conn else (p["src"], xfer.get("sport"))
    key = (str(tuple_at_server[0]), int(tuple_at_server[1] or 0))
    segments = seen.data.get(key, [])
    xfer_syn = seen.syns.get(key)
    if verdict == "returned":
        verdict, detail = classify_transfer(
            xfer, conn, segments, None if xfer_syn is None else xfer_syn["mp_capable"]
        )
    moved = "error" not in xfer
    return PathProbe(
        path=link.name,
        client_if=link.client_if,
        verdict=verdict,
        detail=detail,
        sent_seq=p["seq"],
        server_seq=None if at_server is None else at_server["seq"],
        syn_mp_capable=None if at_server is None else at_server["mp_capable"],
        synack_mp_capable=None if not syn or "error" in syn else syn["mp_capable"],
        data_segments=len(segments) if moved else None,
        mapped_segments=sum(s["mapped"] for s in segments) if moved else None,
    )
