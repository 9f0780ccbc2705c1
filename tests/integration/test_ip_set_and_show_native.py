"""knobs.set_and_show against the real `ip` in a fresh namespace: one `ip -batch` sets the
MPTCP limits and endpoints and shows them, and isolation.with_mptcp reads from its output
exactly what the settings read-back (READ_SCRIPT's own `ip -batch`) reads; a line that
fails stops the batch with a non-zero status and shows nothing, so a failed set is never
read back as if it had worked."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from nslink import scratch_ns, sh

from mprig.stack import isolation, knobs

pytestmark = pytest.mark.integration


@pytest.fixture
def ns() -> Iterator[str]:
    with scratch_ns("mprig-ipshow") as name:
        for link in ("wlan0", "wwan0"):
            sh("ip", "-n", name, "link", "add", link, "type", "veth", "peer", "name", f"{link}p")
        sh("ip", "-n", name, "addr", "add", "10.1.1.2/24", "dev", "wlan0")
        sh("ip", "-n", name, "addr", "add", "10.2.1.2/24", "dev", "wwan0")
        yield name


def _in(ns: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=30
    )


def test_one_batch_sets_and_reads_back_what_the_read_back_reads(ns: str) -> None:
    batch = knobs.ip_batch(
        [
            "mptcp limits set subflows 4 add_addr_accepted 3",
            "mptcp endpoint flush",
            "mptcp endpoint add 10.1.1.2 dev wlan0 id 1 subflow",
            "mptcp endpoint add 10.2.1.2 dev wwan0 id 2 subflow",
        ]
    )
    shows = knobs.set_and_show(batch)
    assert shows is not None
    done = _in(ns, shows)
    assert done.returncode == 0, done.stderr
    read = _in(ns, isolation.read_argv(["net.ipv4.tcp_sack"], []))
    assert read.returncode == 0
    without = _in(ns, isolation.read_argv(["net.ipv4.tcp_sack"], [], mptcp=False))
    got = isolation.with_mptcp(isolation.parse(without.stdout), done.stdout)
    assert got == isolation.parse(read.stdout)
    assert got.mptcp_limits == {"add_addr_accepted": "3", "subflows": "4"}
    assert len(got.endpoints) == 2 and got.sysctls["net.ipv4.tcp_sack"] in ("0", "1")


def test_a_failed_set_line_fails_the_batch_and_shows_nothing(ns: str) -> None:
    shows = knobs.set_and_show(["ip", "mptcp", "endpoint", "add", "10.9.9.9", "dev", "nope0"])
    assert shows is not None
    done = _in(ns, shows)
    assert done.returncode != 0 and done.stderr.strip()
    assert "subflows" not in done.stdout and "add_addr_accepted" not in done.stdout
