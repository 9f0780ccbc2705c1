"""The runner's side of RBPM (mprig.stack.rbpm): the controller's command on the client, its log
in the bundle, and the endpoints' backup flags cleared after the run."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from mprig.campaign.plan import Run
from mprig.campaign.spec import Variant
from mprig.rig.host import PathLink
from mprig.run import traffic
from mprig.stack import knobs

LOG = "rbpm.jsonl"  # the controller's decisions, one JSON line per step (docs/bundle.md)
STDOUT = "rbpm.log"  # its stdout and stderr (empty unless Python itself fails)
INTERVAL_S = 0.1
SOURCE_NAME = "<mprig/stack/rbpm.py>"


INLINED = ("rbpm_policy", "rbpm_ss")  # the modules rbpm.py imports (standard library only)


@functools.cache
def source() -> str:
    """mprig/stack/rbpm.py with the modules it imports inlined, sent as `python3 -c` (a lab
    client needs Python, not mprig)."""
    here = Path(__file__).resolve().parents[1] / "stack"
    text = (here / "rbpm.py").read_text()
    for name in INLINED:
        text = _inline(text, name, (here / f"{name}.py").read_text())
    return text


def _inline(text: str, name: str, module: str) -> str:
    """TEXT with its `from mprig.stack.NAME import ...` statement replaced by MODULE's imports
    and definitions (its docstring and __future__ import stay out: TEXT has them)."""
    node = next(
        n
        for n in ast.parse(text).body
        if isinstance(n, ast.ImportFrom) and n.module == f"mprig.stack.{name}"
    )
    lines = text.splitlines(keepends=True)
    body = module.split("from __future__ import annotations\n", 1)[1]
    return "".join([*lines[: node.lineno - 1], body, *lines[node.end_lineno or node.lineno :]])


def controller_argv(run: Run, log: str, sender_ss: str | None = None) -> list[str]:
    """The controller on the client: the receiver in a download, the sender in an upload.
    In a download it reads the server's ss sampler output `sender_ss` (the paper's inputs
    are the sender's srtt and cwnd; docs/rbpm.md)."""
    port = traffic.IPERF3_PORT if run.traffic.tool == "iperf3" else traffic.BULK_PORT
    down = run.traffic.direction == "download"
    role = "receiver" if down else "sender"
    args = ["--port", str(port), "--role", role, "--interval", str(INTERVAL_S), "--log", log]
    if down and sender_ss is not None:
        args += ["--sender-ss", sender_ss]
    return ["python3", "-c", source(), *args]


def shown(argv: list[str]) -> list[str]:
    """The controller's argv for people (`mprig plan --commands`): its source as a name."""
    return [SOURCE_NAME if a == source() else a for a in argv]


def restore_commands(variant: Variant, links: tuple[PathLink, ...]) -> list[tuple[str, list[str]]]:
    """Clear the backup flag on every endpoint the variant uses (the controller does on exit;
    this covers a controller that was killed), so no run inherits one."""
    ids = [str(links.index(link) + 1) for link in knobs.used_links(variant, links)]
    return [("client", ["ip", "mptcp", "endpoint", "change", "id", i, "nobackup"]) for i in ids]


def doctor_check() -> tuple[bool, str]:
    """Whether the RBPM controller can run here: ss lists MPTCP sockets (MPTCP diag) and
    ip manages MPTCP endpoints."""
    import subprocess

    for argv in (["ss", "-HMm"], ["ip", "mptcp", "endpoint", "show"], ["python3", "-V"]):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"`{' '.join(argv)}` failed: {e}"
        if done.returncode != 0:
            err = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return False, f"`{' '.join(argv)}` exited {done.returncode}: {err}"
    return True, "ss -M (MPTCP diag), ip mptcp endpoint and python3 present"
