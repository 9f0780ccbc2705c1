"""Generate the traces of experiments/traces/ (Mahimahi format: one millisecond timestamp
per 1500-byte delivery opportunity). Deterministic: `python experiments/traces/generate.py`
rewrites the committed files byte for byte (tests/unit/test_trace.py checks it).

Each trace is a list of (duration ms, Mbit/s) segments; within a segment, opportunities
are spread evenly: a packet is due each time the credit rate x elapsed time reaches
1500 bytes (credit carries over segment boundaries)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

PACKET_BITS = 1500 * 8
SEED = 18  # issue 18: the random walk's seed


def opportunities(segments: list[tuple[int, float]]) -> list[int]:
    """Millisecond timestamps for segments of (duration ms, Mbit/s); the last timestamp is
    the end of the last segment (Mahimahi loops the trace there)."""
    out: list[int] = []
    credit, t = 0.0, 0
    for duration, mbit in segments:
        for _ in range(duration):
            t += 1
            credit += mbit * 1000  # bits per ms
            while credit >= PACKET_BITS:
                credit -= PACKET_BITS
                out.append(t)
    if not out or out[-1] != t:
        out.append(t)  # the period ends with the last segment
    return out


def random_walk(seconds: int, step_ms: int, low: float, high: float) -> list[tuple[int, float]]:
    """A cellular-like capacity: each step_ms the rate moves by a seeded random factor
    (x0.6 to x1.6), kept within [low, high] Mbit/s."""
    rng = random.Random(SEED)
    rate, out = (low + high) / 2, []
    for _ in range(seconds * 1000 // step_ms):
        rate = min(high, max(low, rate * rng.uniform(0.6, 1.6)))
        out.append((step_ms, round(rate, 3)))
    return out


TRACES = {
    "alt-4-12.trace": [(2000, 4.0), (2000, 12.0)],  # 4 and 12 Mbit/s, 2 s each
    "steps-2-20.trace": [(2000, 2.0), (2000, 5.0), (2000, 10.0), (2000, 20.0)],
    "walk-1-20.trace": random_walk(20, 500, 1.0, 20.0),
}


def main(out: Path) -> None:
    for name, segments in TRACES.items():
        text = "".join(f"{t}\n" for t in opportunities(segments))
        (out / name).write_text(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
