/*
 * shm_test_util.h - the harness of the shared-memory transport tests
 * (test_shm.c, test_shm_faults.c, test_shm_connect.c): real rank processes
 * connected by the shm transport, driven and watched by the test process.
 *
 * run_job() forks 2..4 rank processes, as test_tcp.c does: every rank opens
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
 * segment name. A job runs one of three paths: large messages read straight
 * from the sender's memory (single copy, the default where the kernel allows
 * it), everything through the ring, or everything through a tiny 4 KiB ring
 * that wraps around thousands of times per message.
 *
 * Header-only, with every function static inline: each test file uses a
 * different part of it, and an unused static function would be a warning.
 */
#ifndef GW_TESTS_SHM_TEST_UTIL_H
#define GW_TESTS_SHM_TEST_UTIL_H

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

static inline int write_all(int fd, const void *buf, size_t len)
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

static inline int read_all(int fd, void *buf, size_t len)
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

static inline uint8_t pattern(size_t i, int from, int to, uint64_t seq)
{
    return (uint8_t)(i * 131u + (size_t)from * 17u + (size_t)to * 5u + seq * 3u + (i >> 13));
}

static inline void fill(uint8_t *buf, size_t len, int from, int to, uint64_t seq)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = pattern(i, from, to, seq);
}

static inline long verify(const uint8_t *buf, size_t len, int from, int to, uint64_t seq)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pattern(i, from, to, seq))
            return (long)i;
    return -1;
}

static inline void make_req(gw_request_t *r, gw_req_kind_t kind, int peer, uint64_t seq,
                            uint32_t sig, void *buf, size_t len)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->peer = peer;
    r->tag.seq = seq;
    r->tag.sig = sig;
    r->buf = buf;
    r->len = len;
}

static inline gw_status_t wait_all(gw_transport_t *t, gw_request_t **reqs, int n,
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

static inline gw_status_t wait_one(gw_transport_t *t, gw_request_t *r, int ms)
{
    return wait_all(t, &r, 1, NULL, ms);
}

/* Names in /dev/shm that belong to this job's segments. */
static inline int leftovers(const uint8_t job_id[16], char *first, size_t cap)
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

static inline int rank_main(job_t *j, int rank, int fd)
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

static inline void run_job(job_t *j)
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

static inline job_t job(int n, path_t path, rank_fn fn, const void *arg)
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

/* Every rank sends two messages to every other rank and receives theirs.
 * Shared by the data tests (test_shm.c) and the late-connect test
 * (test_shm_connect.c). */
static inline int body_all_to_all(gw_transport_t *t, int rank, int size, const void *arg)
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

#endif
