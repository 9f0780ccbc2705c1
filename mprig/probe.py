"""Preflight probe: does MPTCP survive each client path? (the middlebox study of seed 004)

For every path of a rig, the client sends one SYN carrying MP_CAPABLE out of that path's
interface (scapy, from the path's address), while the server listens with an MPTCP socket and
records every SYN as it arrives. Comparing the two ends gives one verdict per path:

    returned       the SYN-ACK came back with MP_CAPABLE: MPTCP can use this path
    stripped       MP_CAPABLE was removed from the SYN (seen at the server) or from the SYN-ACK
    seq-rewritten  the server saw another initial sequence number than the client sent, or
                   the SYN-ACK acknowledges another one (a sequence-randomising middlebox)
    no-answer      no SYN-ACK: the SYN (or its answer) was dropped on the way
    reset          the server's side answered with RST (nothing listening, or a firewall)

The remote halves live in mprig/probe_agent.py and run as `python -c <source>` on the hosts.
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
VERDICTS = ("returned", "stripped", "seq-rewritten", "no-answer", "reset")


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


def parse_server_log(text: str) -> dict[tuple[str, int], dict[str, Any]]:
    """SYNs the server agent printed, by (source address, source port); first one wins."""
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "sport" in record:
            seen.setdefault((record["src"], record["sport"]), record)
    return seen


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


def _probes(
    links: Sequence[PathLink], server_addr: str, port: int, rng: random.Random
) -> list[dict[str, Any]]:
    return [
        {"if": link.client_if, "src": link.client_addr, "dst": server_addr, "port": port,
         "sport": rng.randrange(20000, 60000), "seq": rng.randrange(2**32)}
        for link in links
    ]  # fmt: skip


def _answers(client: Host, rc: int, stdout: str, stderr: str) -> list[dict[str, Any] | None]:
    """The client agent's JSON list; its last error line (not our script) when it failed."""
    lines = stdout.strip().splitlines()
    if rc != 0 or not lines:
        err = (stderr.strip().splitlines() or [f"exit status {rc}"])[-1]
        hint = " (is scapy installed? python3-scapy)" if "scapy" in err else ""
        raise HostError(client.name, f"probe agent failed: {err}{hint}")
    answers: list[dict[str, Any] | None] = json.loads(lines[-1])
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
) -> list[PathProbe]:
    """Probe every path of `rig`; one PathProbe per path, in path order."""
    py = python or python_for(rig)
    server, client = rig.hosts["server"], rig.hosts["client"]
    log = f"/tmp/mprig-probe-{rig.name}-{port}.log"
    probes = _probes(rig.paths, rig.server_addr, port, random.Random(seed))
    listener = server.start([py, "-c", agent_source(), "server", str(port)], log=log)
    try:
        _wait_ready(server, log)
        argv = [py, "-c", agent_source(), "client", json.dumps(probes), str(timeout)]
        done = client.run(argv, timeout=30 + len(probes) * (2 * timeout + 5), check=False)
        answers = _answers(client, done.returncode, done.stdout, done.stderr)
    finally:
        seen = parse_server_log(listener.stop().stdout)
        server.run(["rm", "-f", "--", log, f"{log}.pid", f"{log}.rc"], check=False)
    return [
        _result(link, p, seen, a) for link, p, a in zip(rig.paths, probes, answers, strict=True)
    ]


def _result(
    link: PathLink,
    p: dict[str, Any],
    seen: dict[tuple[str, int], dict[str, Any]],
    answer: dict[str, Any] | None,
) -> PathProbe:
    # Behind a NAT the server sees another source: fall back to the (unchanged) ISN.
    by_seq = {record["seq"]: record for record in seen.values()}
    at_server = seen.get((p["src"], p["sport"])) or by_seq.get(p["seq"])
    verdict, detail = classify(p["seq"], at_server, answer)
    return PathProbe(
        path=link.name,
        client_if=link.client_if,
        verdict=verdict,
        detail=detail,
        sent_seq=p["seq"],
        server_seq=None if at_server is None else at_server["seq"],
        syn_mp_capable=None if at_server is None else at_server["mp_capable"],
        synack_mp_capable=None if not answer or "error" in answer else answer["mp_capable"],
    )
