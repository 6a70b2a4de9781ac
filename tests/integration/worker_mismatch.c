/*
 * worker_mismatch.c - one rank of the mismatch tests: every rank calls the
 * same collective except one, which changes one argument (or calls another
 * collective). Every rank must fail with GW_ERR_MISMATCH, promptly, and
 * none may write its receive buffer past what it asked for.
 *
 * Usage: worker_mismatch COLL WHAT ODD [COUNT]
 *   COLL: allreduce, broadcast, reduce, allgather, reduce_scatter, barrier,
 *         compressed, alltoall, alltoallv, gather, scatter, allgatherv,
 *         and on 2 ranks the point-to-point forms:
 *         p2p (rank 0 gw_send to rank 1, which gw_recv),
 *         p2p_window (rank 0 posts WINDOW gw_isend, rank 1 as many gw_irecv;
 *         only message P2P_ODD_MSG differs; the ones before must complete
 *         with GW_OK on both ranks, the odd one fail on both),
 *         p2p_window_late (the same, but rank 1 posts its receives only
 *         LATE_MS after rank 0 posted its sends: every message waits in
 *         its buffers, and it accepts the first ones and rejects the odd
 *         one in one progress round, before any receipt went out; and it
 *         is slow to abort: its log stalls until STALL_MS after that
 *         (stall_log), so rank 0 has the referee's verdict well before
 *         rank 1's abort, which carries the receipt of the first two),
 *         p2p_sendrecv (both ranks gw_sendrecv with each other; count and
 *         zero change only the odd rank's receive count, so the other rank's
 *         receive succeeds and only its send half can report the mismatch;
 *         dtype changes both halves),
 *         p2p_unmatched (rank 0 gw_send to rank 1, which never receives: it
 *         sleeps 3 x GW_TIMEOUT_MS; rank 0 must fail with GW_ERR_TIMEOUT
 *         naming rank 1, its receipt never having come)
 *   WHAT: count (one more element), zero (count 0), dtype (int32 instead of
 *         float32), op (max instead of sum), root (root 1 instead of 0),
 *         algo (tree instead of ring), hier (the hierarchical allreduce
 *         instead of ring), kind (a barrier instead of COLL; for
 *         barrier: an allreduce); for the v-forms also sendcount (alltoallv:
 *         one more element to the previous rank; allgatherv: a sendcount
 *         that is not its own recvcounts entry), recvcount (alltoallv: one
 *         more expected from the next rank), counts (allgatherv: another
 *         rank's count one more), self (alltoallv: sendcounts[rank] !=
 *         recvcounts[rank]); count and zero change every count
 *   ODD:  the rank that differs
 *   COUNT: elements of the call (1024; small counts leave ranks without a
 *         chunk of their own in the ring algorithms)
 * Each rank prints "rank R: STATUS after T ms, culprit K" and exits 0 when
 * its status is GW_ERR_MISMATCH and its buffer intact, 1 otherwise. In the
 * point-to-point forms that status is the call's own: a sender whose send
 * returned GW_OK has failed, whatever its next call would say.
 *
 * Under GW_P2P_SEND=standard (gradwire.h, gw_p2p_send_t) a send completes
 * once its buffer may be reused, so a refused message's sender learns the
 * verdict in a later call: a point-to-point form whose call returned GW_OK
 * then receives one element from the peer (which never sends it), and
 * that receive's status is the rank's ("then STATUS" in the line). In
 * p2p_unmatched rank 0 first sends a small message, which must return
 * GW_OK (the pair holds it), then BIG_BYTES, more than any pair buffers,
 * which must fail with GW_ERR_TIMEOUT naming rank 1.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"

#define COUNT 1024
#define CANARY 0x5A
#define WINDOW 5                      /* messages in flight in p2p_window */
#define P2P_ODD_MSG 2                 /* the one that differs (0-based: the third) */
#define LATE_MS 300                   /* how long p2p_window_late's receiver waits */
#define STALL_MS 500                  /* then how long its log, and so its abort, stalls */
#define BIG_BYTES ((size_t)256 << 20) /* p2p_unmatched's large standard send */

static int is_window(const char *coll) { return strncmp(coll, "p2p_window", 10) == 0; }

/* GW_P2P_SEND=standard: sends complete without the receiver's word. */
static int standard_sends(void)
{
    const char *v = getenv("GW_P2P_SEND");
    return v && strcasecmp(v, "standard") == 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A rank slow to abort, without touching the library: its stderr (the
 * log) becomes a pipe filled with filler (0x01) but for the prefix and
 * ROOM_BODY bytes, which nobody reads until STALL_MS after its receives are posted. The line that
 * reports the mismatch (the transport's, about 200 bytes after the prefix
 * "host:pid:rank hh:mm:ss.micros ") still fits; the next, the verdict that
 * it logs just before it aborts (blame.c, comm_state.c, 320 bytes), does
 * not: the write, atomic below PIPE_BUF, blocks until the thread drains
 * the pipe, and the abort waits with it. A longer first line would only
 * delay the report instead, which the test cannot tell from a fast rank. */
#define ROOM_BODY 260

typedef struct stall {
    int rd, out;
} stall_t;

static void *stall_main(void *arg)
{
    stall_t *s = arg;
    sleep_ms(LATE_MS + STALL_MS);
    char buf[4096];
    ssize_t n;
    while ((n = read(s->rd, buf, sizeof(buf))) > 0) {
        size_t keep = 0;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != 1)
                buf[keep++] = buf[i];
        if (keep && write(s->out, buf, keep) < 0)
            break;
    }
    return NULL;
}

static int stall_log(void)
{
    static stall_t s;
    int p[2];
    char host[256] = "";
    if (pipe(p) != 0)
        return -1;
    fcntl(p[1], F_SETPIPE_SZ, 4096);
    int cap = fcntl(p[1], F_GETPIPE_SZ);
    gethostname(host, sizeof(host) - 1);
    char prefix[512];
    int room = snprintf(prefix, sizeof(prefix), "%s:%d:1 00:00:00.000000 ", host, (int)getpid()) +
               ROOM_BODY;
    if (cap < room + 1)
        return -1;
    s = (stall_t){.rd = p[0], .out = dup(2)};
    size_t fill = (size_t)(cap - room);
    char *filler = malloc(fill);
    if (!filler || s.out < 0)
        return -1;
    memset(filler, 1, fill);
    ssize_t w = write(p[1], filler, fill);
    free(filler);
    pthread_t t;
    if (w != (ssize_t)fill || dup2(p[1], 2) < 0 || pthread_create(&t, NULL, stall_main, &s))
        return -1;
    pthread_detach(t);
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct call {
    const char *coll;
    size_t count;
    gw_dtype_t dtype;
    gw_op_t op;
    int root;
    int odd;          /* this rank is the one that differs */
    const char *what; /* how */
} call_t;

/* p2p_window: WINDOW messages of c->count elements, posted back to back;
 * on the odd rank message P2P_ODD_MSG has its argument changed. Messages
 * before it must succeed; the call's status is the odd message's. */
static gw_status_t window(gw_comm_t *comm, const call_t *c, uint8_t *send, uint8_t *recv)
{
    int rank = gw_comm_rank(comm);
    size_t esize = gw_dtype_size(GW_FLOAT32);
    gw_handle_t *h[WINDOW];
    gw_status_t st = GW_OK;
    int posted = 0;
    if (rank == 1 && strcmp(c->coll, "p2p_window_late") == 0) {
        if (stall_log() != 0) {
            perror("worker_mismatch: stall_log");
            return GW_ERR_SYSTEM;
        }
        sleep_ms(LATE_MS);
    }
    for (int m = 0; m < WINDOW && st == GW_OK; m++) {
        size_t count = (size_t)COUNT;
        gw_dtype_t dtype = GW_FLOAT32;
        if (c->odd && m == P2P_ODD_MSG) {
            count = c->count;
            dtype = c->dtype;
        }
        uint8_t *slot = (rank == 0 ? send : recv) + (size_t)m * (COUNT + 1) * esize;
        st = rank == 0 ? gw_isend(comm, slot, count, dtype, 1, &h[m])
                       : gw_irecv(comm, slot, count, dtype, 0, &h[m]);
        if (st == GW_OK)
            posted++;
    }
    if (st != GW_OK) {
        printf("rank %d: posting message %d failed: %s\n", rank, posted, gw_status_name(st));
        return GW_ERR_PROTOCOL;
    }
    gw_status_t odd = GW_OK;
    for (int m = 0; m < WINDOW; m++) {
        gw_status_t w = gw_wait(h[m]);
        printf("rank %d: message %d: %s\n", rank, m, gw_status_name(w));
        if (m < P2P_ODD_MSG && w != GW_OK) {
            printf("rank %d: message %d, before the odd one, failed\n", rank, m);
            odd = GW_ERR_PROTOCOL;
        }
        if (m == P2P_ODD_MSG && odd == GW_OK)
            odd = w;
    }
    return odd;
}

/* alltoallv and allgatherv: per-rank counts (every pair c->count elements
 * for alltoallv, c->count + rank % 2 for allgatherv's blocks) at stride
 * c->count + 2, changed on the odd rank as WHAT says (see the top).
 * alltoallv's pair that disagrees is the one of the last step of the
 * pairwise exchange (odd to odd - 1, odd + 1 to odd): the receiver finds
 * out last, when the other ranks may have all their blocks. */
static gw_status_t run_v(gw_comm_t *comm, const call_t *c, void *send, void *recv)
{
    const int n = gw_comm_size(comm), rank = gw_comm_rank(comm);
    size_t sc[64], sd[64], rc[64], rd[64];
    if (n > 64)
        return GW_ERR_INVALID_ARG;
    int is_v = strcmp(c->coll, "alltoallv") == 0;
    for (int j = 0; j < n; j++) {
        sc[j] = rc[j] = is_v ? c->count : c->count + (size_t)(j % 2);
        sd[j] = rd[j] = (size_t)j * (c->count + 2);
    }
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    size_t sendcount = rc[rank];
    if (c->odd && strcmp(c->what, "sendcount") == 0) {
        if (is_v)
            sc[prev]++;
        else
            sendcount++;
    }
    if (c->odd && strcmp(c->what, "recvcount") == 0)
        rc[next]++;
    if (c->odd && strcmp(c->what, "counts") == 0)
        rc[next]++;
    if (c->odd && strcmp(c->what, "self") == 0)
        sc[rank]++;
    if (is_v)
        return gw_alltoallv(comm, send, sc, sd, recv, rc, rd, c->dtype);
    return gw_allgatherv(comm, send, recv, sendcount, rc, rd, c->dtype);
}

static gw_status_t run(gw_comm_t *comm, const call_t *c, void *send, void *recv)
{
    const char *k = c->coll;
    if (strcmp(k, "alltoall") == 0)
        return gw_alltoall(comm, send, recv, c->count, c->dtype);
    if (strcmp(k, "gather") == 0)
        return gw_gather(comm, send, recv, c->count, c->dtype, c->root);
    if (strcmp(k, "scatter") == 0)
        return gw_scatter(comm, send, recv, c->count, c->dtype, c->root);
    if (strcmp(k, "alltoallv") == 0 || strcmp(k, "allgatherv") == 0)
        return run_v(comm, c, send, recv);
    if (strcmp(k, "allreduce") == 0)
        return gw_allreduce(comm, send, recv, c->count, c->dtype, c->op);
    if (strcmp(k, "broadcast") == 0)
        return gw_broadcast(comm, send, recv, c->count, c->dtype, c->root);
    if (strcmp(k, "reduce") == 0)
        return gw_reduce(comm, send, recv, c->count, c->dtype, c->op, c->root);
    if (strcmp(k, "allgather") == 0)
        return gw_allgather(comm, send, recv, c->count, c->dtype);
    if (strcmp(k, "reduce_scatter") == 0)
        return gw_reduce_scatter(comm, send, recv, c->count, c->dtype, c->op);
    if (strcmp(k, "barrier") == 0)
        return gw_barrier(comm);
    if (strcmp(k, "p2p") == 0) {
        if (gw_comm_rank(comm) == 0)
            return gw_send(comm, send, c->count, c->dtype, 1);
        return gw_recv(comm, recv, c->count, c->dtype, 0);
    }
    if (strcmp(k, "p2p_unmatched") == 0) {
        /* Connected first (a pair connecting on first use needs both
         * ranks in a call): what is tested is the message, not the dial. */
        if (standard_sends() && gw_barrier(comm) != GW_OK)
            return GW_ERR_PROTOCOL;
        if (gw_comm_rank(comm) == 0 && standard_sends()) {
            gw_status_t st = gw_send(comm, send, c->count, c->dtype, 1);
            printf("rank 0: the small send: %s\n", gw_status_name(st));
            if (st != GW_OK)
                return GW_ERR_PROTOCOL;
            uint8_t *big = calloc(1, BIG_BYTES);
            st = big ? gw_send(comm, big, BIG_BYTES, GW_UINT8, 1) : GW_ERR_NO_MEMORY;
            free(big);
            return st;
        }
        if (gw_comm_rank(comm) == 0)
            return gw_send(comm, send, c->count, c->dtype, 1);
        const char *ms = getenv("GW_TIMEOUT_MS");
        sleep_ms(3 * (ms ? atol(ms) : 1000));
        return GW_OK;
    }
    if (is_window(k))
        return window(comm, c, send, recv);
    if (strcmp(k, "p2p_sendrecv") == 0) {
        int peer = 1 - gw_comm_rank(comm);
        /* count and zero change the odd rank's receive only (see the top). */
        size_t sendcount = c->odd && strcmp(c->what, "dtype") != 0 ? COUNT : c->count;
        return gw_sendrecv(comm, send, sendcount, peer, recv, c->count, peer, c->dtype);
    }
    return GW_ERR_INVALID_ARG;
}

/* The receive bytes a call may write: the rest must keep the canary. */
static size_t recv_bytes(const call_t *c, int size)
{
    size_t n = c->count * gw_dtype_size(c->dtype);
    if (is_window(c->coll)) /* the messages before the odd one */
        return (size_t)P2P_ODD_MSG * (COUNT + 1) * gw_dtype_size(GW_FLOAT32);
    if (strcmp(c->coll, "alltoallv") == 0 || strcmp(c->coll, "allgatherv") == 0)
        return (c->count + 2) * (size_t)size * gw_dtype_size(c->dtype);
    if (strcmp(c->coll, "alltoall") == 0 || strcmp(c->coll, "gather") == 0)
        return n * (size_t)size;
    return strcmp(c->coll, "allgather") == 0 ? n * (size_t)size : n;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s COLL WHAT ODD [COUNT]\n", argv[0]);
        return 2;
    }
    const char *what = argv[2];
    int odd = atoi(argv[3]);
    size_t base = argc == 5 ? strtoul(argv[4], NULL, 10) : COUNT;
    if (base < 1 || base > COUNT) {
        fprintf(stderr, "worker_mismatch: COUNT must be in 1..%d\n", COUNT);
        return 2;
    }
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init_env(&comm);
    if (st != GW_OK) {
        printf("init failed: %s\n", gw_status_name(st));
        return 1;
    }
    int rank = gw_comm_rank(comm), size = gw_comm_size(comm);
    call_t c = {argv[1], base, GW_FLOAT32, GW_SUM, 0, rank == odd, what};
    if (strncmp(c.coll, "p2p", 3) == 0 && size != 2) {
        fprintf(stderr, "worker_mismatch: %s runs on 2 ranks, not %d\n", c.coll, size);
        return 2;
    }
    if (is_window(c.coll) && base != COUNT) {
        fprintf(stderr, "worker_mismatch: %s sends %d elements a message\n", c.coll, COUNT);
        return 2;
    }
    if (rank == odd) {
        if (strcmp(what, "count") == 0)
            c.count = base + 1;
        else if (strcmp(what, "zero") == 0)
            c.count = 0;
        else if (strcmp(what, "dtype") == 0)
            c.dtype = GW_INT32;
        else if (strcmp(what, "op") == 0)
            c.op = GW_MAX;
        else if (strcmp(what, "root") == 0)
            c.root = 1;
        else if (strcmp(what, "algo") == 0)
            gw_comm_set_algo(comm, GW_ALGO_TREE);
        else if (strcmp(what, "hier") == 0)
            gw_comm_set_algo(comm, GW_ALGO_HIER);
        else if (strcmp(what, "kind") == 0)
            c.coll = strcmp(c.coll, "barrier") == 0 ? "allreduce" : "barrier";
    } else if (strcmp(what, "algo") == 0 || strcmp(what, "hier") == 0) {
        gw_comm_set_algo(comm, GW_ALGO_RING);
    }
    size_t cap = (size_t)(COUNT + 1) * 8 * (size_t)(size > WINDOW ? size : WINDOW) + 4096;
    uint8_t *send = malloc(cap), *recv = malloc(cap);
    if (!send || !recv)
        return 1;
    memset(send, 0, cap);
    memset(recv, CANARY, cap);
    double t0 = now_ms();
    st = run(comm, &c, send, recv);
    char then[64] = "";
    if (st == GW_OK && standard_sends() && strncmp(c.coll, "p2p", 3) == 0 &&
        strcmp(c.coll, "p2p_unmatched") != 0) {
        /* The verdict on a message sent under standard completion comes
         * with the receiver's abort: a call that waits on it gets it. */
        float one;
        st = gw_recv(comm, &one, 1, GW_FLOAT32, 1 - rank);
        snprintf(then, sizeof(then), " (the call returned GW_OK; this is a receive after it)");
    }
    printf("rank %d: %s after %.0f ms, culprit %d%s\n", rank, gw_status_name(st), now_ms() - t0,
           gw_comm_culprit(comm), then);
    fflush(stdout);
    int ok = st == GW_ERR_MISMATCH;
    if (strcmp(c.coll, "p2p_unmatched") == 0)
        ok = rank == 1 || (st == GW_ERR_TIMEOUT && gw_comm_culprit(comm) == 1);
    /* A broadcast's root copies its own data into recv: its count is its own. */
    for (size_t i = recv_bytes(&c, size); ok && i < cap; i++)
        if (recv[i] != CANARY) {
            printf("rank %d: receive buffer written past its count at byte %zu\n", rank, i);
            ok = 0;
        }
    gw_comm_destroy(comm);
    free(send);
    free(recv);
    return ok ? 0 : 1;
}
