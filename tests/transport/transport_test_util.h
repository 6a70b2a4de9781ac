/*
 * transport_test_util.h - what the transport tests that fork rank processes
 * share (tcp_test_util.h, shm_test_util.h): the CHECK macros a rank's body
 * reports failures with, whole-buffer reads and writes on the socketpair to
 * the parent, a byte pattern that differs per sender, receiver and message,
 * requests posted and waited for directly on a transport, and the job
 * runner (fork_ranks) that every harness drives its rank processes with.
 *
 * Header-only, every function static inline: each test file uses a
 * different part of it, and an unused static function would be a warning.
 */
#ifndef GW_TESTS_TRANSPORT_TEST_UTIL_H
#define GW_TESTS_TRANSPORT_TEST_UTIL_H

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
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
#include "transport/transport.h"

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank, __FILE__, __LINE__, \
                    #cond);                                                                 \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

#define CHECK_ST(expr, want)                                                              \
    do {                                                                                  \
        gw_status_t st__ = (expr);                                                        \
        CHECK(st__ == (want), "%s returned %s, expected %s", #expr, gw_status_name(st__), \
              gw_status_name(want));                                                      \
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

/* A logger that logs nothing. */
static inline gw_logger_t quiet_logger(void)
{
    gw_logger_t lg;
    gw__logger_init(&lg, -1);
    lg.level = GW_LOG_NONE;
    return lg;
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

/* In a rank process: send our address blob to the parent (which stands in
 * for the bootstrap) and read back all n blobs; NULL, after saying which
 * step failed, when the parent went away. The caller frees the array. */
static inline uint8_t *exchange_blobs(int fd, const uint8_t mine[GW_TRANSPORT_ADDR_MAX], int n)
{
    size_t bytes = (size_t)n * GW_TRANSPORT_ADDR_MAX;
    uint8_t *all = malloc(bytes);
    const char *failed = NULL;
    if (!all)
        failed = "malloc";
    else if (write_all(fd, mine, GW_TRANSPORT_ADDR_MAX) != 0)
        failed = "sending my address to the parent";
    else if (read_all(fd, all, bytes) != 0)
        failed = "reading the addresses";
    if (!failed)
        return all;
    fprintf(stderr, "rank process %d: %s failed\n", (int)getpid(), failed);
    free(all);
    return NULL;
}

/* A rank's body: runs in the rank process on its connected transport;
 * returns 0 when every check passed. */
typedef int (*rank_fn)(gw_transport_t *t, int rank, int size, const void *arg);

/* The end of every harness's rank process: connect with the blobs in `all`
 * (freed here), expect `expect` from connect() within the transport's
 * timeout plus a second, then run the body, close, and (under ASan) check
 * for leaks, since ranks leave with _exit(), which skips LeakSanitizer's
 * exit check. */
static inline int connect_and_run(gw_transport_t *t, uint8_t *all, int rank, int size,
                                  gw_status_t expect, int timeout_ms, rank_fn fn, const void *arg,
                                  gw_logger_t *lg)
{
    int64_t t0 = gw__now_ms();
    gw_status_t st = t->ops->connect(t, all);
    free(all);
    CHECK(st == expect, "connect returned %s, expected %s", gw_status_name(st),
          gw_status_name(expect));
    if (st != GW_OK) {
        int limit = timeout_ms + 1000;
        CHECK(gw__now_ms() - t0 < limit, "connect took %lld ms, limit %d",
              (long long)(gw__now_ms() - t0), limit);
        t->ops->close(t);
        return 0;
    }
    int rc = fn ? fn(t, rank, size, arg) : 0;
    t->ops->close(t);
    gw__logger_fini(lg);
#if defined(__SANITIZE_ADDRESS__)
    CHECK(__lsan_do_recoverable_leak_check() == 0, "memory leaked (see the report above)");
#endif
    return rc;
}

/* ---- the job runner ------------------------------------------------------ */

#define GW_TEST_MAX_RANKS 8

/* One job of rank processes. The harness fills in the first part;
 * fork_ranks() fills in the results. */
typedef struct ranks_run {
    int n;
    int deadline_ms;
    void *job;
    /* In each child: open a transport, send its address blob (one
     * GW_TRANSPORT_ADDR_MAX block) on fd, read all n blobs back, connect,
     * run the test; the return value is the exit status. */
    int (*rank_main)(void *job, int rank, int fd);
    /* In the parent, optional: edit the gathered blobs once (e.g. point
     * strangers at a port), then what each rank is sent (e.g. hide peers). */
    void (*tamper)(void *job, uint8_t *all);
    void (*view)(void *job, int rank, uint8_t *all);
    int kill_rank, kill_at_ms; /* kill_at_ms > 0: SIGKILL kill_rank then */
    /* Results. */
    int gathered; /* every rank published its address */
    int done[GW_TEST_MAX_RANKS], status[GW_TEST_MAX_RANKS];
} ranks_run_t;

/* Fork the ranks, stand in for the bootstrap (gather the blobs, tamper,
 * send them out), wait for the ranks until the deadline and kill the ones
 * still running, so that a hang fails the test instead of stalling it. */
static inline void fork_ranks(ranks_run_t *rr)
{
    pid_t pids[GW_TEST_MAX_RANKS];
    int fds[GW_TEST_MAX_RANKS];
    cr_assert(rr->n >= 1 && rr->n <= GW_TEST_MAX_RANKS);
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < rr->n; r++) {
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        pids[r] = fork();
        cr_assert_neq(pids[r], -1, "fork: %s", strerror(errno));
        if (pids[r] == 0) {
            close(sv[0]);
            for (int q = 0; q < r; q++)
                close(fds[q]);
            _exit(rr->rank_main(rr->job, r, sv[1]));
        }
        close(sv[1]);
        fds[r] = sv[0];
    }
    uint8_t all[GW_TEST_MAX_RANKS * GW_TRANSPORT_ADDR_MAX];
    const size_t bytes = (size_t)rr->n * GW_TRANSPORT_ADDR_MAX;
    rr->gathered = 1;
    for (int r = 0; r < rr->n; r++)
        if (read_all(fds[r], all + r * GW_TRANSPORT_ADDR_MAX, GW_TRANSPORT_ADDR_MAX) != 0)
            rr->gathered = 0;
    if (rr->gathered && rr->tamper)
        rr->tamper(rr->job, all);
    for (int r = 0; r < rr->n && rr->gathered; r++) {
        uint8_t view[GW_TEST_MAX_RANKS * GW_TRANSPORT_ADDR_MAX];
        memcpy(view, all, bytes);
        if (rr->view)
            rr->view(rr->job, r, view);
        write_all(fds[r], view, bytes);
    }
    int left = rr->n, killed = 0;
    memset(rr->done, 0, sizeof(rr->done));
    int64_t start = gw__now_ms(), end = start + rr->deadline_ms;
    while (left > 0 && gw__now_ms() < end) {
        if (rr->kill_at_ms > 0 && !killed && gw__now_ms() - start >= rr->kill_at_ms) {
            kill(pids[rr->kill_rank], SIGKILL);
            killed = 1;
        }
        for (int r = 0; r < rr->n; r++)
            if (!rr->done[r] && waitpid(pids[r], &rr->status[r], WNOHANG) == pids[r]) {
                rr->done[r] = 1;
                left--;
            }
        if (left > 0)
            usleep(5000);
    }
    for (int r = 0; r < rr->n; r++) {
        if (!rr->done[r]) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], &rr->status[r], 0);
        }
        close(fds[r]);
    }
}

/* Every rank but `skip` (-1: none) finished in time with exit status 0. */
static inline void expect_ranks_ok(const ranks_run_t *rr, int skip)
{
    cr_assert(rr->gathered, "a rank failed before publishing its address");
    for (int r = 0; r < rr->n; r++) {
        if (r == skip)
            continue;
        cr_expect(rr->done[r], "rank %d still running after %d ms: killed", r, rr->deadline_ms);
        if (rr->done[r] && WIFSIGNALED(rr->status[r]))
            cr_expect(0, "rank %d killed by signal %d", r, WTERMSIG(rr->status[r]));
        else if (rr->done[r])
            cr_expect(WEXITSTATUS(rr->status[r]) == 0, "rank %d failed a check (exit %d)", r,
                      WEXITSTATUS(rr->status[r]));
    }
}

#endif /* GW_TESTS_TRANSPORT_TEST_UTIL_H */
