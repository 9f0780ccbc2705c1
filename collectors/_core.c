/* mprig collectors core: one streaming pass over a pcap/pcapng capture that decodes
 * link/IP/TCP/MPTCP, replays every MPTCP connection at the receiver (subflow reassembly,
 * DSS mapping, connection-level out-of-order queue) and emits compact per-connection event
 * arrays plus counters. The metric math lives in Python (collectors/metrics.py).
 *
 * Safety: every read of capture bytes goes through a length check; nothing trusts a length
 * field from the file. Memory grows only with per-arrival records (48 bytes), per-data-
 * packet records (16 bytes) and tree nodes (64 bytes, at most three per queued or held
 * segment or mapping), never with Python objects.
 *
 * Cost: O(n log n) for n packets in any order. Every structure whose order the capture
 * decides is a treap (see "ordered sets"); sums kept in its nodes answer "queued bytes in
 * [s, e)" and "delivered bytes of subflow x below p" in O(log n) instead of a scan. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <arpa/inet.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECORD (1u << 20)     /* a capture record larger than this is corruption */
#define MAX_WARNINGS 50           /* detailed warnings kept; the rest are only counted */
#define INFINITE_LEN (UINT64_C(1) << 62)
#define MAX_IFACES 256
#define MAX_JUMP_NS INT64_C(3600000000000) /* a forward step larger than this is suspect */

/* ---------------------------------------------------------------- small growable arrays */

typedef struct {
    uint8_t *p;
    size_t n, cap; /* bytes used, bytes allocated */
} buf_t;

static int buf_grow(buf_t *b, size_t add)
{
    if (b->n + add <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + add)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_push(buf_t *b, const void *src, size_t len)
{
    if (buf_grow(b, len))
        return -1;
    memcpy(b->p + b->n, src, len);
    b->n += len;
    return 0;
}

/* An array of [s, e) ranges appended at the end and popped at the front (O(1)). */
typedef struct {
    uint64_t s, e;
    uint32_t pkts; /* packets this entry stands for (0 for trimmed extra pieces) */
    int32_t sf;    /* connection-local subflow index of the copy that arrived first */
} range_t;

typedef struct {
    range_t *r;
    size_t head, n, cap; /* live entries are r[head .. n) */
} rlist_t;

static size_t rl_len(const rlist_t *l) { return l->n - l->head; }

static int rl_insert_at(rlist_t *l, size_t pos, range_t v)
{
    if (l->head > 0 && l->head * 2 >= l->n) {
        memmove(l->r, l->r + l->head, (l->n - l->head) * sizeof(range_t));
        pos -= l->head;
        l->n -= l->head;
        l->head = 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        range_t *r = realloc(l->r, cap * sizeof(range_t));
        if (!r)
            return -1;
        l->r = r;
        l->cap = cap;
    }
    memmove(l->r + pos + 1, l->r + pos, (l->n - pos) * sizeof(range_t));
    l->r[pos] = v;
    l->n++;
    return 0;
}

/* --------------------------------------------------- ordered sets: treaps over a pool */

/* Every sorted structure of the replay that the capture's order decides (the connection's
 * out-of-order queue, its coverage and per-subflow shares, segments held past a subflow
 * hole, DSS mappings) is a treap: O(log n) expected per insert, lookup and pop whatever
 * the order of the input. Sorted arrays cost O(n) per insert at the front, which crafted
 * captures (descending sequence numbers) turned into quadratic time. Nodes live in one
 * pool per capture and are addressed by index (0 = none), so the pool can grow. */
typedef struct {
    uint64_t k, k2; /* key: start, then insertion number (orders equal starts) */
    uint64_t e;     /* end, exclusive */
    uint64_t x;     /* payload: a mapping's DSN */
    uint64_t sum;   /* bytes (e - k) in the subtree */
    uint32_t pkts;  /* packets this entry stands for */
    int32_t sf;     /* connection-local subflow index */
    uint32_t prio, l, r;
} tnode_t;

typedef struct {
    tnode_t *n;
    uint32_t cap, used, free; /* nodes allocated, nodes ever handed out (+1), free list */
    uint32_t rng;
    uint64_t seq;
} pool_t;

static uint32_t tn_rand(pool_t *p)
{
    uint32_t x = p->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return p->rng = x;
}

/* A new node [k, e), or 0 when memory ran out. May move the pool: re-read p->n after. */
static uint32_t tn_new(pool_t *p, uint64_t k, uint64_t e)
{
    uint32_t i = p->free;
    if (i) {
        p->free = p->n[i].l;
    } else {
        if (p->used == 0)
            p->used = 1; /* node 0 is "none" */
        if (p->used >= p->cap) {
            if (p->cap >= UINT32_MAX / 2)
                return 0;
            uint32_t cap = p->cap ? p->cap * 2 : 1024;
            tnode_t *n = realloc(p->n, (size_t)cap * sizeof(tnode_t));
            if (!n)
                return 0;
            memset(n, 0, sizeof(tnode_t)); /* node 0: sum 0, no children */
            p->n = n;
            p->cap = cap;
        }
        i = p->used++;
    }
    tnode_t *t = &p->n[i];
    memset(t, 0, sizeof *t);
    t->k = k;
    t->e = e;
    t->k2 = ++p->seq;
    t->sum = e > k ? e - k : 0;
    t->prio = tn_rand(p);
    return i;
}

static void tn_free(pool_t *p, uint32_t i)
{
    p->n[i].l = p->free;
    p->free = i;
}

static void tn_pull(tnode_t *N, uint32_t i)
{
    tnode_t *t = &N[i];
    t->sum = (t->e > t->k ? t->e - t->k : 0) + N[t->l].sum + N[t->r].sum;
}

static int tn_before(const tnode_t *a, uint64_t k, uint64_t k2)
{
    return a->k < k || (a->k == k && a->k2 < k2);
}

/* Splits t into keys < (k, k2) and the rest. */
static void tn_split(tnode_t *N, uint32_t t, uint64_t k, uint64_t k2, uint32_t *a, uint32_t *b)
{
    if (!t) {
        *a = *b = 0;
        return;
    }
    if (tn_before(&N[t], k, k2)) {
        tn_split(N, N[t].r, k, k2, &N[t].r, b);
        *a = t;
    } else {
        tn_split(N, N[t].l, k, k2, a, &N[t].l);
        *b = t;
    }
    tn_pull(N, t);
}

static uint32_t tn_merge(tnode_t *N, uint32_t a, uint32_t b)
{
    if (!a || !b)
        return a ? a : b;
    if (N[a].prio > N[b].prio) {
        N[a].r = tn_merge(N, N[a].r, b);
        tn_pull(N, a);
        return a;
    }
    N[b].l = tn_merge(N, a, N[b].l);
    tn_pull(N, b);
    return b;
}

/* Inserts node i into subtree t: one descent to i's priority level, then a split of the
 * (expected O(1)-sized) subtree below it. Returns the new subtree root. */
static uint32_t tn_ins(tnode_t *N, uint32_t t, uint32_t i)
{
    if (!t)
        return i;
    if (N[i].prio > N[t].prio) {
        tn_split(N, t, N[i].k, N[i].k2, &N[i].l, &N[i].r);
        tn_pull(N, i);
        return i;
    }
    if (tn_before(&N[i], N[t].k, N[t].k2))
        N[t].l = tn_ins(N, N[t].l, i);
    else
        N[t].r = tn_ins(N, N[t].r, i);
    tn_pull(N, t);
    return t;
}

static void tn_insert(tnode_t *N, uint32_t *root, uint32_t i) { *root = tn_ins(N, *root, i); }

static void tn_erase(tnode_t *N, uint32_t *root, uint32_t i)
{
    uint32_t a, b, m, c;
    tn_split(N, *root, N[i].k, N[i].k2, &a, &b);
    tn_split(N, b, N[i].k, N[i].k2 + 1, &m, &c);
    *root = tn_merge(N, a, c);
}

static uint32_t tn_min(const tnode_t *N, uint32_t t)
{
    while (t && N[t].l)
        t = N[t].l;
    return t;
}

/* Unlinks and returns the smallest node (0 if empty). */
static uint32_t tn_pop_min(tnode_t *N, uint32_t *root)
{
    uint32_t t = *root;
    if (!t)
        return 0;
    if (!N[t].l) {
        *root = N[t].r;
        return t;
    }
    uint32_t m = tn_pop_min(N, &N[t].l);
    tn_pull(N, t);
    return m;
}

/* First node ending after x (for disjoint sorted ranges: the one holding x, or the next). */
static uint32_t tn_end_after(const tnode_t *N, uint32_t t, uint64_t x)
{
    uint32_t best = 0;
    while (t) {
        if (N[t].e > x) {
            best = t;
            t = N[t].l;
        } else {
            t = N[t].r;
        }
    }
    return best;
}

/* First node starting at or after x. */
static uint32_t tn_start_ge(const tnode_t *N, uint32_t t, uint64_t x)
{
    uint32_t best = 0;
    while (t) {
        if (N[t].k >= x) {
            best = t;
            t = N[t].l;
        } else {
            t = N[t].r;
        }
    }
    return best;
}

/* Last node starting at or before x (among equal starts, the last inserted). */
static uint32_t tn_start_le(const tnode_t *N, uint32_t t, uint64_t x)
{
    uint32_t best = 0;
    while (t) {
        if (N[t].k <= x) {
            best = t;
            t = N[t].r;
        } else {
            t = N[t].l;
        }
    }
    return best;
}

/* The node after node i in key order (0 if none). */
static uint32_t tn_next(const tnode_t *N, uint32_t t, uint32_t i)
{
    uint32_t best = 0;
    uint64_t k = N[i].k, k2 = N[i].k2;
    while (t) {
        if (!tn_before(&N[t], k, k2) && !(N[t].k == k && N[t].k2 == k2)) {
            best = t;
            t = N[t].l;
        } else {
            t = N[t].r;
        }
    }
    return best;
}

/* Bytes of disjoint sorted ranges that lie below x. */
static uint64_t tn_bytes_below(const tnode_t *N, uint32_t t, uint64_t x)
{
    uint64_t acc = 0;
    while (t) {
        if (N[t].k >= x) {
            t = N[t].l;
        } else {
            acc += N[N[t].l].sum + ((N[t].e < x ? N[t].e : x) - N[t].k);
            t = N[t].r;
        }
    }
    return acc;
}

/* -------------------------------------------------------------------------- records */

/* One non-duplicate data chunk reaching the connection level (little-endian, packed as
 * the numpy dtype ARRIVAL_DTYPE in collectors/replay.py). */
typedef struct {
    int64_t t_ns;         /* capture time */
    uint64_t dsn;         /* relative data sequence number of the first byte */
    uint64_t dlv_bytes;   /* cumulative in-order bytes delivered after this arrival */
    uint64_t ooo_bytes;   /* out-of-order queue occupancy after this arrival, bytes */
    uint32_t len;         /* bytes in the chunk (before trimming duplicates) */
    uint32_t dlv_pkts;    /* cumulative in-order packets delivered after this arrival */
    uint32_t ooo_pkts;    /* out-of-order queue occupancy after this arrival, packets */
    uint16_t sf;          /* connection-local subflow index */
    uint16_t flags;       /* 1 = stored out of order */
} arrival_t;

/* One TCP segment with payload in the data direction (for throughput). */
typedef struct {
    int64_t t_ns;
    uint32_t len;
    uint16_t sf;
    uint16_t flags; /* 1 = subflow retransmission */
} pkt_t;

_Static_assert(sizeof(arrival_t) == 48, "arrival_t layout");
_Static_assert(sizeof(pkt_t) == 16, "pkt_t layout");

/* --------------------------------------------------------------------------- state */

typedef struct {
    int have_isn;
    uint32_t isn;
    int started;       /* rcv_nxt valid */
    uint64_t rcv_nxt;  /* next expected relative subflow sequence number */
    uint64_t max_end;  /* highest relative end seen */
    uint32_t held;     /* treap: segments past a hole, by start */
    rlist_t pend;      /* released but not yet covered by a mapping */
    uint32_t maps;     /* treap: DSS mappings by subflow start (k ssn, e ssn + len, x dsn) */
    size_t nmaps;
    /* counters for data sent in this direction on this subflow */
    uint64_t packets, bytes, retrans_pkts, retrans_bytes;
    uint64_t ooo_pkts, dup_pkts, dup_bytes, reinj_bytes, unmapped_bytes, mapped_bytes;
    uint64_t ip_bytes; /* IP length (headers + payload) of those packets: wire bytes less L2 */
    buf_t tcp_pkts;    /* pkt_t of each data segment while outside any MPTCP connection */
    int64_t first_ts, last_ts;
    int fin, rst;
    uint64_t batch; /* counts releases: segments released together may share one skb */
} half_t;

/* Laid out without padding: keys are hashed and compared as raw bytes. */
typedef struct {
    uint16_t sport, dport;
    uint16_t fam; /* 4 or 6 */
    uint8_t src[16], dst[16];
} fkey_t;

_Static_assert(sizeof(fkey_t) == 38, "fkey_t must have no padding");

typedef struct {
    fkey_t key;       /* direction 0: from the subflow's SYN sender (A) to B */
    int32_t conn;     /* -1: not (yet) part of an MPTCP connection */
    int32_t idx;      /* index within its connection */
    uint8_t a_side;   /* connection side of A: 0 = initiator of the connection, 1 = listener */
    uint8_t join, backup, missing_hs, syn_mpc, syn_seen;
    half_t h[2];
} subflow_t;

/* One subflow's part of a connection direction (reinjection and duplicate accounting). */
typedef struct {
    uint32_t q;            /* treap: this subflow's entries of the out-of-order queue */
    uint64_t *rs, *re, *rc; /* delivered runs: start, end (once closed), bytes of earlier runs */
    size_t rn, rcap;
} dsf_t;

typedef struct {
    int inited;      /* rcv_nxt valid */
    int based;       /* base valid */
    uint64_t base;   /* IDSN: relative DSN = DSN - base */
    int have_last;
    uint64_t last_dsn; /* for expanding 32-bit DSNs */
    uint64_t rcv_nxt;
    uint32_t q;      /* treap: out-of-order queue entries (disjoint), with pkts and sf */
    uint32_t cov;    /* treap: the queue's coverage, adjacent entries merged */
    uint64_t q_bytes, q_pkts;
    dsf_t *per;      /* per connection-local subflow: its queue share, its delivered runs */
    size_t nper;
    int have_runs;   /* delivered data is cut in runs by the subflow that delivered it */
    int32_t last_sf; /* subflow of the last (open) run */
    uint64_t first_run; /* where the first run starts */
    buf_t arr, pkts;
    uint64_t dlv_bytes, dlv_pkts, ooo_pkts, ooo_arrivals, dup_pkts, dup_bytes, reinj_bytes;
    uint64_t ooo_max_bytes, ooo_max_pkts, data_fin, fallback, map_count, csum_maps;
    /* the previous arrival, to tell chunks the kernel would have received as one skb */
    int32_t tag_sf;
    uint64_t tag_batch, tag_map, tag_end;
} dir_t;

typedef struct {
    int version;
    int have_key[2];
    uint64_t key[2];
    uint32_t token[2];
    uint64_t idsn[2];
    int missing_hs, not_mptcp, csum;
    uint64_t add_addr, rm_addr, mp_prio, mp_fail, fastclose, tcprst, joins;
    int32_t *sfs;
    size_t nsf, capsf;
    dir_t d[2]; /* d[s] receives data sent by side s */
} conn_t;

typedef struct {
    int32_t *slot; /* hash slots: subflow index * 2 + direction, or -1 */
    size_t cap, used;
} fmap_t;

typedef struct {
    int32_t *slot;
    uint32_t *tok;
    size_t cap, used;
} tmap_t;

typedef struct {
    int linktype;
    int64_t res_num; /* ticks per second numerator handled in ts_to_ns */
    uint8_t tsresol;
} iface_t;

typedef struct {
    uint64_t index, offset; /* packet index (1-based) and byte offset of its record */
    char msg[200];
} warning_t;

typedef struct {
    subflow_t *sf;
    size_t nsf, capsf;
    conn_t *c;
    size_t nc, capc;
    fmap_t fm;
    tmap_t tm;
    pool_t pool; /* nodes of every treap */
    warning_t warns[MAX_WARNINGS]; /* kept in C so the pass runs without the GIL */
    uint64_t nwarn;
    uint64_t pkt_index, offset;
    int64_t last_ts;
    int have_ts;
    /* file-level counters */
    uint64_t packets, non_ip, non_tcp, truncated_hdr, truncated_opts, backwards, jumps, fragments;
    uint64_t outliers;     /* packets stamped more than MAX_JUMP_NS ahead, not confirmed */
    int pending_jump;      /* the previous packet was such an outlier, stamped pending_ts */
    int64_t pending_ts;
    uint64_t unknown_link, tcp_packets, mptcp_packets, bytes_read;
    int partial, oom;
    char fatal[256];
} state_t;

static void warn(state_t *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(state_t *st, const char *fmt, ...)
{
    if (st->nwarn < MAX_WARNINGS) {
        warning_t *w = &st->warns[st->nwarn];
        w->index = st->pkt_index;
        w->offset = st->offset;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->msg, sizeof w->msg, fmt, ap);
        va_end(ap);
    }
    st->nwarn++;
}

/* ------------------------------------------------------------------------ hash maps */

static uint64_t key_hash(const fkey_t *k)
{
    uint64_t w[5] = {0, 0, 0, 0, 0};
    memcpy(w, k, sizeof(*k));
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 5; i++) {
        h = (h ^ w[i]) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

static int key_eq(const fkey_t *a, const fkey_t *b) { return memcmp(a, b, sizeof(*a)) == 0; }

static void key_reverse(const fkey_t *k, fkey_t *r)
{
    memset(r, 0, sizeof(*r));
    r->fam = k->fam;
    memcpy(r->src, k->dst, 16);
    memcpy(r->dst, k->src, 16);
    r->sport = k->dport;
    r->dport = k->sport;
}

static const fkey_t *slot_key(state_t *st, int32_t v, fkey_t *tmp)
{
    const subflow_t *s = &st->sf[v >> 1];
    if ((v & 1) == 0)
        return &s->key;
    key_reverse(&s->key, tmp);
    return tmp;
}

static int32_t fmap_get(state_t *st, const fkey_t *k)
{
    if (!st->fm.cap)
        return -1;
    size_t mask = st->fm.cap - 1, i = key_hash(k) & mask;
    fkey_t tmp;
    while (st->fm.slot[i] >= 0) {
        if (key_eq(slot_key(st, st->fm.slot[i], &tmp), k))
            return st->fm.slot[i];
        i = (i + 1) & mask;
    }
    return -1;
}

static int fmap_put(state_t *st, const fkey_t *k, int32_t v);

static int fmap_rehash(state_t *st)
{
    size_t cap = st->fm.cap ? st->fm.cap * 2 : 1024;
    int32_t *old = st->fm.slot;
    size_t oldcap = st->fm.cap;
    st->fm.slot = malloc(cap * sizeof(int32_t));
    if (!st->fm.slot) {
        st->fm.slot = old;
        return -1;
    }
    memset(st->fm.slot, 0xff, cap * sizeof(int32_t));
    st->fm.cap = cap;
    st->fm.used = 0;
    fkey_t tmp;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i] >= 0)
            fmap_put(st, slot_key(st, old[i], &tmp), old[i]);
    free(old);
    return 0;
}

static int fmap_put(state_t *st, const fkey_t *k, int32_t v)
{
    if ((st->fm.used + 1) * 2 > st->fm.cap && fmap_rehash(st))
        return -1;
    size_t mask = st->fm.cap - 1, i = key_hash(k) & mask;
    while (st->fm.slot[i] >= 0)
        i = (i + 1) & mask;
    st->fm.slot[i] = v;
    st->fm.used++;
    return 0;
}

static int32_t tmap_get(state_t *st, uint32_t tok)
{
    if (!st->tm.cap)
        return -1;
    size_t mask = st->tm.cap - 1, i = (tok * 2654435761u) & mask;
    while (st->tm.slot[i] >= 0) {
        if (st->tm.tok[i] == tok)
            return st->tm.slot[i];
        i = (i + 1) & mask;
    }
    return -1;
}

static int tmap_put(state_t *st, uint32_t tok, int32_t v)
{
    if ((st->tm.used + 1) * 2 > st->tm.cap) {
        size_t cap = st->tm.cap ? st->tm.cap * 2 : 256, oldcap = st->tm.cap;
        int32_t *os = st->tm.slot;
        uint32_t *ot = st->tm.tok;
        st->tm.slot = malloc(cap * sizeof(int32_t));
        st->tm.tok = malloc(cap * sizeof(uint32_t));
        if (!st->tm.slot || !st->tm.tok) {
            free(st->tm.slot);
            free(st->tm.tok);
            st->tm.slot = os;
            st->tm.tok = ot;
            return -1;
        }
        memset(st->tm.slot, 0xff, cap * sizeof(int32_t));
        st->tm.cap = cap;
        st->tm.used = 0;
        for (size_t i = 0; i < oldcap; i++)
            if (os[i] >= 0)
                tmap_put(st, ot[i], os[i]);
        free(os);
        free(ot);
    }
    size_t mask = st->tm.cap - 1, i = (tok * 2654435761u) & mask;
    while (st->tm.slot[i] >= 0) {
        if (st->tm.tok[i] == tok) {
            st->tm.slot[i] = v;
            return 0;
        }
        i = (i + 1) & mask;
    }
    st->tm.slot[i] = v;
    st->tm.tok[i] = tok;
    st->tm.used++;
    return 0;
}

/* ------------------------------------------------------------------ parsed options */

typedef struct {
    int mpc, mpc_ver, mpc_nkeys, mpc_has_dlen, mpc_csum_flag;
    uint64_t mpc_key[2];
    uint16_t mpc_dlen;
    int join;
    uint32_t join_token;
    int join_backup, join_syn;
    int dss, dss_map, dss_dsn8, dss_fin, dss_csum, dss_ack;
    uint64_t dss_dsn;
    uint32_t dss_ssn;
    uint16_t dss_dlen;
    int add_addr, rm_addr, mp_prio, mp_fail, fastclose, tcprst, any_mptcp, truncated;
    int prio_backup;
} opts_t;

static uint32_t rd32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static uint16_t rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint64_t rd64(const uint8_t *p) { return ((uint64_t)rd32(p) << 32) | rd32(p + 4); }

static void parse_mpc(const uint8_t *o, unsigned len, opts_t *op)
{
    op->mpc = 1;
    op->mpc_ver = o[2] & 0x0f;
    op->mpc_csum_flag = (o[3] & 0x80) != 0;
    if (len >= 12) {
        op->mpc_key[0] = rd64(o + 4);
        op->mpc_nkeys = 1;
    }
    if (len >= 20) {
        op->mpc_key[1] = rd64(o + 12);
        op->mpc_nkeys = 2;
    }
    if (len >= 22) {
        op->mpc_dlen = rd16(o + 20);
        op->mpc_has_dlen = 1;
    }
}

static void parse_dss(const uint8_t *o, unsigned len, opts_t *op)
{
    uint8_t fl = o[3];
    unsigned need = 4, pos = 4;
    int A = fl & 0x01, a8 = fl & 0x02, M = fl & 0x04, m8 = fl & 0x08;
    if (A)
        need += a8 ? 8 : 4;
    if (M)
        need += (m8 ? 8 : 4) + 4 + 2;
    if (len < need)
        return; /* malformed: ignore the option */
    op->dss = 1;
    op->dss_fin = (fl & 0x10) != 0;
    op->dss_ack = A != 0;
    if (A)
        pos += a8 ? 8 : 4;
    if (M) {
        op->dss_map = 1;
        op->dss_dsn8 = m8 != 0;
        op->dss_dsn = m8 ? rd64(o + pos) : rd32(o + pos);
        pos += m8 ? 8 : 4;
        op->dss_ssn = rd32(o + pos);
        op->dss_dlen = rd16(o + pos + 4);
        op->dss_csum = len >= need + 2;
    }
}

static void parse_mptcp(const uint8_t *o, unsigned len, int syn, opts_t *op)
{
    if (len < 3)
        return;
    op->any_mptcp = 1;
    switch (o[2] >> 4) {
    case 0:
        if (len >= 4)
            parse_mpc(o, len, op);
        break;
    case 1:
        op->join = 1;
        if (syn && len >= 12) {
            op->join_backup = o[2] & 1;
            op->join_token = rd32(o + 4);
            op->join_syn = 1;
        }
        break;
    case 2:
        if (len >= 4)
            parse_dss(o, len, op);
        break;
    case 3: op->add_addr = 1; break;
    case 4: op->rm_addr = 1; break;
    case 5: op->mp_prio = 1; op->prio_backup = o[2] & 1; break;
    case 6: op->mp_fail = 1; break;
    case 7: op->fastclose = 1; break;
    case 8: op->tcprst = 1; break;
    default: break;
    }
}

/* Walks TCP options in o[0..len); avail < len means the capture cut them short. */
static void parse_options(const uint8_t *o, unsigned len, unsigned avail, int syn, opts_t *op)
{
    if (avail < len) {
        op->truncated = 1;
        len = avail;
    }
    unsigned i = 0;
    while (i < len) {
        uint8_t kind = o[i];
        if (kind == 0)
            break;
        if (kind == 1) {
            i++;
            continue;
        }
        if (i + 1 >= len)
            break;
        unsigned ol = o[i + 1];
        if (ol < 2 || i + ol > len)
            break;
        if (kind == 30)
            parse_mptcp(o + i, ol, syn, op);
        i += ol;
    }
}

/* ------------------------------------------------------------- connection-level replay */

/* The per-subflow part of d for subflow sf (grown on demand), or NULL without memory. */
static dsf_t *dsf_get(dir_t *d, int32_t sf)
{
    size_t need = (size_t)sf + 1;
    if (sf < 0)
        return NULL;
    if (need > d->nper) {
        size_t cap = d->nper ? d->nper : 4;
        while (cap < need)
            cap *= 2;
        dsf_t *p = realloc(d->per, cap * sizeof(dsf_t));
        if (!p)
            return NULL;
        memset(p + d->nper, 0, (cap - d->nper) * sizeof(dsf_t));
        d->per = p;
        d->nper = cap;
    }
    return &d->per[sf];
}

/* Delivered data from s on comes from subflow sf: open a run unless sf's run is open. */
static int runs_add(dir_t *d, uint64_t s, int32_t sf)
{
    if (d->have_runs && d->last_sf == sf)
        return 0;
    if (d->have_runs) {
        dsf_t *prev = &d->per[d->last_sf];
        prev->re[prev->rn - 1] = s;
    }
    dsf_t *p = dsf_get(d, sf);
    if (!p)
        return -1;
    if (p->rn == p->rcap) {
        size_t cap = p->rcap ? p->rcap * 2 : 16;
        uint64_t *rs = realloc(p->rs, cap * sizeof(uint64_t));
        if (rs)
            p->rs = rs;
        uint64_t *re = realloc(p->re, cap * sizeof(uint64_t));
        if (re)
            p->re = re;
        uint64_t *rc = realloc(p->rc, cap * sizeof(uint64_t));
        if (rc)
            p->rc = rc;
        if (!rs || !re || !rc)
            return -1;
        p->rcap = cap;
    }
    size_t n = p->rn;
    p->rs[n] = p->re[n] = s;
    p->rc[n] = n ? p->rc[n - 1] + (p->re[n - 1] - p->rs[n - 1]) : 0;
    p->rn++;
    if (!d->have_runs)
        d->first_run = s;
    d->have_runs = 1;
    d->last_sf = sf;
    return 0;
}

/* Delivered bytes below x that subflow sf brought first. */
static uint64_t runs_below(const dir_t *d, int32_t sf, uint64_t x)
{
    if (sf < 0 || (size_t)sf >= d->nper)
        return 0;
    const dsf_t *p = &d->per[sf];
    size_t lo = 0, hi = p->rn;
    while (lo < hi) { /* runs starting below x */
        size_t mid = lo + (hi - lo) / 2;
        if (p->rs[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    size_t j = lo - 1;
    uint64_t end = d->last_sf == sf && j == p->rn - 1 ? d->rcv_nxt : p->re[j];
    return p->rc[j] + ((end < x ? end : x) - p->rs[j]);
}

/* Bytes of [s, e) (already delivered) that the first copy brought on another subflow. */
static uint64_t runs_other(const dir_t *d, uint64_t s, uint64_t e, int32_t sf)
{
    if (!d->have_runs)
        return 0;
    uint64_t lo = s > d->first_run ? s : d->first_run, hi = e < d->rcv_nxt ? e : d->rcv_nxt;
    if (hi <= lo)
        return 0;
    return (hi - lo) - (runs_below(d, sf, hi) - runs_below(d, sf, lo));
}

static void deliver(state_t *st, dir_t *d, uint64_t e, int32_t sf, uint32_t pkts)
{
    if (runs_add(d, d->rcv_nxt, sf))
        st->oom = 1;
    d->dlv_bytes += e - d->rcv_nxt;
    d->dlv_pkts += pkts;
    d->rcv_nxt = e;
}

static void drain(state_t *st, dir_t *d)
{
    tnode_t *N = st->pool.n;
    while (d->q && N[tn_min(N, d->q)].k <= d->rcv_nxt) {
        uint32_t i = tn_pop_min(N, &d->q);
        tnode_t r = N[i];
        tn_free(&st->pool, i);
        tn_free(&st->pool, tn_pop_min(N, &d->per[r.sf].q)); /* the same entry, sf's share */
        if (r.e > d->rcv_nxt)
            deliver(st, d, r.e, r.sf, r.pkts);
        else
            d->dlv_pkts += r.pkts;
        d->q_bytes -= r.e - r.k;
        d->q_pkts -= r.pkts;
    }
    while (d->cov && N[tn_min(N, d->cov)].k <= d->rcv_nxt) /* drained: whole intervals */
        tn_free(&st->pool, tn_pop_min(N, &d->cov));
}

#define MAX_PIECES 64

typedef struct {
    uint64_t s[MAX_PIECES], e[MAX_PIECES];
    int n;
    uint64_t covered_other, covered;
    uint64_t next; /* where to resume when more than MAX_PIECES gaps were found */
} pieces_t;

static int add_piece(pieces_t *pc, uint64_t s, uint64_t e)
{
    if (pc->n == MAX_PIECES) {
        pc->next = s;
        return -1;
    }
    pc->s[pc->n] = s;
    pc->e[pc->n++] = e;
    return 0;
}

/* Splits [s, e) into the parts not already in the out-of-order queue (at most MAX_PIECES;
 * pc->next says where the rest starts), and counts the queued bytes of [s, pc->next): all
 * of them, and those another subflow brought. The gaps are found on the merged coverage,
 * so a stretch of many queued entries costs one step, and the counts are subtree sums. */
static void uncovered(const state_t *st, const dir_t *d, uint64_t s, uint64_t e, int32_t sf,
                      pieces_t *pc)
{
    const tnode_t *N = st->pool.n;
    pc->n = 0;
    pc->next = e;
    uint64_t cur = s;
    int full = 0, touched = 0;
    for (uint32_t i = tn_end_after(N, d->cov, s); i && N[i].k < e;
         i = tn_start_ge(N, d->cov, cur)) {
        touched = 1;
        if (N[i].k > cur && add_piece(pc, cur, N[i].k)) {
            full = 1;
            break;
        }
        if (N[i].e > cur)
            cur = N[i].e;
        if (cur >= e)
            break;
    }
    if (!full && cur < e)
        add_piece(pc, cur, e);
    pc->covered = pc->covered_other = 0;
    if (!touched) /* nothing queued in [s, e): no sums to take */
        return;
    uint64_t stop = pc->next;
    pc->covered = tn_bytes_below(N, d->q, stop) - tn_bytes_below(N, d->q, s);
    uint64_t same = 0;
    if (sf >= 0 && (size_t)sf < d->nper)
        same = tn_bytes_below(N, d->per[sf].q, stop) - tn_bytes_below(N, d->per[sf].q, s);
    pc->covered_other = pc->covered - same;
}

/* Adds [s, e), a gap of the coverage, merging it with the intervals it touches. */
static void cov_add(state_t *st, dir_t *d, uint64_t s, uint64_t e)
{
    tnode_t *N = st->pool.n;
    uint32_t r = tn_start_ge(N, d->cov, e);
    if (r && N[r].k == e) {
        e = N[r].e;
        tn_erase(N, &d->cov, r);
        tn_free(&st->pool, r);
    }
    uint32_t l = tn_start_le(N, d->cov, s);
    if (l && N[l].e == s) {
        N[l].e = e; /* the coverage keeps no sums: no subtree to update */
        return;
    }
    uint32_t i = tn_new(&st->pool, s, e);
    if (!i) {
        st->oom = 1;
        return;
    }
    tn_insert(st->pool.n, &d->cov, i);
}

static void queue_insert(state_t *st, dir_t *d, uint64_t s, uint64_t e, int32_t sf, uint32_t pk)
{
    dsf_t *share = dsf_get(d, sf);
    uint32_t i = tn_new(&st->pool, s, e), j = tn_new(&st->pool, s, e);
    if (!share || !i || !j) {
        st->oom = 1;
        return;
    }
    tnode_t *N = st->pool.n;
    N[i].pkts = pk;
    N[i].sf = sf;
    N[j].sf = sf;
    tn_insert(N, &d->q, i);
    tn_insert(N, &share->q, j);
    cov_add(st, d, s, e);
    d->q_bytes += e - s;
    d->q_pkts += pk;
}

static void record_arrival(state_t *st, dir_t *d, int64_t t, uint64_t s, uint64_t len,
                           int32_t sf, int ooo)
{
    arrival_t a = {t, s, d->dlv_bytes, d->q_bytes, (uint32_t)len, (uint32_t)d->dlv_pkts,
                   (uint32_t)d->q_pkts, (uint16_t)sf, (uint16_t)ooo};
    if (buf_push(&d->arr, &a, sizeof a))
        st->oom = 1;
    if (d->q_bytes > d->ooo_max_bytes)
        d->ooo_max_bytes = d->q_bytes;
    if (d->q_pkts > d->ooo_max_pkts)
        d->ooo_max_pkts = d->q_pkts;
}

/* A mapped chunk [s, e) of relative DSN space reaches the connection level at time t. */
/* Whether the chunk continues the previous one inside one skb as the kernel would see it:
 * same subflow, released in the same batch, same mapping, contiguous. */
static int same_skb(dir_t *d, int32_t sf, uint64_t batch, uint64_t map, uint64_t s, uint64_t e)
{
    int same = d->tag_sf == sf && d->tag_batch == batch && d->tag_map == map && d->tag_end == s;
    d->tag_sf = sf;
    d->tag_batch = batch;
    d->tag_map = map;
    d->tag_end = e;
    return same;
}

static void conn_arrival(state_t *st, dir_t *d, half_t *h, int64_t t, uint64_t s, uint64_t e,
                         int32_t sf, uint64_t map)
{
    uint64_t s0 = s, len0 = e - s;
    int one_skb = same_skb(d, sf, h->batch, map, s, e);
    if (!d->inited) {
        d->rcv_nxt = s;
        d->inited = 1;
    }
    if (e <= d->rcv_nxt) {
        uint64_t o = runs_other(d, s, e, sf);
        d->dup_pkts++;
        d->dup_bytes += e - s;
        d->reinj_bytes += o;
        h->dup_pkts++;
        h->dup_bytes += e - s;
        h->reinj_bytes += o;
        return;
    }
    if (s < d->rcv_nxt) {
        uint64_t o = runs_other(d, s, d->rcv_nxt, sf);
        d->dup_bytes += d->rcv_nxt - s;
        d->reinj_bytes += o;
        h->reinj_bytes += o;
        s = d->rcv_nxt;
    }
    if (s > d->rcv_nxt && !one_skb)
        d->ooo_arrivals++; /* what the kernel's MPTcpExtOFOQueue counts, duplicates included */
    int ooo = -1; /* decided by the first new piece: 0 in order, 1 out of order */
    for (uint64_t from = s; from < e;) {
        pieces_t pc;
        uncovered(st, d, from, e, sf, &pc);
        d->dup_bytes += pc.covered;
        d->reinj_bytes += pc.covered_other;
        h->reinj_bytes += pc.covered_other;
        for (int i = 0; i < pc.n; i++) {
            if (ooo < 0) {
                ooo = pc.s[0] != d->rcv_nxt;
                if (!ooo) {
                    deliver(st, d, pc.e[0], sf, 1);
                    continue;
                }
            }
            queue_insert(st, d, pc.s[i], pc.e[i], sf, ooo && i == 0 && from == s ? 1 : 0);
        }
        from = pc.next;
    }
    if (ooo < 0) {
        d->dup_pkts++;
        h->dup_pkts++;
        return;
    }
    if (ooo) {
        d->ooo_pkts++;
        h->ooo_pkts++;
    } else {
        drain(st, d);
    }
    record_arrival(st, d, t, s0, len0, sf, ooo);
}

/* ------------------------------------------------------------------ subflow replay */

static int conn_side_of(const subflow_t *s, int dir) { return dir == 0 ? s->a_side : 1 - s->a_side; }

/* The last mapping with ssn <= x, or 0. */
static uint32_t map_find(const state_t *st, const half_t *h, uint64_t x)
{
    return tn_start_le(st->pool.n, h->maps, x);
}

static void map_add(state_t *st, half_t *h, uint64_t ssn, uint64_t len, uint64_t dsn)
{
    uint32_t i = map_find(st, h, ssn);
    if (i && st->pool.n[i].k == ssn) { /* the same mapping again (retransmission) or a fix */
        st->pool.n[i].e = ssn + len;
        st->pool.n[i].x = dsn;
        return;
    }
    i = tn_new(&st->pool, ssn, ssn + len);
    if (!i) {
        st->oom = 1;
        return;
    }
    st->pool.n[i].x = dsn;
    tn_insert(st->pool.n, &h->maps, i);
    h->nmaps++;
}

/* Maps as much of [s, e) as mappings cover, feeding the connection; returns the first
 * unmapped subflow offset (== e when all of it was mapped). */
static uint64_t map_feed(state_t *st, conn_t *c, subflow_t *sfp, int dir, int64_t t,
                         uint64_t s, uint64_t e)
{
    half_t *h = &sfp->h[dir];
    dir_t *d = &c->d[conn_side_of(sfp, dir)];
    while (s < e) {
        uint32_t i = map_find(st, h, s);
        if (!i)
            return s;
        tnode_t m = st->pool.n[i]; /* a copy: conn_arrival may grow the pool */
        if (s >= m.e)
            return s;
        uint64_t pe = m.e < e ? m.e : e;
        uint64_t ds = m.x + (s - m.k) - d->base;
        h->mapped_bytes += pe - s;
        conn_arrival(st, d, h, t, ds, ds + (pe - s), sfp->idx, m.k);
        s = pe;
    }
    return s;
}

static void prune_maps(state_t *st, half_t *h)
{
    tnode_t *N = st->pool.n;
    uint64_t bound = rl_len(&h->pend) ? h->pend.r[h->pend.head].s : h->rcv_nxt;
    while (h->nmaps > 1) {
        uint32_t first = tn_min(N, h->maps);
        if (N[first].e > bound || N[tn_next(N, h->maps, first)].k > bound)
            break;
        tn_free(&st->pool, tn_pop_min(N, &h->maps));
        h->nmaps--;
    }
}

static void retry_pending(state_t *st, conn_t *c, subflow_t *sfp, int dir, int64_t t)
{
    half_t *h = &sfp->h[dir];
    rlist_t *p = &h->pend;
    while (rl_len(p)) {
        range_t *r = &p->r[p->head];
        uint64_t u = map_feed(st, c, sfp, dir, t, r->s, r->e);
        if (u < r->e) {
            r->s = u;
            break;
        }
        p->head++;
    }
    if (!rl_len(p))
        p->head = p->n = 0;
}

/* Subflow bytes [s, e) become readable in order at time t. */
static void release(state_t *st, subflow_t *sfp, int dir, int64_t t, uint64_t s, uint64_t e)
{
    half_t *h = &sfp->h[dir];
    if (sfp->conn < 0)
        return;
    conn_t *c = &st->c[sfp->conn];
    uint64_t u = rl_len(&h->pend) ? s : map_feed(st, c, sfp, dir, t, s, e);
    if (u < e) {
        range_t v = {u, e, 1, 0};
        if (rl_insert_at(&h->pend, h->pend.n, v))
            st->oom = 1;
    }
    prune_maps(st, h);
}

static void hold(state_t *st, half_t *h, uint64_t s, uint64_t e)
{
    /* The entry just before: the last one starting at or before s. */
    uint32_t prev = tn_start_le(st->pool.n, h->held, s);
    if (prev && st->pool.n[prev].e >= e)
        return; /* already held */
    uint32_t i = tn_new(&st->pool, s, e);
    if (!i) {
        st->oom = 1;
        return;
    }
    tn_insert(st->pool.n, &h->held, i);
}

static void subflow_data(state_t *st, subflow_t *sfp, int dir, int64_t t, uint64_t s,
                         uint64_t e)
{
    half_t *h = &sfp->h[dir];
    if (e <= h->rcv_nxt)
        return;
    if (s > h->rcv_nxt) {
        hold(st, h, s, e);
        return;
    }
    h->batch++;
    release(st, sfp, dir, t, h->rcv_nxt, e);
    h->rcv_nxt = e;
    while (h->held && st->pool.n[tn_min(st->pool.n, h->held)].k <= h->rcv_nxt) {
        uint32_t i = tn_pop_min(st->pool.n, &h->held);
        tnode_t r = st->pool.n[i];
        tn_free(&st->pool, i);
        if (r.e > h->rcv_nxt) {
            release(st, sfp, dir, t, h->rcv_nxt, r.e);
            h->rcv_nxt = r.e;
        }
    }
}

/* ------------------------------------------------------------------ packet handling */

typedef struct {
    fkey_t key;
    uint32_t seq, ack;
    uint8_t flags;
    uint32_t paylen;
    uint32_t iplen; /* IP header(s) + TCP header + payload */
    opts_t op;
} tcpinfo_t;

static uint64_t expand32(uint64_t ref, uint32_t v)
{
    uint64_t cand = (ref & ~UINT64_C(0xffffffff)) | v;
    if (cand + UINT64_C(0x80000000) < ref && cand < UINT64_MAX - UINT64_C(0xffffffff))
        cand += UINT64_C(0x100000000);
    else if (cand > ref + UINT64_C(0x80000000) && cand >= UINT64_C(0x100000000))
        cand -= UINT64_C(0x100000000);
    return cand;
}

static int32_t new_conn(state_t *st)
{
    if (st->nc == st->capc) {
        size_t cap = st->capc ? st->capc * 2 : 16;
        conn_t *p = realloc(st->c, cap * sizeof(conn_t));
        if (!p)
            return -1;
        st->c = p;
        st->capc = cap;
    }
    memset(&st->c[st->nc], 0, sizeof(conn_t));
    return (int32_t)st->nc++;
}

static void conn_add_sf(state_t *st, int32_t ci, int32_t si)
{
    conn_t *c = &st->c[ci];
    if (c->nsf == c->capsf) {
        size_t cap = c->capsf ? c->capsf * 2 : 4;
        int32_t *p = realloc(c->sfs, cap * sizeof(int32_t));
        if (!p) {
            st->oom = 1;
            return;
        }
        c->sfs = p;
        c->capsf = cap;
    }
    st->sf[si].conn = ci;
    st->sf[si].idx = (int32_t)c->nsf;
    c->sfs[c->nsf++] = si;
}

/* Points an existing key at another value (a 4-tuple reused by a new connection). */
static void fmap_set(state_t *st, const fkey_t *k, int32_t v)
{
    size_t mask = st->fm.cap - 1, i = key_hash(k) & mask;
    fkey_t tmp;
    while (st->fm.slot[i] >= 0) {
        if (key_eq(slot_key(st, st->fm.slot[i], &tmp), k)) {
            st->fm.slot[i] = v;
            return;
        }
        i = (i + 1) & mask;
    }
}

/* Subflow record for key k; `reuse` re-points the key's existing hash entries to it. */
static int32_t new_subflow_ex(state_t *st, const fkey_t *k, int reuse)
{
    if (st->nsf == st->capsf) {
        size_t cap = st->capsf ? st->capsf * 2 : 64;
        subflow_t *p = realloc(st->sf, cap * sizeof(subflow_t));
        if (!p)
            return -1;
        st->sf = p;
        st->capsf = cap;
    }
    subflow_t *s = &st->sf[st->nsf];
    memset(s, 0, sizeof(*s));
    s->key = *k;
    s->conn = -1;
    int32_t si = (int32_t)st->nsf++;
    fkey_t r;
    key_reverse(k, &r);
    if (reuse) {
        fmap_set(st, k, si * 2);
        fmap_set(st, &r, si * 2 + 1);
    } else if (fmap_put(st, k, si * 2) || fmap_put(st, &r, si * 2 + 1)) {
        return -1;
    }
    return si;
}

static int32_t new_subflow(state_t *st, const fkey_t *k) { return new_subflow_ex(st, k, 0); }

/* A SYN with a new ISN on a 4-tuple whose previous connection ended (FIN or RST). */
static int reused_tuple(const subflow_t *s, const tcpinfo_t *ti, int dir)
{
    int ended = s->h[0].fin || s->h[0].rst || s->h[1].fin || s->h[1].rst;
    return ended && !(dir == 0 && s->h[0].have_isn && s->h[0].isn == ti->seq);
}

/* An MPTCP key's token (most significant 32 bits of its hash) and IDSN (least significant
 * 64): SHA-1 for version 0 (RFC 6824), SHA-256 for version 1 (RFC 8684), from OpenSSL.
 * 0 on success; -1 when OpenSSL fails (it cannot allocate). */
static int mptcp_key_derive(uint64_t key, int version, uint32_t *token, uint64_t *idsn)
{
    uint8_t k[8], dig[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    for (int i = 0; i < 8; i++)
        k[i] = (uint8_t)(key >> (56 - 8 * i));
    if (!EVP_Digest(k, sizeof k, dig, &n, version == 0 ? EVP_sha1() : EVP_sha256(), NULL))
        return -1;
    *token = rd32(dig);
    *idsn = rd64(dig + n - 8);
    return 0;
}

static void set_key(state_t *st, conn_t *c, int32_t ci, int side, uint64_t key)
{
    if (c->have_key[side])
        return;
    c->have_key[side] = 1;
    c->key[side] = key;
    if (mptcp_key_derive(key, c->version, &c->token[side], &c->idsn[side]) ||
        tmap_put(st, c->token[side], ci * 2 + side))
        st->oom = 1;
    dir_t *d = &c->d[side];
    if (!d->based) { /* data starts at IDSN + 1 */
        d->based = d->inited = d->have_last = 1;
        d->base = c->idsn[side];
        d->rcv_nxt = 1;
        d->last_dsn = c->idsn[side];
    }
}

static void on_syn(state_t *st, tcpinfo_t *ti, int32_t si)
{
    subflow_t *s = &st->sf[si];
    s->syn_seen = 1;
    s->h[0].have_isn = 1;
    s->h[0].isn = ti->seq;
    s->h[0].started = 1;
    s->h[0].rcv_nxt = s->h[0].max_end = 1;
    if (s->conn >= 0)
        return; /* SYN retransmission */
    if (ti->op.mpc) {
        int32_t ci = new_conn(st);
        if (ci < 0) {
            st->oom = 1;
            return;
        }
        st->c[ci].version = ti->op.mpc_ver;
        s->syn_mpc = 1;
        s->a_side = 0;
        conn_add_sf(st, ci, si);
        if (ti->op.mpc_nkeys >= 1)
            set_key(st, &st->c[ci], ci, 0, ti->op.mpc_key[0]);
    } else if (ti->op.join_syn) {
        int32_t v = tmap_get(st, ti->op.join_token);
        s->join = 1;
        s->backup = (uint8_t)ti->op.join_backup;
        if (v < 0) {
            warn(st, "MP_JOIN with unknown token %08x: connection handshake not captured",
                 ti->op.join_token);
            return;
        }
        s->a_side = (uint8_t)(1 - (v & 1)); /* the SYN goes to the token's owner */
        conn_add_sf(st, v >> 1, si);
        st->c[v >> 1].joins++;
    }
}

static void on_synack(state_t *st, tcpinfo_t *ti, subflow_t *s)
{
    s->h[1].have_isn = 1;
    s->h[1].isn = ti->seq;
    s->h[1].started = 1;
    s->h[1].rcv_nxt = s->h[1].max_end = 1;
    if (s->conn < 0 || !s->syn_mpc)
        return;
    conn_t *c = &st->c[s->conn];
    if (!ti->op.mpc) {
        c->not_mptcp = !ti->op.truncated; /* options cut by the snaplen prove nothing */
        return;
    }
    if (ti->op.mpc_nkeys >= 1)
        set_key(st, c, s->conn, 1, ti->op.mpc_key[0]);
}

/* Third ACK or first data packet of the initial subflow carrying MP_CAPABLE keys. */
static void on_mpc_ack(state_t *st, tcpinfo_t *ti, subflow_t *s, int dir)
{
    conn_t *c = &st->c[s->conn];
    int side = conn_side_of(s, dir);
    if (ti->op.mpc_nkeys >= 2) {
        set_key(st, c, s->conn, side, ti->op.mpc_key[0]);
        set_key(st, c, s->conn, 1 - side, ti->op.mpc_key[1]);
    }
    if (ti->op.mpc_csum_flag)
        c->csum = 1;
    if (ti->op.mpc_has_dlen && c->have_key[side] && ti->op.mpc_dlen > 0) {
        map_add(st, &s->h[dir], 1, ti->op.mpc_dlen, c->idsn[side] + 1);
        c->d[side].map_count++;
    }
}

/* A subflow seen without its SYN that carries MPTCP data: a connection of its own. */
static void adopt_midstream(state_t *st, subflow_t *s, int32_t si)
{
    int32_t ci = new_conn(st);
    if (ci < 0) {
        st->oom = 1;
        return;
    }
    st->c[ci].version = 1;
    st->c[ci].missing_hs = 1;
    s->a_side = 0;
    s->missing_hs = 1;
    conn_add_sf(st, ci, si);
    warn(st, "MPTCP subflow without captured handshake: connection tracked from here");
}

static void on_dss(state_t *st, tcpinfo_t *ti, subflow_t *s, int dir, half_t *h)
{
    conn_t *c = &st->c[s->conn];
    dir_t *d = &c->d[conn_side_of(s, dir)];
    if (ti->op.dss_fin)
        d->data_fin++;
    if (!ti->op.dss_map || (ti->op.dss_fin && ti->op.dss_ssn == 0))
        return;
    uint64_t dsn = ti->op.dss_dsn;
    if (!ti->op.dss_dsn8)
        dsn = d->have_last ? expand32(d->last_dsn, (uint32_t)dsn) : dsn;
    if (!d->based) {
        d->based = 1;
        d->base = dsn - 1;
    }
    d->have_last = 1;
    d->last_dsn = dsn;
    d->map_count++;
    if (ti->op.dss_csum)
        d->csum_maps++;
    if (!h->have_isn) { /* mid-stream: assume this segment starts its mapping */
        h->have_isn = 1;
        h->isn = ti->seq - ti->op.dss_ssn;
    }
    uint64_t ref = h->started ? h->rcv_nxt : 1;
    uint64_t ssn = expand32(ref, ti->op.dss_ssn);
    uint64_t len = ti->op.dss_dlen;
    if (len == 0) {
        d->fallback = 1;
        len = INFINITE_LEN;
    }
    map_add(st, h, ssn, len, dsn);
}

static void on_payload(state_t *st, tcpinfo_t *ti, subflow_t *s, int dir, int64_t t)
{
    half_t *h = &s->h[dir];
    if (!h->have_isn) {
        h->have_isn = 1;
        h->isn = ti->seq - 1;
    }
    uint32_t rel = ti->seq - h->isn;
    if (!h->started) {
        h->started = 1;
        h->rcv_nxt = h->max_end = rel;
    }
    uint64_t sq = expand32(h->rcv_nxt, rel), e = sq + ti->paylen;
    int retrans = sq < h->max_end;
    h->packets++;
    h->bytes += ti->paylen;
    h->ip_bytes += ti->iplen;
    if (h->packets == 1)
        h->first_ts = t;
    h->last_ts = t;
    if (retrans) {
        h->retrans_pkts++;
        h->retrans_bytes += ti->paylen;
    }
    if (e > h->max_end)
        h->max_end = e;
    pkt_t p = {t, ti->paylen, (uint16_t)s->idx, (uint16_t)retrans};
    if (s->conn >= 0) {
        dir_t *d = &st->c[s->conn].d[conn_side_of(s, dir)];
        if (buf_push(&d->pkts, &p, sizeof p))
            st->oom = 1;
    } else if (buf_push(&h->tcp_pkts, &p, sizeof p)) {
        st->oom = 1;
    }
    subflow_data(st, s, dir, t, sq, e);
}

static void on_tcp(state_t *st, tcpinfo_t *ti, int64_t t)
{
    int syn = ti->flags & 0x02, ack = ti->flags & 0x10;
    int32_t v = fmap_get(st, &ti->key);
    if (v < 0) {
        v = new_subflow(st, &ti->key);
        if (v < 0) {
            st->oom = 1;
            return;
        }
        v *= 2;
        if (!syn || ack)
            st->sf[v >> 1].missing_hs = 1;
    } else if (syn && !ack && reused_tuple(&st->sf[v >> 1], ti, v & 1)) {
        v = new_subflow_ex(st, &ti->key, 1);
        if (v < 0) {
            st->oom = 1;
            return;
        }
        v *= 2;
    }
    int32_t si = v >> 1;
    int dir = v & 1;
    subflow_t *s = &st->sf[si];
    if (syn && !ack && dir == 0)
        on_syn(st, ti, si);
    else if (syn && ack && dir == 1)
        on_synack(st, ti, s);
    s = &st->sf[si]; /* on_syn may have grown arrays */
    if (s->conn < 0 && !syn && ti->op.dss && ti->op.dss_map && (!s->syn_seen || s->join))
        adopt_midstream(st, s, si);
    if (s->conn >= 0) {
        conn_t *c = &st->c[s->conn];
        if (ti->op.mpc && !syn && s->syn_mpc)
            on_mpc_ack(st, ti, s, dir);
        if (ti->op.dss)
            on_dss(st, ti, s, dir, &s->h[dir]);
        c->add_addr += (uint64_t)ti->op.add_addr;
        c->rm_addr += (uint64_t)ti->op.rm_addr;
        c->mp_prio += (uint64_t)ti->op.mp_prio;
        c->mp_fail += (uint64_t)ti->op.mp_fail;
        c->fastclose += (uint64_t)ti->op.fastclose;
        c->tcprst += (uint64_t)ti->op.tcprst;
        if (ti->op.mp_prio)
            s->backup = (uint8_t)ti->op.prio_backup;
    }
    if (ti->flags & 0x01)
        s->h[dir].fin = 1;
    if (ti->flags & 0x04)
        s->h[dir].rst = 1;
    if (ti->paylen && !syn)
        on_payload(st, ti, s, dir, t);
    if (s->conn >= 0 && ti->op.dss_map)
        retry_pending(st, &st->c[s->conn], s, dir, t);
}

/* ---------------------------------------------------------------- link / IP / TCP */

static int decode_tcp(state_t *st, const uint8_t *p, uint32_t avail, uint32_t seglen,
                      tcpinfo_t *ti)
{
    if (avail < 20 || seglen < 20) {
        st->truncated_hdr++;
        if (st->truncated_hdr <= 3)
            warn(st, "TCP header cut by the capture snaplen (%u bytes captured)", avail);
        return -1;
    }
    ti->key.sport = rd16(p);
    ti->key.dport = rd16(p + 2);
    ti->seq = rd32(p + 4);
    ti->ack = rd32(p + 8);
    unsigned hl = (unsigned)(p[12] >> 4) * 4;
    ti->flags = p[13];
    if (hl < 20 || hl > seglen)
        return -1;
    ti->paylen = seglen - hl;
    parse_options(p + 20, hl - 20, avail >= hl ? hl - 20 : avail - 20, ti->flags & 0x02, &ti->op);
    if (ti->op.truncated) {
        st->truncated_opts++;
        if (st->truncated_opts <= 3)
            warn(st, "TCP options cut by the capture snaplen (%u bytes captured, header %u)",
                 avail, hl);
    }
    return 0;
}

static int decode_ipv4(state_t *st, const uint8_t *p, uint32_t avail, tcpinfo_t *ti)
{
    if (avail < 20 || (p[0] >> 4) != 4)
        return -1;
    unsigned ihl = (unsigned)(p[0] & 0x0f) * 4;
    unsigned tot = rd16(p + 2);
    if (ihl < 20 || avail < ihl)
        return -1;
    if (tot == 0) /* TSO: the length lives in the capture only */
        tot = avail;
    if (tot < ihl)
        return -1;
    if (p[9] != 6) {
        st->non_tcp++;
        return -1;
    }
    if (rd16(p + 6) & 0x1fff) {
        st->fragments++;
        return -1;
    }
    ti->key.fam = 4;
    ti->iplen = tot;
    memcpy(ti->key.src, p + 12, 4);
    memcpy(ti->key.dst, p + 16, 4);
    return decode_tcp(st, p + ihl, avail - ihl, tot - ihl, ti);
}

static int decode_ipv6(state_t *st, const uint8_t *p, uint32_t avail, tcpinfo_t *ti)
{
    if (avail < 40 || (p[0] >> 4) != 6)
        return -1;
    uint32_t plen = rd16(p + 4), off = 40;
    uint8_t nh = p[6];
    if (plen == 0)
        plen = avail - 40;
    for (int hops = 0; hops < 16; hops++) {
        if (nh == 6)
            break;
        if (off + 8 > avail)
            return -1;
        uint32_t hl;
        if (nh == 0 || nh == 43 || nh == 60)
            hl = ((uint32_t)p[off + 1] + 1) * 8;
        else if (nh == 44) {
            if (rd16(p + off + 2) & 0xfff8) {
                st->fragments++;
                return -1;
            }
            hl = 8;
        } else if (nh == 51)
            hl = ((uint32_t)p[off + 1] + 2) * 4;
        else {
            st->non_tcp++;
            return -1;
        }
        nh = p[off];
        off += hl;
    }
    if (nh != 6 || off > avail || off - 40 > plen)
        return -1;
    ti->key.fam = 6;
    ti->iplen = 40 + plen;
    memcpy(ti->key.src, p + 8, 16);
    memcpy(ti->key.dst, p + 24, 16);
    return decode_tcp(st, p + off, avail - off, plen - (off - 40), ti);
}

static int decode_ip(state_t *st, const uint8_t *p, uint32_t avail, tcpinfo_t *ti)
{
    if (avail < 1)
        return -1;
    if ((p[0] >> 4) == 4)
        return decode_ipv4(st, p, avail, ti);
    if ((p[0] >> 4) == 6)
        return decode_ipv6(st, p, avail, ti);
    return -1;
}

static int decode_ethertype(state_t *st, uint16_t et, const uint8_t *p, uint32_t n,
                            tcpinfo_t *ti)
{
    while ((et == 0x8100 || et == 0x88a8 || et == 0x9100) && n >= 4) {
        et = rd16(p + 2);
        p += 4;
        n -= 4;
    }
    if (et == 0x0800)
        return decode_ipv4(st, p, n, ti);
    if (et == 0x86dd)
        return decode_ipv6(st, p, n, ti);
    st->non_ip++;
    return -1;
}

static int decode_link(state_t *st, int lt, const uint8_t *p, uint32_t n, tcpinfo_t *ti)
{
    switch (lt) {
    case 1: /* Ethernet */
        return n < 14 ? -1 : decode_ethertype(st, rd16(p + 12), p + 14, n - 14, ti);
    case 113: /* Linux SLL */
        return n < 16 ? -1 : decode_ethertype(st, rd16(p + 14), p + 16, n - 16, ti);
    case 276: /* Linux SLL2 */
        return n < 20 ? -1 : decode_ethertype(st, rd16(p), p + 20, n - 20, ti);
    case 101: case 12: case 14:
        return decode_ip(st, p, n, ti);
    case 228:
        return decode_ipv4(st, p, n, ti);
    case 229:
        return decode_ipv6(st, p, n, ti);
    case 0: case 108: /* BSD loopback: 4-byte family, either byte order */
        return n < 4 ? -1 : decode_ip(st, p + 4, n - 4, ti);
    default:
        st->unknown_link++;
        if (st->unknown_link == 1)
            warn(st, "unsupported link type %d: packet skipped", lt);
        return -1;
    }
}

static void on_packet(state_t *st, int64_t t, int lt, const uint8_t *p, uint32_t caplen)
{
    st->packets++;
    if (st->have_ts && t < st->last_ts) {
        st->backwards++;
        if (st->backwards <= 3)
            warn(st, "timestamp goes backwards by %lld ns; using the previous time",
                 (long long)(st->last_ts - t));
        t = st->last_ts;
    }
    if (st->have_ts && t - st->last_ts > MAX_JUMP_NS) {
        /* A jump is believed only when the next packet confirms it (a capture that really
         * resumed later); a lone packet stamped far ahead is a clock outlier and keeps the
         * previous packet's time, or every later packet would be "backwards" and stamped
         * with it, and the run's span (and its time series) would cover years. */
        int confirmed = st->pending_jump && t >= st->pending_ts - MAX_JUMP_NS;
        st->pending_jump = !confirmed;
        st->pending_ts = t;
        if (confirmed) {
            st->jumps++;
            if (st->jumps <= 3)
                warn(st, "timestamp jumps forward by %lld s",
                     (long long)((t - st->last_ts) / 1000000000));
        } else {
            st->outliers++;
            if (st->outliers <= 3)
                warn(st, "timestamp %lld s ahead of the previous packet: a clock outlier, "
                     "given the previous packet's time", (long long)((t - st->last_ts) / 1000000000));
            t = st->last_ts;
        }
    } else {
        st->pending_jump = 0;
    }
    st->have_ts = 1;
    st->last_ts = t;
    tcpinfo_t ti;
    memset(&ti, 0, sizeof ti);
    if (decode_link(st, lt, p, caplen, &ti))
        return;
    st->tcp_packets++;
    st->mptcp_packets += (uint64_t)ti.op.any_mptcp;
    on_tcp(st, &ti, t);
}

/* --------------------------------------------------------------------- file readers */

typedef struct {
    FILE *f;
    uint8_t *b;
    size_t start, end, cap;
    uint64_t pos; /* file offset of b[start] */
    int eof;
} rd_t;

/* Makes n bytes available at r->b + r->start; 0 on success, 1 on clean EOF, -1 short. */
static int rd_need(rd_t *r, size_t n)
{
    if (r->end - r->start >= n)
        return 0;
    if (n > r->cap) {
        size_t cap = r->cap;
        while (cap < n)
            cap *= 2;
        uint8_t *b = realloc(r->b, cap);
        if (!b)
            return -1;
        r->b = b;
        r->cap = cap;
    }
    memmove(r->b, r->b + r->start, r->end - r->start);
    r->end -= r->start;
    r->start = 0;
    while (r->end < n && !r->eof) {
        size_t got = fread(r->b + r->end, 1, r->cap - r->end, r->f);
        if (got == 0)
            r->eof = 1;
        r->end += got;
    }
    if (r->end >= n)
        return 0;
    return r->end == 0 ? 1 : -1;
}

static void rd_skip(rd_t *r, size_t n)
{
    r->start += n;
    r->pos += n;
}

static uint32_t u32e(const uint8_t *p, int swap)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swap ? __builtin_bswap32(v) : v;
}

static uint16_t u16e(const uint8_t *p, int swap)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return swap ? __builtin_bswap16(v) : v;
}

static void truncated(state_t *st, const char *what)
{
    st->partial = 1;
    warn(st, "file ends inside %s: truncated capture, results are partial", what);
}

static void read_pcap(state_t *st, rd_t *r, const uint8_t *hdr)
{
    uint32_t magic;
    memcpy(&magic, hdr, 4);
    int swap = magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u;
    int nsec = magic == 0xa1b23c4du || magic == 0x4d3cb2a1u;
    int lt = (int)(u32e(hdr + 20, swap) & 0xffff);
    rd_skip(r, 24);
    for (;;) {
        st->offset = r->pos;
        int rc = rd_need(r, 16);
        if (rc == 1)
            return;
        st->pkt_index++;
        if (rc < 0) {
            truncated(st, "a record header");
            return;
        }
        const uint8_t *h = r->b + r->start;
        uint32_t sec = u32e(h, swap), frac = u32e(h + 4, swap), incl = u32e(h + 8, swap);
        if (incl > MAX_RECORD) {
            st->partial = 1;
            warn(st, "record length %u is not plausible: file corrupt here, stopping", incl);
            return;
        }
        if (rd_need(r, 16 + (size_t)incl)) {
            truncated(st, "a packet");
            return;
        }
        int64_t t = (int64_t)sec * 1000000000 + (int64_t)frac * (nsec ? 1 : 1000);
        on_packet(st, t, lt, r->b + r->start + 16, incl);
        rd_skip(r, 16 + (size_t)incl);
        if (st->oom)
            return;
    }
}

/* Ticks of 10^-res (or 2^-res when the top bit is set) seconds to ns, clamped so that
 * differences of two times never overflow. */
static int64_t ticks_to_ns(uint64_t ticks, uint8_t res)
{
    const __uint128_t max = (__uint128_t)(INT64_MAX / 4);
    __uint128_t v = ticks;
    if (res & 0x80) {
        unsigned e = res & 0x7f;
        v = e > 63 ? 0 : (v * 1000000000u) >> e;
    } else if (res > 19) {
        v = 0;
    } else if (res <= 9) {
        for (unsigned i = res; i < 9; i++)
            v *= 10;
    } else {
        for (unsigned i = 9; i < res; i++)
            v /= 10;
    }
    return (int64_t)(v > max ? max : v);
}

static void pcapng_idb(state_t *st, const uint8_t *b, uint32_t blen, int swap, iface_t *ifs,
                       int *nif)
{
    if (*nif >= MAX_IFACES) {
        warn(st, "more than %d pcapng interfaces: extra ones ignored", MAX_IFACES);
        return;
    }
    iface_t *f = &ifs[(*nif)++];
    f->linktype = blen >= 12 ? u16e(b + 8, swap) : -1;
    f->tsresol = 6;
    uint32_t o = 16; /* options after type, len, linktype, reserved, snaplen */
    while (o + 4 <= blen - 4) {
        uint16_t code = u16e(b + o, swap), ol = u16e(b + o + 2, swap);
        if (code == 0 || o + 4 + ol > blen - 4)
            break;
        if (code == 9 && ol >= 1)
            f->tsresol = b[o + 4];
        o += 4 + ((ol + 3u) & ~3u);
    }
}

/* Enhanced packet block, or (obsolete) the old packet block whose interface id is 16 bits
 * followed by a drop count; the rest of the layout is the same. */
static void pcapng_epb(state_t *st, const uint8_t *b, uint32_t blen, int swap,
                       const iface_t *ifs, int nif, int64_t *last_t, int obsolete)
{
    if (blen < 32) {
        warn(st, "pcapng packet block too short (%u bytes)", blen);
        return;
    }
    uint32_t ifid = obsolete ? u16e(b + 8, swap) : u32e(b + 8, swap);
    uint32_t caplen = u32e(b + 20, swap);
    uint64_t ticks = ((uint64_t)u32e(b + 12, swap) << 32) | u32e(b + 16, swap);
    if (ifid >= (uint32_t)nif || caplen > blen - 32) {
        warn(st, "pcapng packet block: bad interface %u or length %u", ifid, caplen);
        return;
    }
    *last_t = ticks_to_ns(ticks, ifs[ifid].tsresol);
    on_packet(st, *last_t, ifs[ifid].linktype, b + 28, caplen);
}

static void pcapng_spb(state_t *st, const uint8_t *b, uint32_t blen, int swap,
                       const iface_t *ifs, int nif, int64_t last_t)
{
    if (blen < 16 || nif < 1)
        return;
    uint32_t orig = u32e(b + 8, swap), caplen = blen - 16;
    if (orig < caplen)
        caplen = orig;
    on_packet(st, last_t, ifs[0].linktype, b + 12, caplen);
}

static int pcapng_shb(state_t *st, rd_t *r, int *swap)
{
    if (rd_need(r, 12))
        return -1;
    uint32_t bom;
    memcpy(&bom, r->b + r->start + 8, 4);
    if (bom == 0x1A2B3C4Du)
        *swap = 0;
    else if (bom == 0x4D3C2B1Au)
        *swap = 1;
    else {
        st->partial = 1;
        warn(st, "pcapng section header with bad byte-order magic: stopping");
        return -1;
    }
    return 0;
}

static void read_pcapng(state_t *st, rd_t *r)
{
    iface_t *ifs = calloc(MAX_IFACES, sizeof(iface_t));
    int nif = 0, swap = 0;
    int64_t last_t = 0;
    if (!ifs) {
        st->oom = 1;
        return;
    }
    for (;;) {
        st->offset = r->pos;
        int rc = rd_need(r, 8);
        if (rc == 1)
            break;
        if (rc < 0) {
            truncated(st, "a block header");
            break;
        }
        uint32_t type;
        memcpy(&type, r->b + r->start, 4);
        if (type == 0x0A0D0D0Au) {
            if (pcapng_shb(st, r, &swap))
                break;
            nif = 0;
        }
        uint32_t blen = u32e(r->b + r->start + 4, swap);
        type = u32e(r->b + r->start, swap);
        if (blen < 12 || blen % 4 || blen > MAX_RECORD) {
            st->partial = 1;
            st->pkt_index++;
            warn(st, "pcapng block length %u is not plausible: file corrupt here, stopping", blen);
            break;
        }
        if (rd_need(r, blen)) {
            st->pkt_index++;
            truncated(st, "a pcapng block");
            break;
        }
        const uint8_t *b = r->b + r->start;
        if (type == 1)
            pcapng_idb(st, b, blen, swap, ifs, &nif);
        else if (type == 6 || type == 2) {
            st->pkt_index++;
            pcapng_epb(st, b, blen, swap, ifs, nif, &last_t, type == 2);
        } else if (type == 3) {
            st->pkt_index++;
            pcapng_spb(st, b, blen, swap, ifs, nif, last_t);
        }
        rd_skip(r, blen);
        if (st->oom)
            break;
    }
    free(ifs);
}

static void read_file(state_t *st, FILE *f)
{
    rd_t r = {f, NULL, 0, 0, 0, 0, 0};
    r.cap = 1 << 20;
    r.b = malloc(r.cap);
    if (!r.b) {
        st->oom = 1;
        return;
    }
    int rc = rd_need(&r, 24);
    uint32_t magic = 0;
    if (r.end == 0) {
        snprintf(st->fatal, sizeof st->fatal, "empty file: no capture header at offset 0");
        free(r.b);
        return;
    }
    if (r.end >= 4)
        memcpy(&magic, r.b, 4);
    if (magic == 0x0A0D0D0Au) {
        read_pcapng(st, &r);
    } else if (magic == 0xa1b2c3d4u || magic == 0xd4c3b2a1u || magic == 0xa1b23c4du ||
               magic == 0x4d3cb2a1u) {
        if (rc)
            snprintf(st->fatal, sizeof st->fatal, "file ends inside the pcap header (%zu bytes)",
                     r.end);
        else
            read_pcap(st, &r, r.b);
    } else {
        snprintf(st->fatal, sizeof st->fatal,
                 "not a pcap or pcapng file: unknown magic %02x%02x%02x%02x at offset 0",
                 r.end > 0 ? r.b[0] : 0, r.end > 1 ? r.b[1] : 0, r.end > 2 ? r.b[2] : 0,
                 r.end > 3 ? r.b[3] : 0);
    }
    st->bytes_read = r.pos;
    free(r.b);
}

/* ------------------------------------------------------------------- end of capture */

static void finish(state_t *st)
{
    for (size_t i = 0; i < st->nsf; i++) {
        subflow_t *s = &st->sf[i];
        if (s->conn < 0)
            continue;
        for (int dir = 0; dir < 2; dir++) {
            half_t *h = &s->h[dir];
            uint64_t un = 0;
            for (size_t j = h->pend.head; j < h->pend.n; j++)
                un += h->pend.r[j].e - h->pend.r[j].s;
            h->unmapped_bytes = un;
        }
    }
}

/* --------------------------------------------------------------- Python conversion */

static PyObject *addr_str(const uint8_t *a, int fam)
{
    char s[INET6_ADDRSTRLEN];
    if (!inet_ntop(fam == 4 ? AF_INET : AF_INET6, a, s, sizeof s))
        strcpy(s, "?");
    return PyUnicode_FromString(s);
}

#define SET(d, k, v)                                                                           \
    do {                                                                                       \
        PyObject *_v = (v);                                                                    \
        if (!_v || PyDict_SetItemString((d), (k), _v)) {                                       \
            Py_XDECREF(_v);                                                                    \
            return -1;                                                                         \
        }                                                                                      \
        Py_DECREF(_v);                                                                         \
    } while (0)
#define U64(x) PyLong_FromUnsignedLongLong((unsigned long long)(x))
#define I64(x) PyLong_FromLongLong((long long)(x))

static int half_dict(PyObject *o, const subflow_t *s, int dir)
{
    const half_t *h = &s->h[dir];
    fkey_t k = s->key, r;
    if (dir == 1) {
        key_reverse(&s->key, &r);
        k = r;
    }
    SET(o, "index", I64(s->idx));
    SET(o, "src", addr_str(k.src, k.fam));
    SET(o, "dst", addr_str(k.dst, k.fam));
    SET(o, "sport", I64(k.sport));
    SET(o, "dport", I64(k.dport));
    SET(o, "family", I64(k.fam));
    SET(o, "join", PyBool_FromLong(s->join));
    SET(o, "backup", PyBool_FromLong(s->backup));
    SET(o, "missing_handshake", PyBool_FromLong(s->missing_hs));
    SET(o, "packets", U64(h->packets));
    SET(o, "bytes", U64(h->bytes));
    SET(o, "retransmitted_packets", U64(h->retrans_pkts));
    SET(o, "retransmitted_bytes", U64(h->retrans_bytes));
    SET(o, "ooo_packets", U64(h->ooo_pkts));
    SET(o, "duplicate_packets", U64(h->dup_pkts));
    SET(o, "duplicate_bytes", U64(h->dup_bytes));
    SET(o, "reinjected_bytes", U64(h->reinj_bytes));
    SET(o, "unmapped_bytes", U64(h->unmapped_bytes));
    SET(o, "mapped_bytes", U64(h->mapped_bytes));
    SET(o, "ip_bytes", U64(h->ip_bytes));
    SET(o, "first_ns", I64(h->first_ts));
    SET(o, "last_ns", I64(h->last_ts));
    return 0;
}

static int dir_dict(PyObject *o, const state_t *st, const conn_t *c, int side)
{
    const dir_t *d = &c->d[side];
    SET(o, "sender_side", I64(side));
    SET(o, "version", I64(c->version));
    SET(o, "missing_handshake", PyBool_FromLong(c->missing_hs || !c->have_key[side]));
    SET(o, "fallback", PyBool_FromLong(d->fallback != 0));
    SET(o, "checksum", PyBool_FromLong(c->csum || d->csum_maps));
    SET(o, "token_sender", U64(c->token[side]));
    SET(o, "token_receiver", U64(c->token[1 - side]));
    SET(o, "idsn", U64(d->base));
    SET(o, "rcv_nxt", U64(d->rcv_nxt));
    SET(o, "delivered_bytes", U64(d->dlv_bytes));
    SET(o, "delivered_packets", U64(d->dlv_pkts));
    SET(o, "ooo_packets", U64(d->ooo_pkts));
    SET(o, "ooo_arrivals", U64(d->ooo_arrivals));
    SET(o, "ooo_max_bytes", U64(d->ooo_max_bytes));
    SET(o, "ooo_max_packets", U64(d->ooo_max_pkts));
    SET(o, "ooo_end_bytes", U64(d->q_bytes));
    SET(o, "duplicate_packets", U64(d->dup_pkts));
    SET(o, "duplicate_bytes", U64(d->dup_bytes));
    SET(o, "reinjected_bytes", U64(d->reinj_bytes));
    SET(o, "data_fin", U64(d->data_fin));
    SET(o, "mappings", U64(d->map_count));
    SET(o, "add_addr", U64(c->add_addr));
    SET(o, "remove_addr", U64(c->rm_addr));
    SET(o, "mp_prio", U64(c->mp_prio));
    SET(o, "mp_fail", U64(c->mp_fail));
    SET(o, "mp_fastclose", U64(c->fastclose));
    SET(o, "mp_tcprst", U64(c->tcprst));
    SET(o, "arrivals", PyBytes_FromStringAndSize((const char *)d->arr.p, (Py_ssize_t)d->arr.n));
    SET(o, "data_packets", PyBytes_FromStringAndSize((const char *)d->pkts.p, (Py_ssize_t)d->pkts.n));
    PyObject *l = PyList_New(0);
    if (!l || PyDict_SetItemString(o, "subflows", l)) {
        Py_XDECREF(l);
        return -1;
    }
    Py_DECREF(l);
    for (size_t i = 0; i < c->nsf; i++) {
        const subflow_t *s = &st->sf[c->sfs[i]];
        int dir = s->a_side == side ? 0 : 1;
        PyObject *sd = PyDict_New();
        if (!sd || half_dict(sd, s, dir) || PyList_Append(l, sd)) {
            Py_XDECREF(sd);
            return -1;
        }
        Py_DECREF(sd);
    }
    return 0;
}

static int conn_list(PyObject *out, const state_t *st)
{
    for (size_t ci = 0; ci < st->nc; ci++) {
        const conn_t *c = &st->c[ci];
        if (c->not_mptcp)
            continue;
        for (int side = 0; side < 2; side++) {
            if (!c->d[side].pkts.n)
                continue;
            PyObject *o = PyDict_New();
            if (!o)
                return -1;
            if (PyList_Append(out, o)) {
                Py_DECREF(o);
                return -1;
            }
            Py_DECREF(o);
            SET(o, "connection", I64(ci));
            if (dir_dict(o, st, c, side))
                return -1;
        }
    }
    return 0;
}

/* Every direction with payload of a TCP flow outside an MPTCP connection (plain TCP, or a
 * connection whose SYN-ACK refused MP_CAPABLE): its subflow counters, so a plain TCP run is
 * measured from the same capture, by the same counting, as an MPTCP one. */
static int tcp_flow_list(PyObject *out, const state_t *st)
{
    for (size_t i = 0; i < st->nsf; i++) {
        const subflow_t *s = &st->sf[i];
        if (s->conn >= 0 && !st->c[s->conn].not_mptcp)
            continue;
        for (int dir = 0; dir < 2; dir++) {
            if (!s->h[dir].packets)
                continue;
            const buf_t *b = &s->h[dir].tcp_pkts;
            PyObject *o = PyDict_New();
            if (!o || half_dict(o, s, dir) || PyList_Append(out, o)) {
                Py_XDECREF(o);
                return -1;
            }
            Py_DECREF(o);
            SET(o, "data_packets", PyBytes_FromStringAndSize((const char *)b->p, (Py_ssize_t)b->n));
        }
    }
    return 0;
}

static int counters(PyObject *o, const state_t *st)
{
    SET(o, "packets", U64(st->packets));
    SET(o, "tcp_packets", U64(st->tcp_packets));
    SET(o, "mptcp_packets", U64(st->mptcp_packets));
    SET(o, "non_ip", U64(st->non_ip));
    SET(o, "non_tcp", U64(st->non_tcp));
    SET(o, "fragments", U64(st->fragments));
    SET(o, "truncated_headers", U64(st->truncated_hdr));
    SET(o, "truncated_options", U64(st->truncated_opts));
    SET(o, "timestamps_backwards", U64(st->backwards));
    SET(o, "timestamp_jumps", U64(st->jumps));
    SET(o, "timestamp_outliers", U64(st->outliers));
    SET(o, "unknown_link", U64(st->unknown_link));
    SET(o, "warnings_total", U64(st->nwarn));
    SET(o, "bytes_read", U64(st->bytes_read));
    SET(o, "partial", PyBool_FromLong(st->partial));
    return 0;
}

static void free_dir(dir_t *d)
{
    for (size_t i = 0; i < d->nper; i++) {
        free(d->per[i].rs);
        free(d->per[i].re);
        free(d->per[i].rc);
    }
    free(d->per);
    free(d->arr.p);
    free(d->pkts.p);
}

static void free_state(state_t *st)
{
    for (size_t i = 0; i < st->nsf; i++)
        for (int d = 0; d < 2; d++) {
            free(st->sf[i].h[d].pend.r);
            free(st->sf[i].h[d].tcp_pkts.p);
        }
    for (size_t i = 0; i < st->nc; i++) {
        free(st->c[i].sfs);
        free_dir(&st->c[i].d[0]);
        free_dir(&st->c[i].d[1]);
    }
    free(st->sf);
    free(st->c);
    free(st->fm.slot);
    free(st->tm.slot);
    free(st->tm.tok);
    free(st->pool.n);
}

static PyObject *warning_list(const state_t *st)
{
    size_t n = st->nwarn < MAX_WARNINGS ? st->nwarn : MAX_WARNINGS;
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        const warning_t *w = &st->warns[i];
        PyObject *t = Py_BuildValue("(KKs)", (unsigned long long)w->index,
                                    (unsigned long long)w->offset, w->msg);
        if (!t) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return l;
}

static PyObject *build_result(state_t *st)
{
    PyObject *out = PyDict_New(), *conns = PyList_New(0), *warns = warning_list(st);
    PyObject *flows = PyList_New(0);
    if (!out || !conns || !warns || !flows || PyDict_SetItemString(out, "connections", conns) ||
        PyDict_SetItemString(out, "warnings", warns) || conn_list(conns, st) ||
        PyDict_SetItemString(out, "tcp_flows", flows) || tcp_flow_list(flows, st) ||
        counters(out, st)) {
        Py_XDECREF(out);
        Py_XDECREF(conns);
        Py_XDECREF(warns);
        Py_XDECREF(flows);
        return NULL;
    }
    Py_DECREF(conns);
    Py_DECREF(warns);
    Py_DECREF(flows);
    return out;
}

static PyObject *core_analyze(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *path;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path))
        return NULL;
    FILE *f = fopen(PyBytes_AS_STRING(path), "rb");
    if (!f) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        Py_DECREF(path);
        return NULL;
    }
    Py_DECREF(path);
    state_t *st = calloc(1, sizeof(state_t));
    if (!st) {
        fclose(f);
        return PyErr_NoMemory();
    }
    st->pool.rng = 0x9E3779B9u ^ (uint32_t)(uintptr_t)st; /* treap priorities, any nonzero */
    if (!st->pool.rng)
        st->pool.rng = 1;
    /* The whole pass touches no Python object: other threads may analyse other files. */
    Py_BEGIN_ALLOW_THREADS
    read_file(st, f);
    fclose(f);
    if (!st->oom && !st->fatal[0])
        finish(st);
    Py_END_ALLOW_THREADS
    PyObject *res = NULL;
    if (st->oom)
        PyErr_NoMemory();
    else if (st->fatal[0])
        PyErr_SetString(PyExc_ValueError, st->fatal);
    else
        res = build_result(st);
    free_state(st);
    free(st);
    return res;
}

static PyObject *core_derive(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long key;
    int version;
    if (!PyArg_ParseTuple(args, "Ki", &key, &version))
        return NULL;
    uint32_t tok;
    uint64_t idsn;
    if (mptcp_key_derive(key, version, &tok, &idsn))
        return PyErr_NoMemory();
    return Py_BuildValue("(kK)", (unsigned long)tok, (unsigned long long)idsn);
}

static PyMethodDef methods[] = {
    {"analyze", core_analyze, METH_VARARGS,
     "analyze(path) -> dict: replay every MPTCP connection of a pcap/pcapng capture."},
    {"derive", core_derive, METH_VARARGS,
     "derive(key, version) -> (token, idsn) as the C core computes them."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core",
                                    "Compiled capture reader and MPTCP receiver replay.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }
