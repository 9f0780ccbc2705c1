/* SPDX-License-Identifier: GPL-2.0 */
/* Shared helpers for mprig's congestion-control programs (BPF struct_ops
 * tcp_congestion_ops). Modelled on the kernel's selftests
 * (tools/testing/selftests/bpf/bpf_tcp_helpers.h), but built against a
 * vmlinux.h that mprig.bpfcc generates from the running kernel's BTF, so
 * the objects are CO-RE and load on any kernel with BTF (5.6+).
 */
#ifndef MPRIG_CC_H
#define MPRIG_CC_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define TCP_INFINITE_SSTHRESH 0x7fffffff

#ifndef min
#define min(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) ((a) > (b) ? (a) : (b))
#endif

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void *inet_csk_ca(const struct sock *sk)
{
	return (void *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline __u8 ca_state(const struct sock *sk)
{
	return BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state);
}

/* Reno's multiplicative decrease: half the window, at least 2 segments. */
static __always_inline __u32 reno_half(const struct tcp_sock *tp)
{
	return max(tp->snd_cwnd >> 1U, 2U);
}

/* For algorithms whose ssthresh() keeps the window in fast recovery (prr, door): the
 * reductions Reno still makes elsewhere. A retransmission timeout (CA_EVENT_LOSS) halves
 * ssthresh (the kernel then sets cwnd to 1); entering CWR (an ECN echo) halves it too. */
static __always_inline void reno_halve_on_timeout(struct sock *sk, enum tcp_ca_event ev)
{
	if (ev == CA_EVENT_LOSS)
		tcp_sk(sk)->snd_ssthresh = reno_half(tcp_sk(sk));
}

/* .set_state(new_state) is entering CWR (an ECN echo or local congestion). */
static __always_inline bool entering_cwr(struct sock *sk, __u8 new_state)
{
	return new_state == TCP_CA_CWR && ca_state(sk) != TCP_CA_CWR;
}

static __always_inline void reno_halve_on_cwr(struct sock *sk, __u8 new_state)
{
	if (entering_cwr(sk, new_state))
		tcp_sk(sk)->snd_ssthresh = reno_half(tcp_sk(sk));
}

/* For the same algorithms: a retransmission timeout inside a fast recovery that kept the
 * window. tcp_enter_loss() asks .ssthresh and raises CA_EVENT_LOSS only when no reduction
 * was made inside the current window; from Recovery (before the recovery point is acked)
 * it does neither and keeps the recovery's ssthresh, i.e. the whole window for prr, which
 * then slow-starts straight back to the window that overflowed the queue. Reno's ssthresh
 * there is half the window before the recovery (tp->prior_cwnd, set on entering it); put
 * that back when the state changes to Loss (tcp_set_ca_state() calls .set_state before it
 * stores the new state, and after tcp_enter_loss() has set cwnd to 1 + in flight). */
static __always_inline bool timeout_in_recovery(struct sock *sk, __u8 new_state)
{
	return new_state == TCP_CA_Loss && ca_state(sk) == TCP_CA_Recovery;
}

static __always_inline void reno_halve_on_timeout_in_recovery(struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (timeout_in_recovery(sk, new_state))
		tp->snd_ssthresh = min(tp->snd_ssthresh, max(tp->prior_cwnd >> 1U, 2U));
}

/* With MPTCP subflows on the 6.18 kernel here, now and then none of a BPF algorithm's
 * hooks runs for an ACK on which the subflow enters fast recovery: ssthresh gets the low
 * half of a kernel text address (0x81104110) and PRR turns it into a cwnd of 10^8 to 10^9
 * packets that floods the path for seconds. Seen with a BPF Reno that only calls the
 * kernel's own functions, never with the kernel's reno, nor on plain TCP. No real ssthresh
 * exceeds TCP_INFINITE_SSTHRESH and no real cwnd reaches 2^31: on the next ACK
 * (.in_ack_event, .pkts_acked) put back what the skipped .ssthresh would have given,
 * computed from the window before the reduction (halved when `halve`). */
static __always_inline bool ssthresh_skipped(const struct tcp_sock *tp)
{
	return tp->snd_ssthresh > TCP_INFINITE_SSTHRESH || tp->snd_cwnd > TCP_INFINITE_SSTHRESH;
}

/* The repair with the ssthresh the program's .ssthresh would have returned for a window of
 * tp->prior_cwnd (call only when ssthresh_skipped()). */
static __always_inline void repair_skipped_ssthresh_to(struct sock *sk, __u32 ssthresh)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (tp->snd_ssthresh > TCP_INFINITE_SSTHRESH)
		tp->snd_ssthresh = ssthresh;
	tp->snd_cwnd = min(tp->snd_cwnd, max(tp->prior_cwnd, 2U));
}

static __always_inline void repair_skipped_ssthresh(struct sock *sk, bool halve)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 prior = max(tp->prior_cwnd, 2U);

	if (ssthresh_skipped(tp))
		repair_skipped_ssthresh_to(sk, halve ? max(prior >> 1, 2U) : prior);
}

/* The kernel's own Reno, exported to struct_ops programs as kfuncs. */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;

#endif
