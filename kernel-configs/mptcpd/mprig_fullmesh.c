// SPDX-License-Identifier: BSD-3-Clause
/*
 * mprig_fullmesh: an mptcpd 0.12 path manager plugin for the kernel's userspace path
 * manager (net.mptcp.pm_type=1). When a connection this host opened is established, it
 * asks the kernel for one subflow from each other local address to the connection's
 * remote address and port. mptcpd's own sspi plugin does not (its
 * connection_established is unimplemented in 0.12), so without this the connection stays
 * on its first subflow.
 *
 * Which local addresses: those of the interfaces named in MPRIG_FULLMESH_IFACES (comma
 * separated; the rig's path interfaces, never its management interface), or of every
 * non-loopback interface mptcpd monitors when the variable is unset. An address that
 * appears later gets a subflow on every open connection; one that goes away has its
 * subflows closed. Everything it asks for, and every answer, is logged with an
 * "mprig_fullmesh:" prefix (the runner's tests read the log).
 */

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ell/ell.h>

#include <mptcpd/id_manager.h>
#include <mptcpd/network_monitor.h>
#include <mptcpd/path_manager.h>
#include <mptcpd/plugin.h>

#define NAME "mprig_fullmesh"
#define IFACES_ENV "MPRIG_FULLMESH_IFACES"

/* A connection this host opened: where its subflows go. */
struct conn {
        mptcpd_token_t token;
        struct sockaddr_storage remote;  /* the server's address and port */
};

/* A subflow the kernel reported established: what closing it takes. */
struct subflow {
        mptcpd_token_t token;
        struct sockaddr_storage local;   /* with its port: the kernel needs it to close */
        struct sockaddr_storage remote;
};

static struct l_queue *conns;
static struct l_queue *subflows;

/* -- addresses ---------------------------------------------------------------------- */

static socklen_t sa_len(struct sockaddr const *sa)
{
        return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                         : sizeof(struct sockaddr_in);
}

static void const *sa_addr(struct sockaddr const *sa, size_t *n)
{
        if (sa->sa_family == AF_INET6) {
                *n = sizeof(struct in6_addr);
                return &((struct sockaddr_in6 const *) sa)->sin6_addr;
        }
        *n = sizeof(struct in_addr);
        return &((struct sockaddr_in const *) sa)->sin_addr;
}

static in_port_t sa_port(struct sockaddr const *sa)
{
        if (sa->sa_family == AF_INET6)
                return ntohs(((struct sockaddr_in6 const *) sa)->sin6_port);
        return ntohs(((struct sockaddr_in const *) sa)->sin_port);
}

/* The same IP address (ports aside). */
static bool same_ip(struct sockaddr const *a, struct sockaddr const *b)
{
        size_t na, nb;
        void const *pa = sa_addr(a, &na);
        void const *pb = sa_addr(b, &nb);

        return a->sa_family == b->sa_family && memcmp(pa, pb, na) == 0;
}

/* "10.0.0.1:5201" for the log; buf holds INET6_ADDRSTRLEN + 8. */
static char const *show(struct sockaddr const *sa, char *buf, size_t len)
{
        size_t n;
        char ip[INET6_ADDRSTRLEN] = "?";

        inet_ntop(sa->sa_family, sa_addr(sa, &n), ip, sizeof(ip));
        snprintf(buf, len, "%s:%u", ip, sa_port(sa));
        return buf;
}

/* Whether the interface's addresses may carry subflows (the rig's paths only). */
static bool iface_allowed(char const *name)
{
        char const *list = getenv(IFACES_ENV);
        size_t n = strlen(name);

        if (list == NULL || *list == '\0')
                return true;
        for (char const *p = list; p != NULL; p = strchr(p, ',')) {
                if (*p == ',')
                        p++;
                if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
                        return true;
        }
        return false;
}

/* -- asking the kernel for subflows --------------------------------------------------- */

/* One MP_JOIN from `local` (port 0: the kernel picks one) to the connection's remote. */
static void join(struct mptcpd_pm *pm, struct conn const *c, struct sockaddr const *local)
{
        struct sockaddr_storage from = { 0 };
        char a[INET6_ADDRSTRLEN + 8], b[INET6_ADDRSTRLEN + 8];
        struct sockaddr const *to = (struct sockaddr const *) &c->remote;
        mptcpd_aid_t id;
        int err;

        memcpy(&from, local, sa_len(local));
        ((struct sockaddr_in *) &from)->sin_port = 0;  /* same offset in sockaddr_in6 */
        id = mptcpd_idm_get_id(mptcpd_pm_get_idm(pm), local);
        err = mptcpd_pm_add_subflow(pm, c->token, id, 0, (struct sockaddr *) &from, to,
                                    false);
        l_info(NAME ": token %08x: add subflow %s (local id %u) -> %s: %s", c->token,
               show((struct sockaddr *) &from, a, sizeof(a)), id, show(to, b, sizeof(b)),
               err == 0 ? "requested" : strerror(err < 0 ? -err : err));
}

struct join_args {
        struct mptcpd_pm *pm;
        struct conn const *conn;
        struct sockaddr const *skip;  /* the first subflow's local address */
        bool allowed;                 /* the interface is one of the rig's paths */
};

static void join_from_addr(void *data, void *user_data)
{
        struct sockaddr const *local = data;
        struct join_args const *j = user_data;
        struct sockaddr const *remote = (struct sockaddr const *) &j->conn->remote;

        if (j->allowed && local->sa_family == remote->sa_family && !same_ip(local, j->skip))
                join(j->pm, j->conn, local);
}

static void join_from_iface(struct mptcpd_interface const *i, void *data)
{
        struct join_args j = *(struct join_args *) data;

        j.allowed = (i->flags & IFF_LOOPBACK) == 0 && iface_allowed(i->name);
        l_queue_foreach(i->addrs, join_from_addr, &j);
}

/* -- connections ---------------------------------------------------------------------- */

static bool conn_has_token(void const *data, void const *token)
{
        return ((struct conn const *) data)->token == *(mptcpd_token_t const *) token;
}

static bool subflow_has_token(void *data, void *token)
{
        if (((struct subflow *) data)->token != *(mptcpd_token_t *) token)
                return false;
        l_free(data);
        return true;
}

static void on_established(mptcpd_token_t token, struct sockaddr const *laddr,
                           struct sockaddr const *raddr, bool server_side,
                           struct mptcpd_pm *pm)
{
        char a[INET6_ADDRSTRLEN + 8], b[INET6_ADDRSTRLEN + 8];
        struct conn *c;
        struct join_args j = { pm, NULL, laddr, false };

        l_info(NAME ": token %08x: established %s -> %s (%s)", token, show(laddr, a, sizeof(a)),
               show(raddr, b, sizeof(b)), server_side ? "server side" : "client side");
        if (server_side)
                return;  /* the peer that opened the connection adds the subflows */
        c = l_new(struct conn, 1);
        c->token = token;
        memcpy(&c->remote, raddr, sa_len(raddr));
        l_queue_push_tail(conns, c);
        j.conn = c;
        mptcpd_nm_foreach_interface(mptcpd_pm_get_nm(pm), join_from_iface, &j);
}

static void on_closed(mptcpd_token_t token, struct mptcpd_pm *pm)
{
        (void) pm;
        l_free(l_queue_remove_if(conns, conn_has_token, &token));
        l_queue_foreach_remove(subflows, subflow_has_token, &token);
        l_info(NAME ": token %08x: closed", token);
}

/* -- subflows ------------------------------------------------------------------------- */

static void on_new_subflow(mptcpd_token_t token, struct sockaddr const *laddr,
                           struct sockaddr const *raddr, bool backup, struct mptcpd_pm *pm)
{
        char a[INET6_ADDRSTRLEN + 8], b[INET6_ADDRSTRLEN + 8];
        struct subflow *s = l_new(struct subflow, 1);

        (void) pm;
        s->token = token;
        memcpy(&s->local, laddr, sa_len(laddr));
        memcpy(&s->remote, raddr, sa_len(raddr));
        l_queue_push_tail(subflows, s);
        (void) backup;  /* mptcpd 0.12 reports true whenever the kernel sends the flag */
        l_info(NAME ": token %08x: subflow established %s -> %s", token,
               show(laddr, a, sizeof(a)), show(raddr, b, sizeof(b)));
}

struct endpoints {
        mptcpd_token_t token;
        struct sockaddr const *local;
        struct sockaddr const *remote;
};

static bool subflow_is(void *data, void *user_data)
{
        struct subflow *s = data;
        struct endpoints const *e = user_data;
        bool match = s->token == e->token
                && same_ip((struct sockaddr *) &s->local, e->local)
                && sa_port((struct sockaddr *) &s->local) == sa_port(e->local)
                && same_ip((struct sockaddr *) &s->remote, e->remote);

        if (match)
                l_free(s);
        return match;
}

/* Logged, not retried: a path that failed is the experiment's data, not ours to hide. */
static void on_subflow_closed(mptcpd_token_t token, struct sockaddr const *laddr,
                              struct sockaddr const *raddr, bool backup,
                              struct mptcpd_pm *pm)
{
        char a[INET6_ADDRSTRLEN + 8], b[INET6_ADDRSTRLEN + 8];
        struct endpoints e = { token, laddr, raddr };

        (void) pm;
        l_queue_foreach_remove(subflows, subflow_is, &e);
        (void) backup;
        l_info(NAME ": token %08x: subflow closed %s -> %s", token, show(laddr, a, sizeof(a)),
               show(raddr, b, sizeof(b)));
}

static void on_address_removed(mptcpd_token_t token, mptcpd_aid_t id, struct mptcpd_pm *pm)
{
        (void) pm;
        l_info(NAME ": token %08x: peer removed its address id %u", token, id);
}

/* -- local addresses coming and going ------------------------------------------------- */

struct local_change {
        struct mptcpd_pm *pm;
        struct sockaddr const *sa;
};

static void join_conn_from(void *data, void *user_data)
{
        struct conn const *c = data;
        struct local_change const *l = user_data;

        if (c->remote.ss_family == l->sa->sa_family)
                join(l->pm, c, l->sa);
}

static void on_new_local_address(struct mptcpd_interface const *i, struct sockaddr const *sa,
                                 struct mptcpd_pm *pm)
{
        struct local_change l = { pm, sa };
        char a[INET6_ADDRSTRLEN + 8];

        if ((i->flags & IFF_LOOPBACK) != 0 || !iface_allowed(i->name))
                return;
        l_info(NAME ": new local address %s on %s", show(sa, a, sizeof(a)), i->name);
        l_queue_foreach(conns, join_conn_from, &l);
}

static void close_if_local(void *data, void *user_data)
{
        struct subflow const *s = data;
        struct local_change const *l = user_data;
        char a[INET6_ADDRSTRLEN + 8];
        int err;

        if (!same_ip((struct sockaddr const *) &s->local, l->sa))
                return;
        err = mptcpd_pm_remove_subflow(l->pm, s->token, (struct sockaddr const *) &s->local,
                                       (struct sockaddr const *) &s->remote);
        l_info(NAME ": token %08x: remove subflow from %s: %s", s->token,
               show((struct sockaddr const *) &s->local, a, sizeof(a)),
               err == 0 ? "requested" : strerror(err < 0 ? -err : err));
}

static void on_delete_local_address(struct mptcpd_interface const *i,
                                    struct sockaddr const *sa, struct mptcpd_pm *pm)
{
        struct local_change l = { pm, sa };
        char a[INET6_ADDRSTRLEN + 8];

        l_info(NAME ": local address %s gone from %s", show(sa, a, sizeof(a)), i->name);
        l_queue_foreach(subflows, close_if_local, &l);
}

/* -- registration --------------------------------------------------------------------- */

/* Logged once mptcpd listens to the kernel's MPTCP events: the runner starts the traffic
 * only then, since a connection established earlier would never get its subflows. */
static void on_pm_ready(struct mptcpd_pm *pm, void *user_data)
{
        static bool said;

        (void) pm;
        (void) user_data;
        if (!said)
                l_info(NAME ": path manager ready");
        said = true;
}

static struct mptcpd_pm_ops const pm_ops = { .ready = on_pm_ready };

static struct mptcpd_plugin_ops const ops = {
        .connection_established = on_established,
        .connection_closed = on_closed,
        .address_removed = on_address_removed,
        .new_subflow = on_new_subflow,
        .subflow_closed = on_subflow_closed,
        .new_local_address = on_new_local_address,
        .delete_local_address = on_delete_local_address,
};

static int fullmesh_init(struct mptcpd_pm *pm)
{
        char const *ifaces = getenv(IFACES_ENV);

        conns = l_queue_new();
        subflows = l_queue_new();
        if (!mptcpd_plugin_register_ops(NAME, &ops)) {
                l_error(NAME ": cannot register the path manager operations");
                return -1;
        }
        l_info(NAME ": loaded; interfaces %s", ifaces && *ifaces ? ifaces : "(all)");
        if (!mptcpd_pm_register_ops(pm, &pm_ops, NULL))
                l_warn(NAME ": cannot follow the path manager's readiness");
        if (mptcpd_pm_ready(pm))
                on_pm_ready(pm, NULL);
        return 0;
}

static void fullmesh_exit(struct mptcpd_pm *pm)
{
        (void) pm;
        l_queue_destroy(conns, l_free);
        l_queue_destroy(subflows, l_free);
        l_info(NAME ": stopped");
}

MPTCPD_PLUGIN_DEFINE(mprig_fullmesh, "mprig: a subflow from every rig path's address",
                     MPTCPD_PLUGIN_PRIORITY_DEFAULT, fullmesh_init, fullmesh_exit)
