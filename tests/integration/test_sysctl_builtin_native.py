"""knobs.SYSCTL_W against the real /proc/sys of a fresh network namespace: what `sysctl -q
-w` would set is set (values with spaces, names given with dots or slashes), a name that
does not exist fails the command with procps' status, without stopping the
assignments after it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from nslink import scratch_ns

from mprig.stack import knobs

pytestmark = pytest.mark.integration


@pytest.fixture
def ns() -> Iterator[str]:
    with scratch_ns("mprig-sysctlw") as name:
        yield name


def _sysctl_w(ns: str, *assignments: str) -> subprocess.CompletedProcess[str]:
    argv = ["ip", "netns", "exec", ns, "bash", "-c", knobs.SYSCTL_W, "x", *assignments]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def _read(ns: str, key: str) -> str:
    argv = ["ip", "netns", "exec", ns, "sysctl", "-n", key]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def test_the_builtin_sets_what_sysctl_would(ns: str) -> None:
    p = _sysctl_w(
        ns,
        "net.ipv4.tcp_sack=0",
        "net.ipv4.tcp_rmem=4096 131072 1000000",
        "net/mptcp/enabled=0",
    )
    assert (p.returncode, p.stderr) == (0, "")
    assert _read(ns, "net.ipv4.tcp_sack") == "0"
    assert _read(ns, "net.ipv4.tcp_rmem").split() == ["4096", "131072", "1000000"]
    assert _read(ns, "net.mptcp.enabled") == "0"


def test_an_unknown_name_fails_like_sysctl_and_the_rest_is_set(ns: str) -> None:
    p = _sysctl_w(ns, "net.ipv4.no_such_knob=1", "net.ipv4.tcp_sack=0")
    assert p.stderr == "sysctl: cannot set net.ipv4.no_such_knob\n"
    assert _read(ns, "net.ipv4.tcp_sack") == "0"
    ref = subprocess.run(
        ["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.no_such_knob=1"],
        capture_output=True,
        timeout=30,
    )
    assert p.returncode == ref.returncode != 0  # procps' status, which the builtin copies
