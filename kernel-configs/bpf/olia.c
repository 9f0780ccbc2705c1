// SPDX-License-Identifier: GPL-2.0
/* olia: the Opportunistic Linked Increases Algorithm (Khalili, Gast, Popovic,
 * Le Boudec, "MPTCP is not Pareto-optimal", IEEE/ACM ToN 2013;
 * draft-khalili-mptcp-congestion-control), the coupled congestion control
 * next to LIA in the multipath-tcp.org kernel.
 *
 * Slow start and the decrease on loss are Reno's, per subflow. In congestion
 * avoidance an ACK of one packet on subflow r adds, in packets,
 *     (w_r / rtt_r^2) / (sum_p w_p / rtt_p)^2  +  alpha_r / w_r
 * where, over the connection's subflows (n of them),
 *     l_p = bytes acked between p's last two losses, or since its last loss
 *           if that is more,
 *     B   = the "best" paths, those with the largest l_p / rtt_p^2 (l_p is
 *           1 / loss rate, so this is the square of a TCP's rate on p),
 *     M   = the paths with the largest window,
 *     alpha_r = 1 / (n |B \ M|)  for r in B \ M,
 *              -1 / (n |M|)      for r in M, when B \ M is not empty,
 *               0                otherwise.
 * The first term is w_r / (sum_p w_p rtt_r / rtt_p)^2. Both are added to a
 * signed fixed-point count (OLIA_ONE = one packet) that moves cwnd by whole
 * packets, up or down; a decrease also lowers ssthresh to the new cwnd, or
 * slow start would undo it on the next ACK.
 *
 * Shared state: coupled.h (map olia_conns): each subflow's slot holds its
 * cwnd, srtt and l (in KiB). While a subflow recovers from a loss its slot's
 * cwnd is its new ssthresh (the window it returns to), as in the
 * multipath-tcp.org implementation. The passes over the slots run as
 * bpf_loop() callbacks: unrolled, their branches exceed the verifier's budget.
 */
#define COUPLED_MAP olia_conns
#include "coupled.h"

char _license[] SEC("license") = "GPL";

#define OLIA_SHIFT 20
#define OLIA_ONE (1LL << OLIA_SHIFT)
#define OLIA_MAX_L_KIB (1U << 20)
#define OLIA_MAX_RTT_US (1U << 21) /* l * rtt^2 stays below 2^64 */

struct olia {
	struct lia base;	/* first: coupled.h reads the private area as struct lia */
	__u32 loss1;		/* snd_una at the loss before the last one */
	__u32 loss2;		/* snd_una at the last loss */
	__s64 count;		/* increase not yet applied, OLIA_ONE = one packet */
};

/* l in KiB: the larger of (last loss - the one before) and (now - last loss). */
static __always_inline __u32 olia_l(const struct olia *ca, __u32 snd_una)
{
	__u32 l = max(snd_una - ca->loss2, ca->loss2 - ca->loss1) >> 10;

	return min(l, OLIA_MAX_L_KIB);
}

/* Path a is better than or as good as b: l_a / rtt_a^2 >= l_b / rtt_b^2. */
static __always_inline bool olia_at_least(__u64 la, __u64 ra, __u64 lb, __u64 rb)
{
	return la * rb * rb >= lb * ra * ra;
}

struct olia_scan {
	struct lia_conn *e;
	__u64 r_me;		/* our srtt */
	__u64 sum;		/* pass 1: sum_p (w_p rtt_me / rtt_p) << 10 */
	__u64 best_l, best_r;	/* pass 1: the largest l / rtt^2 */
	__u32 n, max_w;		/* pass 1: subflows, largest window */
	__u32 in_m, in_b_not_m;	/* pass 2: |M|, |B \ M| */
	__u32 me;		/* our slot */
	bool me_in_m, me_in_b;
};

static __always_inline __u64 olia_rtt(const struct lia_slot *slot)
{
	return min(max(slot->rtt_us, 1U), OLIA_MAX_RTT_US);
}

static long olia_pass1(__u32 i, void *data)
{
	struct olia_scan *s = data;
	struct lia_slot *slot = &s->e->slot[i & (LIA_SUBFLOWS - 1)];
	__u64 r = olia_rtt(slot);

	if (!slot->used || !slot->cwnd)
		return 0;
	s->n++;
	s->max_w = max(s->max_w, slot->cwnd);
	s->sum += (((__u64)slot->cwnd * s->r_me) << 10) / r;
	if (!s->best_l || !olia_at_least(s->best_l, s->best_r, slot->l_kib, r)) {
		s->best_l = slot->l_kib;
		s->best_r = r;
	}
	return 0;
}

static long olia_pass2(__u32 i, void *data)
{
	struct olia_scan *s = data;
	struct lia_slot *slot = &s->e->slot[i & (LIA_SUBFLOWS - 1)];
	bool in_m, in_b;

	if (!slot->used || !slot->cwnd)
		return 0;
	in_m = slot->cwnd == s->max_w;
	in_b = olia_at_least(slot->l_kib, olia_rtt(slot), s->best_l, s->best_r);
	s->in_m += in_m;
	s->in_b_not_m += in_b && !in_m;
	if (i == s->me) {
		s->me_in_m = in_m;
		s->me_in_b = in_b;
	}
	return 0;
}

/* The increase per packet acked, OLIA_ONE = one packet (see the top of the file). */
static __always_inline __s64 olia_increase(struct lia_conn *e, __u32 me, __u32 w)
{
	struct olia_scan s = {.e = e, .me = me, .best_r = 1};
	__u64 sum;
	__s64 inc;

	s.r_me = olia_rtt(&e->slot[me & (LIA_SUBFLOWS - 1)]);
	bpf_loop(LIA_SUBFLOWS, olia_pass1, &s, 0);
	bpf_loop(LIA_SUBFLOWS, olia_pass2, &s, 0);
	sum = min(max(s.sum, 1ULL), 1ULL << 31);
	/* w / (sum / 2^10)^2 in units of 2^-20 */
	inc = (__s64)(((__u64)w << (OLIA_SHIFT + 20)) / (sum * sum));
	if (!s.in_b_not_m || !s.n)
		return inc;
	/* BPF has no signed division: divide magnitudes */
	if (s.me_in_m)
		return inc - (__s64)((__u64)OLIA_ONE / ((__u64)s.n * s.in_m * w));
	if (s.me_in_b)
		return inc + (__s64)((__u64)OLIA_ONE / ((__u64)s.n * s.in_b_not_m * w));
	return inc;
}

/* Move cwnd by the whole packets in ca->count. */
static __always_inline void olia_apply(struct tcp_sock *tp, struct olia *ca)
{
	__s64 step;

	if (ca->count >= OLIA_ONE) {
		step = (__s64)((__u64)ca->count >> OLIA_SHIFT);
		ca->count -= step * OLIA_ONE;
		tp->snd_cwnd = (__u32)min((__u64)tp->snd_cwnd + step, (__u64)tp->snd_cwnd_clamp);
	} else if (ca->count <= -OLIA_ONE) {
		step = (__s64)((__u64)(-ca->count) >> OLIA_SHIFT);
		ca->count += step * OLIA_ONE;
		tp->snd_cwnd = (__u32)max((__s64)tp->snd_cwnd - step, 2LL);
		tp->snd_ssthresh = min(tp->snd_ssthresh, tp->snd_cwnd);
	}
}

SEC("struct_ops/olia_init")
void BPF_PROG(olia_init, struct sock *sk)
{
	struct olia *ca = inet_csk_ca(sk);

	coupled_init(sk);
	ca->loss1 = tcp_sk(sk)->snd_una;
	ca->loss2 = ca->loss1;
	ca->count = 0;
}

SEC("struct_ops/olia_release")
void BPF_PROG(olia_release, struct sock *sk)
{
	coupled_release(sk);
}

SEC("struct_ops/olia_cong_avoid")
void BPF_PROG(olia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct olia *ca = inet_csk_ca(sk);
	struct lia_conn *entry;
	__u32 me;

	if (!lia_cwnd_limited(tp))
		return;
	entry = lia_update(sk, &ca->base);
	me = ca->base.slot & (LIA_SUBFLOWS - 1);
	if (entry)
		entry->slot[me].l_kib = olia_l(ca, tp->snd_una);
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	if (!entry) {
		tcp_cong_avoid_ai(tp, tp->snd_cwnd, acked);
		return;
	}
	ca->count += olia_increase(entry, me, tp->snd_cwnd) * acked;
	olia_apply(tp, ca);
}

/* A loss (fast recovery, timeout) or an ECN echo: a new inter-loss interval, once per
 * event (a repeated timeout acks nothing in between), and the slot shows the window
 * the subflow will return to. */
SEC("struct_ops/olia_set_state")
void BPF_PROG(olia_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct olia *ca = inet_csk_ca(sk);
	struct lia_conn *entry;
	__u64 key = ca->base.conn;

	if (new_state != TCP_CA_Recovery && new_state != TCP_CA_Loss && new_state != TCP_CA_CWR)
		return;
	if (tp->snd_una != ca->loss2) {
		ca->loss1 = ca->loss2;
		ca->loss2 = tp->snd_una;
	}
	ca->count = 0;
	if (!key || ca->base.slot >= LIA_SUBFLOWS)
		return;
	entry = bpf_map_lookup_elem(&COUPLED_MAP, &key);
	if (!entry)
		return;
	entry->slot[ca->base.slot & (LIA_SUBFLOWS - 1)].l_kib = olia_l(ca, tp->snd_una);
	entry->slot[ca->base.slot & (LIA_SUBFLOWS - 1)].cwnd =
		min(min(tp->snd_cwnd, tp->snd_ssthresh), LIA_MAX_CWND);
}

SEC("struct_ops/olia_in_ack_event")
void BPF_PROG(olia_in_ack_event, struct sock *sk, __u32 flags)
{
	repair_skipped_ssthresh(sk, true);
}

SEC("struct_ops/olia_pkts_acked")
void BPF_PROG(olia_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	repair_skipped_ssthresh(sk, true);
}

SEC("struct_ops/olia_ssthresh")
__u32 BPF_PROG(olia_ssthresh, struct sock *sk)
{
	return reno_half(tcp_sk(sk));
}

SEC("struct_ops/olia_undo_cwnd")
__u32 BPF_PROG(olia_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops olia = {
	.init		= (void *)olia_init,
	.release	= (void *)olia_release,
	.ssthresh	= (void *)olia_ssthresh,
	.cong_avoid	= (void *)olia_cong_avoid,
	.set_state	= (void *)olia_set_state,
	.in_ack_event	= (void *)olia_in_ack_event,
	.pkts_acked	= (void *)olia_pkts_acked,
	.undo_cwnd	= (void *)olia_undo_cwnd,
	.name		= "olia",
};
