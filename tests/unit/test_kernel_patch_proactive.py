"""Patch 0002's proactive scheduler: its DSN bookkeeping, run in userspace.

The patched kernel cannot boot here (no kernel build in CI; the VM runs Debian's stock kernel),
so this runs the patch's own functions (mptcp_pro_slot, _insert, _sendmsg, _skip and
mptcp_pending_head, taken from the patch text unchanged) against kernelsim/proactive_sim.c: a
userspace stand-in for the MPTCP socket's send queue and cursor, driving the patched
__mptcp_push_pending() loop with random jumps ahead. Every byte must be handed to a subflow
exactly once, snd_nxt must end at write_seq and no range may stay behind. The kernel build of
the same code is tests/integration/test_kernel_configs.py::test_upstream_patches_compile.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

PATCH = (
    Path(__file__).resolve().parents[2]
    / "kernel-configs/patches/upstream/0002-mptcp-proactive-scheduler-seed-001.patch"
)
SIM = Path(__file__).resolve().parent / "kernelsim" / "proactive_sim.c"
FUNCTIONS = (
    "mptcp_pro_slot",
    "mptcp_pro_insert",
    "mptcp_pro_sendmsg",
    "mptcp_pro_skip",
    "mptcp_pending_head",
)


def added_function(name: str) -> str:
    """A function the patch adds to net/mptcp/protocol.c, from its `+` lines."""
    diff = PATCH.read_text().split("+++ b/net/mptcp/protocol.c\n", 1)[1].split("\ndiff --git")[0]
    added = "\n".join(line[1:] for line in diff.splitlines() if line.startswith("+"))
    found = re.search(rf"^static [^\n]*\b{name}\(.*?^}}$", added, re.MULTILINE | re.DOTALL)
    assert found, f"{PATCH.name} no longer adds {name}()"
    return found[0]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc (build-essential)")
def test_every_byte_sent_once_and_snd_nxt_reaches_the_end(tmp_path: Path) -> None:
    (tmp_path / "pro.inc").write_text("\n\n".join(map(added_function, FUNCTIONS)) + "\n")
    binary = tmp_path / "sim"
    subprocess.run(
        ["gcc", "-O1", "-Wall", "-Wno-unused-function", "-Werror",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
         f"-I{tmp_path}", "-o", str(binary), str(SIM)],
        check=True, capture_output=True,
    )  # fmt: skip
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    # bad: bytes not sent exactly once; short: runs whose snd_nxt missed write_seq; left:
    # ranges never skipped; jumps / full: a slow subflow jumped ahead / the 8-range list filled
    assert done.stdout.splitlines() == [
        "delta<600 bad=0 short=0 left=0 jumps=1 full=0",
        "delta<6000 bad=0 short=0 left=0 jumps=1 full=1",
        "delta<20000 bad=0 short=0 left=0 jumps=1 full=1",
    ]
