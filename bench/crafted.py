"""Collector cost on crafted (adversarial) captures: time per n and the fitted exponent.

    .venv/bin/python -m bench.crafted [--sizes 10000,30000,100000,300000,1000000]
                                      [--patterns all] [--write DIR]

Each pattern is a two-subflow MPTCP download synthesised with the vectorised packer of
bench.collectors (cached in bench/out/crafted/, nothing big is committed), shaped to hit
one worst case of the receiver replay:

  conn_reverse     data sequence numbers in descending order (every segment lands at the
                   front of the connection's out-of-order queue; in order per subflow)
  subflow_reverse  subflow sequence numbers in descending order on both subflows (every
                   segment is held at the front of its subflow's reassembly queue, and its
                   mapping is inserted at the front of the mapping table)
  random           data sequence numbers in a random order
  far_future       an ordinary download with one segment stamped 30 years ahead

For each size n the bench runs `mprig analyze --json` in a child pinned to one core and
prints CPU seconds, seconds per packet and peak RSS; it then fits t = c * n^a over the
sizes (least squares on log t vs log n) and states whether a <= 1.25 (n log n over this
range fits an exponent of about 1.1; quadratic would be 2). `--write DIR` only writes the
captures (for tests and by hand).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.collectors import MSS, OUT, records, run_analyze, write_pcap

Schedule = dict[str, npt.NDArray[np.generic]]
FAR_FUTURE_S = 30 * 365 * 86400.0  # the far-future segment's offset
MAX_EXPONENT = 1.25  # what the fitted exponent must stay under


def _per_subflow_ssn(
    sf: npt.NDArray[np.int64], order: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint64]:
    """Subflow offsets: segment i of subflow k gets the rank of order[i] within k, times MSS."""
    ssn = np.zeros(len(sf), dtype=np.uint64)
    for k in (0, 1):
        m = np.flatnonzero(sf == k)
        rank = np.argsort(np.argsort(order[m], kind="stable"), kind="stable")
        ssn[m] = rank.astype(np.uint64) * np.uint64(MSS)
    return ssn


def _times(n: int) -> npt.NDArray[np.float64]:
    return 0.001 + np.arange(n, dtype=np.float64) * (MSS * 8 / 100e6)  # 100 Mbit/s


def conn_reverse(n: int, rng: np.random.Generator) -> Schedule:
    sf = np.arange(n, dtype=np.int64) % 2
    dsn = (np.arange(n, dtype=np.uint64)[::-1]) * np.uint64(MSS)
    return {"sf": sf, "dsn": dsn, "ssn": _per_subflow_ssn(sf, np.arange(n)), "t": _times(n)}


def subflow_reverse(n: int, rng: np.random.Generator) -> Schedule:
    sf = np.arange(n, dtype=np.int64) % 2
    order = np.arange(n, dtype=np.int64)[::-1]
    ssn = _per_subflow_ssn(sf, order)
    dsn = order.astype(np.uint64) * np.uint64(MSS)
    return {"sf": sf, "dsn": dsn, "ssn": ssn, "t": _times(n)}


def random_order(n: int, rng: np.random.Generator) -> Schedule:
    sf = np.arange(n, dtype=np.int64) % 2
    dsn = rng.permutation(n).astype(np.uint64) * np.uint64(MSS)
    return {"sf": sf, "dsn": dsn, "ssn": _per_subflow_ssn(sf, np.arange(n)), "t": _times(n)}


def far_future(n: int, rng: np.random.Generator, jumps: int = 1) -> Schedule:
    """In order; JUMPS consecutive segments from the middle on stamped FAR_FUTURE_S ahead
    (one is a clock outlier; two or more look like a clock that really jumped)."""
    sf = np.arange(n, dtype=np.int64) % 2
    dsn = np.arange(n, dtype=np.uint64) * np.uint64(MSS)
    t = _times(n)
    first = n // 2 & ~1  # even: the packer's ACKs copy the time of odd segments only
    t[first : first + jumps] += FAR_FUTURE_S
    return {"sf": sf, "dsn": dsn, "ssn": _per_subflow_ssn(sf, np.arange(n)), "t": t}


PATTERNS: dict[str, Callable[[int, np.random.Generator], Schedule]] = {
    "conn_reverse": conn_reverse,
    "subflow_reverse": subflow_reverse,
    "random": random_order,
    "far_future": far_future,
}


def write_capture(path: Path, pattern: str, n_data: int, seed: int = 1, jumps: int = 1) -> Path:
    """Write PATTERN with N_DATA data segments (plus one ACK per two) to PATH (pcap)."""
    rng = np.random.default_rng(seed)
    schedule = far_future(n_data, rng, jumps) if pattern == "far_future" else None
    rows = records(schedule or PATTERNS[pattern](n_data, rng))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_pcap(path, rows)
    return path


def capture(pattern: str, n_packets: int) -> Path:
    """The cached capture of PATTERN with about N_PACKETS packets."""
    path = OUT / "crafted" / f"{pattern}-{n_packets}.pcap"
    if not path.exists():
        write_capture(path, pattern, n_packets * 2 // 3)
    return path


def exponent(sizes: list[int], seconds: list[float]) -> float:
    """a of the least-squares fit t = c * n^a."""
    x = np.log(np.asarray(sizes, dtype=np.float64))
    y = np.log(np.maximum(np.asarray(seconds, dtype=np.float64), 1e-3))
    return float(np.polyfit(x, y, 1)[0])


def bench_pattern(pattern: str, sizes: list[int]) -> tuple[float, float]:
    """Print one line per size; return the fitted exponent and the largest peak RSS."""
    seconds, peak = [], 0.0
    for n in sizes:
        _wall, cpu, rss = run_analyze(capture(pattern, n))
        seconds.append(cpu)
        peak = max(peak, rss)
        per = cpu / n * 1e6
        print(f"{pattern:<16} n={n:>9,}  {cpu:8.2f} s CPU  {per:6.2f} us/packet  RSS {rss:5.0f} MB")
    a = exponent(sizes, seconds) if len(sizes) > 1 else math.nan
    print(f"{pattern:<16} fitted exponent {a:.2f} (n log n: ~1.1; quadratic: 2)")
    return a, peak


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,30000,100000,300000,1000000")
    ap.add_argument("--patterns", default="all", help="comma list of " + ",".join(PATTERNS))
    ap.add_argument("--write", type=Path, default=None, metavar="DIR", help="only write captures")
    args, _ = ap.parse_known_args()  # `python -m bench` passes the other benches' options
    sizes = [int(s) for s in args.sizes.split(",")]
    names = list(PATTERNS) if args.patterns == "all" else args.patterns.split(",")
    if args.write is not None:
        for name in names:
            for n in sizes:
                print(write_capture(args.write / f"{name}-{n}.pcap", name, n * 2 // 3))
        return 0
    ok = True
    for name in names:
        a, _ = bench_pattern(name, sizes)
        ok = ok and a <= MAX_EXPONENT
    print(f"target exponent <= {MAX_EXPONENT}: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
