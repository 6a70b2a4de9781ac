/*
 * test_shm.c - the shared-memory transport between real processes.
 *
 * Each test forks 2..4 rank processes, as test_tcp.c does: every rank opens
 * a shm transport, sends its address blob to the parent over a socketpair,
 * gets everybody's blobs back (the parent stands in for the bootstrap, and
 * may tamper with them first) and connects. The ranks then run the test's
 * body and report through their exit status (0 = every check passed; a
 * failed check prints its line to stderr); the parent asserts on those
 * statuses, kills any rank that outlives the job's deadline (so a hang fails
 * the test instead of stalling it), and checks that no segment of the job
 * is left in /dev/shm, whatever happened to the ranks.
 *
 * Each job gets a random job id, so tests running in parallel never share a
 * segment name. Most data tests run three ways: large messages read straight
 * from the sender's memory (single copy, the default where the kernel allows
 * it), everything through the ring, and everything through a tiny 4 KiB ring
 * that wraps around thousands of times per message.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "common/clock.h"
#include "common/log.h"
#include "transport/shm_internal.h"
#include "transport/transport.h"

#define MAX_RANKS 4
#define MIB ((size_t)1024 * 1024)
#define JOB_DEADLINE_MS 12000

typedef int (*rank_fn)(gw_transport_t *t, int rank, int size, const void *arg);

typedef enum path { PATH_DIRECT = 0, PATH_RING, PATH_TINY_RING } path_t;

typedef struct job {
    int n;
    path_t path;
    int no_direct_rank; /* -1, or a rank whose single-copy probe is switched off */
    int timeout_ms;
    int skip_connect_rank; /* -1, or a rank that opens but never connects */
    int skip_connect_ms;   /* how long it stays alive before leaving */
    int delay_connect_rank; /* -1, or a rank that connects late */
    int delay_connect_ms;
    int kill_rank_at_ms;    /* > 0: the parent SIGKILLs rank kill_rank then */
    int kill_rank;
    int group[MAX_RANKS]; /* ranks in different groups see each other's blob as zero */
    rank_fn fn;
    const void *arg;
    void (*tamper)(struct job *j, uint8_t *all);
    int expect_connect[MAX_RANKS]; /* status connect() must give each rank (GW_OK) */
    int expect_killed;             /* the killed rank's status is not checked */
    uint8_t job_id[16];
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

/* Names in /dev/shm that belong to this job's segments. */
static int leftovers(const uint8_t job_id[16], char *first, size_t cap)
{
    char prefix[64];
    gw__shm_seg_name(job_id, 0, 0, prefix, sizeof(prefix));
    char *dash = strrchr(prefix, '-');
    *dash = '\0';
    dash = strrchr(prefix, '-');
    dash[1] = '\0'; /* "/gw-<job id>-" */
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix + 1, strlen(prefix + 1)) == 0) {
            if (n == 0)
                snprintf(first, cap, "%s", e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
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
    pr.nsocks = 1;
    memcpy(pr.job_id, j->job_id, sizeof(pr.job_id));

    uint8_t mine[GW_TRANSPORT_ADDR_MAX];
    gw_transport_t *t = NULL;
    CHECK_ST(gw__shm_transport_ops.open(&pr, &t, mine), GW_OK);
    CHECK(t && t->rank == rank && t->size == j->n, "bad transport fields");
    CHECK(strcmp(t->ops->name, "shm") == 0, "name %s", t->ops->name);
    if (j->path == PATH_RING || j->no_direct_rank == rank)
        gw__shm_set_direct(t, 0, 0);
    if (j->path == PATH_TINY_RING) {
        gw__shm_set_direct(t, 0, 0);
        CHECK_ST(gw__shm_set_ring(t, 4096, mine), GW_OK);
    }
    uint8_t *all = malloc((size_t)j->n * GW_TRANSPORT_ADDR_MAX);
    CHECK(all, "malloc");
    CHECK(write_all(fd, mine, sizeof(mine)) == 0, "sending my address to the parent");
    CHECK(read_all(fd, all, (size_t)j->n * GW_TRANSPORT_ADDR_MAX) == 0, "reading addresses");
    if (rank == j->skip_connect_rank) {
        usleep((useconds_t)j->skip_connect_ms * 1000);
        t->ops->close(t);
        free(all);
        return 0;
    }
    if (rank == j->delay_connect_rank)
        usleep((useconds_t)j->delay_connect_ms * 1000);
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
    cr_assert_eq(getrandom(j->job_id, sizeof(j->job_id), 0), (ssize_t)sizeof(j->job_id));
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
    for (int r = 0; r < j->n && gathered; r++) {
        /* Peers in another group are "not mine": their blob reads as zero. */
        uint8_t view[MAX_RANKS * GW_TRANSPORT_ADDR_MAX];
        memcpy(view, all, sizeof(view));
        for (int q = 0; q < j->n; q++)
            if (j->group[q] != j->group[r])
                memset(view + q * GW_TRANSPORT_ADDR_MAX, 0, GW_TRANSPORT_ADDR_MAX);
        write_all(fds[r], view, (size_t)j->n * GW_TRANSPORT_ADDR_MAX);
    }

    int status[MAX_RANKS], done[MAX_RANKS] = {0}, left = j->n, killed = 0;
    int64_t start = gw__now_ms(), end = start + JOB_DEADLINE_MS;
    while (left > 0 && gw__now_ms() < end) {
        if (j->kill_rank_at_ms > 0 && !killed && gw__now_ms() - start >= j->kill_rank_at_ms) {
            kill(pids[j->kill_rank], SIGKILL);
            killed = 1;
        }
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
    cr_assert(gathered, "a rank failed before publishing its address");
    for (int r = 0; r < j->n; r++) {
        if (j->expect_killed && r == j->kill_rank)
            continue;
        cr_expect(done[r], "rank %d still running after %d ms: killed", r, JOB_DEADLINE_MS);
        if (done[r] && WIFSIGNALED(status[r]))
            cr_expect(0, "rank %d killed by signal %d", r, WTERMSIG(status[r]));
        else if (done[r])
            cr_expect(WEXITSTATUS(status[r]) == 0, "rank %d failed a check (exit %d)", r,
                      WEXITSTATUS(status[r]));
    }
    char name[256] = "";
    int n = leftovers(j->job_id, name, sizeof(name));
    cr_expect_eq(n, 0, "%d segment(s) of the job left in /dev/shm, e.g. %s", n, name);
}

static job_t job(int n, path_t path, rank_fn fn, const void *arg)
{
    job_t j;
    memset(&j, 0, sizeof(j));
    j.n = n;
    j.path = path;
    j.fn = fn;
    j.arg = arg;
    j.no_direct_rank = -1;
    j.skip_connect_rank = -1;
    j.delay_connect_rank = -1;
    return j;
}

/* ---- data movement ----------------------------------------------------------- */

static const size_t exchange_sizes[] = {0,          1,          63,       64,      1000,
                                        64 * 1024 - 1, 64 * 1024, MIB + 3, 8 * MIB};
#define NSIZES (sizeof(exchange_sizes) / sizeof(exchange_sizes[0]))

/* Ranks 0 and 1 send each other every size at once, then check the bytes
 * and that nothing was written past the end of the receive buffer. */
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
        CHECK_ST(wait_all(t, both, 2, NULL, 8000), GW_OK);
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

Test(shm, exchange_sizes_single_copy, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_exchange, NULL);
    run_job(&j);
}

Test(shm, exchange_sizes_ring, .timeout = 30)
{
    job_t j = job(2, PATH_RING, body_exchange, NULL);
    run_job(&j);
}

Test(shm, exchange_sizes_tiny_ring, .timeout = 30)
{
    job_t j = job(2, PATH_TINY_RING, body_exchange, NULL);
    run_job(&j);
}

/* One rank may not read the other's memory: its large messages still come
 * through (as INLINE), while the other direction stays single-copy. */
Test(shm, exchange_sizes_one_way_single_copy, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_exchange, NULL);
    j.no_direct_rank = 1;
    run_job(&j);
}

#define NMSG 400
static size_t inorder_len(int i)
{
    return (size_t)(i * 7919) % (300 * 1024) + (i % 3 == 0 ? 0 : 1);
}

/* Rank 0 posts NMSG sends of mixed sizes (INLINE and DIRECT) at once; rank 1
 * posts the receives one at a time with progress in between, so headers
 * are read ahead before their receive exists. Every message arrives whole
 * and in order. */
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
    CHECK_ST(wait_all(t, ptrs, NMSG, NULL, 10000), GW_OK);
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

Test(shm, many_messages_in_order, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_in_order, NULL);
    run_job(&j);
}

Test(shm, many_messages_in_order_tiny_ring, .timeout = 30)
{
    job_t j = job(2, PATH_TINY_RING, body_in_order, NULL);
    run_job(&j);
}

/* Everyone sends 8 MiB to the right and receives 8 MiB from the left at
 * once: far more than a ring holds, so it only finishes if sends and
 * receives of all peers are interleaved. */
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
        CHECK_ST(wait_all(t, both, 2, &cur, 8000), GW_OK);
        long bad = verify(rbuf, len, left, rank, round);
        CHECK(bad < 0, "round %llu: byte %ld from rank %d is wrong", (unsigned long long)round, bad,
              left);
        free(sbuf);
        free(rbuf);
    }
    return 0;
}

Test(shm, ring_exchange_single_copy, .timeout = 30)
{
    job_t j = job(4, PATH_DIRECT, body_ring, NULL);
    run_job(&j);
}

Test(shm, ring_exchange_ring, .timeout = 30)
{
    job_t j = job(3, PATH_RING, body_ring, NULL);
    run_job(&j);
}

/* Every rank sends two messages to every other rank and receives theirs. */
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
    CHECK_ST(wait_all(t, ptrs, n, NULL, 8000), GW_OK);
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

Test(shm, all_to_all_four_ranks, .timeout = 30)
{
    job_t j = job(4, PATH_DIRECT, body_all_to_all, NULL);
    run_job(&j);
}

/* Ping-pong of tiny and empty messages: each must be delivered by the round
 * in which it arrives, and a sleeping receiver must be woken. */
static int body_ping_pong(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    uint8_t buf[8];
    int64_t t0 = gw__now_ns();
    for (uint64_t i = 1; i <= 2000; i++) {
        size_t len = i % 2 ? 0 : sizeof(buf);
        gw_request_t r;
        if ((int)(i % 2) == rank) {
            if (i % 500 == 0)
                usleep(5000); /* long enough for the peer to fall asleep */
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
        fprintf(stderr, "rank %d: 2000 ping-pong messages in %.1f us each\n", rank,
                (double)(gw__now_ns() - t0) / 2000 / 1000);
    return 0;
}

Test(shm, ping_pong, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_ping_pong, NULL);
    run_job(&j);
}

/* ---- mismatches -------------------------------------------------------------- */

typedef struct mismatch_case {
    uint32_t recv_sig; /* the sender always uses 0xAA */
    size_t send_len, recv_len;
} mismatch_case_t;

/* Rank 0 sends; rank 1 posts a receive that disagrees. Rank 1 must fail with
 * GW_ERR_MISMATCH without touching its buffer (the canary), then abort; rank
 * 0 learns of it through the abort flag. */
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
    CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_MISMATCH);
    gw_request_t later;
    make_req(&later, GW_REQ_RECV, 0, 2, 0xAA, buf, 1);
    CHECK_ST(t->ops->irecv(t, &later), GW_ERR_MISMATCH);
    CHECK(later.complete && later.status == GW_ERR_MISMATCH, "later request not failed");
    CHECK_ST(t->ops->abort(t, GW_ERR_MISMATCH), GW_OK);
    free(buf);
    return 0;
}

Test(shm, tag_mismatch_leaves_buffer_untouched, .timeout = 30)
{
    static const mismatch_case_t c = {.recv_sig = 0xBB, .send_len = 1000, .recv_len = 1000};
    job_t j = job(2, PATH_DIRECT, body_mismatch, &c);
    run_job(&j);
}

Test(shm, length_mismatch_longer_receive_single_copy, .timeout = 30)
{
    static const mismatch_case_t c = {.recv_sig = 0xAA, .send_len = MIB, .recv_len = 2 * MIB};
    job_t j = job(2, PATH_DIRECT, body_mismatch, &c);
    run_job(&j);
}

Test(shm, length_mismatch_shorter_receive_ring, .timeout = 30)
{
    static const mismatch_case_t c = {.recv_sig = 0xAA, .send_len = 4 * MIB, .recv_len = 1000};
    job_t j = job(2, PATH_RING, body_mismatch, &c);
    run_job(&j);
}

typedef struct conflict_case {
    gw_msg_tag_t current; /* rank 1's collective; rank 0 sends seq 3, sig 0x11 */
    int conflicts;
} conflict_case_t;

/* Rank 1 posts no receive and only calls progress(current): the header read
 * ahead from rank 0 must be reported when it proves a disagreement, and be
 * harmless (its message intact) when rank 0 is merely ahead. */
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
        uint8_t dummy[4];
        make_req(&r, GW_REQ_RECV, 1, 4, 0x11, dummy, sizeof(dummy));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        gw_request_t *both[] = {&s, &r};
        if (c->conflicts) {
            CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_ERR_MISMATCH); /* rank 1's abort */
        } else {
            CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_OK);
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

Test(shm, readahead_detects_older_sequence, .timeout = 30)
{
    static const conflict_case_t c = {.current = {.seq = 4, .sig = 0x11}, .conflicts = 1};
    job_t j = job(2, PATH_DIRECT, body_conflict, &c);
    run_job(&j);
}

Test(shm, readahead_detects_other_signature, .timeout = 30)
{
    static const conflict_case_t c = {.current = {.seq = 3, .sig = 0x22}, .conflicts = 1};
    job_t j = job(2, PATH_RING, body_conflict, &c);
    run_job(&j);
}

Test(shm, readahead_of_newer_sequence_is_fine, .timeout = 30)
{
    static const conflict_case_t c = {.current = {.seq = 2, .sig = 0x11}, .conflicts = 0};
    job_t j = job(2, PATH_DIRECT, body_conflict, &c);
    run_job(&j);
}

/* Rank 0 writes a record header with a bad magic into its ring behind the
 * transport's back: rank 1 must fail with GW_ERR_PROTOCOL. */
static int body_garbage(gw_transport_t *base, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    if (rank == 0) {
        gw_shm_peer_t *p = &gw__shm_of(base)->peers[1];
        gw_shm_rec_t rec;
        memset(&rec, 0, sizeof(rec));
        rec.magic = 0x12345678;
        rec.kind = GW_SHM_INLINE;
        rec.index = 1;
        uint64_t head = atomic_load(&p->out->head);
        memcpy(p->out_ring + (head & (p->ring_bytes - 1)), &rec, sizeof(rec));
        atomic_store(&p->out->head, head + sizeof(rec));
        uint8_t dummy[4];
        gw_request_t r;
        make_req(&r, GW_REQ_RECV, 1, 1, 2, dummy, sizeof(dummy));
        CHECK_ST(base->ops->irecv(base, &r), GW_OK);
        CHECK_ST(wait_one(base, &r, 5000), GW_ERR_PROTOCOL);
        return 0;
    }
    uint8_t buf[16];
    gw_request_t r;
    make_req(&r, GW_REQ_RECV, 0, 1, 2, buf, sizeof(buf));
    CHECK_ST(base->ops->irecv(base, &r), GW_OK);
    CHECK_ST(wait_one(base, &r, 5000), GW_ERR_PROTOCOL);
    CHECK_ST(base->ops->abort(base, GW_ERR_PROTOCOL), GW_OK);
    return 0;
}

Test(shm, garbage_in_ring_is_protocol_error, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_garbage, NULL);
    run_job(&j);
}

/* ---- failures ------------------------------------------------------------------ */

typedef enum death_kind {
    DIE_IDLE,         /* rank 0 dies while rank 1 waits for a message */
    DIE_MID_STREAM,   /* rank 0 dies after writing part of a large message */
    DIE_WHILE_READ,   /* rank 1 sends a DIRECT message rank 0 never reads */
} death_kind_t;

static int body_death(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const death_kind_t *kind = arg;
    size_t len = 64 * MIB;
    if (rank == 0) {
        if (*kind == DIE_MID_STREAM) {
            uint8_t *buf = calloc(1, len);
            CHECK(buf, "calloc");
            gw_request_t s;
            make_req(&s, GW_REQ_SEND, 1, 1, 5, buf, len);
            CHECK_ST(t->ops->isend(t, &s), GW_OK);
            while (s.bytes_done == 0)
                CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
            CHECK(!s.complete, "the whole message went out at once");
        } else {
            usleep(100 * 1000);
        }
        _exit(0); /* no close, no goodbye: as if the process crashed */
    }
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    gw_request_t r;
    int sends = *kind == DIE_WHILE_READ;
    make_req(&r, sends ? GW_REQ_SEND : GW_REQ_RECV, 0, 1, 5, buf, len);
    if (sends) {
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

Test(shm, peer_dies_while_we_wait, .timeout = 30)
{
    static const death_kind_t k = DIE_IDLE;
    job_t j = job(2, PATH_DIRECT, body_death, &k);
    run_job(&j);
}

Test(shm, peer_dies_mid_stream, .timeout = 30)
{
    static const death_kind_t k = DIE_MID_STREAM;
    job_t j = job(2, PATH_TINY_RING, body_death, &k);
    run_job(&j);
}

Test(shm, peer_dies_before_reading_our_message, .timeout = 30)
{
    static const death_kind_t k = DIE_WHILE_READ;
    job_t j = job(2, PATH_DIRECT, body_death, &k);
    run_job(&j);
}

/* The parent SIGKILLs rank 0 while rank 1 waits for a message. */
static int body_killed(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    uint8_t buf[64];
    gw_request_t r;
    if (rank == 0) {
        for (;;)
            pause();
    }
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 8000), GW_ERR_REMOTE);
    return 0;
}

Test(shm, killed_peer_is_remote_error_and_leaves_nothing, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_killed, NULL);
    j.kill_rank = 0;
    j.kill_rank_at_ms = 500;
    j.expect_killed = 1;
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
        usleep(200 * 1000); /* still alive: the flag, not our death, must tell rank 1 */
        return 0;
    }
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    int64_t t0 = gw__now_ms();
    CHECK_ST(wait_one(t, &r, 5000), GW_ERR_TIMEOUT);
    CHECK(r.status == GW_ERR_TIMEOUT, "request status %s", gw_status_name(r.status));
    CHECK(gw__now_ms() - t0 < 200, "the abort took %lld ms to arrive",
          (long long)(gw__now_ms() - t0));
    return 0;
}

Test(shm, abort_flag_carries_status, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_abort, NULL);
    run_job(&j);
}

typedef struct goodbye_case {
    int recv_posted_first; /* rank 1's receive is pending when the goodbye comes */
} goodbye_case_t;

/* A message sent before close() is still delivered after it (it waits in
 * the ring, which outlives the sender's mapping); a receive that nothing
 * will ever satisfy fails with GW_ERR_REMOTE. */
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
    usleep(300 * 1000); /* rank 0 has closed (and exited) by now */
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_OK);
    CHECK(verify(buf, sizeof(buf), 0, 1, 1) < 0, "content");
    int64_t end = gw__now_ms() + 100;
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

Test(shm, message_before_goodbye_is_delivered_then_remote_error, .timeout = 30)
{
    static const goodbye_case_t c = {.recv_posted_first = 0};
    job_t j = job(2, PATH_DIRECT, body_goodbye, &c);
    run_job(&j);
}

Test(shm, goodbye_with_receive_pending_is_remote_error, .timeout = 30)
{
    static const goodbye_case_t c = {.recv_posted_first = 1};
    job_t j = job(2, PATH_DIRECT, body_goodbye, &c);
    run_job(&j);
}

/* ---- connection establishment ---------------------------------------------------- */

/* Ranks in different groups see each other's blob as zero ("not mine"):
 * each group is a mesh of its own, nobody waits for the others, and a rank
 * of the other group cannot be addressed. */
static int body_pairs(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = rank ^ 2; /* 0 <-> 2, 1 <-> 3 */
    size_t len = MIB;
    uint8_t *sbuf = malloc(len), *rbuf = malloc(len);
    CHECK(sbuf && rbuf, "malloc");
    fill(sbuf, len, rank, peer, 1);
    gw_request_t s, r;
    make_req(&s, GW_REQ_SEND, peer, 1, 9, sbuf, len);
    make_req(&r, GW_REQ_RECV, peer, 1, 9, rbuf, len);
    CHECK_ST(t->ops->isend(t, &s), GW_OK);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    gw_request_t *both[] = {&s, &r};
    CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_OK);
    CHECK(verify(rbuf, len, peer, rank, 1) < 0, "content");
    /* A rank of the other group is not ours to talk to. */
    gw_request_t bad;
    make_req(&bad, GW_REQ_SEND, rank ^ 1, 1, 9, sbuf, 1);
    CHECK_ST(t->ops->isend(t, &bad), GW_ERR_INVALID_ARG);
    free(sbuf);
    free(rbuf);
    return 0;
}

Test(shm, zero_address_peers_are_skipped, .timeout = 30)
{
    job_t j = job(4, PATH_DIRECT, body_pairs, NULL);
    j.group[0] = j.group[2] = 0;
    j.group[1] = j.group[3] = 1;
    run_job(&j);
}

static void tamper_host(job_t *j, uint8_t *all)
{
    (void)j;
    all[GW_TRANSPORT_ADDR_MAX + 16] ^= 1; /* rank 1's host id */
}

/* Rank 1 claims another host: rank 0 refuses it; rank 1 (which sees rank
 * 0 on its own host) learns from rank 0's abort flag or death. */
Test(shm, peer_on_another_host_is_config_error, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.tamper = tamper_host;
    j.expect_connect[0] = GW_ERR_CONFIG;
    j.expect_connect[1] = GW_ERR_REMOTE;
    run_job(&j);
}

static void tamper_magic(job_t *j, uint8_t *all)
{
    (void)j;
    all[0] ^= 0xff; /* rank 0's magic */
}

Test(shm, garbage_address_is_protocol_error, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.tamper = tamper_magic;
    j.timeout_ms = 1500;
    /* Rank 1 rejects rank 0's blob; rank 0, which created the segment, sees
     * rank 1 leave without attaching. */
    j.expect_connect[0] = GW_ERR_REMOTE;
    j.expect_connect[1] = GW_ERR_PROTOCOL;
    run_job(&j);
}

/* A peer that exits without connecting: the creator notices its death
 * instead of waiting for the timeout, and unlinks the segment. */
Test(shm, peer_exits_before_connecting, .timeout = 30)
{
    job_t j = job(3, PATH_DIRECT, NULL, NULL);
    j.skip_connect_rank = 2;
    j.skip_connect_ms = 100;
    j.timeout_ms = 8000;
    j.expect_connect[0] = GW_ERR_REMOTE;
    j.expect_connect[1] = GW_ERR_REMOTE;
    run_job(&j);
}

/* A peer that stays alive but never connects: a time-out naming it. */
Test(shm, silent_peer_times_out, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.skip_connect_rank = 0;
    j.skip_connect_ms = 2500;
    j.timeout_ms = 1000;
    j.expect_connect[1] = GW_ERR_TIMEOUT;
    run_job(&j);
}

/* Rank 0 creates the segment and is killed before rank 1 attaches: rank 1
 * still finds the name, unlinks it and reports the death. */
Test(shm, creator_killed_before_attach_leaves_nothing, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.delay_connect_rank = 1;
    j.delay_connect_ms = 800;
    j.kill_rank = 0;
    j.kill_rank_at_ms = 300;
    j.expect_killed = 1;
    j.expect_connect[1] = GW_ERR_REMOTE;
    run_job(&j);
}

Test(shm, late_peer_connects, .timeout = 30)
{
    job_t j = job(3, PATH_DIRECT, body_all_to_all, NULL);
    j.delay_connect_rank = 0;
    j.delay_connect_ms = 300;
    run_job(&j);
}

Test(shm, address_blob_round_trip)
{
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__shm_addr_encode(4242, 0x0123456789abcdefull, 1u << 20, blob);
    uint32_t pid;
    uint64_t host, ring;
    cr_assert_eq(gw__shm_addr_decode(blob, &pid, &host, &ring), GW_OK);
    cr_expect_eq(pid, 4242u);
    cr_expect_eq(host, 0x0123456789abcdefull);
    cr_expect_eq(ring, 1u << 20);
    for (size_t i = GW_SHM_ADDR_SIZE; i < sizeof(blob); i++)
        cr_expect_eq(blob[i], 0, "byte %zu of the blob is not zero", i);
    gw__shm_addr_encode(4242, 1, 3000, blob); /* not a power of two */
    cr_expect_eq(gw__shm_addr_decode(blob, &pid, &host, &ring), GW_ERR_PROTOCOL);
    gw__shm_addr_encode(4242, 1, 1u << 20, blob);
    blob[0] ^= 1;
    cr_expect_eq(gw__shm_addr_decode(blob, &pid, &host, &ring), GW_ERR_PROTOCOL);
    char name[96];
    uint8_t id[16];
    for (int i = 0; i < 16; i++)
        id[i] = (uint8_t)(i * 17);
    gw__shm_seg_name(id, 3, 12, name, sizeof(name));
    cr_expect_str_eq(name, "/gw-00112233445566778899aabbccddeeff-3-12");
}
