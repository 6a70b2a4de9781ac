/*
 * bootstrap_table.c - rank 0's table of unfinished handshakes (the protocol
 * on each connection is bootstrap_root.c's; what both share is in
 * bootstrap_root.h).
 *
 * The root port is open to anyone, so the join is built to stay quick while
 * thousands of strangers (silent, garbage, a wrong token, connect-and-close)
 * arrive with the ranks:
 *   - the root drains the kernel's accept queue as fast as connections come:
 *     a connection left waiting there stalls every rank queued behind it,
 *     and once the queue is full the kernel drops new SYNs, which the ranks
 *     send again only after a second or more;
 *   - unfinished handshakes are held in a bounded table (PENDING_MAX): when
 *     it is full, each new connection evicts the oldest that sent a wrong
 *     proof, else the oldest that has not sent a whole HELLO, else the
 *     oldest of all. Ranks send their HELLO the moment they connect and
 *     answer the challenge at once, so the oldest silent connection is a
 *     stranger's; a connection that proved the token has left the table
 *     and is never evicted. A rank evicted all the same (it connected while
 *     flooded and its HELLO was late) connects again (bootstrap_client.c);
 *   - the table needs a descriptor per connection, so the root raises its
 *     soft RLIMIT_NOFILE towards the hard limit for the join (restoring it
 *     after); when accept() still runs out of descriptors, the oldest
 *     stranger makes room;
 *   - a wrong proof is answered late, at the connection's handshake
 *     deadline (bootstrap_root.c says why), so that a flood of wrong
 *     tokens costs a slot per connection, not a handshake per microsecond;
 *   - every step is O(1) per connection: epoll reports only the
 *     connections with something to do, and the table is lists in accept
 *     order, whose heads are the next handshake deadline (every connection
 *     has the same time) and the next to evict;
 *   - the first strangers are logged one by one, the rest counted and
 *     summed up once a second (each at TRACE), so that a flood of
 *     connections does not become a flood of log lines (the bound is
 *     transport/sock_strangers.c's, shared with the TCP transport);
 *   - what is left when the join is over is closed by a thread of its own,
 *     not in the way of this rank's transports.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/container_of.h"
#include "transport/bootstrap/bootstrap_root.h"

/* Unfinished handshakes held at once (fewer when the descriptor limit
 * cannot be raised that far, never fewer than PENDING_MIN). */
#define PENDING_MAX 16384
#define PENDING_MIN 8
/* Descriptors left to the rest of the process while the table is full. */
#define FD_RESERVE 64
/* Connections accepted per wake-up before the others' events are served. */
#define ACCEPT_BATCH 256
#define ACCEPT_PAUSE_MS 100
/* Fewer connections than this left at the end are closed inline. */
#define CLOSE_INLINE_MAX 64

/* ---- lists ----------------------------------------------------------------- */

static void q_init(gw_bs_link_t *q) { q->prev = q->next = q; }

static int q_linked(const gw_bs_link_t *l) { return l->next != NULL; }

static void q_push(gw_bs_link_t *q, gw_bs_link_t *l)
{
    l->prev = q->prev;
    l->next = q;
    q->prev->next = l;
    q->prev = l;
}

static void q_unlink(gw_bs_link_t *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

static gw_bs_conn_t *oldest_pending(const gw_bs_join_t *j)
{
    return j->pending.next == &j->pending
               ? NULL
               : gw__container_of(j->pending.next, gw_bs_conn_t, pending);
}

static gw_bs_conn_t *oldest_of(const gw_bs_link_t *q)
{
    return q->next == q ? NULL : gw__container_of(q->next, gw_bs_conn_t, evict);
}

/* ---- strangers: logged, then counted (transport/sock_strangers.c) ------------ */

static const char *const drop_names[GW_BS_DROP_KINDS] = {"silent", "garbage", "wrong token", "left",
                                                         "evicted"};

static gw_sock_strangers_t *strangers(gw_bs_join_t *j)
{
    gw_sock_strangers_t *s = &j->strangers;
    if (!s->log) {
        s->log = j->bs->log;
        s->subsys = GW_BS_SUBSYS;
        s->where = j->bs->root;
        s->kind_names = drop_names;
        s->nkinds = GW_BS_DROP_KINDS;
    }
    return s;
}

int64_t gw__bs_strangers_summary_due(const gw_bs_join_t *j)
{
    return gw__sock_strangers_due(&j->strangers);
}

void gw__bs_strangers_summary(gw_bs_join_t *j, int64_t now, int force)
{
    char tail[48];
    snprintf(tail, sizeof(tail), "; %zu handshake%s pending", j->npending,
             j->npending == 1 ? "" : "s");
    gw__sock_strangers_summary(strangers(j), now, force, tail);
}

void gw__bs_stranger(gw_bs_join_t *j, const gw_bs_conn_t *c, gw_bs_drop_t kind, const char *why)
{
    if (gw__sock_stranger(strangers(j), (int)kind))
        GW_WARN(j->bs->log, GW_BS_SUBSYS, "dropped connection from %s: %s", c->addr, why);
    else
        GW_TRACE(j->bs->log, GW_BS_SUBSYS, "dropped connection from %s: %s", c->addr, why);
}

/* ---- leaving the table -------------------------------------------------------- */

void gw__bs_conn_close(gw_bs_join_t *j, gw_bs_conn_t *c)
{
    if (c->state == GW_BS_CONN_CLOSED)
        return;
    if (c->state == GW_BS_CONN_JOINED && j->by_rank[c->rank] == c) {
        j->by_rank[c->rank] = NULL;
        j->joined--;
    }
    if (q_linked(&c->pending)) {
        q_unlink(&c->pending);
        j->npending--;
    }
    if (q_linked(&c->evict))
        q_unlink(&c->evict);
    if (c->fd >= 0) {
        /* Taken out of the set by hand: a process forked meanwhile may
         * hold the socket open, and epoll would go on reporting it. */
        if (j->ep >= 0 && c->events)
            epoll_ctl(j->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    /* An event for it may still be in this pass's list: freed after. */
    c->state = GW_BS_CONN_CLOSED;
    c->dead_next = j->dead;
    j->dead = c;
}

void gw__bs_conn_drop(gw_bs_join_t *j, gw_bs_conn_t *c, gw_bs_drop_t kind, const char *why)
{
    gw__bs_stranger(j, c, kind, why);
    gw__bs_conn_close(j, c);
}

void gw__bs_table_free_dead(gw_bs_join_t *j)
{
    while (j->dead) {
        gw_bs_conn_t *c = j->dead;
        j->dead = c->dead_next;
        free(c);
    }
}

void gw__bs_table_spoke(gw_bs_join_t *j, gw_bs_conn_t *c)
{
    (void)j;
    if (q_linked(&c->evict))
        q_unlink(&c->evict);
}

void gw__bs_table_wrong(gw_bs_join_t *j, gw_bs_conn_t *c)
{
    c->state = GW_BS_CONN_WRONG;
    if (q_linked(&c->evict))
        q_unlink(&c->evict);
    q_push(&j->wrong, &c->evict);
}

void gw__bs_table_joined(gw_bs_join_t *j, gw_bs_conn_t *c)
{
    q_unlink(&c->pending);
    j->npending--;
    c->state = GW_BS_CONN_JOINED;
    j->by_rank[c->rank] = c;
    j->joined++;
}

/* Make room: the oldest connection that sent a wrong proof, else the oldest
 * without a whole HELLO, else the oldest unfinished handshake. */
static void evict_one(gw_bs_join_t *j, const char *why)
{
    gw_bs_conn_t *c = oldest_of(&j->wrong);
    if (!c)
        c = oldest_of(&j->silent);
    if (!c)
        c = oldest_pending(j);
    if (!c)
        return;
    if (c->state == GW_BS_CONN_REJECT || c->state == GW_BS_CONN_WRONG)
        gw__bs_conn_close(j, c); /* logged when rejected */
    else
        gw__bs_conn_drop(j, c, GW_BS_DROP_EVICTED, why);
}

int64_t gw__bs_table_next_deadline(const gw_bs_join_t *j)
{
    const gw_bs_conn_t *c = oldest_pending(j);
    return c ? c->deadline : INT64_MAX;
}

/* Every connection has the same time, so those past their deadline are at
 * the head of the table, the oldest first. */
void gw__bs_table_expire(gw_bs_join_t *j, int64_t now)
{
    char why[96];
    snprintf(why, sizeof(why), "no complete handshake within %d ms", j->handshake_ms);
    for (gw_bs_conn_t *c; (c = oldest_pending(j)) && c->deadline <= now;) {
        if (c->state == GW_BS_CONN_WRONG)
            gw__bs_send_reject_nowait(c->fd, GW_ERR_AUTH,
                                      "wrong job token: rank 0 rejects this rank's proof");
        if (c->state == GW_BS_CONN_REJECT || c->state == GW_BS_CONN_WRONG)
            gw__bs_conn_close(j, c); /* logged when rejected */
        else
            gw__bs_conn_drop(j, c, GW_BS_DROP_SILENT, why);
    }
}

/* ---- accepting -------------------------------------------------------------- */

static void accept_pause(gw_bs_join_t *j)
{
    j->accept_paused_until = gw__now_ms() + ACCEPT_PAUSE_MS;
    struct epoll_event ev = {.events = 0, .data.ptr = NULL};
    epoll_ctl(j->ep, EPOLL_CTL_MOD, j->lfd, &ev);
}

void gw__bs_table_accept(gw_bs_join_t *j)
{
    const gw_bootstrap_t *bs = j->bs;
    if (j->accept_paused_until) {
        if (gw__now_ms() < j->accept_paused_until)
            return;
        j->accept_paused_until = 0;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(j->ep, EPOLL_CTL_MOD, j->lfd, &ev);
    }
    for (int n = 0; n < ACCEPT_BATCH; n++) {
        if (j->npending >= j->cap)
            evict_one(j, "dropped for a newer connection: the table of unfinished handshakes is "
                         "full");
        char addr[GW_BS_ADDR_TEXT];
        int fd = gw__sock_accept(j->lfd, addr, sizeof(addr));
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if ((errno == EMFILE || errno == ENFILE) && j->npending > 0) {
                /* Out of descriptors: the oldest stranger makes room. */
                if (!j->fd_short_warned) {
                    j->fd_short_warned = 1;
                    GW_WARN(bs->log, GW_BS_SUBSYS,
                            "accept on %s: %m with %zu unfinished handshakes: each new "
                            "connection now replaces the oldest of them",
                            bs->root, j->npending);
                }
                evict_one(j, "dropped for a newer connection: out of file descriptors");
                continue;
            }
            /* Out of memory, or of descriptors with only ranks holding
             * them: let handshakes finish or expire, and try again a
             * little later. */
            GW_WARN(bs->log, GW_BS_SUBSYS, "accept on %s failed: %m; retrying in %d ms", bs->root,
                    ACCEPT_PAUSE_MS);
            accept_pause(j);
            return;
        }
        gw_bs_conn_t *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            GW_WARN(bs->log, GW_BS_SUBSYS, "out of memory accepting a connection on %s", bs->root);
            accept_pause(j);
            return;
        }
        c->fd = fd;
        c->rank = -1;
        c->deadline = gw__now_ms() + j->handshake_ms;
        memcpy(c->addr, addr, sizeof(c->addr));
        q_push(&j->pending, &c->pending);
        q_push(&j->silent, &c->evict);
        j->npending++;
        c->state = GW_BS_CONN_HELLO;
        gw__sock_io_set(&c->io, c->buf, GW_BS_HDR_LEN, NULL, 0);
        GW_TRACE(bs->log, GW_BS_SUBSYS, "connection from %s", c->addr);
        /* Read at once: a rank's HELLO is often there already, and garbage
         * or a reset is dropped before it costs an epoll registration
         * (gw__bs_conn_event adds to the set what still waits). */
        gw__bs_conn_event(j, c);
    }
}

/* ---- the descriptor limit, and the end of the join -------------------------------- */

void gw__bs_table_init(gw_bs_join_t *j)
{
    const gw_bootstrap_t *bs = j->bs;
    q_init(&j->pending);
    q_init(&j->silent);
    q_init(&j->wrong);
    /* Raise the soft RLIMIT_NOFILE towards the hard limit, as far as the
     * table needs, and size the table by what the limit allows. */
    rlim_t spare = (rlim_t)FD_RESERVE + (rlim_t)bs->size;
    rlim_t want = (rlim_t)PENDING_MAX + spare, have = want;
    struct rlimit rl = {.rlim_cur = RLIM_INFINITY, .rlim_max = RLIM_INFINITY};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        j->nofile_found = have = rl.rlim_cur;
        if (rl.rlim_cur < want && (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > rl.rlim_cur)) {
            struct rlimit up = rl;
            up.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
            if (setrlimit(RLIMIT_NOFILE, &up) == 0) {
                GW_INFO(bs->log, GW_BS_SUBSYS,
                        "raised the soft RLIMIT_NOFILE from %llu to %llu for the join, so that "
                        "strangers on %s cannot use up the descriptors (restored after it)",
                        (unsigned long long)rl.rlim_cur, (unsigned long long)up.rlim_cur, bs->root);
                j->nofile_set = have = up.rlim_cur;
            } else {
                GW_INFO(bs->log, GW_BS_SUBSYS, "cannot raise the soft RLIMIT_NOFILE from %llu: %m",
                        (unsigned long long)rl.rlim_cur);
            }
        }
    }
    j->cap = have > spare + PENDING_MIN ? (size_t)(have - spare) : PENDING_MIN;
    if (j->cap > PENDING_MAX)
        j->cap = PENDING_MAX;
    if (j->cap < PENDING_MAX)
        GW_INFO(bs->log, GW_BS_SUBSYS,
                "RLIMIT_NOFILE %llu (hard %llu) leaves room for %zu unfinished handshakes on %s: "
                "beyond that, each new connection replaces the oldest",
                (unsigned long long)have, (unsigned long long)rl.rlim_max, j->cap, bs->root);
}

/* What is left to undo once the join is over. */
typedef struct leftovers {
    rlim_t nofile_found, nofile_set;
    size_t n;
    int fds[];
} leftovers_t;

static void nofile_restore(rlim_t found, rlim_t set)
{
    /* As found, unless someone changed it meanwhile. Descriptors above it
     * stay valid, and the library polls them, never select()s. */
    struct rlimit rl;
    if (set && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == set) {
        rl.rlim_cur = found;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void *leftovers_close(void *arg)
{
    leftovers_t *l = arg;
    for (size_t i = 0; i < l->n; i++)
        close(l->fds[i]);
    nofile_restore(l->nofile_found, l->nofile_set);
    free(l);
    return NULL;
}

/* Closing a TCP socket costs some 15 us, so thousands of strangers are
 * closed by a thread of their own while this rank goes on to set up its
 * transports; the limit is restored once they are closed. A few are closed
 * inline, and so are all when there is no memory or thread to be had. */
void gw__bs_table_cleanup(gw_bs_join_t *j)
{
    if (j->npending > 0)
        GW_TRACE(j->bs->log, GW_BS_SUBSYS,
                 "closing %zu unfinished handshakes on %s: the join is over", j->npending,
                 j->bs->root);
    leftovers_t *l = j->npending >= CLOSE_INLINE_MAX
                         ? malloc(sizeof(*l) + j->npending * sizeof(l->fds[0]))
                         : NULL;
    size_t n = 0;
    for (gw_bs_conn_t *c; (c = oldest_pending(j));) {
        if (l) {
            l->fds[n++] = c->fd; /* the leftovers' now */
            c->fd = -1;
        }
        gw__bs_conn_close(j, c);
    }
    if (l) {
        l->nofile_found = j->nofile_found;
        l->nofile_set = j->nofile_set;
        l->n = n;
        pthread_attr_t attr;
        pthread_t t;
        if (pthread_attr_init(&attr) == 0) {
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            int rc = pthread_create(&t, &attr, leftovers_close, l);
            pthread_attr_destroy(&attr);
            if (rc == 0)
                return;
        }
        leftovers_close(l);
        return;
    }
    nofile_restore(j->nofile_found, j->nofile_set);
}
