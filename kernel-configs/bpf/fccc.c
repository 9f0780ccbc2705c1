// SPDX-License-Identifier: GPL-2.0
/* fccc: fully coupled congestion control, the papers' FC-CC (seed 003), as the NS-3 MPTCP
 * model the paper ran defines it (Chihani and Collange's model, MpTcpSocketImpl::OpenCWND
 * and ::reduceCWND, algorithm Fully_Coupled; the strawman "fully coupled" of Raiciu,
 * Handley and Wischik, the paper's reference [12]). In packets, with cwnd_total the sum of
 * the windows of the connection's subflows:
 *   slow start:           Reno's, per subflow;
 *   congestion avoidance: each packet acked on subflow i adds 1 / cwnd_total to cwnd_i
 *                         (the connection as a whole grows as one Reno flow of window
 *                         cwnd_total: by one packet per round trip);
 *   loss on subflow i:    cwnd_i becomes cwnd_i - cwnd_total / 2, at least 2 (the model's
 *                         floor is 1; Linux's, as Reno's, is 2). Fast retransmit and
 *                         timeout alike: Linux asks .ssthresh on both.
 * One subflow alone is Reno. A subflow's slot holds its new ssthresh from the moment it
 * enters recovery (the model sets the reduced cwnd at once; Linux's PRR reaches it at the
 * end of the recovery), so a loss on another subflow meanwhile counts it at that window.
 *
 * Shared state: coupled.h's entry per connection (map fccc_conns), the slots' cwnd only.
 */
#define COUPLED_MAP fccc_conns
#include "coupled.h"

char _license[] SEC("license") = "GPL";

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

SEC("struct_ops/fccc_init")
void BPF_PROG(fccc_init, struct sock *sk)
{
	coupled_init(sk);
}

SEC("struct_ops/fccc_release")
void BPF_PROG(fccc_release, struct sock *sk)
{
	coupled_release(sk);
}

SEC("struct_ops/fccc_cong_avoid")
void BPF_PROG(fccc_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
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

SEC("struct_ops/fccc_in_ack_event")
void BPF_PROG(fccc_in_ack_event, struct sock *sk, __u32 flags)
{
	fccc_repair(sk);
}

SEC("struct_ops/fccc_pkts_acked")
void BPF_PROG(fccc_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	fccc_repair(sk);
}

SEC("struct_ops/fccc_ssthresh")
__u32 BPF_PROG(fccc_ssthresh, struct sock *sk)
{
	return fccc_decrease(sk, tcp_sk(sk)->snd_cwnd);
}

SEC("struct_ops/fccc_undo_cwnd")
__u32 BPF_PROG(fccc_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops fccc = {
	.init		= (void *)fccc_init,
	.release	= (void *)fccc_release,
	.ssthresh	= (void *)fccc_ssthresh,
	.cong_avoid	= (void *)fccc_cong_avoid,
	.undo_cwnd	= (void *)fccc_undo_cwnd,
	.in_ack_event	= (void *)fccc_in_ack_event,
	.pkts_acked	= (void *)fccc_pkts_acked,
	.name		= "fccc",
};
