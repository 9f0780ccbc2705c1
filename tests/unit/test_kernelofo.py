"""Out-of-order skbs as the kernel counts them (MPTcpExtOFOQueue), from arrivals."""

from __future__ import annotations

import numpy as np

from collectors.analyze import ARRIVAL_DTYPE
from collectors.kernelofo import ofo_skbs

MSS = 1000


def arrivals(rows: list[tuple[int, int, int, int]]) -> np.ndarray:
    """(t_ns, dsn, subflow, out-of-order flag) rows, MSS-sized."""
    a = np.zeros(len(rows), dtype=ARRIVAL_DTYPE)
    for i, (t, dsn, sf, ooo) in enumerate(rows):
        a[i]["t_ns"], a[i]["dsn"], a[i]["sf"], a[i]["flags"], a[i]["len"] = t, dsn, sf, ooo, MSS
    return a


def test_each_ooo_segment_arriving_alone_is_one_skb() -> None:
    a = arrivals([(1, 1, 0, 0), (2, 3001, 1, 1), (3, 4001, 1, 1), (4, 1001, 0, 0)])
    assert ofo_skbs(a) == 2


def test_segments_released_together_coalesce_up_to_the_cap() -> None:
    # packet at t=5 fills a subflow hole and releases 10 contiguous out-of-order segments
    released = [(5, 10_001 + i * MSS, 1, 1) for i in range(10)]
    a = arrivals([(1, 1, 0, 0), *released, (6, 1001, 0, 0)])
    assert (ofo_skbs(a), ofo_skbs(a, cap=4), ofo_skbs(a, cap=100)) == (2, 3, 1)


def test_no_join_across_subflows_gaps_times_or_in_order_data() -> None:
    a = arrivals(
        [
            (5, 10_001, 1, 1),
            (5, 11_001, 0, 1),  # other subflow
            (5, 13_001, 0, 1),  # gap in data sequence
            (6, 14_001, 0, 1),  # released by another packet
            (6, 15_001, 0, 0),  # in order: not counted
            (6, 16_001, 0, 1),  # follows in-order data: a new skb
        ]
    )
    assert (ofo_skbs(a), ofo_skbs(arrivals([]))) == (5, 0)
