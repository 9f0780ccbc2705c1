/* Userspace stand-in for the kernel pieces that patch 0002's proactive-scheduler functions
 * touch (lists, data fragments, the MPTCP socket's send cursor), to run those functions
 * unchanged: test_kernel_patch_proactive.py extracts them from the patch into pro.inc. This
 * checks the patch's DSN bookkeeping, not the kernel: the in-order path and random jumps
 * ahead by the "slow subflow" must send every byte exactly once and leave snd_nxt at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stddef.h>
#include <assert.h>
typedef uint64_t u64; typedef uint32_t u32; typedef uint16_t u16; typedef int64_t s64;
#define U64_MAX UINT64_MAX
#define MPTCP_PRO_SENT_MAX 8
#define READ_ONCE(x) (x)
#define WRITE_ONCE(x, v) ((x) = (v))
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
static int before64(u64 a, u64 b) { return (s64)(a - b) < 0; }
static int after64(u64 a, u64 b) { return before64(b, a); }
struct list_head { struct list_head *next, *prev; };
#define container_of(p, t, m) ((t *)((char *)(p) - offsetof(t, m)))
#define list_entry(p, t, m) container_of(p, t, m)
#define list_next_entry(pos, m) list_entry((pos)->m.next, __typeof__(*(pos)), m)
#define list_entry_is_head(pos, head, m) (&(pos)->m == (head))
#define list_for_each_entry_from(pos, head, m) for (; !list_entry_is_head(pos, head, m); pos = list_next_entry(pos, m))
static int list_is_last(const struct list_head *l, const struct list_head *h) { return l->next == h; }
struct mptcp_data_frag { struct list_head list; u64 data_seq; u16 data_len; u16 offset; u16 overhead; u16 already_sent; };
struct sock { int dummy; };
struct mptcp_sock {
	struct sock sk; u64 snd_nxt, write_seq; int snd_burst; int recovery, csum_enabled;
	struct list_head rtx_queue; struct mptcp_data_frag *first_pending;
	unsigned char pro_cnt; struct { u64 seq; u32 len; } pro_sent[MPTCP_PRO_SENT_MAX];
};
struct tcp_sock { u32 mss_cache; };
struct mptcp_sendmsg_info { int mss_now; int size_goal; u16 limit; u16 sent; unsigned int flags; int data_lock_held; };
#define mptcp_sk(s) ((struct mptcp_sock *)(s))
#define tcp_sk(s) ((struct tcp_sock *)(s))
#define sock_net(s) 0
static int mptcp_proactive_sched(int n) { return 1; }
static int __mptcp_check_fallback(struct mptcp_sock *m) { return 0; }
static u64 mptcp_wnd_end(struct mptcp_sock *m) { return m->write_seq; }
static struct mptcp_data_frag *mptcp_send_head(struct sock *sk) { return mptcp_sk(sk)->first_pending; }
static struct mptcp_data_frag *mptcp_send_next(struct sock *sk) {
	struct mptcp_sock *msk = mptcp_sk(sk); struct mptcp_data_frag *cur = msk->first_pending;
	return list_is_last(&cur->list, &msk->rtx_queue) ? NULL : list_next_entry(cur, list);
}
static u64 stub_delta;
#define mptcp_pro_delta(msk, ssk) stub_delta
/* the subflow send: counts how often each DSN byte is handed to a subflow */
static unsigned char sent_cnt[1 << 20];
static int chunk = 300;
static int mptcp_sendmsg_frag(struct sock *sk, struct sock *ssk, struct mptcp_data_frag *d, struct mptcp_sendmsg_info *info) {
	int n = info->limit - info->sent; if (n > chunk) n = chunk;
	assert(info->sent < info->limit && info->limit <= d->data_len);
	for (u64 b = d->data_seq + info->sent; b < d->data_seq + info->sent + n; b++) sent_cnt[b]++;
	return n;
}
/* as in net/mptcp/protocol.c (6.1) */
static void mptcp_update_post_push(struct mptcp_sock *msk, struct mptcp_data_frag *dfrag, u32 sent) {
	u64 snd_nxt_new = dfrag->data_seq; dfrag->already_sent += sent; msk->snd_burst -= sent;
	snd_nxt_new += dfrag->already_sent; if (after64(snd_nxt_new, msk->snd_nxt)) msk->snd_nxt = snd_nxt_new;
}

#include "pro.inc"

struct result { int jumps, full, bad, short_nxt, left; };

static void run(unsigned seed, int delta_max, struct result *r)
{
	static struct mptcp_sock m;
	struct sock *sk = &m.sk;
	struct tcp_sock slow = { .mss_cache = 100 };
	int nfrag = 200, flen = 1000;
	struct mptcp_data_frag *f = calloc(nfrag, sizeof(*f));
	struct mptcp_sendmsg_info info = {0};
	struct mptcp_data_frag *dfrag;

	srand(seed);
	memset(&m, 0, sizeof(m));
	memset(sent_cnt, 0, sizeof(sent_cnt));
	m.rtx_queue.next = m.rtx_queue.prev = &m.rtx_queue;
	for (int i = 0; i < nfrag; i++) {
		f[i].data_seq = 5000 + (u64)i * flen;
		f[i].data_len = flen;
		f[i].list.prev = m.rtx_queue.prev;
		f[i].list.next = &m.rtx_queue;
		m.rtx_queue.prev->next = &f[i].list;
		m.rtx_queue.prev = &f[i].list;
	}
	m.snd_nxt = 5000;
	m.write_seq = 5000 + (u64)nfrag * flen;
	m.first_pending = &f[0];

	/* the loop of __mptcp_push_pending() as the patch leaves it */
	while ((dfrag = mptcp_pending_head(sk, &info))) {
		int len = info.limit - info.sent;

		assert(len > 0);
		while (len > 0) {
			int ret;

			chunk = 50 + rand() % 400;
			if (rand() % 3 == 0) {	/* the scheduler picked the slow subflow */
				stub_delta = rand() % delta_max;
				if (mptcp_pro_sendmsg(sk, (struct sock *)&slow, &info) > 0) {
					r->jumps++;
					break;
				}
			}
			ret = mptcp_sendmsg_frag(sk, NULL, dfrag, &info);
			info.sent += ret;
			len -= ret;
			mptcp_update_post_push(&m, dfrag, ret);
		}
		if (dfrag->already_sent == dfrag->data_len)
			m.first_pending = mptcp_send_next(sk);
		for (int i = 0; i + 1 < m.pro_cnt; i++)	/* sorted, disjoint, not adjacent */
			assert(before64(m.pro_sent[i].seq + m.pro_sent[i].len, m.pro_sent[i + 1].seq));
		if (m.pro_cnt)	/* never below the in-order cursor */
			assert(!before64(m.pro_sent[0].seq, m.snd_nxt));
		r->full += m.pro_cnt == MPTCP_PRO_SENT_MAX;
	}
	for (u64 b = 5000; b < m.write_seq; b++)
		r->bad += sent_cnt[b] != 1;
	r->short_nxt += m.snd_nxt != m.write_seq;
	r->left += m.pro_cnt;
	free(f);
}

int main(void)
{
	static const int delta_max[] = { 600, 6000, 20000 };

	for (int d = 0; d < 3; d++) {
		struct result r = {0};

		for (unsigned seed = 1; seed <= 20; seed++)
			run(seed, delta_max[d], &r);
		printf("delta<%d bad=%d short=%d left=%d jumps=%d full=%d\n", delta_max[d], r.bad,
		       r.short_nxt, r.left, r.jumps > 0, r.full > 0);
	}
	return 0;
}
