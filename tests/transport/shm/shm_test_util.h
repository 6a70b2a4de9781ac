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
 * segment name. Pairs are connected at connect() unless the job says lazy
 * (test_shm_lazy.c). A job runs one of four paths: messages of
 * TEST_DIRECT_MIN bytes and more read straight from the sender's memory
 * (single copy, where the kernel allows it: far below the transport's
 * default, so that the tests' messages exercise it), everything through the
 * ring, everything through a tiny 4 KiB ring that wraps around thousands of
 * times per message, or the transport's defaults as GW_SHM_DIRECT_MIN (or
 * its absence) leaves them.
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

#include "../transport_test_util.h"
#include "common/clock.h"
#include "common/log.h"
#include "transport/shm/shm_internal.h"
#include "transport/transport.h"

#define MAX_RANKS 4
#define MIB ((size_t)1024 * 1024)
#define JOB_DEADLINE_MS 12000

typedef enum path { PATH_DIRECT = 0, PATH_RING, PATH_TINY_RING, PATH_DEFAULT } path_t;
/* PATH_DIRECT's single-copy size: the transport's default before 8 MiB. */
#define TEST_DIRECT_MIN ((size_t)64 * 1024)

typedef struct job {
    int n;
    path_t path;
    int no_direct_rank; /* -1, or a rank whose single-copy probe is switched off */
    int timeout_ms;
    int skip_connect_rank;  /* -1, or a rank that opens but never connects */
    int skip_connect_ms;    /* how long it stays alive before leaving */
    int skip_connect_hard;  /* it then leaves with _exit(), as if killed: no close() */
    int wrong_key_rank;     /* -1, or a rank that does not know the job's data-plane key */
    int delay_connect_rank; /* -1, or a rank that connects late */
    int delay_connect_ms;
    int kill_rank_at_ms; /* > 0: the parent SIGKILLs rank kill_rank then */
    int kill_rank;
    int group[MAX_RANKS]; /* ranks in different groups see each other's blob as zero */
    int lazy;             /* pairs connected on first use (params.lazy) */
    int eager_rank;       /* -1, or a rank that connects eagerly while the others are lazy */
    int linger_rank;      /* -1, or a rank that stays alive linger_ms after its close() */
    int linger_ms;
    rank_fn fn;
    const void *arg;
    void (*tamper)(struct job *j, uint8_t *all);
    int expect_connect[MAX_RANKS]; /* status connect() must give each rank (GW_OK) */
    int expect_killed;             /* the killed rank's status is not checked */
    uint8_t job_id[16];
} job_t;

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
    pr.lazy = j->lazy && rank != j->eager_rank;
    memcpy(pr.job_id, j->job_id, sizeof(pr.job_id));
    memset(pr.data_key, 0x6b, sizeof(pr.data_key)); /* the bootstrap's, on every rank */
    if (rank == j->wrong_key_rank)
        memset(pr.data_key, 0x5a, sizeof(pr.data_key)); /* one without the token */

    uint8_t mine[GW_TRANSPORT_ADDR_MAX];
    gw_transport_t *t = NULL;
    CHECK_ST(gw__shm_transport_ops.open(&pr, &t, mine), GW_OK);
    CHECK(t && t->rank == rank && t->size == j->n, "bad transport fields");
    CHECK(strcmp(t->name, "shm") == 0, "name %s", t->name);
    if (j->path == PATH_DIRECT)
        gw__shm_set_direct(t, 1, TEST_DIRECT_MIN);
    if (j->path == PATH_RING || j->no_direct_rank == rank)
        gw__shm_set_direct(t, 0, 0);
    if (j->path == PATH_TINY_RING) {
        gw__shm_set_direct(t, 0, 0);
        CHECK_ST(gw__shm_set_ring(t, 4096, mine), GW_OK);
    }
    uint8_t *all = exchange_blobs(fd, mine, j->n);
    CHECK(all, "exchanging addresses with the parent");
    if (rank == j->skip_connect_rank) {
        usleep((useconds_t)j->skip_connect_ms * 1000);
        if (j->skip_connect_hard)
            _exit(0);
        t->ops->close(t);
        free(all);
        return 0;
    }
    if (rank == j->delay_connect_rank)
        usleep((useconds_t)j->delay_connect_ms * 1000);
    int rc = connect_and_run(t, all, rank, j->n, (gw_status_t)j->expect_connect[rank],
                             pr.timeout_ms, j->fn, j->arg, &lg);
    if (rank == j->linger_rank)
        usleep((useconds_t)j->linger_ms * 1000);
    return rc;
}

static inline int rank_main_of(void *job, int rank, int fd) { return rank_main(job, rank, fd); }

static inline void tamper_of(void *job, uint8_t *all)
{
    job_t *j = job;
    j->tamper(j, all);
}

/* Peers in another group are "not mine": their blob reads as zero. */
static inline void view_of(void *job, int rank, uint8_t *all)
{
    job_t *j = job;
    for (int q = 0; q < j->n; q++)
        if (j->group[q] != j->group[rank])
            memset(all + q * GW_TRANSPORT_ADDR_MAX, 0, GW_TRANSPORT_ADDR_MAX);
}

static inline void run_job(job_t *j)
{
    cr_assert(j->n >= 1 && j->n <= MAX_RANKS);
    cr_assert_eq(getrandom(j->job_id, sizeof(j->job_id), 0), (ssize_t)sizeof(j->job_id));
    ranks_run_t rr = {.n = j->n,
                      .deadline_ms = JOB_DEADLINE_MS,
                      .job = j,
                      .rank_main = rank_main_of,
                      .tamper = j->tamper ? tamper_of : NULL,
                      .view = view_of,
                      .kill_rank = j->kill_rank,
                      .kill_at_ms = j->kill_rank_at_ms};
    fork_ranks(&rr);
    expect_ranks_ok(&rr, j->expect_killed ? j->kill_rank : -1);
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
    j.eager_rank = -1;
    j.linger_rank = -1;
    j.wrong_key_rank = -1;
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
