/*
 * test_tcp.c - the TCP transport between real processes on loopback.
 *
 * Each test forks 2..4 rank processes. Every rank opens a transport on
 * 127.0.0.1, sends its address blob to the parent over a socketpair, gets
 * everybody's blobs back (the parent stands in for the bootstrap, and may
 * first point strangers at the ranks' ports) and connects. The ranks then run
 * the test's body and report through their exit status (0 = every check
 * passed; a failed check prints its line to stderr); the parent asserts on
 * those statuses and kills any rank that outlives the job's deadline, so a
 * hang fails the test instead of stalling it.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "common/clock.h"
#include "common/log.h"
#include "transport/tcp_internal.h"
#include "transport/transport.h"

#define MAX_RANKS 4
#define MIB ((size_t)1024 * 1024)
#define JOB_DEADLINE_MS 9000

typedef int (*rank_fn)(gw_transport_t *t, int rank, int size, const void *arg);

typedef struct job {
    int n;
    int nsocks;
    int nsocks_of[MAX_RANKS]; /* non-zero: this rank's nsocks differs */
    const char *ifname;
    int timeout_ms;
    int skip_connect_rank; /* -1, or a rank that opens but never connects */
    int ipv6;              /* default address ::1 instead of 127.0.0.1 */
    rank_fn fn;
    const void *arg;
    /* Parent side, between gathering and releasing addresses. */
    void (*tamper)(struct job *j, uint8_t *all);
    int stranger_fds[16];
    int nstrangers;
    int expect_connect[MAX_RANKS]; /* status connect() must give each rank (GW_OK) */
} job_t;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank, __FILE__, __LINE__,        \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define CHECK_ST(expr, want)                                                                       \
    do {                                                                                           \
        gw_status_t st__ = (expr);                                                                 \
        CHECK(st__ == (want), "%s returned %s, expected %s", #expr, gw_status_name(st__),          \
              gw_status_name(want));                                                               \
    } while (0)

static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static uint8_t pattern(size_t i, int from, int to, uint64_t seq)
{
    return (uint8_t)(i * 131u + (size_t)from * 17u + (size_t)to * 5u + seq * 3u + (i >> 13));
}

static void fill(uint8_t *buf, size_t len, int from, int to, uint64_t seq)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = pattern(i, from, to, seq);
}

/* Index of the first wrong byte, or -1. */
static long verify(const uint8_t *buf, size_t len, int from, int to, uint64_t seq)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pattern(i, from, to, seq))
            return (long)i;
    return -1;
}

static void make_req(gw_request_t *r, gw_req_kind_t kind, int peer, uint64_t seq, uint32_t sig,
                     void *buf, size_t len)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->peer = peer;
    r->tag.seq = seq;
    r->tag.sig = sig;
    r->buf = buf;
    r->len = len;
}

/* Progress until every request completed; the first failed status, or
 * GW_ERR_TIMEOUT after ms. */
static gw_status_t wait_all(gw_transport_t *t, gw_request_t **reqs, int n,
                            const gw_msg_tag_t *current, int ms)
{
    int64_t end = gw__now_ms() + ms;
    for (;;) {
        int done = 1;
        for (int i = 0; i < n; i++) {
            if (reqs[i]->complete && reqs[i]->status != GW_OK)
                return reqs[i]->status;
            done &= reqs[i]->complete;
        }
        if (done)
            return GW_OK;
        gw_status_t st = t->ops->progress(t, current, 20);
        if (st != GW_OK)
            return st;
        if (gw__now_ms() > end)
            return GW_ERR_TIMEOUT;
    }
}

static gw_status_t wait_one(gw_transport_t *t, gw_request_t *r, int ms)
{
    return wait_all(t, &r, 1, NULL, ms);
}

static int rank_main(job_t *j, int rank, int fd)
{
    gw_logger_t lg;
    gw__logger_init(&lg, rank);
    gw_transport_params_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.rank = rank;
    pr.size = j->n;
    pr.log = &lg;
    pr.timeout_ms = j->timeout_ms ? j->timeout_ms : 5000;
    pr.ifname = j->ifname;
    pr.nsocks = j->nsocks_of[rank] ? j->nsocks_of[rank] : j->nsocks;
    memset(pr.job_id, 0x42, sizeof(pr.job_id));
    if (j->ipv6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&pr.default_addr;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_loopback;
        in6->sin6_port = htons(5555);
        pr.default_addr_len = sizeof(*in6);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&pr.default_addr;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        in->sin_port = htons(5555); /* must be ignored: the transport picks its port */
        pr.default_addr_len = sizeof(*in);
    }

    uint8_t mine[GW_TRANSPORT_ADDR_MAX];
    gw_transport_t *t = NULL;
    CHECK_ST(gw__tcp_transport_ops.open(&pr, &t, mine), GW_OK);
    CHECK(t && t->rank == rank && t->size == j->n, "bad transport fields");
    uint8_t *all = malloc((size_t)j->n * GW_TRANSPORT_ADDR_MAX);
    CHECK(all, "malloc");
    CHECK(write_all(fd, mine, sizeof(mine)) == 0, "sending my address to the parent");
    CHECK(read_all(fd, all, (size_t)j->n * GW_TRANSPORT_ADDR_MAX) == 0, "reading addresses");
    if (rank == j->skip_connect_rank) {
        usleep(1000 * 1000);
        t->ops->close(t);
        free(all);
        return 0;
    }
    int64_t t0 = gw__now_ms();
    gw_status_t st = t->ops->connect(t, all);
    free(all);
    CHECK(st == (gw_status_t)j->expect_connect[rank], "connect returned %s, expected %s",
          gw_status_name(st), gw_status_name((gw_status_t)j->expect_connect[rank]));
    if (st != GW_OK) {
        int limit = pr.timeout_ms + 1000;
        CHECK(gw__now_ms() - t0 < limit, "connect took %lld ms, limit %d",
              (long long)(gw__now_ms() - t0), limit);
        t->ops->close(t);
        return 0;
    }
    int rc = j->fn ? j->fn(t, rank, j->n, j->arg) : 0;
    t->ops->close(t);
    gw__logger_fini(&lg);
#if defined(__SANITIZE_ADDRESS__)
    /* Ranks leave with _exit(), which skips LeakSanitizer's exit check. */
    CHECK(__lsan_do_recoverable_leak_check() == 0, "memory leaked (see the report above)");
#endif
    return rc;
}

static void run_job(job_t *j)
{
    pid_t pids[MAX_RANKS];
    int fds[MAX_RANKS];
    cr_assert(j->n >= 1 && j->n <= MAX_RANKS);
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < j->n; r++) {
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        pids[r] = fork();
        cr_assert_neq(pids[r], -1, "fork: %s", strerror(errno));
        if (pids[r] == 0) {
            close(sv[0]);
            for (int q = 0; q < r; q++)
                close(fds[q]);
            _exit(rank_main(j, r, sv[1]));
        }
        close(sv[1]);
        fds[r] = sv[0];
    }
    uint8_t all[MAX_RANKS * GW_TRANSPORT_ADDR_MAX];
    int gathered = 1;
    for (int r = 0; r < j->n; r++)
        if (read_all(fds[r], all + r * GW_TRANSPORT_ADDR_MAX, GW_TRANSPORT_ADDR_MAX) != 0)
            gathered = 0;
    if (gathered && j->tamper)
        j->tamper(j, all);
    for (int r = 0; r < j->n && gathered; r++)
        write_all(fds[r], all, (size_t)j->n * GW_TRANSPORT_ADDR_MAX);

    int status[MAX_RANKS], done[MAX_RANKS] = {0}, left = j->n;
    int64_t end = gw__now_ms() + JOB_DEADLINE_MS;
    while (left > 0 && gw__now_ms() < end) {
        for (int r = 0; r < j->n; r++)
            if (!done[r] && waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
                done[r] = 1;
                left--;
            }
        if (left > 0)
            usleep(5000);
    }
    for (int r = 0; r < j->n; r++) {
        if (!done[r]) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], &status[r], 0);
        }
        close(fds[r]);
    }
    for (int i = 0; i < j->nstrangers; i++)
        close(j->stranger_fds[i]);
    cr_assert(gathered, "a rank failed before publishing its address");
    for (int r = 0; r < j->n; r++) {
        cr_expect(done[r], "rank %d still running after %d ms: killed", r, JOB_DEADLINE_MS);
        if (done[r] && WIFSIGNALED(status[r]))
            cr_expect(0, "rank %d killed by signal %d", r, WTERMSIG(status[r]));
        else if (done[r])
            cr_expect(WEXITSTATUS(status[r]) == 0, "rank %d failed a check (exit %d)", r,
                      WEXITSTATUS(status[r]));
    }
}

static job_t job(int n, int nsocks, rank_fn fn, const void *arg)
{
    job_t j;
    memset(&j, 0, sizeof(j));
    j.n = n;
    j.nsocks = nsocks;
    j.fn = fn;
    j.arg = arg;
    j.skip_connect_rank = -1;
    return j;
}

/* ---- data movement ----------------------------------------------------------- */

static const size_t exchange_sizes[] = {0, 1, 1000, 64 * 1024 - 1, MIB + 3, 8 * MIB};
#define NSIZES (sizeof(exchange_sizes) / sizeof(exchange_sizes[0]))

/* Ranks 0 and 1 send each other every size at once, then check the bytes. */
static int body_exchange(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    for (size_t i = 0; i < NSIZES; i++) {
        size_t len = exchange_sizes[i];
        uint64_t seq = i + 1;
        uint8_t *sbuf = malloc(len + 1), *rbuf = malloc(len + 1);
        CHECK(sbuf && rbuf, "malloc");
        fill(sbuf, len, rank, peer, seq);
        memset(rbuf, 0xEE, len + 1);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, peer, seq, 0x1234, sbuf, len);
        make_req(&r, GW_REQ_RECV, peer, seq, 0x1234, rbuf, len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        gw_request_t *both[] = {&s, &r};
        CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_OK);
        CHECK(s.bytes_done == len && r.bytes_done == len, "bytes_done %zu/%zu for len %zu",
              s.bytes_done, r.bytes_done, len);
        long bad = verify(rbuf, len, peer, rank, seq);
        CHECK(bad < 0, "len %zu: byte %ld is wrong", len, bad);
        CHECK(rbuf[len] == 0xEE, "len %zu: wrote past the end of the buffer", len);
        free(sbuf);
        free(rbuf);
    }
    return 0;
}

Test(tcp, exchange_sizes_one_socket, .timeout = 15)
{
    job_t j = job(2, 1, body_exchange, NULL);
    run_job(&j);
}

Test(tcp, exchange_sizes_four_sockets, .timeout = 15)
{
    job_t j = job(2, 4, body_exchange, NULL);
    run_job(&j);
}

#define NMSG 400
static size_t inorder_len(int i)
{
    return (size_t)(i * 7919) % (300 * 1024) + (i % 3 == 0 ? 0 : 1);
}

/* Rank 0 posts NMSG sends of mixed sizes at once; rank 1 posts the receives
 * one at a time with progress in between, so some headers are read ahead
 * before their receive exists. Every message arrives whole and in order. */
static int body_in_order(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    gw_request_t *reqs = calloc(NMSG, sizeof(*reqs));
    uint8_t **bufs = calloc(NMSG, sizeof(*bufs));
    gw_request_t **ptrs = calloc(NMSG, sizeof(*ptrs));
    CHECK(reqs && bufs && ptrs, "calloc");
    for (int i = 0; i < NMSG; i++) {
        size_t len = inorder_len(i);
        bufs[i] = malloc(len ? len : 1);
        CHECK(bufs[i], "malloc");
        ptrs[i] = &reqs[i];
        if (rank == 0) {
            fill(bufs[i], len, 0, 1, (uint64_t)i + 1);
            make_req(&reqs[i], GW_REQ_SEND, 1, (uint64_t)i + 1, 7, bufs[i], len);
            CHECK_ST(t->ops->isend(t, &reqs[i]), GW_OK);
        } else {
            make_req(&reqs[i], GW_REQ_RECV, 0, (uint64_t)i + 1, 7, bufs[i], len);
            CHECK_ST(t->ops->irecv(t, &reqs[i]), GW_OK);
            gw_msg_tag_t cur = {.seq = (uint64_t)i + 1, .sig = 7};
            CHECK_ST(t->ops->progress(t, &cur, 0), GW_OK);
        }
    }
    CHECK_ST(wait_all(t, ptrs, NMSG, NULL, 8000), GW_OK);
    for (int i = 0; i < NMSG && rank == 1; i++) {
        long bad = verify(bufs[i], inorder_len(i), 0, 1, (uint64_t)i + 1);
        CHECK(bad < 0, "message %d (len %zu): byte %ld is wrong", i, inorder_len(i), bad);
    }
    for (int i = 0; i < NMSG; i++)
        free(bufs[i]);
    free(bufs);
    free(ptrs);
    free(reqs);
    return 0;
}

Test(tcp, many_messages_in_order, .timeout = 15)
{
    job_t j = job(2, 4, body_in_order, NULL);
    run_job(&j);
}

/* Everyone sends 8 MiB to the right and receives 8 MiB from the left at
 * once: far more than the socket buffers hold, so it only finishes if sends
 * and receives are interleaved. */
static int body_ring(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    size_t len = 8 * MIB;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (uint64_t round = 1; round <= 2; round++) {
        uint8_t *sbuf = malloc(len), *rbuf = malloc(len);
        CHECK(sbuf && rbuf, "malloc");
        fill(sbuf, len, rank, right, round);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, right, round, 99, sbuf, len);
        make_req(&r, GW_REQ_RECV, left, round, 99, rbuf, len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        gw_request_t *both[] = {&s, &r};
        gw_msg_tag_t cur = {.seq = round, .sig = 99};
        CHECK_ST(wait_all(t, both, 2, &cur, 6000), GW_OK);
        long bad = verify(rbuf, len, left, rank, round);
        CHECK(bad < 0, "round %llu: byte %ld from rank %d is wrong", (unsigned long long)round, bad,
              left);
        free(sbuf);
        free(rbuf);
    }
    return 0;
}

Test(tcp, ring_one_socket, .timeout = 15)
{
    job_t j = job(4, 1, body_ring, NULL);
    run_job(&j);
}

Test(tcp, ring_four_sockets, .timeout = 15)
{
    job_t j = job(3, 4, body_ring, NULL);
    run_job(&j);
}

/* Every rank sends two messages to every other rank (one small, one split
 * over the sockets) and receives theirs: the whole mesh carries data. */
static int body_all_to_all(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    enum { NM = 2 };
    static const size_t lens[NM] = {777, 700 * 1024 + 5};
    gw_request_t reqs[2 * MAX_RANKS * NM];
    gw_request_t *ptrs[2 * MAX_RANKS * NM];
    uint8_t *bufs[2 * MAX_RANKS * NM];
    int n = 0;
    for (int m = 0; m < NM; m++) {
        for (int d = 1; d < size; d++) {
            int to = (rank + d) % size, from = (rank + size - d) % size;
            bufs[n] = malloc(lens[m]);
            CHECK(bufs[n], "malloc");
            fill(bufs[n], lens[m], rank, to, (uint64_t)m + 1);
            make_req(&reqs[n], GW_REQ_SEND, to, (uint64_t)m + 1, 3, bufs[n], lens[m]);
            CHECK_ST(t->ops->isend(t, &reqs[n]), GW_OK);
            ptrs[n] = &reqs[n];
            n++;
            bufs[n] = malloc(lens[m]);
            CHECK(bufs[n], "malloc");
            make_req(&reqs[n], GW_REQ_RECV, from, (uint64_t)m + 1, 3, bufs[n], lens[m]);
            CHECK_ST(t->ops->irecv(t, &reqs[n]), GW_OK);
            ptrs[n] = &reqs[n];
            n++;
        }
    }
    CHECK_ST(wait_all(t, ptrs, n, NULL, 6000), GW_OK);
    for (int i = 0; i < n; i++) {
        if (reqs[i].kind == GW_REQ_RECV) {
            long bad = verify(bufs[i], reqs[i].len, reqs[i].peer, rank, reqs[i].tag.seq);
            CHECK(bad < 0, "message %llu from rank %d: byte %ld is wrong",
                  (unsigned long long)reqs[i].tag.seq, reqs[i].peer, bad);
        }
        free(bufs[i]);
    }
    return 0;
}

/* Ping-pong of tiny and empty messages: each one must be delivered by the
 * progress round in which it arrives, without waiting for more data. */
static int body_ping_pong(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    uint8_t buf[8];
    int64_t t0 = gw__now_ms();
    for (uint64_t i = 1; i <= 1000; i++) {
        size_t len = i % 2 ? 0 : sizeof(buf);
        gw_request_t r;
        if ((int)(i % 2) == rank) {
            fill(buf, len, rank, peer, i);
            make_req(&r, GW_REQ_SEND, peer, i, 1, buf, len);
            CHECK_ST(t->ops->isend(t, &r), GW_OK);
        } else {
            make_req(&r, GW_REQ_RECV, peer, i, 1, buf, len);
            CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        }
        CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        if ((int)(i % 2) != rank)
            CHECK(verify(buf, len, peer, rank, i) < 0, "message %llu", (unsigned long long)i);
    }
    if (getenv("GW_TEST_VERBOSE"))
        fprintf(stderr, "rank %d: 1000 ping-pong messages in %lld ms\n", rank,
                (long long)(gw__now_ms() - t0));
    return 0;
}

Test(tcp, ping_pong, .timeout = 15)
{
    job_t j = job(2, 2, body_ping_pong, NULL);
    run_job(&j);
}

Test(tcp, all_to_all_four_ranks, .timeout = 15)
{
    job_t j = job(4, 3, body_all_to_all, NULL);
    run_job(&j);
}

Test(tcp, ipv6_loopback, .timeout = 15)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&in6, sizeof(in6)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok)
        cr_skip_test("no IPv6 loopback on this host");
    job_t j = job(2, 2, body_exchange, NULL);
    j.ipv6 = 1;
    run_job(&j);
}

/* ---- mismatches -------------------------------------------------------------- */

typedef struct mismatch_case {
    uint32_t recv_sig; /* the sender always uses 0xAA */
    size_t send_len, recv_len;
} mismatch_case_t;

/* Rank 0 sends; rank 1 posts a receive that disagrees. Rank 1 must fail with
 * GW_ERR_MISMATCH without touching its buffer, then abort; rank 0 learns of
 * it through the abort frame. */
static int body_mismatch(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const mismatch_case_t *c = arg;
    if (rank == 0) {
        uint8_t *buf = malloc(c->send_len);
        CHECK(buf, "malloc");
        fill(buf, c->send_len, 0, 1, 1);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, 1, 1, 0xAA, buf, c->send_len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        uint8_t dummy[16];
        make_req(&r, GW_REQ_RECV, 1, 2, 0xAA, dummy, sizeof(dummy));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        /* The abort from rank 1 carries its status. */
        CHECK_ST(wait_one(t, &r, 5000), GW_ERR_MISMATCH);
        free(buf);
        return 0;
    }
    uint8_t *buf = malloc(c->recv_len);
    CHECK(buf, "malloc");
    memset(buf, 0x5A, c->recv_len);
    gw_request_t r;
    make_req(&r, GW_REQ_RECV, 0, 1, c->recv_sig, buf, c->recv_len);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_ERR_MISMATCH);
    CHECK(r.complete && r.status == GW_ERR_MISMATCH, "request not failed");
    CHECK(r.bytes_done == 0, "%zu payload bytes were received", r.bytes_done);
    for (size_t i = 0; i < c->recv_len; i++)
        CHECK(buf[i] == 0x5A, "byte %zu of the receive buffer was overwritten", i);
    /* The transport is broken from now on. */
    CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_MISMATCH);
    gw_request_t later;
    make_req(&later, GW_REQ_RECV, 0, 2, 0xAA, buf, 1);
    CHECK_ST(t->ops->irecv(t, &later), GW_ERR_MISMATCH);
    CHECK(later.complete && later.status == GW_ERR_MISMATCH, "later request not failed");
    CHECK_ST(t->ops->abort(t, GW_ERR_MISMATCH), GW_OK);
    free(buf);
    return 0;
}

Test(tcp, tag_mismatch_leaves_buffer_untouched, .timeout = 15)
{
    static const mismatch_case_t c = {.recv_sig = 0xBB, .send_len = 1000, .recv_len = 1000};
    job_t j = job(2, 1, body_mismatch, &c);
    run_job(&j);
}

Test(tcp, length_mismatch_longer_receive, .timeout = 15)
{
    static const mismatch_case_t c = {.recv_sig = 0xAA, .send_len = MIB, .recv_len = 2 * MIB};
    job_t j = job(2, 4, body_mismatch, &c);
    run_job(&j);
}

Test(tcp, length_mismatch_shorter_receive, .timeout = 15)
{
    static const mismatch_case_t c = {.recv_sig = 0xAA, .send_len = 4 * MIB, .recv_len = 1000};
    job_t j = job(2, 2, body_mismatch, &c);
    run_job(&j);
}

typedef struct conflict_case {
    gw_msg_tag_t current; /* rank 1's collective; rank 0 sends seq 3, sig 0x11 */
    int conflicts;
} conflict_case_t;

/* Rank 1 posts no receive and only calls progress(current): the header read
 * ahead from rank 0 must be reported when it proves a disagreement, and must
 * be harmless (and its message intact) when rank 0 is merely ahead. */
static int body_conflict(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const conflict_case_t *c = arg;
    size_t len = 3 * 64 * 1024;
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    if (rank == 0) {
        fill(buf, len, 0, 1, 3);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, 1, 3, 0x11, buf, len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(wait_one(t, &s, 5000), GW_OK);
        uint8_t dummy[4];
        make_req(&r, GW_REQ_RECV, 1, 4, 0x11, dummy, sizeof(dummy));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        if (c->conflicts) {
            CHECK_ST(wait_one(t, &r, 5000), GW_ERR_MISMATCH); /* rank 1's abort */
        } else {
            CHECK_ST(wait_one(t, &r, 5000), GW_OK);
            CHECK(dummy[0] == 0x77, "ack content");
        }
        free(buf);
        return 0;
    }
    int64_t end = gw__now_ms() + (c->conflicts ? 3000 : 300);
    gw_status_t st = GW_OK;
    while (st == GW_OK && gw__now_ms() < end)
        st = t->ops->progress(t, &c->current, 10);
    if (c->conflicts) {
        CHECK_ST(st, GW_ERR_MISMATCH);
        CHECK_ST(t->ops->abort(t, GW_ERR_MISMATCH), GW_OK);
        CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_MISMATCH);
    } else {
        CHECK_ST(st, GW_OK);
        memset(buf, 0, len);
        gw_request_t r, s;
        make_req(&r, GW_REQ_RECV, 0, 3, 0x11, buf, len);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        long bad = verify(buf, len, 0, 1, 3);
        CHECK(bad < 0, "byte %ld of the read-ahead message is wrong", bad);
        uint8_t ack[4] = {0x77, 0x77, 0x77, 0x77};
        make_req(&s, GW_REQ_SEND, 0, 4, 0x11, ack, sizeof(ack));
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(wait_one(t, &s, 5000), GW_OK);
    }
    free(buf);
    return 0;
}

Test(tcp, readahead_detects_older_sequence, .timeout = 15)
{
    static const conflict_case_t c = {.current = {.seq = 4, .sig = 0x11}, .conflicts = 1};
    job_t j = job(2, 2, body_conflict, &c);
    run_job(&j);
}

Test(tcp, readahead_detects_other_signature, .timeout = 15)
{
    static const conflict_case_t c = {.current = {.seq = 3, .sig = 0x22}, .conflicts = 1};
    job_t j = job(2, 1, body_conflict, &c);
    run_job(&j);
}

Test(tcp, readahead_of_newer_sequence_is_fine, .timeout = 15)
{
    static const conflict_case_t c = {.current = {.seq = 2, .sig = 0x11}, .conflicts = 0};
    job_t j = job(2, 2, body_conflict, &c);
    run_job(&j);
}

/* ---- failures ------------------------------------------------------------------ */

typedef struct death_case {
    int mid_stream;   /* rank 0 dies after writing part of a large message, else idle */
    int victim_sends; /* the survivor is sending (EPIPE/reset) rather than receiving */
} death_case_t;

static int body_death(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const death_case_t *c = arg;
    /* Mid-stream, rank 0 dies after its first progress round that wrote
     * anything; one round writes at most 16 MiB per socket, so 256 MiB
     * cannot all go out in it. Untouched pages of the buffers cost nothing. */
    size_t len = c->mid_stream ? 256 * MIB : 64 * MIB;
    if (rank == 0) {
        if (c->mid_stream && !c->victim_sends) {
            uint8_t *buf = calloc(1, len);
            CHECK(buf, "calloc");
            gw_request_t s;
            make_req(&s, GW_REQ_SEND, 1, 1, 5, buf, len);
            CHECK_ST(t->ops->isend(t, &s), GW_OK);
            while (s.bytes_done == 0)
                CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
            CHECK(!s.complete, "the whole message went out in one round");
        } else {
            usleep(100 * 1000);
        }
        _exit(0); /* no close, no goodbye: as if the process crashed */
    }
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    gw_request_t r;
    make_req(&r, c->victim_sends ? GW_REQ_SEND : GW_REQ_RECV, 0, 1, 5, buf, len);
    if (c->victim_sends) {
        memset(buf, 1, len);
        CHECK_ST(t->ops->isend(t, &r), GW_OK);
    } else {
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    }
    int64_t t0 = gw__now_ms();
    gw_status_t st = wait_one(t, &r, 5000);
    int64_t took = gw__now_ms() - t0;
    CHECK_ST(st, GW_ERR_REMOTE);
    CHECK(r.complete && r.status == GW_ERR_REMOTE, "request not failed");
    CHECK(took < 2500, "the failure took %lld ms to notice", (long long)took);
    CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_REMOTE);
    gw_request_t later;
    make_req(&later, GW_REQ_SEND, 0, 2, 5, buf, 1);
    CHECK_ST(t->ops->isend(t, &later), GW_ERR_REMOTE);
    free(buf);
    return 0;
}

Test(tcp, peer_dies_mid_stream, .timeout = 15)
{
    static const death_case_t c = {.mid_stream = 1};
    job_t j = job(2, 4, body_death, &c);
    run_job(&j);
}

Test(tcp, peer_dies_while_we_wait, .timeout = 15)
{
    static const death_case_t c = {.mid_stream = 0};
    job_t j = job(2, 1, body_death, &c);
    run_job(&j);
}

Test(tcp, peer_dies_while_we_send, .timeout = 15)
{
    static const death_case_t c = {.mid_stream = 0, .victim_sends = 1};
    job_t j = job(2, 2, body_death, &c);
    run_job(&j);
}

/* Rank 0 aborts with a status of its own; rank 1, waiting for a message,
 * fails with that status. */
static int body_abort(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    uint8_t buf[64];
    gw_request_t r;
    if (rank == 0) {
        usleep(50 * 1000);
        int64_t t0 = gw__now_ms();
        CHECK_ST(t->ops->abort(t, GW_ERR_TIMEOUT), GW_OK);
        CHECK(gw__now_ms() - t0 < 500, "abort blocked for %lld ms", (long long)(gw__now_ms() - t0));
        CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_ABORTED);
        make_req(&r, GW_REQ_SEND, 1, 1, 1, buf, sizeof(buf));
        CHECK_ST(t->ops->isend(t, &r), GW_ERR_ABORTED);
        CHECK(r.complete && r.status == GW_ERR_ABORTED, "request not failed");
        return 0;
    }
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_ERR_TIMEOUT);
    CHECK(r.status == GW_ERR_TIMEOUT, "request status %s", gw_status_name(r.status));
    return 0;
}

Test(tcp, abort_frame_carries_status, .timeout = 15)
{
    job_t j = job(2, 2, body_abort, NULL);
    run_job(&j);
}

typedef struct goodbye_case {
    int recv_posted_first; /* rank 1's receive is pending when the goodbye comes */
} goodbye_case_t;

static int body_goodbye(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const goodbye_case_t *c = arg;
    uint8_t buf[100];
    gw_request_t r;
    if (rank == 0) {
        if (!c->recv_posted_first) {
            fill(buf, sizeof(buf), 0, 1, 1);
            make_req(&r, GW_REQ_SEND, 1, 1, 1, buf, sizeof(buf));
            CHECK_ST(t->ops->isend(t, &r), GW_OK);
            CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        } else {
            usleep(100 * 1000);
        }
        return 0; /* rank_main closes: goodbye */
    }
    if (c->recv_posted_first) {
        make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_ERR_REMOTE);
        return 0;
    }
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_OK);
    CHECK(verify(buf, sizeof(buf), 0, 1, 1) < 0, "content");
    /* A goodbye with nothing expected from that peer is fine. */
    int64_t end = gw__now_ms() + 300;
    while (gw__now_ms() < end)
        CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
    make_req(&r, GW_REQ_RECV, 0, 2, 1, buf, sizeof(buf));
    gw_status_t st = t->ops->irecv(t, &r);
    if (st == GW_OK)
        st = wait_one(t, &r, 5000);
    CHECK_ST(st, GW_ERR_REMOTE);
    CHECK(r.complete && r.status == GW_ERR_REMOTE, "request not failed");
    return 0;
}

Test(tcp, goodbye_then_receive_is_remote_error, .timeout = 15)
{
    static const goodbye_case_t c = {.recv_posted_first = 0};
    job_t j = job(2, 2, body_goodbye, &c);
    run_job(&j);
}

Test(tcp, goodbye_with_receive_pending_is_remote_error, .timeout = 15)
{
    static const goodbye_case_t c = {.recv_posted_first = 1};
    job_t j = job(2, 1, body_goodbye, &c);
    run_job(&j);
}

/* Write raw bytes on rank 0's socket k to rank 1, behind the transport's
 * back (the sockets are non-blocking: wait for room with poll). */
static int raw_send(gw_transport_t *base, int peer, int k, const void *buf, size_t len)
{
    gw_tcp_t *t = gw__tcp_of(base);
    int fd = t->peers[peer].socks[k].fd;
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, 100);
            continue;
        }
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

typedef struct forgery {
    int bad_magic; /* else: part 1's header disagrees with part 0 */
} forgery_t;

/* Rank 0 forges frames; rank 1 must fail with GW_ERR_PROTOCOL before
 * trusting them, and its abort tells rank 0. */
static int body_forgery(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const forgery_t *c = arg;
    size_t len = 256 * 1024, half = len / 2;
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    if (rank == 0) {
        memset(buf, 0x11, len);
        uint8_t hdr[GW_TCP_HDR_SIZE];
        gw_tcp_hdr_t h = {.magic = GW_TCP_FRAME_MAGIC,
                          .type = GW_TCP_DATA,
                          .seq = 1,
                          .sig = 2,
                          .total = len,
                          .offset = 0,
                          .part_len = half};
        if (c->bad_magic) {
            h.magic = 0x12345678;
            gw__tcp_hdr_encode(&h, hdr);
            CHECK(raw_send(t, 1, 0, hdr, sizeof(hdr)) == 0, "raw send");
        } else {
            gw__tcp_hdr_encode(&h, hdr);
            CHECK(raw_send(t, 1, 0, hdr, sizeof(hdr)) == 0, "raw send");
            CHECK(raw_send(t, 1, 0, buf, half) == 0, "raw send");
            h.seq = 7; /* part 1 claims another message */
            h.offset = half;
            gw__tcp_hdr_encode(&h, hdr);
            CHECK(raw_send(t, 1, 1, hdr, sizeof(hdr)) == 0, "raw send");
            CHECK(raw_send(t, 1, 1, buf, half) == 0, "raw send");
        }
        gw_request_t r;
        make_req(&r, GW_REQ_RECV, 1, 1, 2, buf, 1);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_ERR_PROTOCOL);
        free(buf);
        return 0;
    }
    memset(buf, 0x5A, len);
    gw_request_t r;
    make_req(&r, GW_REQ_RECV, 0, 1, 2, buf, len);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_ERR_PROTOCOL);
    for (size_t i = half; i < len; i++)
        CHECK(buf[i] == 0x5A, "byte %zu was written from a disagreeing part", i);
    CHECK_ST(t->ops->abort(t, GW_ERR_PROTOCOL), GW_OK);
    free(buf);
    return 0;
}

Test(tcp, garbage_header_is_protocol_error, .timeout = 15)
{
    static const forgery_t c = {.bad_magic = 1};
    job_t j = job(2, 1, body_forgery, &c);
    run_job(&j);
}

Test(tcp, part_header_disagreeing_with_part0_is_protocol_error, .timeout = 15)
{
    static const forgery_t c = {.bad_magic = 0};
    job_t j = job(2, 2, body_forgery, &c);
    run_job(&j);
}

/* ---- connection establishment ---------------------------------------------------- */

static int connect_stranger(const uint8_t *blob)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (gw__tcp_addr_decode(blob, &ss, &len) != GW_OK)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Strangers knock on the ports of rank 0 (which accepts from the others) and
 * of the last rank: garbage, silence, a hello of another job, a hello with a
 * bad rank, and an immediate close. */
static void add_strangers(job_t *j, uint8_t *all)
{
    static const char garbage[] = "GET / HTTP/1.0\r\nHost: gradwire\r\n\r\n0123456789abcdef";
    for (int which = 0; which < 2; which++) {
        const uint8_t *blob = all + (which ? j->n - 1 : 0) * GW_TRANSPORT_ADDR_MAX;
        int fd;
        if ((fd = connect_stranger(blob)) >= 0) {
            write_all(fd, garbage, sizeof(garbage));
            j->stranger_fds[j->nstrangers++] = fd;
        }
        if ((fd = connect_stranger(blob)) >= 0) /* silent */
            j->stranger_fds[j->nstrangers++] = fd;
        if ((fd = connect_stranger(blob)) >= 0)
            close(fd);
        uint8_t hello[GW_TCP_HELLO_SIZE];
        gw_tcp_hello_t h = {.magic = GW_TCP_HELLO_MAGIC,
                            .version = GW_TCP_PROTOCOL_VERSION,
                            .from = 1,
                            .to = 0,
                            .sock_idx = 0,
                            .nsocks = (uint32_t)j->nsocks};
        memset(h.job_id, 0x43, sizeof(h.job_id)); /* not our job (0x42) */
        gw__tcp_hello_encode(&h, hello);
        if ((fd = connect_stranger(blob)) >= 0) {
            write_all(fd, hello, sizeof(hello));
            j->stranger_fds[j->nstrangers++] = fd;
        }
        memset(h.job_id, 0x42, sizeof(h.job_id));
        h.from = 0; /* rank 0 never connects to anyone */
        gw__tcp_hello_encode(&h, hello);
        if ((fd = connect_stranger(blob)) >= 0) {
            write_all(fd, hello, sizeof(hello));
            j->stranger_fds[j->nstrangers++] = fd;
        }
    }
}

Test(tcp, strangers_do_not_break_connect, .timeout = 15)
{
    job_t j = job(3, 2, body_ring, NULL);
    j.tamper = add_strangers;
    run_job(&j);
    cr_expect_geq(j.nstrangers, 6, "the strangers could not even connect");
}

static int body_small_exchange(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    uint8_t sbuf[300], rbuf[300];
    fill(sbuf, sizeof(sbuf), rank, peer, 9);
    gw_request_t s, r;
    make_req(&s, GW_REQ_SEND, peer, 9, 9, sbuf, sizeof(sbuf));
    make_req(&r, GW_REQ_RECV, peer, 9, 9, rbuf, sizeof(rbuf));
    CHECK_ST(t->ops->isend(t, &s), GW_OK);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    gw_request_t *both[] = {&s, &r};
    CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_OK);
    CHECK(verify(rbuf, sizeof(rbuf), peer, rank, 9) < 0, "content");
    return 0;
}

Test(tcp, ifname_lo_works, .timeout = 15)
{
    job_t j = job(2, 2, body_small_exchange, NULL);
    j.ifname = "lo";
    run_job(&j);
}

static void open_one(const char *ifname, gw_status_t want)
{
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    gw_transport_params_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.rank = 0;
    pr.size = 2;
    pr.log = &lg;
    pr.timeout_ms = 1000;
    pr.ifname = ifname;
    pr.nsocks = 1;
    struct sockaddr_in *in = (struct sockaddr_in *)&pr.default_addr;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    pr.default_addr_len = sizeof(*in);
    uint8_t addr[GW_TRANSPORT_ADDR_MAX];
    gw_transport_t *t = NULL;
    gw_status_t st = gw__tcp_transport_ops.open(&pr, &t, addr);
    cr_expect_eq(st, want, "open(ifname %s) gave %s, expected %s", ifname ? ifname : "(none)",
                 gw_status_name(st), gw_status_name(want));
    if (st == GW_OK) {
        struct sockaddr_storage ss;
        socklen_t len;
        cr_expect_eq(gw__tcp_addr_decode(addr, &ss, &len), GW_OK);
        cr_expect_eq(ss.ss_family, AF_INET);
        cr_expect_eq(((struct sockaddr_in *)&ss)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
        cr_expect_neq(((struct sockaddr_in *)&ss)->sin_port, 0);
        cr_expect_eq(gw__tcp_transport_ops.mem_reg(t, addr, 1, NULL), GW_ERR_UNSUPPORTED);
        cr_expect_eq(gw__tcp_transport_ops.mem_dereg(t, NULL), GW_ERR_UNSUPPORTED);
        /* Nothing moves before connect(). */
        cr_expect_neq(t->ops->progress(t, NULL, 0), GW_OK);
        t->ops->close(t);
    } else {
        cr_expect_null(t, "*out written on failure");
    }
    gw__logger_fini(&lg);
}

Test(tcp, ifname_that_does_not_exist_is_config_error, .timeout = 15)
{
    setenv("GW_SOCKET_IFNAME", "gw_no_such_if0", 1);
    open_one(getenv("GW_SOCKET_IFNAME"), GW_ERR_CONFIG);
    unsetenv("GW_SOCKET_IFNAME");
    open_one("lo", GW_OK);
    open_one(NULL, GW_OK);
    open_one("", GW_OK);
}

Test(tcp, bad_open_parameters, .timeout = 15)
{
    gw_transport_params_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.rank = 0;
    pr.size = 2;
    pr.nsocks = 0;
    uint8_t addr[GW_TRANSPORT_ADDR_MAX];
    gw_transport_t *t = NULL;
    cr_expect_eq(gw__tcp_transport_ops.open(&pr, &t, addr), GW_ERR_CONFIG);
    pr.nsocks = 1;
    pr.rank = 2;
    cr_expect_eq(gw__tcp_transport_ops.open(&pr, &t, addr), GW_ERR_INVALID_ARG);
    pr.rank = 0; /* no default address and no ifname */
    cr_expect_eq(gw__tcp_transport_ops.open(&pr, &t, addr), GW_ERR_CONFIG);
    cr_expect_null(t);
    gw__tcp_transport_ops.close(NULL);
}

/* Rank 1 never connects: rank 0, which waits for rank 1's connections, must
 * time out on time and name it. */
Test(tcp, missing_peer_times_out, .timeout = 15)
{
    job_t j = job(2, 2, NULL, NULL);
    j.timeout_ms = 500;
    j.skip_connect_rank = 1;
    j.expect_connect[0] = GW_ERR_TIMEOUT;
    run_job(&j);
}

/* Rank 0 never connects (but listens): rank 1's connections are accepted by
 * the kernel and never answered, so its handshakes time out. */
Test(tcp, silent_peer_times_out, .timeout = 15)
{
    job_t j = job(2, 1, NULL, NULL);
    j.timeout_ms = 500;
    j.skip_connect_rank = 0;
    j.expect_connect[1] = GW_ERR_TIMEOUT;
    run_job(&j);
}

static void point_rank0_at_closed_port(job_t *j, uint8_t *all)
{
    (void)j;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(in);
    bind(fd, (struct sockaddr *)&in, sizeof(in));
    getsockname(fd, (struct sockaddr *)&in, &len);
    close(fd); /* nobody listens there now: connections are refused */
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, &in, sizeof(in));
    gw__tcp_addr_encode((struct sockaddr *)&ss, all);
}

Test(tcp, refused_connection_retries_then_times_out, .timeout = 15)
{
    job_t j = job(2, 1, NULL, NULL);
    j.timeout_ms = 600;
    j.tamper = point_rank0_at_closed_port;
    j.expect_connect[0] = GW_ERR_TIMEOUT; /* rank 1 never gets through */
    j.expect_connect[1] = GW_ERR_TIMEOUT;
    run_job(&j);
}

/* Ranks that disagree on GW_NSOCKS: the accepting rank says so at once. */
static int body_nothing(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)t;
    (void)rank;
    (void)size;
    (void)arg;
    return 0;
}

Test(tcp, nsocks_disagreement_is_config_error, .timeout = 15)
{
    job_t j = job(2, 1, body_nothing, NULL);
    j.nsocks_of[0] = 2;
    j.timeout_ms = 800;
    j.expect_connect[0] = GW_ERR_CONFIG;
    j.expect_connect[1] = GW_ERR_TIMEOUT; /* rejected, it retries until its deadline */
    run_job(&j);
}

/* ---- pieces ---------------------------------------------------------------------- */

Test(tcp, parts_cover_the_message)
{
    cr_expect_eq(gw__tcp_nparts(0, 4), 1);
    cr_expect_eq(gw__tcp_nparts(64 * 1024 - 1, 4), 1);
    cr_expect_eq(gw__tcp_nparts(128 * 1024, 4), 2);
    cr_expect_eq(gw__tcp_nparts(MIB + 3, 4), 4);
    cr_expect_eq(gw__tcp_nparts(MIB + 3, 1), 1);
    const size_t lens[] = {0, 1, 65536, 131071, MIB + 3, 8 * MIB};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        for (int ns = 1; ns <= 8; ns++) {
            size_t np = gw__tcp_nparts(lens[i], ns), next = 0;
            for (size_t k = 0; k < np; k++) {
                size_t off, plen;
                gw__tcp_part_range(lens[i], np, k, &off, &plen);
                cr_expect_eq(off, next, "len %zu part %zu", lens[i], k);
                if (np > 1)
                    cr_expect_geq(plen, 64 * 1024, "len %zu part %zu is %zu", lens[i], k, plen);
                next = off + plen;
            }
            cr_expect_eq(next, lens[i]);
        }
    }
}

Test(tcp, wire_round_trip)
{
    gw_tcp_hdr_t h = {.magic = GW_TCP_FRAME_MAGIC,
                      .type = GW_TCP_ABORT,
                      .seq = 0x0102030405060708ull,
                      .sig = 0xdeadbeef,
                      .status = GW_ERR_TIMEOUT,
                      .total = 1ull << 40,
                      .offset = 12345,
                      .part_len = 678};
    uint8_t buf[GW_TCP_HDR_SIZE];
    gw__tcp_hdr_encode(&h, buf);
    cr_expect_eq(buf[0], 0x47); /* big-endian magic "GWFR" */
    cr_expect_eq(buf[3], 0x52);
    gw_tcp_hdr_t d;
    gw__tcp_hdr_decode(buf, &d);
    cr_expect(memcmp(&h, &d, sizeof(h)) == 0);

    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(4242)};
    inet_pton(AF_INET6, "fe80::1", &in6.sin6_addr);
    in6.sin6_scope_id = 3;
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__tcp_addr_encode((struct sockaddr *)&in6, blob);
    struct sockaddr_storage ss;
    socklen_t len;
    cr_expect_eq(gw__tcp_addr_decode(blob, &ss, &len), GW_OK);
    cr_expect_eq(len, sizeof(in6));
    cr_expect(memcmp(&((struct sockaddr_in6 *)&ss)->sin6_addr, &in6.sin6_addr, 16) == 0);
    cr_expect_eq(((struct sockaddr_in6 *)&ss)->sin6_port, htons(4242));
    cr_expect_eq(((struct sockaddr_in6 *)&ss)->sin6_scope_id, 3u);
    blob[0] ^= 1;
    cr_expect_eq(gw__tcp_addr_decode(blob, &ss, &len), GW_ERR_PROTOCOL);
}
