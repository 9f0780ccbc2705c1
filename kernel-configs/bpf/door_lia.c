// SPDX-License-Identifier: GPL-2.0
/* door_lia: TCP-DOOR's responses (door.h) over LIA's coupled increase (coupled.h), for the
 * papers' rows that ran TCP-DOOR with coupled congestion control. The socket's
 * congestion-control area holds door's state, then LIA's; the shared per-connection entry
 * is in map door_lia_conns.
 */
#include "door.h"
#define LIA_CA(sk) ((struct lia *)((char *)inet_csk_ca(sk) + sizeof(struct door)))
#define COUPLED_MAP door_lia_conns
#include "coupled.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops/door_lia_init")
void BPF_PROG(door_lia_init, struct sock *sk)
{
	door_init_state(sk);
	coupled_init(sk);
}

SEC("struct_ops/door_lia_release")
void BPF_PROG(door_lia_release, struct sock *sk)
{
	coupled_release(sk);
}

SEC("struct_ops/door_lia_in_ack_event")
void BPF_PROG(door_lia_in_ack_event, struct sock *sk, __u32 flags)
{
	door_on_ack(sk);
}

SEC("struct_ops/door_lia_pkts_acked")
void BPF_PROG(door_lia_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	door_on_ack(sk);
}

SEC("struct_ops/door_lia_ssthresh")
__u32 BPF_PROG(door_lia_ssthresh, struct sock *sk)
{
	return door_ssthresh_of(sk);
}

SEC("struct_ops/door_lia_cwnd_event")
void BPF_PROG(door_lia_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	door_on_cwnd_event(sk, ev);
}

SEC("struct_ops/door_lia_set_state")
void BPF_PROG(door_lia_set_state, struct sock *sk, __u8 new_state)
{
	door_on_set_state(sk, new_state);
}

SEC("struct_ops/door_lia_cong_avoid")
void BPF_PROG(door_lia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	coupled_cong_avoid(sk, acked);
}

SEC("struct_ops/door_lia_undo_cwnd")
__u32 BPF_PROG(door_lia_undo_cwnd, struct sock *sk)
{
	return door_undo(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops door_lia = {
	.init		= (void *)door_lia_init,
	.release	= (void *)door_lia_release,
	.ssthresh	= (void *)door_lia_ssthresh,
	.cong_avoid	= (void *)door_lia_cong_avoid,
	.set_state	= (void *)door_lia_set_state,
	.cwnd_event	= (void *)door_lia_cwnd_event,
	.in_ack_event	= (void *)door_lia_in_ack_event,
	.pkts_acked	= (void *)door_lia_pkts_acked,
	.undo_cwnd	= (void *)door_lia_undo_cwnd,
	.name		= "door_lia",
};
