/* SPDX-License-Identifier: GPL-2.0 */
/* FC-CC's fully coupled decrease and increase (fccc.c has the algorithm's description),
 * shared by fccc.c and door_fccc.c (TCP-DOOR's responses over them). Define COUPLED_MAP
 * (and LIA_CA, if struct lia is not at the start of the congestion-control area) first.
 */
#ifndef MPRIG_FCCC_H
#define MPRIG_FCCC_H

#include "coupled.h"

/* cwnd_total: the windows in the connection's slots. */
static __always_inline __u32 fccc_total(const struct lia_conn *entry)
{
	__u32 total = 0;

	for (int i = 0; i < LIA_SUBFLOWS; i++)
		if (entry->slot[i].used)
			total += entry->slot[i].cwnd;
	return total;
}

/* ssthresh after a loss at window cwnd: max(cwnd - cwnd_total / 2, 2), computed as
 * (2 cwnd - cwnd_total) / 2 so that one subflow alone gets exactly Reno's half. Our slot
 * then holds it, the window this subflow returns to. */
static __always_inline __u32 fccc_decrease(struct sock *sk, __u32 cwnd)
{
	struct lia *ca = LIA_CA(sk);
	struct lia_conn *entry = lia_update(sk, ca);
	__u32 c = min(cwnd, LIA_MAX_CWND), total, ssthresh = 2;
	struct lia_slot *slot;

	if (!entry)
		return max(cwnd >> 1U, 2U);
	slot = &entry->slot[ca->slot & (LIA_SUBFLOWS - 1)];
	slot->cwnd = c;
	total = fccc_total(entry);
	if (2 * c > total)
		ssthresh = max((2 * c - total) >> 1U, 2U);
	slot->cwnd = ssthresh;
	return ssthresh;
}

/* The kernel's skipped .ssthresh (mprig_cc.h): put back what ours gives for the window
 * before the reduction. */
static __always_inline void fccc_repair(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ssthresh_skipped(tp))
		repair_skipped_ssthresh_to(sk, fccc_decrease(sk, max(tp->prior_cwnd, 2U)));
}

/* Our slot holds `cwnd`, the window this subflow returns to (door_fccc: the one instant
 * recovery gave back), until the next cwnd-limited ACK writes the window itself. */
static __always_inline void fccc_hold(struct sock *sk, __u32 cwnd)
{
	struct lia *ca = LIA_CA(sk);
	struct lia_conn *entry = lia_update(sk, ca);

	if (entry)
		entry->slot[ca->slot & (LIA_SUBFLOWS - 1)].cwnd = min(cwnd, LIA_MAX_CWND);
}

/* .cong_avoid: Reno's slow start, then 1 / cwnd_total per packet acked. */
static __always_inline void fccc_increase(struct sock *sk, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct lia_conn *entry;

	if (!lia_cwnd_limited(tp))
		return;
	entry = lia_update(sk, LIA_CA(sk));
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	tcp_cong_avoid_ai(tp, entry ? max(fccc_total(entry), tp->snd_cwnd) : tp->snd_cwnd, acked);
}

#endif
