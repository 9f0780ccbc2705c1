// SPDX-License-Identifier: GPL-2.0
/* lia: RFC 6356 Linked Increases Algorithm, coupled congestion control for
 * the subflows of one MPTCP connection (the papers' Co-CC, seeds 000, 003).
 * The algorithm and the shared per-connection state: coupled.h.
 */
#include "coupled.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops/lia_init")
void BPF_PROG(lia_init, struct sock *sk)
{
	coupled_init(sk);
}

SEC("struct_ops/lia_release")
void BPF_PROG(lia_release, struct sock *sk)
{
	coupled_release(sk);
}

SEC("struct_ops/lia_cong_avoid")
void BPF_PROG(lia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	coupled_cong_avoid(sk, acked);
}

SEC("struct_ops/lia_in_ack_event")
void BPF_PROG(lia_in_ack_event, struct sock *sk, __u32 flags)
{
	repair_skipped_ssthresh(sk, true);
}

SEC("struct_ops/lia_pkts_acked")
void BPF_PROG(lia_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	repair_skipped_ssthresh(sk, true);
}

SEC("struct_ops/lia_ssthresh")
__u32 BPF_PROG(lia_ssthresh, struct sock *sk)
{
	return reno_half(tcp_sk(sk));
}

SEC("struct_ops/lia_undo_cwnd")
__u32 BPF_PROG(lia_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops lia = {
	.init		= (void *)lia_init,
	.release	= (void *)lia_release,
	.ssthresh	= (void *)lia_ssthresh,
	.cong_avoid	= (void *)lia_cong_avoid,
	.undo_cwnd	= (void *)lia_undo_cwnd,
	.in_ack_event	= (void *)lia_in_ack_event,
	.pkts_acked	= (void *)lia_pkts_acked,
	.name		= "lia",
};
