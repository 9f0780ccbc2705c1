// SPDX-License-Identifier: GPL-2.0
/* prr_lia: PR-R (prr.c) over LIA's coupled increase (coupled.h), as seed 000 ran it ("the
 * coupled CC algorithm [19] is implemented with the proposed method"). Fast recovery keeps
 * the window; timeouts and ECN halve as Reno; slow start and congestion avoidance are
 * LIA's, with the shared per-connection entry in map prr_lia_conns.
 */
#define COUPLED_MAP prr_lia_conns
#include "coupled.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops/prr_lia_init")
void BPF_PROG(prr_lia_init, struct sock *sk)
{
	coupled_init(sk);
}

SEC("struct_ops/prr_lia_release")
void BPF_PROG(prr_lia_release, struct sock *sk)
{
	coupled_release(sk);
}

SEC("struct_ops/prr_lia_ssthresh")
__u32 BPF_PROG(prr_lia_ssthresh, struct sock *sk)
{
	return max(tcp_sk(sk)->snd_cwnd, 2U);
}

SEC("struct_ops/prr_lia_cwnd_event")
void BPF_PROG(prr_lia_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	reno_halve_on_timeout(sk, ev);
}

SEC("struct_ops/prr_lia_set_state")
void BPF_PROG(prr_lia_set_state, struct sock *sk, __u8 new_state)
{
	reno_halve_on_cwr(sk, new_state);
	reno_halve_on_timeout_in_recovery(sk, new_state);
}

SEC("struct_ops/prr_lia_cong_avoid")
void BPF_PROG(prr_lia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	coupled_cong_avoid(sk, acked);
}

SEC("struct_ops/prr_lia_in_ack_event")
void BPF_PROG(prr_lia_in_ack_event, struct sock *sk, __u32 flags)
{
	repair_skipped_ssthresh(sk, false);
}

SEC("struct_ops/prr_lia_pkts_acked")
void BPF_PROG(prr_lia_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	repair_skipped_ssthresh(sk, false);
}

SEC("struct_ops/prr_lia_undo_cwnd")
__u32 BPF_PROG(prr_lia_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops prr_lia = {
	.init		= (void *)prr_lia_init,
	.release	= (void *)prr_lia_release,
	.ssthresh	= (void *)prr_lia_ssthresh,
	.cong_avoid	= (void *)prr_lia_cong_avoid,
	.set_state	= (void *)prr_lia_set_state,
	.cwnd_event	= (void *)prr_lia_cwnd_event,
	.undo_cwnd	= (void *)prr_lia_undo_cwnd,
	.in_ack_event	= (void *)prr_lia_in_ack_event,
	.pkts_acked	= (void *)prr_lia_pkts_acked,
	.name		= "prr_lia",
};
