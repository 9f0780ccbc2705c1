"""Cross-check against the kernel (issue 3, part 7): in the VM rig (Debian's stock 6.1
kernel, with netem, one vCPU), real two-path MPTCP downloads (2 MB bulk transfers) with
unequal delays (10 and 40 ms) and 0.5 % loss on each path, captured on the receiver with
offloads off; summed over CAPTURES captures, our out-of-order count must be within 2 % of the
receiver's MPTcpExtOFOQueue deltas, and each capture within 8 %. One VM boot for the module
(about 2 minutes), CAPTURES transfers in it.

What is compared (docs/metrics.md, "Kernel cross-check"): the kernel counts skbs queued out
of order at the MPTCP level; we count out-of-order arrivals as skbs (collectors.kernelofo:
segments released together by one packet after a subflow hole, contiguous on one subflow,
are one coalesced skb, at most 8 segments each), summed over every MPTCP connection towards
the client, as the counter is per namespace. The conditions make the kernel process packets
in the order tcpdump records them: one vCPU, and a receiver that does not read until the
sender's DATA_FIN, with a receive buffer larger than the transfer
(tests/integration/realbundle.py HOLD_RECEIVER). A reading application holds the subflows'
socket locks, and packets arriving meanwhile reach MPTCP later from the socket backlog:
with the runner's reading receiver the counts differed by up to 4 % (8 runs: -4.0 to
+1.2 %). With the holding receiver 19 single captures differed by -3.5 to +0.8 %, 16 of
them within 0.8 %; the two of the three beyond -1.5 % whose receiver counters we kept are
the captures whose subflows reordered most (TcpExtTCPOFOQueue 347 and 356 against 136-268
in the others), where the kernel coalesced fewer released segments than the model assumes.
One capture against a 2 % bar therefore failed about one run in ten (one CI run: -2.5 %);
the sum over five holds the model's bias to 2 % and a single capture's spread to 8 %. A run
in which the kernel dropped data (out of its receive window, or as old data) or the sender
reinjected is run again: after such a drop the kernel keeps a hole the capture does not
show until the sender reinjects, so the two counts measure different things.
"""

from __future__ import annotations

import fcntl
import functools
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from quiet import quiet

from collectors.analyze import analyze_pcap
from collectors.collect import Options, collect_campaign
from collectors.kernelofo import ofo_skbs
from collectors.nstat import run_deltas
from mprig.rig.vmsession import VmSession

pytestmark = [pytest.mark.vm, pytest.mark.slow]

MAKER = Path(__file__).parents[1] / "integration" / "realbundle.py"
CLIENT = {"10.55.1.1", "10.55.2.1"}
CAPTURES = 5  # clean captures compared, summed
RETRIES = 3  # runs beyond CAPTURES allowed for runs in which the kernel dropped data


def receiver_deltas(bundle: Path, host: str = "client") -> dict[str, int]:
    return run_deltas(
        (bundle / f"nstat-{host}-before.txt").read_text(),
        (bundle / f"nstat-{host}-after.txt").read_text(),
    )


def kernel_dropped(bundle: Path) -> dict[str, int]:
    """Kernel events after which its count and a capture's cannot agree: the receiver
    dropped data as out of window or old (the hole then stays until the sender reinjects,
    and everything behind it is out of order for the kernel only), or the sender
    reinjected at the MPTCP level."""
    client, server = receiver_deltas(bundle), receiver_deltas(bundle, "server")
    events = {
        "MPTcpExtNoDSSInWindow": client["MPTcpExtNoDSSInWindow"],
        "MPTcpExtDuplicateData": client["MPTcpExtDuplicateData"],
        "MPTcpExtMPTCPRetrans": server["MPTcpExtMPTCPRetrans"],
    }
    return {k: v for k, v in events.items() if v}


@pytest.fixture(scope="module")
def bundles() -> Iterator[list[Path]]:
    """One VM boot: the first CAPTURES cross-check runs (2 MB, a few seconds each) in which
    the kernel dropped no data, each written into a shared directory of its own."""
    with open("/tmp/mprig-vm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one VM at a time on this machine
        share = Path(tempfile.mkdtemp(prefix="h5-crosscheck-", dir="/var/tmp"))
        try:
            yield _clean_runs(share)
        finally:
            shutil.rmtree(share, ignore_errors=True)


def _clean_runs(share: Path) -> list[Path]:
    clean: list[Path] = []
    dropped = []
    with VmSession(rwdirs=[share], cpus=1) as vm, quiet("crosscheck runs"):  # whole captures
        for attempt in range(1, CAPTURES + RETRIES + 1):
            out = share / f"h5x{attempt}" / "crosscheck"
            argv = [sys.executable, str(MAKER), str(out), "--crosscheck", "2000000"]
            res = vm.run(argv, timeout=300)
            assert res.returncode == 0, res.stderr[-3000:]
            if events := kernel_dropped(out):
                dropped.append(events)
            else:
                clean.append(out)
            if len(clean) == CAPTURES:
                return clean
    pytest.fail(f"the kernel dropped data in {len(dropped)} runs of {attempt}: {dropped}")


@functools.cache  # both tests read each capture
def counts(bundle: Path) -> tuple[int, int]:
    """(ours, the kernel's): ooo_skbs over the connections towards the client, and the
    client's MPTcpExtOFOQueue delta."""
    conns = analyze_pcap(bundle / "client.pcap").connections
    ours = sum(ofo_skbs(c.arrivals) for c in conns if c.subflows[0].dst in CLIENT)
    return ours, receiver_deltas(bundle)["MPTcpExtOFOQueue"]


def test_ooo_count_within_2_percent_of_kernel_ofoqueue(bundles: list[Path]) -> None:
    pairs = [counts(b) for b in bundles]
    for bundle in bundles:
        record = json.loads((bundle / "run.json").read_text())
        # the setup did what it says: stock kernel, reordering, and a capture that kept up
        assert record["capture"]["kernel_drops"] == {"client": 0}, bundle
    assert min(kernel for _, kernel in pairs) > 300, pairs
    assert [abs(ours - kernel) <= 0.08 * kernel for ours, kernel in pairs] == [True] * CAPTURES, (
        pairs
    )
    ours, kernel = (sum(column) for column in zip(*pairs, strict=True))
    assert abs(ours - kernel) <= 0.02 * kernel, pairs


def test_collect_reports_the_kernel_ratio(bundles: list[Path]) -> None:
    """`mprig collect` reports, per bundle, the two counts the test above holds to the
    bound (and their ratio), and the transfer it ran."""
    for bundle in bundles:
        outcome = collect_campaign(bundle.parent, Options())
        doc = json.loads((bundle / "metrics.json").read_text())
        status = (outcome.problems, doc["run_id"], doc["row"]["status"])
        assert status == ([], "crosscheck", "complete"), bundle
        ours, kernel = counts(bundle)
        detail = doc["kernel_ofo"]
        assert (detail["ooo_skbs"], detail["MPTcpExtOFOQueue"]) == (ours, kernel)
        assert doc["kernel_ofo_ratio"] == pytest.approx(ours / kernel)
        bulk = doc["bulk"]
        assert (bulk["bytes_received"], bulk["sha256_received"]) == (
            2_000_000,
            bulk["sha256_sent"],
        )
        row = doc["row"]
        util = [p for p in ("wifi", "cell") if 0.3 < row[f"link_util.{p}"] <= 1.05]
        assert util == ["wifi", "cell"], row
        # netem delays the data 40 ms on cell and 10 ms on wifi (their 1000-packet queues,
        # which the holding receiver's large window fills, add more: the order can flip)
        assert (row["srtt_ms.cell"] > 40.0, row["srtt_ms.wifi"] > 10.0) == (True, True), row
