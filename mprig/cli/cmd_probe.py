"""`mprig probe`: does each client path let MPTCP through? (preflight before a campaign)"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mprig.errors import UsageError
from mprig.rig.layout import DEFAULT_RIG

EPILOG = f"""\
examples:
  mprig probe                          probe every path of the virtual rig "{DEFAULT_RIG}" (the one
                                       `mprig rig up` and `mprig run` use)
  mprig probe --rig h7                 another virtual rig (it must be up: mprig rig up)
  mprig probe --inventory inventory/lab    the lab rig described by an Ansible inventory
  mprig probe --json                   one JSON object per path

  path  interface  verdict       detail
  wifi  wlan0      ok            MP_CAPABLE handshake, 48000 bytes echoed, 34 data segments ...
  cell  wwan0      dss-stripped  34 of 34 data segments on this path reached the server ...

Per path: a SYN carrying MP_CAPABLE (scapy, with a chosen ISN), then a real MPTCP
connection from the path's address sending 48000 bytes that the server echoes back.
verdicts: ok (MPTCP works, data with DSS both ways), stripped (MP_CAPABLE removed on the
way), seq-rewritten (a middlebox changed the initial sequence number), no-answer (SYN or
SYN-ACK dropped), reset (RST instead of SYN-ACK), dss-stripped (data arrived without its
DSS mapping, or DSS packets dropped), fallback (the connection fell back to TCP),
data-failed (the transfer failed or came back short). Exit status 0 only when every path
says `ok`. `mprig run` on a lab rig runs this before the first run (--no-preflight skips).
The client needs scapy (python3-scapy on a lab client) and both ends need root.
"""


def register(subparsers: Any) -> None:
    """Add the `probe` command."""
    p = subparsers.add_parser(
        "probe",
        help="check that MPTCP (handshake and data with DSS) survives every client path",
        description="Send a SYN carrying MP_CAPABLE on each client path, then a data transfer "
        "over a real MPTCP connection, and report, per path, whether the handshake and the "
        "DSS mappings survive, are stripped, or sequence numbers are rewritten.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--rig", metavar="NAME", help=f"a virtual rig that is up (default: {DEFAULT_RIG})"
    )
    where.add_argument("--inventory", metavar="DIR", type=Path, help="a lab Ansible inventory")
    p.add_argument("--port", type=int, default=5299, help="server port to probe (default 5299)")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds to wait per answer")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    p.set_defaults(func=cmd_probe)


def _rig(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The rig, and the Python its hosts run the agents with (None: mprig.rig.probe's default)."""
    if args.inventory is not None:
        from mprig.rig.inventory import host_python, load_inventory, rig_from_inventory

        data = load_inventory(args.inventory)
        return rig_from_inventory(args.inventory, data), host_python(data)
    from mprig.rig import virtual

    name = args.rig or DEFAULT_RIG
    rig = virtual.load(name)
    if rig is None:
        raise UsageError(
            f"virtual rig {name!r} is not up: start it with `mprig rig up --name {name}`"
        )
    return rig, None


def render(results: list[Any]) -> str:
    """The per-path table."""
    rows = [("path", "interface", "verdict", "detail")]
    rows += [(r.path, r.client_if, r.verdict, r.detail) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    )


def cmd_probe(args: argparse.Namespace) -> int:
    from mprig.rig.probe import probe

    rig, python = _rig(args)
    results = probe(rig, port=args.port, timeout=args.timeout, python=python)
    if args.json:
        print("\n".join(json.dumps(asdict(r)) for r in results))
    else:
        print(render(results))
    return 0 if all(r.verdict == "ok" for r in results) else 1
