/* SPDX-License-Identifier: GPL-2.0 */
/* RFC 6356 LIA's coupled increase, shared by lia.c and cwa.c (CWA-MPTCP's
 * increase "follows the algorithm in original MPTCP", i.e. LIA).
 *
 * Each subflow runs Reno's slow start and multiplicative decrease on its own
 * window; in congestion avoidance, an ACK of `acked` packets on subflow i
 * increases cwnd_i by
 *     min(alpha * acked / cwnd_total, acked / cwnd_i),
 *     alpha = cwnd_total * max_k(cwnd_k / rtt_k^2) / (sum_k cwnd_k / rtt_k)^2,
 * which is an additive increase of 1 per w_i acked packets with
 *     w_i = max(cwnd_i, (sum_k cwnd_k * rtt_m / rtt_k)^2 / cwnd_m),
 * m being the subflow with the largest cwnd_k / rtt_k^2 (the kernel's
 * tcp_cong_avoid_ai() does the 1-per-w counting).
 *
 * Shared state: a hash map keyed by the MPTCP connection, i.e. the address
 * of the MPTCP socket, read from the subflow's ULP context
 * (inet_csk(sk)->icsk_ulp_data, a struct mptcp_subflow_context, field conn).
 * Each entry holds up to LIA_SUBFLOWS slots of (cwnd, srtt); a subflow takes
 * a free slot on its first cwnd-limited ACK, keeps it current on every one,
 * and frees it in .release. A plain TCP socket, a connection whose map entry
 * cannot be made, or a ninth subflow, runs Reno. Slots of other subflows are
 * read without a lock (as the out-of-tree multipath-tcp.org kernel's LIA
 * does).
 */
#ifndef MPRIG_COUPLED_H
#define MPRIG_COUPLED_H

#include "mprig_cc.h"

#define LIA_SUBFLOWS 8
#define LIA_NO_SLOT 0xff
#define LIA_MAX_RTT_US (1U << 22) /* clamps keep the products below 2^64 */
#define LIA_MAX_CWND (1U << 18)

struct lia_slot {
	__u32 used;
	__u32 cwnd;
	__u32 rtt_us;
	__u16 cuts;	/* cwa: consecutive cuts of this subflow (Algorithm 1's count_i) */
	__u16 cut_x256;	/* cwa: pending cut, theta * 256, applied by the subflow itself */
	__u32 l_kib;	/* olia: KiB acked between the subflow's last two losses, or since
			 * the last one if more (the paper's l_r) */
};

struct lia_conn {
	struct lia_slot slot[LIA_SUBFLOWS];
	__u64 checked_us;	/* cwa: time of the last Algorithm 1 check */
};

#ifndef COUPLED_MAP
#define COUPLED_MAP lia_conns /* the map's name in bpftool */
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct lia_conn);
} COUPLED_MAP SEC(".maps");

struct lia {
	__u64 conn;	/* the MPTCP socket's address; 0: plain TCP */
	__u8 slot;	/* our slot in lia_conns[conn], or LIA_NO_SLOT */
};

/* Where a program keeps its struct lia in the socket's congestion-control area (default:
 * at its start; door_lia.c puts door's state first). */
#ifndef LIA_CA
#define LIA_CA(sk) ((struct lia *)inet_csk_ca(sk))
#endif

static __always_inline __u64 lia_conn_of(struct sock *sk)
{
	struct mptcp_subflow_context *ctx;
	struct sock *conn = NULL;

	if (!tcp_sk(sk)->is_mptcp)
		return 0;
	ctx = (struct mptcp_subflow_context *)inet_csk(sk)->icsk_ulp_data;
	if (!ctx || bpf_core_read(&conn, sizeof(conn), &ctx->conn))
		return 0;
	return (__u64)conn;
}

static __always_inline struct lia_conn *lia_entry(__u64 key)
{
	struct lia_conn *entry = bpf_map_lookup_elem(&COUPLED_MAP, &key);
	struct lia_conn empty = {};

	if (entry)
		return entry;
	bpf_map_update_elem(&COUPLED_MAP, &key, &empty, BPF_NOEXIST);
	return bpf_map_lookup_elem(&COUPLED_MAP, &key);
}

static __always_inline void lia_take_slot(struct lia *ca, struct lia_conn *entry)
{
	/* Subflows on other CPUs may be claiming slots at the same moment: atomically. */
	for (int i = 0; i < LIA_SUBFLOWS; i++) {
		if (!__sync_val_compare_and_swap(&entry->slot[i].used, 0, 1)) {
			ca->slot = i;
			return;
		}
	}
}

/* Our slot, with our cwnd and srtt written into it (every subflow's slot is
 * kept current, slow start included, as cwnd_total counts them all); NULL
 * when this subflow runs Reno. */
static __always_inline struct lia_conn *lia_update(struct sock *sk, struct lia *ca)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct lia_conn *entry;

	if (!ca->conn)
		return NULL;
	entry = lia_entry(ca->conn);
	if (!entry)
		return NULL;
	if (ca->slot == LIA_NO_SLOT)
		lia_take_slot(ca, entry);
	if (ca->slot >= LIA_SUBFLOWS)
		return NULL;
	entry->slot[ca->slot].cwnd = min(tp->snd_cwnd, LIA_MAX_CWND);
	entry->slot[ca->slot].rtt_us = min(max(tp->srtt_us >> 3, 1U), LIA_MAX_RTT_US);
	return entry;
}

/* w for a subflow with window cwnd (see the top of the file). */
static __always_inline __u32 lia_window(struct lia_conn *entry, __u32 cwnd)
{
	__u64 best_c = 0, best_r = 1, sum = 0, w;
	int i;

	for (i = 0; i < LIA_SUBFLOWS; i++) {
		__u64 c = entry->slot[i].cwnd, r = max(entry->slot[i].rtt_us, 1U);

		if (entry->slot[i].used && c * best_r * best_r > best_c * r * r) {
			best_c = c;
			best_r = r;
		}
	}
	if (!best_c)
		return cwnd;
	for (i = 0; i < LIA_SUBFLOWS; i++) {
		__u64 r = max(entry->slot[i].rtt_us, 1U);

		if (entry->slot[i].used)
			sum += (((__u64)entry->slot[i].cwnd * best_r) << 8) / r;
	}
	sum = min(sum, 1ULL << 31);
	w = ((sum * sum) >> 16) / best_c;
	return (__u32)min(max(w, (__u64)cwnd), 0xffffffffULL);
}

static __always_inline bool lia_cwnd_limited(const struct tcp_sock *tp)
{
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

static __always_inline void coupled_init(struct sock *sk)
{
	struct lia *ca = LIA_CA(sk);

	ca->conn = lia_conn_of(sk);
	ca->slot = LIA_NO_SLOT;
}

/* Free our slot; the last subflow out deletes the connection's entry. */
static __always_inline void coupled_release(struct sock *sk)
{
	struct lia *ca = LIA_CA(sk);
	struct lia_conn *entry;
	__u64 key = ca->conn;
	int i, used = 0;

	if (!key || ca->slot >= LIA_SUBFLOWS)
		return;
	entry = bpf_map_lookup_elem(&COUPLED_MAP, &key);
	if (!entry)
		return;
	entry->slot[ca->slot & (LIA_SUBFLOWS - 1)].used = 0;
	ca->slot = LIA_NO_SLOT;
	for (i = 0; i < LIA_SUBFLOWS; i++)
		used += entry->slot[i].used;
	if (!used)
		bpf_map_delete_elem(&COUPLED_MAP, &key);
}

/* Slow start, then LIA's coupled increase (Reno's without an entry). */
static __always_inline void coupled_increase(struct tcp_sock *tp, struct lia_conn *entry,
					     __u32 acked)
{
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	tcp_cong_avoid_ai(tp, entry ? lia_window(entry, tp->snd_cwnd) : tp->snd_cwnd, acked);
}

/* .cong_avoid of lia and of the programs that put LIA's increase under their own recovery
 * (prr_lia, door_lia). */
static __always_inline void coupled_cong_avoid(struct sock *sk, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (!lia_cwnd_limited(tp))
		return;
	coupled_increase(tp, lia_update(sk, LIA_CA(sk)), acked);
}

#endif
