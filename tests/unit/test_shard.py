"""`mprig run --shard I/N`: the partition of a plan into N shards (mprig/campaign/shard.py).

Property tests over plans (variants x sweep points x repetitions, sequential or shuffled)
and N: every run is in exactly one shard; shard sizes, each variant's runs and each cell's
repetitions differ by at most one between shards; the execution order changes nothing;
run ids, indices and seeds are the plan's."""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Callable, Hashable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mprig.campaign.plan import Run, expand
from mprig.campaign.shard import Shard, assign, parse_shard, select
from mprig.campaign.spec import parse_campaign


def campaign_text(variants: int, points: int, repetitions: int, order: str) -> str:
    names = "\n".join(f"  - {{name: v{i}, protocol: mptcp}}" for i in range(variants))
    values = ", ".join(str(5 + 5 * i) for i in range(points))
    return f"""\
name: t
paths:
  - {{name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10}}
  - {{name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}}
variants:
{names}
repetitions: {repetitions}
order: {order}
seed: 11
sweep:
  axes:
    paths.wifi.delay_ms: [{values}]
"""


def plan(variants: int, points: int, repetitions: int, order: str) -> list[Run]:
    return expand(parse_campaign(campaign_text(variants, points, repetitions, order), "t.yaml"))


plans = st.builds(
    plan,
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from(["sequential", "shuffle"]),
)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def spread(runs: list[Run], n: int, group: Callable[[Run], Hashable]) -> int:
    """The largest difference, over the groups, between two shards' counts of a group."""
    shard_of = assign(runs, n)
    counts: dict[Hashable, Counter[int]] = {}
    for r in runs:
        counts.setdefault(group(r), Counter())[shard_of[r.run_id]] += 1
    return max(max(c[s] for s in range(1, n + 1)) - min(c[s] for s in range(1, n + 1))
               for c in counts.values())  # fmt: skip


@PROPERTY
@given(plans, st.integers(1, 7))
def test_every_run_is_in_exactly_one_shard(runs: list[Run], n: int) -> None:
    shards = [select(runs, Shard(i, n)) for i in range(1, n + 1)]
    ids = Counter(r.run_id for shard in shards for r in shard)
    assert sorted(ids) == sorted(r.run_id for r in runs)
    assert set(ids.values()) == {1}


@PROPERTY
@given(plans, st.integers(1, 7))
def test_shards_are_balanced_overall_per_variant_and_per_cell(runs: list[Run], n: int) -> None:
    def cell(r: Run) -> tuple[str, str]:
        return r.variant.name, repr(r.point)

    assert spread(runs, n, lambda r: "all") <= 1
    assert spread(runs, n, lambda r: r.variant.name) <= 1
    assert spread(runs, n, cell) <= 1


@PROPERTY
@given(plans, st.integers(1, 7), st.randoms(use_true_random=False))
def test_the_execution_order_does_not_change_the_partition(
    runs: list[Run], n: int, rnd: random.Random
) -> None:
    shuffled = list(runs)
    rnd.shuffle(shuffled)
    assert assign(shuffled, n) == assign(runs, n)


@PROPERTY
@given(plans, st.integers(1, 7), st.integers(1, 7))
def test_a_shard_keeps_the_plans_ids_seeds_and_order(runs: list[Run], n: int, i: int) -> None:
    shard = select(runs, Shard(min(i, n), n))
    by_id = {r.run_id: r for r in runs}
    assert [(r.run_id, r.index, r.seed) for r in shard] == [
        (r.run_id, by_id[r.run_id].index, by_id[r.run_id].seed) for r in shard
    ]
    assert [r.index for r in shard] == sorted(r.index for r in shard)


def test_two_variants_on_two_rigs_split_each_variant_and_each_point() -> None:
    # One run per cell: `index % 2` would give rig 1 every v0 run and rig 2 every v1 run.
    runs = plan(2, 2, 1, "sequential")
    first = [(r.variant.name, r.point["paths.wifi.delay_ms"]) for r in select(runs, Shard(1, 2))]
    second = [(r.variant.name, r.point["paths.wifi.delay_ms"]) for r in select(runs, Shard(2, 2))]
    assert (first, second) == ([("v1", 5), ("v0", 10)], [("v0", 5), ("v1", 10)])


def test_no_shard_is_the_whole_plan() -> None:
    runs = plan(2, 1, 2, "shuffle")
    assert select(runs, None) == runs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2", "expected I/N (shard I of N, e.g. 1/2), got '2'"),
        ("0/2", "I must be 1..N, got 0/2"),
        ("3/2", "I must be 1..N, got 3/2"),
        ("1/0", "N must be 1..1000, got 1/0"),
        ("a/b", "expected I/N (shard I of N, e.g. 1/2), got 'a/b'"),
    ],
)
def test_bad_shard_arguments_say_what_is_expected(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as e:
        parse_shard(text)
    assert str(e.value) == message


def test_a_good_shard_argument() -> None:
    assert (parse_shard(" 2 / 3 "), str(parse_shard("1/1"))) == (Shard(2, 3), "1/1")
