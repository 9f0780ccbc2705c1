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
 * The decrease and increase are in fccc.h (door_fccc.c uses them too).
 */
#define COUPLED_MAP fccc_conns
#include "fccc.h"

char _license[] SEC("license") = "GPL";

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
	fccc_increase(sk, acked);
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
