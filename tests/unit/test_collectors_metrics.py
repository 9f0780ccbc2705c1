"""The metric math as pure functions over arrays (collectors/metrics.py, reorder.py), and
the compiled core's key derivation (OpenSSL's EVP) against hashlib."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import _core, metrics
from collectors.reorder import Rfc4737, Rfc5236, rfc4737, rfc5236


def u64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.uint64)


@pytest.mark.parametrize(("version", "hash_"), [(0, hashlib.sha1), (1, hashlib.sha256)])
@pytest.mark.parametrize("key", [0, 1, 0x0123456789ABCDEF, 2**64 - 1])
def test_token_and_idsn_from_key(version: int, hash_: type, key: int) -> None:
    digest = hash_(key.to_bytes(8, "big")).digest()
    expected = (int.from_bytes(digest[:4], "big"), int.from_bytes(digest[-8:], "big"))
    assert _core.derive(key, version) == expected


@settings(max_examples=500, deadline=None)
@given(key=st.integers(0, 2**64 - 1), version=st.sampled_from([0, 1]))
def test_openssl_derivation_equals_hashlib_on_any_key(key: int, version: int) -> None:
    digest = (hashlib.sha1 if version == 0 else hashlib.sha256)(key.to_bytes(8, "big")).digest()
    expected = (int.from_bytes(digest[:4], "big"), int.from_bytes(digest[-8:], "big"))
    assert _core.derive(key, version) == expected


def test_time_weighted_mean() -> None:
    t = np.array([0.0, 1.0, 3.0])
    assert metrics.time_weighted_mean(t, u64(10, 0, 40), 4.0) == (10 * 1 + 0 * 2 + 40 * 1) / 4
    assert metrics.time_weighted_mean(np.array([]), u64(), 4.0) == 0.0


def test_binned_rate_and_level() -> None:
    t = np.array([0.0, 0.05, 0.15, 0.35])
    assert metrics.nbins_for(0.0, 0.35, 0.1) == 4
    rates = metrics.binned_rate_bps(t, u64(100, 100, 50, 25), 0.0, 0.1, 4)
    assert rates.tolist() == pytest.approx([1600 / 0.1, 400 / 0.1, 0.0, 200 / 0.1])
    level = metrics.binned_level_max(t, u64(5, 1, 7, 0), 0.0, 0.1, 4)
    assert level.tolist() == [5.0, 7.0, 7.0, 7.0]  # 7 holds until the arrival at 0.35


def test_k_block_buffer_reads_whole_blocks() -> None:
    # Cumulative delivered packets/bytes and OOO bytes after each arrival, blocks of 2.
    dlv_pkts = u64(1, 1, 3, 4, 4, 6)
    dlv_bytes = u64(100, 100, 300, 400, 400, 600)
    ooo = u64(0, 100, 0, 0, 100, 0)
    # Block 1 completes at arrival 3 (held: 100, 100 + 100 queued, 300): 300. The reader takes
    # all 3 packets; block 2 completes at arrival 6 (held: 100, 100 + 100, 300): 300.
    assert metrics.k_block_buffer(dlv_pkts, dlv_bytes, ooo, 2).tolist() == [300, 300]
    assert metrics.k_block_buffer(dlv_pkts, dlv_bytes, ooo, 7).tolist() == []


def test_nearest_rank_quantile() -> None:
    values = np.array([5.0, 1.0, 3.0, np.nan, 4.0, 2.0])
    assert metrics.nearest_rank(values, 0.05) == 1.0  # NaN (a zero-length block) ignored
    assert metrics.nearest_rank(values, 0.5) == 3.0  # rank ceil(0.5 * 5) = 3
    assert metrics.nearest_rank(values, 1.0) == 5.0
    assert metrics.nearest_rank(np.array([np.nan]), 0.05) is None


def test_block_goodput_low_skips_the_start() -> None:
    # Block ends (s) and goodput (Mbit/s): the first block spans the handshake and slow start,
    # blocks ending before the warm-up are slow start too; the dip at 3.0 s is the answer.
    t_end = np.array([0.4, 0.9, 1.5, 2.1, 3.0, 3.6, 4.1])
    goodput = np.array([0.3, 1.0, 5.8, 6.0, 2.1, 5.9, 6.0])
    assert metrics.block_goodput_low_bps(t_end, goodput, 1.0, 0.05) == 2.1
    assert metrics.block_goodput_low_bps(t_end, goodput, 1.0, 0.5) == 5.9
    # The first block is never taken, even when it ends after the warm-up.
    assert metrics.block_goodput_low_bps(t_end[2:], goodput[2:], 1.0, 0.05) == 2.1
    assert metrics.block_goodput_low_bps(t_end[:2], goodput[:2], 1.0, 0.05) is None


def test_link_utilisation() -> None:
    assert metrics.link_utilisation({"a": 5e6, "b": None, "c": 1.0}, {"a": 10e6, "b": 1e6}) == {
        "a": 0.5,
        "b": None,
    }


def test_rfc4737_byte_stream() -> None:
    # Packets of 10 bytes arriving as sequence numbers 1, 2, 4, 5, 3, 6 (x10).
    starts = u64(10, 20, 40, 50, 30, 60)
    lens = np.full(6, 10, dtype=np.uint32)
    assert rfc4737(starts, lens) == Rfc4737(
        reordered_ratio=1 / 6,
        extent_mean=2.0,
        extent_max=2,
        n_reordering={1: 1 / 6, 2: 1 / 6, 3: 0.0},
    )
    assert rfc4737(u64(), np.array([], dtype=np.uint32)).reordered_ratio == 0.0


def test_rfc4737_overlapping_chunk_has_extent_zero() -> None:
    # The second chunk starts inside the first (a trimmed partial duplicate).
    r = rfc4737(u64(10, 15, 30), np.array([10, 10, 10], dtype=np.uint32))
    assert (r.reordered_ratio, r.extent_max) == (1 / 3, 0)


def test_rfc5236_densities() -> None:
    # Arrival order of packets 1..6: 1, 2, 4, 5, 3, 6 -> displacements 0, 0, -1, -1, 2, 0;
    # the buffer holds 4, then 4 and 5, until 3 arrives: occupancies 0, 0, 1, 2, 0, 0.
    r = rfc5236(u64(10, 20, 40, 50, 30, 60), threshold=3)
    assert r == Rfc5236(
        reorder_density={-1: 2 / 6, 0: 3 / 6, 2: 1 / 6},
        buffer_occupancy_density={0: 4 / 6, 1: 1 / 6, 2: 1 / 6},
    )


def _k_blocks_by_hand(
    dlv_pkts: list[int], dlv_bytes: list[int], ooo: list[int], k: int
) -> list[int]:
    """The definition, arrival by arrival."""
    out, read_pkts, read_bytes, worst = [], 0, 0, 0
    for p, b, o in zip(dlv_pkts, dlv_bytes, ooo, strict=True):
        worst = max(worst, b - read_bytes + o)
        if p - read_pkts >= k:
            out.append(worst)
            read_pkts, read_bytes, worst = p, b, 0
    return out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    steps=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5000)), max_size=60),
    k=st.integers(1, 6),
)
def test_k_block_buffer_matches_its_definition(steps: list[tuple[int, int]], k: int) -> None:
    pkts = np.cumsum([p for p, _ in steps], dtype=np.uint64)
    nbytes = np.cumsum([p * 1000 for p, _ in steps], dtype=np.uint64)
    ooo = np.array([o for _, o in steps], dtype=np.uint64)
    expected = _k_blocks_by_hand(pkts.tolist(), nbytes.tolist(), ooo.tolist(), k)
    assert metrics.k_block_buffer(pkts, nbytes, ooo, k).tolist() == expected
