"""The kernel `make kernel-vm` builds (Debian's linux-source-6.1 + the upstream patch series +
upstream-mptcp.config) boots under virtme-ng and has what the series promises.

One boot under software emulation (about a minute) checks the running release against the one
the build recorded, MPTCP on, patch 0002's net.mptcp.proactive_sched (0 by default, settable),
and one MPTCP transfer over loopback with the proactive scheduler on. A missing bzImage is a
failure, not a skip: `make test-kernel` exists to check that kernel. Run it under
`flock /tmp/mprig-vm.lock` (vm.boot_lock takes the lock itself otherwise).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mprig.rig import vm

pytestmark = [pytest.mark.long, pytest.mark.vm, pytest.mark.integration]

KERNEL_VM = Path(os.environ.get("MPRIG_KERNEL_VM", "/var/cache/mprig/kernel-vm"))

# One MiB over MPTCP on loopback (IPPROTO_MPTCP = 262), then the MPTcpExt counters that show
# the connection was MPTCP on both ends; printed as key=value lines like the rest.
TRANSFER = r"""
import socket, threading
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
srv.bind(("127.0.0.1", 0)); srv.listen(1)
got = []
def serve():
    conn, _ = srv.accept(); n = 0
    while (chunk := conn.recv(65536)):
        n += len(chunk)
    got.append(n)
reader = threading.Thread(target=serve); reader.start()
cli = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
cli.connect(srv.getsockname()); cli.sendall(b"x" * (1 << 20)); cli.close(); reader.join()
print(f"received={got[0]}")
lines = [ln.split() for ln in open("/proc/net/netstat") if ln.startswith("MPTcpExt")]
counters = dict(zip(lines[0][1:], lines[1][1:]))
print(f"mpcapable_acks={counters['MPCapableACKRX']}")
"""

GUEST = (
    'echo "release=$(uname -r)"; '
    'echo "enabled=$(sysctl -n net.mptcp.enabled)"; '
    'echo "proactive_default=$(sysctl -n net.mptcp.proactive_sched)"; '
    "sysctl -qw net.mptcp.proactive_sched=1; "
    'echo "proactive_set=$(sysctl -n net.mptcp.proactive_sched)"; '
    "python3 {script}"
)


def built_kernel() -> tuple[Path, str]:
    """The bzImage and the release string `make kernel-vm` recorded next to it."""
    image, release = KERNEL_VM / "bzImage", KERNEL_VM / "release"
    if not (image.is_file() and release.is_file()):
        pytest.fail(f"no {image}: `make kernel-vm` builds it (see kernel-configs/README.md)")
    return image, release.read_text().strip()


@pytest.fixture(scope="module")
def guest() -> Iterator[dict[str, str]]:
    """Boot the built kernel once; the key=value lines the guest printed."""
    image, _ = built_kernel()
    share = Path(tempfile.mkdtemp(prefix="kernel-vm-", dir="/var/tmp"))  # guest has its own /tmp
    try:
        (share / "transfer.py").write_text(TRANSFER)
        argv = [vm.vng_path(), "--run", str(image), "--disable-kvm", "--memory", "1G"]
        argv += ["--rwdir", str(share), "--exec", GUEST.format(script=share / "transfer.py")]
        path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # vng runs virtme-run
        with vm.boot_lock():
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=900, env={**os.environ, "PATH": path}
            )
    finally:
        shutil.rmtree(share, ignore_errors=True)
    pairs = [ln.split("=", 1) for ln in done.stdout.splitlines() if "=" in ln]
    values = {k.strip(): v.strip() for k, v in pairs}
    assert "release" in values, (done.stdout + done.stderr)[-3000:]
    yield values


def test_kernel_is_built() -> None:
    """Fails with how to build it, where the tests below error in their fixture."""
    image, release = built_kernel()
    assert image.stat().st_size > 1 << 20 and release


def test_guest_runs_the_built_release(guest: dict[str, str]) -> None:
    _, release = built_kernel()
    assert guest["release"] == release
    assert release.endswith("-mprig-vm")


def test_proactive_sched_sysctl_exists_off_by_default(guest: dict[str, str]) -> None:
    assert (guest["enabled"], guest["proactive_default"], guest["proactive_set"]) == ("1", "0", "1")


def test_mptcp_transfer_with_proactive_scheduler(guest: dict[str, str]) -> None:
    assert guest["received"] == str(1 << 20)
    assert int(guest["mpcapable_acks"]) >= 1
