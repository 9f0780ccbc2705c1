/* SPDX-License-Identifier: GPL-2.0 */
/* TCP-DOOR's state and responses (door.c has the algorithm's description), shared by door.c,
 * door_lia.c (the same responses over LIA's coupled increase) and door_fccc.c (over FC-CC).
 * DOOR_CA(sk) is where the state lives in the socket's congestion-control area (default: at
 * its start). DOOR_DECREASE(sk, cwnd) is the ssthresh of a reduction door makes, from a
 * window of cwnd: on a loss outside T1, a timeout, an ECN echo (default: Reno's half;
 * door_fccc.c: FC-CC's). DOOR_UNDONE(sk, cwnd) is told the window instant recovery gave
 * back (default: nothing; door_fccc.c counts it in the connection's total).
 */
#ifndef MPRIG_DOOR_H
#define MPRIG_DOOR_H

#include "mprig_cc.h"

#ifndef DOOR_CA
#define DOOR_CA(sk) ((struct door *)inet_csk_ca(sk))
#endif

#ifndef DOOR_DECREASE
#define DOOR_DECREASE(sk, cwnd) max((cwnd) >> 1U, 2U)
#endif

#ifndef DOOR_UNDONE
#define DOOR_UNDONE(sk, cwnd) ((void)(sk), (void)(cwnd))
#endif

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
	struct door *ca = DOOR_CA(sk);
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
		DOOR_UNDONE(sk, tp->snd_ssthresh);
	} else if (ca_state(sk) <= TCP_CA_Disorder) {
		tp->snd_cwnd = max(tp->snd_cwnd, ca->prior_cwnd);
		tp->snd_ssthresh = max(tp->snd_ssthresh, ca->prior_ssthresh);
		DOOR_UNDONE(sk, tp->snd_cwnd);
	}
}

static __always_inline void door_check_reordering(struct sock *sk)
{
	struct door *ca = DOOR_CA(sk);
	__u32 seen = tcp_sk(sk)->reord_seen;

	if (seen != ca->reord_seen) {
		ca->reord_seen = seen;
		door_out_of_order(sk);
	}
}

static __always_inline void door_init_state(struct sock *sk)
{
	struct door *ca = DOOR_CA(sk);

	ca->quiet_until_us = 0;
	ca->reduced_at_us = 0;
	ca->reord_seen = tcp_sk(sk)->reord_seen;
	ca->prior_cwnd = 0;
	ca->prior_ssthresh = 0;
}

/* .in_ack_event and .pkts_acked (the latter runs right after tcp_clean_rtx_queue() has
 * counted a hole filled by original segments, before tcp_fastretrans_alert() decides on
 * recovery for the same ACK). */
static __always_inline void door_on_ack(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	/* the workaround of mprig_cc.h, with the reduction our .ssthresh makes */
	if (ssthresh_skipped(tp))
		repair_skipped_ssthresh_to(sk, DOOR_DECREASE(sk, max(tp->prior_cwnd, 2U)));
	door_check_reordering(sk);
}

static __always_inline __u32 door_ssthresh_of(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct door *ca = DOOR_CA(sk);

	door_check_reordering(sk);
	if (tp->tcp_mstamp < ca->quiet_until_us)
		return max(tp->snd_cwnd, 2U);
	ca->reduced_at_us = tp->tcp_mstamp;
	ca->prior_cwnd = tp->snd_cwnd;
	ca->prior_ssthresh = tp->snd_ssthresh;
	return DOOR_DECREASE(sk, tp->snd_cwnd);
}

/* As reno_halve_on_timeout() and the others in mprig_cc.h, with DOOR_DECREASE. */
static __always_inline void door_on_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);

	/* A timeout's reduction is never undone by instant recovery. */
	if (ev == CA_EVENT_LOSS) {
		DOOR_CA(sk)->reduced_at_us = 0;
		tp->snd_ssthresh = DOOR_DECREASE(sk, tp->snd_cwnd);
	}
}

static __always_inline void door_on_set_state(struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (entering_cwr(sk, new_state))
		tp->snd_ssthresh = DOOR_DECREASE(sk, tp->snd_cwnd);
	if (timeout_in_recovery(sk, new_state))
		tp->snd_ssthresh = min(tp->snd_ssthresh, DOOR_DECREASE(sk, max(tp->prior_cwnd, 2U)));
}

/* .undo_cwnd: Linux proved a retransmission spurious, so the segment was reordered. */
static __always_inline __u32 door_undo(struct sock *sk)
{
	door_out_of_order(sk);
	return tcp_reno_undo_cwnd(sk);
}

#endif
