// SPDX-License-Identifier: GPL-2.0
/* door_fccc: TCP-DOOR's responses (door.h) over FC-CC, the fully coupled control (fccc.h),
 * for seed 003's TCP-DOOR rows under FC-CC. Within T1 of a reordering event, entering fast
 * recovery keeps the window; otherwise a loss (and a timeout, and an ECN echo) on subflow i
 * leaves max(cwnd_i - cwnd_total / 2, 2), which instant recovery undoes when reordering
 * shows within T2; the window given back counts in cwnd_total at once. Slow start and
 * congestion avoidance are fccc's (1 / cwnd_total per packet acked). Plain TCP is door.
 *
 * The socket's congestion-control area holds fccc's state (struct lia), then door's
 * (door_lia.c has them the other way round: there LIA's offset depends on door's size;
 * here door.h's reductions call fccc.h, which must come first). The shared per-connection
 * entry is in map door_fccc_conns.
 */
#define COUPLED_MAP door_fccc_conns
#include "fccc.h"
#define DOOR_CA(sk) ((struct door *)((char *)inet_csk_ca(sk) + sizeof(struct lia)))
#define DOOR_DECREASE(sk, cwnd) fccc_decrease(sk, cwnd)
#define DOOR_UNDONE(sk, cwnd) fccc_hold(sk, cwnd)
#include "door.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops/door_fccc_init")
void BPF_PROG(door_fccc_init, struct sock *sk)
{
	coupled_init(sk);
	door_init_state(sk);
}

SEC("struct_ops/door_fccc_release")
void BPF_PROG(door_fccc_release, struct sock *sk)
{
	coupled_release(sk);
}

SEC("struct_ops/door_fccc_in_ack_event")
void BPF_PROG(door_fccc_in_ack_event, struct sock *sk, __u32 flags)
{
	door_on_ack(sk);
}

SEC("struct_ops/door_fccc_pkts_acked")
void BPF_PROG(door_fccc_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	door_on_ack(sk);
}

SEC("struct_ops/door_fccc_ssthresh")
__u32 BPF_PROG(door_fccc_ssthresh, struct sock *sk)
{
	return door_ssthresh_of(sk);
}

SEC("struct_ops/door_fccc_cwnd_event")
void BPF_PROG(door_fccc_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	door_on_cwnd_event(sk, ev);
}

SEC("struct_ops/door_fccc_set_state")
void BPF_PROG(door_fccc_set_state, struct sock *sk, __u8 new_state)
{
	door_on_set_state(sk, new_state);
}

SEC("struct_ops/door_fccc_cong_avoid")
void BPF_PROG(door_fccc_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	fccc_increase(sk, acked);
}

SEC("struct_ops/door_fccc_undo_cwnd")
__u32 BPF_PROG(door_fccc_undo_cwnd, struct sock *sk)
{
	return door_undo(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops door_fccc = {
	.init		= (void *)door_fccc_init,
	.release	= (void *)door_fccc_release,
	.ssthresh	= (void *)door_fccc_ssthresh,
	.cong_avoid	= (void *)door_fccc_cong_avoid,
	.set_state	= (void *)door_fccc_set_state,
	.cwnd_event	= (void *)door_fccc_cwnd_event,
	.in_ack_event	= (void *)door_fccc_in_ack_event,
	.pkts_acked	= (void *)door_fccc_pkts_acked,
	.undo_cwnd	= (void *)door_fccc_undo_cwnd,
	.name		= "door_fccc",
};
