"""Fuzz the compiled reader and decoder with mutated fixture bytes (hypothesis). The core
runs in a worker subprocess so that a crash fails the test instead of killing pytest."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FIX = Path(__file__).resolve().parents[1] / "captures" / "test_collectors_fixtures"
SEEDS = sorted(p.read_bytes() for p in FIX.iterdir() if p.suffix in (".pcap", ".pcapng"))

# Reads one path per line, analyses it down to every metric and series, answers one line:
# "ok", "error" (a clean UsageError) or "exception" (a traceback the CLI would show).
WORKER = """
import sys, traceback
from collectors.analyze import analyze_pcap
from mprig.errors import UsageError
for line in sys.stdin:
    try:
        for conn in analyze_pcap(line.strip(), k_block=3, bin_s=0.05).connections:
            conn.summary(), conn.timeseries(), conn.kblocks(), conn.occupancy()
        print("ok", flush=True)
    except UsageError as e:
        print("error", e, flush=True)
    except Exception:
        print("exception", repr(traceback.format_exc()), flush=True)
"""


class Worker:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip

    def run(self, data: bytes) -> str:
        self.path.write_bytes(data)
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"{self.path}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            kept = self.path.with_suffix(".crash")
            kept.write_bytes(data)
            pytest.fail(f"core crashed (exit {self.proc.wait()}) on input kept at {kept}")
        return answer.rstrip("\n")

    def close(self) -> None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    w = Worker(tmp_path_factory.mktemp("fuzz") / "input.pcap")
    yield w
    w.close()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 12))):
        pos = draw(st.integers(0, len(data) - 1))
        data[pos] = draw(st.integers(0, 255))
    if draw(st.booleans()):  # splice a slice somewhere else (duplicates/shifts records)
        a, b = sorted(draw(st.lists(st.integers(0, len(data)), min_size=2, max_size=2)))
        at = draw(st.integers(0, len(data)))
        data[at:at] = data[a:b]
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


@settings(
    max_examples=4000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=mutated())
def test_core_never_crashes_on_mutated_captures(worker: Worker, data: bytes) -> None:
    assert worker.run(data).split()[0] in ("ok", "error")


@settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.binary(max_size=400))
def test_core_never_crashes_on_random_bytes_after_a_header(worker: Worker, data: bytes) -> None:
    pcap = FIX.joinpath("plain_tcp.pcap").read_bytes()[:24]
    ng = FIX.joinpath("reorder_two_subflows.pcapng").read_bytes()[:28]
    assert worker.run(pcap + data).split()[0] in ("ok", "error")
    assert worker.run(ng + data).split()[0] in ("ok", "error")


def test_core_survives_found_crashers(worker: Worker) -> None:
    """Inputs that once crashed the core (found by an AddressSanitizer build)."""
    ng = bytearray(FIX.joinpath("reorder_two_subflows.pcapng").read_bytes())
    shb = int.from_bytes(ng[4:8], "little")
    idb0 = int.from_bytes(ng[shb + 4 : shb + 8], "little")
    idb1 = int.from_bytes(ng[shb + idb0 + 4 : shb + idb0 + 8], "little")
    epb = shb + idb0 + idb1
    bad_iface = bytearray(ng)
    bad_iface[epb + 8 : epb + 12] = (0x80000000).to_bytes(4, "little")  # negative as int
    huge_time = bytearray(ng)
    huge_time[epb + 12 : epb + 20] = b"\xff" * 8  # timestamp beyond int64 nanoseconds
    assert worker.run(bytes(bad_iface)) == "ok"
    assert worker.run(bytes(huge_time)) == "ok"
