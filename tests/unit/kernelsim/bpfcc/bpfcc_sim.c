/* mprig's BPF congestion controls (kernel-configs/bpf/<PROG>.c) compiled as ordinary C and
 * driven by crafted ACK sequences through a model of the kernel's call sites (Linux 6.1
 * net/ipv4/tcp_input.c, tcp_cong.c): the order in which the hooks run and what the kernel
 * does between them. Built by tests/unit/test_bpfcc_logic.py with -DPROG=<name>; prints one
 * line per scenario, which the test compares whole.
 *
 * Not a TCP: no segments, no timers, no PRR arithmetic. A scenario says what the kernel
 * decided (an ACK of n packets, entering fast recovery, an RTO) and the model calls the
 * hooks exactly as the kernel does at that point.
 */
#include <stdio.h>
#include <stdlib.h>

#include "vmlinux.h"
#include "bpf/bpf_helpers.h"

__u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked);
void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked);
void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked);
__u32 tcp_reno_undo_cwnd(struct sock *sk);

#define STR2(x) #x
#define STR(x) STR2(x)
#include STR(PROG.c)

/* ---- maps: a few entries per map are enough for a scenario ---- */
struct shim_entry {
	void *map;
	unsigned char key[16];
	void *value;
};
static struct shim_entry shim_table[64];

static struct shim_entry *shim_find(void *map, const void *key, unsigned int ksize)
{
	for (int i = 0; i < 64; i++)
		if (shim_table[i].map == map && !memcmp(shim_table[i].key, key, ksize))
			return &shim_table[i];
	return NULL;
}

void *shim_map_lookup(void *map, const void *key, unsigned int ksize, unsigned int vsize)
{
	struct shim_entry *e = shim_find(map, key, ksize);

	(void)vsize;
	return e ? e->value : NULL;
}

long shim_map_update(void *map, const void *key, const void *value, unsigned int ksize,
		     unsigned int vsize, __u64 flags)
{
	struct shim_entry *e = shim_find(map, key, ksize);

	if (e && flags == BPF_NOEXIST)
		return -17;
	for (int i = 0; !e && i < 64; i++)
		if (!shim_table[i].map) {
			e = &shim_table[i];
			e->map = map;
			memcpy(e->key, key, ksize);
			e->value = calloc(1, vsize);
		}
	if (!e)
		return -7;
	memcpy(e->value, value, vsize);
	return 0;
}

long shim_map_delete(void *map, const void *key, unsigned int ksize)
{
	struct shim_entry *e = shim_find(map, key, ksize);

	if (!e)
		return -2;
	free(e->value);
	memset(e, 0, sizeof(*e));
	return 0;
}

/* ---- the kfuncs: the kernel's own code (net/ipv4/tcp_cong.c, 6.1) ---- */
__u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked)
{
	__u32 cwnd = min(tp->snd_cwnd + acked, tp->snd_ssthresh);

	acked -= cwnd - tp->snd_cwnd;
	tp->snd_cwnd = min(cwnd, tp->snd_cwnd_clamp);
	return acked;
}

void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked)
{
	if (tp->snd_cwnd_cnt >= w) {
		tp->snd_cwnd_cnt = 0;
		tp->snd_cwnd++;
	}
	tp->snd_cwnd_cnt += acked;
	if (tp->snd_cwnd_cnt >= w) {
		__u32 delta = tp->snd_cwnd_cnt / w;

		tp->snd_cwnd_cnt -= delta * w;
		tp->snd_cwnd += delta;
	}
	tp->snd_cwnd = min(tp->snd_cwnd, tp->snd_cwnd_clamp);
}

static bool tcp_is_cwnd_limited(const struct sock *sk)
{
	if (sk->is_cwnd_limited)
		return true;
	if (sk->snd_cwnd < sk->snd_ssthresh)
		return sk->snd_cwnd < 2 * sk->max_packets_out;
	return false;
}

void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked)
{
	(void)ack;
	if (!tcp_is_cwnd_limited(sk))
		return;
	if (sk->snd_cwnd < sk->snd_ssthresh) {
		acked = tcp_slow_start(sk, acked);
		if (!acked)
			return;
	}
	tcp_cong_avoid_ai(sk, sk->snd_cwnd, acked);
}

__u32 tcp_reno_undo_cwnd(struct sock *sk)
{
	return max(sk->snd_cwnd, sk->prior_cwnd);
}

static __u32 tcp_reno_ssthresh(struct sock *sk)
{
	return max(sk->snd_cwnd >> 1U, 2U);
}

static struct tcp_congestion_ops reno_ops = {
	.ssthresh = tcp_reno_ssthresh,
	.cong_avoid = tcp_reno_cong_avoid,
	.undo_cwnd = tcp_reno_undo_cwnd,
	.name = "reno",
};

/* ---- the kernel's call sites ---- */
struct flow {
	struct sock sk;	/* first: the programs' sk */
	struct tcp_congestion_ops *ops;
	struct mptcp_subflow_context ctx;
	__u32 high_seq, snd_nxt, in_flight;
	bool undo_marker;
	int retransmits;
};

static bool after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

static void k_set_state(struct flow *f, __u8 state)	/* tcp_set_ca_state */
{
	if (f->ops->set_state)
		f->ops->set_state(&f->sk, state);
	f->sk.icsk_ca_state = state;
}

static void k_init(struct flow *f, struct tcp_congestion_ops *ops, struct sock *conn)
{
	memset(f, 0, sizeof(*f));
	f->ops = ops;
	f->sk.snd_cwnd = 10;
	f->sk.snd_cwnd_clamp = ~0U;
	f->sk.snd_ssthresh = TCP_INFINITE_SSTHRESH;
	f->sk.srtt_us = 20000 << 3;
	f->ctx.conn = conn;
	f->sk.is_mptcp = conn != NULL;
	f->sk.icsk_ulp_data = conn ? &f->ctx : NULL;
	if (ops->init)
		ops->init(&f->sk);
}

/* The sender fills its window and an ACK of `acked` packets arrives (tcp_ack: in_ack_event,
 * tcp_clean_rtx_queue -> pkts_acked, then tcp_cong_control -> cong_avoid outside recovery). */
static void k_ack(struct flow *f, __u32 acked, __u64 now_us)
{
	struct ack_sample sample = { .pkts_acked = acked, .rtt_us = (__s32)(f->sk.srtt_us >> 3) };

	f->sk.tcp_mstamp = now_us;
	f->sk.max_packets_out = f->sk.snd_cwnd;
	f->sk.is_cwnd_limited = true;
	f->snd_nxt += acked;
	f->sk.snd_una += acked;
	if (f->ops->in_ack_event)
		f->ops->in_ack_event(&f->sk, 0);
	if (acked && f->ops->pkts_acked)
		f->ops->pkts_acked(&f->sk, &sample);
	/* tcp_cong_control: PRR in CWR and Recovery, cong_avoid otherwise (Loss included) */
	if (f->sk.icsk_ca_state != TCP_CA_CWR && f->sk.icsk_ca_state != TCP_CA_Recovery &&
	    f->ops->cong_avoid)
		f->ops->cong_avoid(&f->sk, f->sk.snd_una, acked);
}

/* The third duplicate ACK: tcp_enter_recovery -> tcp_init_cwnd_reduction. */
static void k_enter_recovery(struct flow *f)
{
	f->snd_nxt += f->sk.snd_cwnd;	/* a window is out beyond the hole */
	f->high_seq = f->snd_nxt;
	f->sk.snd_cwnd_cnt = 0;
	f->sk.prior_cwnd = f->sk.snd_cwnd;
	f->undo_marker = true;
	f->sk.snd_ssthresh = f->ops->ssthresh(&f->sk);
	k_set_state(f, TCP_CA_Recovery);
}

/* The ACK that covers high_seq: tcp_end_cwnd_reduction, then Open. */
static void k_exit_recovery(struct flow *f)
{
	f->sk.snd_una = f->high_seq;
	if (f->sk.snd_ssthresh < TCP_INFINITE_SSTHRESH && f->undo_marker)
		f->sk.snd_cwnd = f->sk.snd_ssthresh;
	k_set_state(f, TCP_CA_Open);
}

/* The retransmission timer fires: tcp_enter_loss (6.1, unchanged in 6.18). */
static void k_rto(struct flow *f)
{
	__u8 state = f->sk.icsk_ca_state;

	/* Reduce ssthresh if it has not yet been made inside this window. */
	if (state <= TCP_CA_Disorder || !after(f->high_seq, f->sk.snd_una) ||
	    (state == TCP_CA_Loss && !f->retransmits)) {
		f->sk.prior_ssthresh = f->sk.snd_ssthresh;
		f->sk.prior_cwnd = f->sk.snd_cwnd;
		f->sk.snd_ssthresh = f->ops->ssthresh(&f->sk);
		if (f->ops->cwnd_event)
			f->ops->cwnd_event(&f->sk, CA_EVENT_LOSS);
	}
	f->sk.snd_cwnd = 1;	/* tcp_packets_in_flight() + 1: everything is marked lost */
	f->sk.snd_cwnd_cnt = 0;
	k_set_state(f, TCP_CA_Loss);
	f->high_seq = f->snd_nxt;
	f->retransmits++;
}

static void show(const char *scenario, struct flow *f)
{
	printf("%s %s: cwnd=%u ssthresh=%u\n", scenario, f->ops->name, f->sk.snd_cwnd,
	       f->sk.snd_ssthresh);
}

/* Slow start from 10 to 100 packets (ssthresh stays infinite). */
static void grow_to_100(struct flow *f, __u64 *now)
{
	while (f->sk.snd_cwnd < 100)
		k_ack(f, min(f->sk.snd_cwnd, 100 - f->sk.snd_cwnd), *now += 20000);
}

/* Fast recovery that completes: the window PR-R keeps and Reno halves. */
static void fast_recovery(struct tcp_congestion_ops *ops)
{
	struct flow f;
	__u64 now = 1000000;

	k_init(&f, ops, NULL);
	grow_to_100(&f, &now);
	k_enter_recovery(&f);
	k_exit_recovery(&f);
	show("fast-recovery", &f);
}

/* A timeout with no recovery under way: every program halves as Reno does. */
static void rto_from_open(struct tcp_congestion_ops *ops)
{
	struct flow f;
	__u64 now = 1000000;

	k_init(&f, ops, NULL);
	grow_to_100(&f, &now);
	k_rto(&f);
	show("rto-from-open", &f);
}

/* Fast recovery (3 dupACKs at cwnd 100), then the retransmission is lost too and the timer
 * fires before the recovery point is acked: the kernel does not ask .ssthresh again (it
 * assumes the recovery already reduced) and raises no CA_EVENT_LOSS; only .set_state(Loss)
 * runs. Reno's ssthresh is 50 from the recovery; PR-R's RTO is Reno's ("the RTO response
 * takes action as legacy TCP"), so its ssthresh must be 50 as well, not the kept 100. */
static void rto_in_recovery(struct tcp_congestion_ops *ops, bool reordered)
{
	struct flow f;
	__u64 now = 1000000;
	const char *name = reordered ? "rto-in-recovery-reordered" : "rto-in-recovery";

	k_init(&f, ops, NULL);
	grow_to_100(&f, &now);
	if (reordered) /* Linux counted a reordering event just before: door keeps the window */
		f.sk.reord_seen++;
	k_enter_recovery(&f);
	k_ack(&f, 0, now += 20000);	/* dupACKs: nothing new acked */
	k_rto(&f);
	show(name, &f);
	/* slow start after the timeout: up to ssthresh, then one packet per RTT */
	for (int rtt = 0; rtt < 8; rtt++)
		k_ack(&f, f.sk.snd_cwnd, now += 20000);
	printf("%s+8rtt %s: cwnd=%u ssthresh=%u\n", name, ops->name, f.sk.snd_cwnd,
	       f.sk.snd_ssthresh);
}

/* Two subflows of one MPTCP connection at cwnd `first` and `second` in congestion avoidance
 * with smoothed RTTs `rtt_us` (one ACK each at the same time, so both hold their slots). */
static void coupled_pair_rtt(struct flow f[2], struct tcp_congestion_ops *ops, __u32 first,
			     __u32 second, const __u32 rtt_us[2], __u64 now)
{
	static struct sock conn;

	for (int i = 0; i < 2; i++) {
		k_init(&f[i], ops, &conn);
		f[i].sk.snd_cwnd = f[i].sk.snd_ssthresh = i ? second : first;
		f[i].sk.srtt_us = rtt_us[i] << 3;
		k_ack(&f[i], 1, now);
	}
}

static void coupled_pair(struct flow f[2], struct tcp_congestion_ops *ops, __u32 first,
			 __u32 second, __u64 now)
{
	static const __u32 rtt_us[2] = { 20000, 20000 };	/* k_init's */

	coupled_pair_rtt(f, ops, first, second, rtt_us, now);
}

static void coupled_show(const char *scenario, struct flow f[2])
{
	printf("%s %s: cwnd=%u+%u\n", scenario, f[0].ops->name, f[0].sk.snd_cwnd,
	       f[1].sk.snd_cwnd);
	for (int i = 0; i < 2; i++)
		if (f[i].ops->release)
			f[i].ops->release(&f[i].sk);
}

/* At cwnd 60 and 40: a fast recovery on the first, then one on the second. Reno (and LIA)
 * halve each subflow's own window: 30 and 20. Fully coupled (FC-CC) takes half the
 * connection's total from the subflow: 60 - 100/2 = 10, then 40 - (10 + 40)/2 = 15.
 * `reordered`: the second subflow counts a reordering event just before its recovery, so
 * TCP-DOOR keeps its window (T1): 40, under Reno's decrease or FC-CC's. */
static void coupled_decrease(struct tcp_congestion_ops *ops, bool reordered)
{
	struct flow f[2];

	coupled_pair(f, ops, 60, 40, 1020000);
	for (int i = 0; i < 2; i++) {
		if (reordered && i == 1)
			f[i].sk.reord_seen++;
		k_enter_recovery(&f[i]);
		k_exit_recovery(&f[i]);
	}
	coupled_show(reordered ? "coupled-decrease-reordered" : "coupled-decrease", f);
}

/* At cwnd 40 and 60: a fast recovery on the first; 10 ms later (less than T2, one srtt of
 * 20 ms, after the reduction) an ACK inside that recovery shows reordering, and TCP-DOOR's
 * instant recovery undoes the reduction (the recovery ends at 40). Then a fast recovery on
 * the second. Reno: 20 + 30; door: 40 + 30; FC-CC: 40 - 100/2 gives the floor 2, then
 * 60 - (2 + 60)/2 = 29; TCP-DOOR over FC-CC: 40, then 60 - (40 + 60)/2 = 10, the total
 * counting the first subflow at the window it was given back. */
static void coupled_instant_recovery(struct tcp_congestion_ops *ops)
{
	struct flow f[2];
	__u64 now = 1020000;

	coupled_pair(f, ops, 40, 60, now);
	k_enter_recovery(&f[0]);
	f[0].sk.reord_seen++;
	k_ack(&f[0], 0, now + 10000);	/* a SACK that fills the hole: nothing new cum-acked */
	k_exit_recovery(&f[0]);
	k_enter_recovery(&f[1]);
	k_exit_recovery(&f[1]);
	coupled_show("coupled-instant-recovery", f);
}

/* Two subflows of one MPTCP connection, same RTT, both at cwnd 20 in congestion
 * avoidance, 40 round trips of full windows acked: Reno grows each by one packet per round
 * trip (to 60); LIA's coupled increase grows the pair as one Reno flow, a quarter packet
 * each per round trip at first. */
static void coupled_avoidance(struct tcp_congestion_ops *ops)
{
	static struct sock conn;
	struct flow f[2];
	__u64 now = 1000000;

	for (int i = 0; i < 2; i++) {
		k_init(&f[i], ops, &conn);
		f[i].sk.snd_cwnd = 20;
		f[i].sk.snd_ssthresh = 20;
	}
	for (int rtt = 0; rtt < 40; rtt++) {
		now += 20000;
		for (int i = 0; i < 2; i++)
			k_ack(&f[i], f[i].sk.snd_cwnd, now);
	}
	printf("coupled-avoidance %s: cwnd=%u+%u\n", ops->name, f[0].sk.snd_cwnd,
	       f[1].sk.snd_cwnd);
	for (int i = 0; i < 2; i++)
		if (ops->release)
			ops->release(&f[i].sk);
}

/* Paper 000's scenario 2 as its archived runs measured it: a clean subflow at cwnd 250 with
 * a 150 ms srtt (a standing queue) beside a lossy one at cwnd 4 with a 30 ms srtt, both in
 * congestion avoidance, for 2 s of full windows acked (the lossy one every 30 ms, the clean
 * one every 150 ms). Reno grows the lossy subflow by one packet per round trip; LIA by
 * alpha / cwnd_total per packet, about one packet per 290 acked (RFC 6356: w = (250 + 4 *
 * 150 / 30)^2 / 250), so it stays at a few packets. */
static void coupled_lossy_path(struct tcp_congestion_ops *ops)
{
	static const __u32 rtt_us[2] = { 150000, 30000 };
	struct flow f[2];
	__u64 now = 1000000;

	coupled_pair_rtt(f, ops, 250, 4, rtt_us, now);
	for (int tick = 1; tick <= 66; tick++) {
		now += 30000;
		k_ack(&f[1], f[1].sk.snd_cwnd, now);
		if (tick % 5 == 0)
			k_ack(&f[0], f[0].sk.snd_cwnd, now);
	}
	coupled_show("coupled-lossy-path", f);
}

int main(int argc, char **argv)
{
	struct tcp_congestion_ops *all[] = { &reno_ops, &PROG };

	if (argc > 1 && !strcmp(argv[1], "lossy-path")) {
		for (int i = 0; i < 2; i++)
			coupled_lossy_path(all[i]);
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		fast_recovery(all[i]);
		rto_from_open(all[i]);
		rto_in_recovery(all[i], false);
		rto_in_recovery(all[i], true);
		coupled_decrease(all[i], false);
		coupled_decrease(all[i], true);
		coupled_instant_recovery(all[i]);
		coupled_avoidance(all[i]);
	}
	return 0;
}
