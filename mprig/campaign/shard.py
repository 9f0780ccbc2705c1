"""Shards: the part of a campaign's plan one of N rigs runs (`mprig run --shard I/N`).

The runs are put in a deal order (variant by variant, within a variant sweep cell by sweep
cell with each cell's repetitions together, variant k rotated k sweep points on) and dealt
round-robin: position p goes to shard p % N + 1. So:

- every run is in exactly one shard, and shard sizes differ by at most one;
- the runs of one variant, and the repetitions of one cell (variant x sweep point), differ
  by at most one between any two shards: a rig's own bias (radio, CPU, kernel build) lands
  in every variant's spread instead of becoming a variant's effect, and with repetitions
  >= N every cell runs on every rig. Dealing `index % N` instead puts every run of one
  variant on one rig whenever N divides the number of variants; a hash of the run id
  balances only on average (a 6-run campaign often splits 5/1). Sweep points are spread
  by the rotation as far as the counts allow, without a bound;
- the deal depends only on the plan's names and values, never on its execution order
  (shuffle) or on which shard asks: every rig computes the same partition, and a run's id,
  index and seed are the plan's, not the shard's.

A spec edit can re-deal the runs: the shards of one merge come from one spec, which
`mprig merge` checks.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass

from mprig.campaign.plan import Run, point_text
from mprig.errors import escape

MAX_SHARDS = 1000  # more rigs than this is a typo


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (1-based, as the command line writes it)."""

    index: int  # 1..count
    count: int  # number of shards the campaign is split into

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """argparse type of `--shard I/N`: 1 <= I <= N <= MAX_SHARDS."""
    m = re.fullmatch(r"\s*(\d{1,4})\s*/\s*(\d{1,4})\s*", text)
    if m is None:
        raise argparse.ArgumentTypeError(
            f"expected I/N (shard I of N, e.g. 1/2), got {escape(text[:40])!r}"
        )
    index, count = int(m.group(1)), int(m.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"N must be 1..{MAX_SHARDS}, got {index}/{count}")
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"I must be 1..N, got {index}/{count}")
    return Shard(index, count)


def assign(runs: Sequence[Run], count: int) -> dict[str, int]:
    """Run id -> shard number (1..count) for every run of the plan (see the module doc)."""
    return {run.run_id: i % count + 1 for i, run in enumerate(deal_order(runs))}


def deal_order(runs: Sequence[Run]) -> list[Run]:
    """The runs in the order they are dealt: variant by variant (names sorted), within a
    variant cell by cell, each cell's repetitions together; variant k starts k sweep
    points further on (a Latin-square rotation: with one run per cell, two variants on two
    rigs split each sweep point over both rigs instead of putting a point on one rig).
    Sorted by names and values only, so the execution order (shuffle) changes nothing."""
    variants = {v: k for k, v in enumerate(sorted({r.variant.name for r in runs}))}
    points = {p: k for k, p in enumerate(sorted({point_text(r.point) for r in runs}))}

    def key(run: Run) -> tuple[int, int, int, str]:
        v = variants[run.variant.name]
        rotated = (points[point_text(run.point)] - v) % len(points)
        return v, rotated, run.repetition, run.run_id

    return sorted(runs, key=key)


def select(runs: Sequence[Run], shard: Shard | None) -> list[Run]:
    """The runs of `shard` in the plan's execution order (every run without a shard)."""
    if shard is None:
        return list(runs)
    mine = assign(runs, shard.count)
    return [r for r in runs if mine[r.run_id] == shard.index]
