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
#include "mprig_cc.h"

char _license[] SEC("license") = "GPL";

#define DOOR_MIN_US 1000ULL /* floor of T1 and T2 (veth RTTs are microseconds) */

struct door {
	__u64 quiet_until_us;	/* T1: congestion response off until then */
	__u64 reduced_at_us;	/* time of the last window reduction */
	__u32 reord_seen;	/* tp->reord_seen when last looked at */
	__u32 prior_cwnd;	/* cwnd and ssthresh before that reduction */
	__u32 prior_ssthresh;
};

static __always_inline __u64 door_window_us(const struct tcp_sock *tp)
{
	return max((__u64)(tp->srtt_us >> 3), DOOR_MIN_US);
}

static __always_inline void door_out_of_order(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct door *ca = inet_csk_ca(sk);
	__u64 now = tp->tcp_mstamp;

	ca->quiet_until_us = now + door_window_us(tp);
	if (!ca->reduced_at_us || now - ca->reduced_at_us > door_window_us(tp))
		return;
	/* Instant recovery: undo a fast-recovery reduction made less than T2 ago. */
	ca->reduced_at_us = 0;
	if (ca_state(sk) == TCP_CA_Recovery) {
		/* Still in the recovery that reduced (it lasts at least one RTT, so this is
		 * where the detection usually lands): Linux's PRR ends it with cwnd =
		 * ssthresh, so aiming ssthresh at the window before restores that window. */
		tp->snd_ssthresh = max(tp->snd_ssthresh, ca->prior_cwnd);
	} else if (ca_state(sk) <= TCP_CA_Disorder) {
		tp->snd_cwnd = max(tp->snd_cwnd, ca->prior_cwnd);
		tp->snd_ssthresh = max(tp->snd_ssthresh, ca->prior_ssthresh);
	}
}

static __always_inline void door_check_reordering(struct sock *sk)
{
	struct door *ca = inet_csk_ca(sk);
	__u32 seen = tcp_sk(sk)->reord_seen;

	if (seen != ca->reord_seen) {
		ca->reord_seen = seen;
		door_out_of_order(sk);
	}
}

SEC("struct_ops/door_init")
void BPF_PROG(door_init, struct sock *sk)
{
	struct door *ca = inet_csk_ca(sk);

	ca->quiet_until_us = 0;
	ca->reduced_at_us = 0;
	ca->reord_seen = tcp_sk(sk)->reord_seen;
	ca->prior_cwnd = 0;
	ca->prior_ssthresh = 0;
}

SEC("struct_ops/door_in_ack_event")
void BPF_PROG(door_in_ack_event, struct sock *sk, __u32 flags)
{
	repair_skipped_ssthresh(sk, true);
	door_check_reordering(sk);
}

SEC("struct_ops/door_pkts_acked")
void BPF_PROG(door_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	repair_skipped_ssthresh(sk, true);
	/* tcp_clean_rtx_queue() has just counted a hole filled by original segments, and
	 * tcp_fastretrans_alert() has not yet decided on recovery for this ACK. */
	door_check_reordering(sk);
}

SEC("struct_ops/door_ssthresh")
__u32 BPF_PROG(door_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct door *ca = inet_csk_ca(sk);

	door_check_reordering(sk);
	if (tp->tcp_mstamp < ca->quiet_until_us)
		return max(tp->snd_cwnd, 2U);
	ca->reduced_at_us = tp->tcp_mstamp;
	ca->prior_cwnd = tp->snd_cwnd;
	ca->prior_ssthresh = tp->snd_ssthresh;
	return reno_half(tp);
}

SEC("struct_ops/door_cwnd_event")
void BPF_PROG(door_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	/* A timeout's reduction is Reno's and never undone by instant recovery. */
	if (ev == CA_EVENT_LOSS)
		((struct door *)inet_csk_ca(sk))->reduced_at_us = 0;
	reno_halve_on_timeout(sk, ev);
}

SEC("struct_ops/door_set_state")
void BPF_PROG(door_set_state, struct sock *sk, __u8 new_state)
{
	reno_halve_on_cwr(sk, new_state);
	reno_halve_on_timeout_in_recovery(sk, new_state);
}

SEC("struct_ops/door_cong_avoid")
void BPF_PROG(door_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/door_undo_cwnd")
__u32 BPF_PROG(door_undo_cwnd, struct sock *sk)
{
	/* Linux proved a retransmission spurious: the segment was reordered. */
	door_out_of_order(sk);
	return tcp_reno_undo_cwnd(sk);
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
