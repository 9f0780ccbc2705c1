// SPDX-License-Identifier: GPL-2.0
/* door: TCP-DOOR (Wang and Zhang, MobiHoc 2002; seeds 000 and 003).
 *
 * Reno, plus TCP-DOOR's two responses to out-of-order delivery:
 *  1. for a bounded time T1 after out-of-order delivery is detected, the
 *     sender does not respond to congestion signals from duplicate ACKs:
 *     entering fast recovery keeps the window (ssthresh = cwnd);
 *  2. "instant recovery": if the window was reduced less than T2 before the
 *     detection, and the connection is back in the Open state, cwnd and
 *     ssthresh are restored to their values before that reduction.
 * T1 = T2 = one smoothed RTT, at least DOOR_MIN_US.
 *
 * The Linux signal for "out-of-order delivery detected" is tp->reord_seen,
 * the sender's count of reordering events (tcp_check_sack_reordering() from
 * SACK blocks or cumulative ACKs of never-retransmitted holes, and
 * tcp_check_reno_reordering() without SACK), checked on every ACK
 * (.in_ack_event) and again when Linux asks for ssthresh; and .undo_cwnd,
 * which Linux calls when D-SACK, timestamps (Eifel) or F-RTO prove a
 * retransmission spurious. TCP-DOOR itself detects reordering from extra
 * sequence numbers in an IP option (ADSN/TPSN), which Linux does not send.
 *
 * A retransmission timeout behaves as Reno (ssthresh halved via the
 * CA_EVENT_LOSS event, cwnd to 1), as does an ECN echo (CWR state).
 */
#include "door.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops/door_init")
void BPF_PROG(door_init, struct sock *sk)
{
	door_init_state(sk);
}

SEC("struct_ops/door_in_ack_event")
void BPF_PROG(door_in_ack_event, struct sock *sk, __u32 flags)
{
	door_on_ack(sk);
}

SEC("struct_ops/door_pkts_acked")
void BPF_PROG(door_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	door_on_ack(sk);
}

SEC("struct_ops/door_ssthresh")
__u32 BPF_PROG(door_ssthresh, struct sock *sk)
{
	return door_ssthresh_of(sk);
}

SEC("struct_ops/door_cwnd_event")
void BPF_PROG(door_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	door_on_cwnd_event(sk, ev);
}

SEC("struct_ops/door_set_state")
void BPF_PROG(door_set_state, struct sock *sk, __u8 new_state)
{
	door_on_set_state(sk, new_state);
}

SEC("struct_ops/door_cong_avoid")
void BPF_PROG(door_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/door_undo_cwnd")
__u32 BPF_PROG(door_undo_cwnd, struct sock *sk)
{
	return door_undo(sk);
}
SEC(".struct_ops")
struct tcp_congestion_ops door = {
	.init		= (void *)door_init,
	.ssthresh	= (void *)door_ssthresh,
	.cong_avoid	= (void *)door_cong_avoid,
	.set_state	= (void *)door_set_state,
	.cwnd_event	= (void *)door_cwnd_event,
	.in_ack_event	= (void *)door_in_ack_event,
	.pkts_acked	= (void *)door_pkts_acked,
	.undo_cwnd	= (void *)door_undo_cwnd,
	.name		= "door",
};
