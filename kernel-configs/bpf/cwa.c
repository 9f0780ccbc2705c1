// SPDX-License-Identifier: GPL-2.0
/* cwa: CWA-MPTCP's congestion window adaptation (seed 001, Algorithm 1).
 *
 * The increase is LIA's (coupled.h: "follows the algorithm in original
 * MPTCP"), the decrease on loss Reno's. In addition, every CWA_PERIOD_US
 * (0.5 s, as in the paper's experiments) one subflow's ACK runs Algorithm 1
 * over the connection's shared entry: theta = max srtt / min srtt over the
 * subflows; if CWA_THETA_MIN <= theta <= CWA_THETA_MAX (1.0 and 3.0), the
 * subflow i with the largest srtt, if its count of consecutive cuts is below
 * CWA_MAX_CUTS (m = 3), gets cwnd_i = cwnd_i / theta and ssthresh_i = cwnd_i
 * if ssthresh_i was larger, and its count grows by one; at m the count
 * returns to 0 instead (no cut that time).
 *
 * A program can only write the window of the subflow whose ACK it runs on,
 * so the cut is recorded in the slow subflow's slot (theta * 256) and that
 * subflow applies it on its next ACK (.in_ack_event). "End-to-end delay of
 * path p" is the subflow's smoothed RTT (tp->srtt_us). The check period is
 * claimed with an atomic compare-and-swap, so one ACK per period runs it.
 */
#define COUPLED_MAP cwa_conns
#include "coupled.h"

char _license[] SEC("license") = "GPL";

#define CWA_PERIOD_US 500000ULL
#define CWA_THETA_MIN 256U	/* 1.0 * 256 */
#define CWA_THETA_MAX 768U	/* 3.0 * 256 */
#define CWA_MAX_CUTS 3

/* Algorithm 1 over the connection's subflows. */
static __always_inline void cwa_check(struct lia_conn *entry, __u64 now)
{
	__u64 last = entry->checked_us;
	__u32 hi = 0, lo = 0xffffffff, slowest = 0, theta;
	int i, n = 0;

	if (now - last < CWA_PERIOD_US ||
	    __sync_val_compare_and_swap(&entry->checked_us, last, now) != last)
		return;
	for (i = 0; i < LIA_SUBFLOWS; i++) {
		__u32 r = entry->slot[i].rtt_us;

		if (!entry->slot[i].used || !r)
			continue;
		n++;
		if (r > hi) {
			hi = r;
			slowest = i;
		}
		lo = min(lo, r);
	}
	if (n < 2)
		return;
	theta = (__u32)(((__u64)hi << 8) / lo);
	if (theta < CWA_THETA_MIN || theta > CWA_THETA_MAX)
		return;
	slowest &= LIA_SUBFLOWS - 1;
	if (entry->slot[slowest].cuts < CWA_MAX_CUTS) {
		entry->slot[slowest].cut_x256 = theta;
		entry->slot[slowest].cuts++;
	} else {
		entry->slot[slowest].cuts = 0;
	}
}

SEC("struct_ops/cwa_init")
void BPF_PROG(cwa_init, struct sock *sk)
{
	coupled_init(sk);
}

SEC("struct_ops/cwa_release")
void BPF_PROG(cwa_release, struct sock *sk)
{
	coupled_release(sk);
}

/* Apply a cut that Algorithm 1 recorded for this subflow. */
SEC("struct_ops/cwa_in_ack_event")
void BPF_PROG(cwa_in_ack_event, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct lia *ca = inet_csk_ca(sk);
	struct lia_conn *entry;
	struct lia_slot *slot;
	__u64 key = ca->conn;
	__u32 cut;

	repair_skipped_ssthresh(sk, true);
	if (!key || ca->slot >= LIA_SUBFLOWS)
		return;
	entry = bpf_map_lookup_elem(&COUPLED_MAP, &key);
	if (!entry)
		return;
	slot = &entry->slot[ca->slot & (LIA_SUBFLOWS - 1)];
	cut = slot->cut_x256;
	if (!cut)
		return;
	slot->cut_x256 = 0;
	tp->snd_cwnd = max((__u32)(((__u64)tp->snd_cwnd << 8) / cut), 2U);
	if (tp->snd_ssthresh > tp->snd_cwnd)
		tp->snd_ssthresh = tp->snd_cwnd;
}

SEC("struct_ops/cwa_pkts_acked")
void BPF_PROG(cwa_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	repair_skipped_ssthresh(sk, true);
}

SEC("struct_ops/cwa_cong_avoid")
void BPF_PROG(cwa_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct lia_conn *entry;

	if (!lia_cwnd_limited(tp))
		return;
	entry = lia_update(sk, inet_csk_ca(sk));
	if (entry)
		cwa_check(entry, tp->tcp_mstamp);
	coupled_increase(tp, entry, acked);
}

SEC("struct_ops/cwa_ssthresh")
__u32 BPF_PROG(cwa_ssthresh, struct sock *sk)
{
	return reno_half(tcp_sk(sk));
}

SEC("struct_ops/cwa_undo_cwnd")
__u32 BPF_PROG(cwa_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops cwa = {
	.init		= (void *)cwa_init,
	.release	= (void *)cwa_release,
	.ssthresh	= (void *)cwa_ssthresh,
	.cong_avoid	= (void *)cwa_cong_avoid,
	.in_ack_event	= (void *)cwa_in_ack_event,
	.pkts_acked	= (void *)cwa_pkts_acked,
	.undo_cwnd	= (void *)cwa_undo_cwnd,
	.name		= "cwa",
};
