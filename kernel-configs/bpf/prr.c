// SPDX-License-Identifier: GPL-2.0
/* prr: PR-R (seed 000), "persistent reordering-robust" TCP.
 *
 * Reno, except that entering fast recovery (the third duplicate ACK, or
 * SACK/RACK loss detection) does not reduce the window: ssthresh stays at
 * cwnd, PRR then sends one segment per segment delivered, and recovery ends
 * with cwnd = ssthresh = the cwnd before recovery.
 *
 * Linux asks the algorithm for ssthresh (.ssthresh) both when it enters
 * fast recovery and when a retransmission timeout fires, and cannot tell
 * the two apart there. The RTO path is recognised by the CA_EVENT_LOSS
 * event that tcp_enter_loss() raises right after asking: there ssthresh is
 * set to half the window, as Reno does (tcp_enter_loss then sets cwnd to
 * 1 + packets in flight, i.e. 1). A timeout inside fast recovery gets no
 * .ssthresh call and no event; .set_state(Loss) halves there (mprig_cc.h). An ECN echo or local congestion (CWR
 * state) also halves, as Reno does: only the loss-triggered fast recovery
 * is reordering-robust.
 */
#include "mprig_cc.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops/prr_ssthresh")
__u32 BPF_PROG(prr_ssthresh, struct sock *sk)
{
	/* Fast recovery: keep the window (the RTO case is fixed up below). */
	return max(tcp_sk(sk)->snd_cwnd, 2U);
}

SEC("struct_ops/prr_cwnd_event")
void BPF_PROG(prr_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	reno_halve_on_timeout(sk, ev);
}

SEC("struct_ops/prr_set_state")
void BPF_PROG(prr_set_state, struct sock *sk, __u8 new_state)
{
	reno_halve_on_cwr(sk, new_state);
	reno_halve_on_timeout_in_recovery(sk, new_state);
}

SEC("struct_ops/prr_cong_avoid")
void BPF_PROG(prr_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/prr_in_ack_event")
void BPF_PROG(prr_in_ack_event, struct sock *sk, __u32 flags)
{
	repair_skipped_ssthresh(sk, false);
}

SEC("struct_ops/prr_pkts_acked")
void BPF_PROG(prr_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	repair_skipped_ssthresh(sk, false);
}

SEC("struct_ops/prr_undo_cwnd")
__u32 BPF_PROG(prr_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops prr = {
	.ssthresh	= (void *)prr_ssthresh,
	.cong_avoid	= (void *)prr_cong_avoid,
	.set_state	= (void *)prr_set_state,
	.cwnd_event	= (void *)prr_cwnd_event,
	.undo_cwnd	= (void *)prr_undo_cwnd,
	.in_ack_event	= (void *)prr_in_ack_event,
	.pkts_acked	= (void *)prr_pkts_acked,
	.name		= "prr",
};
