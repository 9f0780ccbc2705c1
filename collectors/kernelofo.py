"""Our count of the kernel's MPTcpExtOFOQueue, for the kernel cross-check.

The receiving kernel increments MPTcpExtOFOQueue in mptcp_data_queue_ofo()
(net/mptcp/protocol.c) once per *skb* a subflow hands to the MPTCP socket while the skb's
data starts beyond the connection's ack_seq. A capture sees *segments*. The two differ
where TCP coalesced several segments into one skb before MPTCP took it: segments held
behind a subflow hole are coalesced in TCP's out-of-order queue (tcp_ooo_try_coalesce:
contiguous, same MPTCP mapping) and released together when the hole fills. So the
matching quantity counts out-of-order arrivals released by the same packet (same capture
time), on the same subflow, contiguous in data sequence, as one skb — up to
SEGMENTS_PER_SKB segments, since skb_try_coalesce() stops at MAX_SKB_FRAGS (17) page
fragments and a received segment carries about two.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

SEGMENTS_PER_SKB = 8  # MAX_SKB_FRAGS (17) // ~2 page fragments per received segment


def ofo_skbs(arrivals: npt.NDArray[np.void], cap: int = SEGMENTS_PER_SKB) -> int:
    """Out-of-order skbs the receiving kernel queued, estimated from connection-level
    arrivals (collectors.analyze.ARRIVAL_DTYPE, in arrival order)."""
    ooo = (arrivals["flags"] & 1).astype(bool)
    if not ooo.any():
        return 0
    joined = np.zeros(len(arrivals), dtype=bool)
    end = arrivals["dsn"][:-1] + arrivals["len"][:-1].astype(np.uint64)
    joined[1:] = (
        ooo[1:]
        & ooo[:-1]
        & (arrivals["t_ns"][1:] == arrivals["t_ns"][:-1])
        & (arrivals["sf"][1:] == arrivals["sf"][:-1])
        & (arrivals["dsn"][1:] == end)
    )
    group = np.cumsum(ooo & ~joined)[ooo]  # 1-based group number of every OOO arrival
    sizes = np.bincount(group)[1:]
    return int(np.sum(-(-sizes // cap)))
