"""The runner's readiness waits (run_attempt.wait_cmd): bash builtins only, exit 0 when ready."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

from mprig.run.run_attempt import wait_cmd


def status(argv: list[str]) -> int:
    return subprocess.run(argv, capture_output=True, check=False, timeout=30).returncode


def test_a_log_line_that_appears_later_ends_the_wait_with_status_0(tmp_path: Path) -> None:
    log = tmp_path / "tcpdump.log"  # missing at first, as when tcpdump has not started

    def later() -> None:
        time.sleep(0.3)
        log.write_text("tcpdump: data link type LINUX_SLL2\ntcpdump: listening on any\n")

    writer = threading.Thread(target=later)
    writer.start()
    # `read -t` returns 142 on every timeout: the loop must not end with its status
    assert status(wait_cmd('logged "$1" "listening on"', str(log), limit=5).argv) == 0
    writer.join()


def test_a_wait_that_never_succeeds_ends_with_status_1(tmp_path: Path) -> None:
    (tmp_path / "log").write_text("tcpdump: permission denied\n")
    argv = wait_cmd('logged "$1" "listening on"', str(tmp_path / "log"), limit=0.2).argv
    assert status(argv) == 1


def test_listening_sees_ipv4_and_ipv6_listeners_only() -> None:
    with socket.socket() as s4, socket.socket(socket.AF_INET6) as s6, socket.socket() as idle:
        s4.bind(("127.0.0.1", 0))
        s4.listen()
        s6.bind(("::1", 0))
        s6.listen()
        idle.bind(("127.0.0.1", 0))  # bound, not listening
        ports = [s.getsockname()[1] for s in (s4, s6, idle)]
        got = [status(wait_cmd('listening "$1"', str(p), limit=0.2).argv) for p in ports]
    assert got == [0, 0, 1]
