/*
 * tcp_test_util.h - the harness of the TCP transport tests (test_tcp.c,
 * test_tcp_faults.c): real processes on loopback.
 *
 * Each test forks 2..4 rank processes. Every rank opens a transport on
 * 127.0.0.1, sends its address blob to the parent over a socketpair, gets
 * everybody's blobs back (the parent stands in for the bootstrap, and may
 * first point strangers at the ranks' ports) and connects. The ranks then run
 * the test's body and report through their exit status (0 = every check
 * passed; a failed check prints its line to stderr); the parent asserts on
 * those statuses and kills any rank that outlives the job's deadline, so a
 * hang fails the test instead of stalling it.
 *
 * Header-only, every function static inline (see transport_test_util.h).
 */
#ifndef GW_TESTS_TCP_TEST_UTIL_H
#define GW_TESTS_TCP_TEST_UTIL_H

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

#include "../transport_bodies.h"
#include "../transport_test_util.h"
#include "common/clock.h"
#include "common/log.h"
#include "transport/tcp/tcp_internal.h"
#include "transport/transport.h"

#define MAX_RANKS 4
#define MIB ((size_t)1024 * 1024)
#define JOB_DEADLINE_MS 9000

typedef struct job {
    int n;
    int nsocks;
    int nsocks_of[MAX_RANKS]; /* non-zero: this rank's nsocks differs */
    const char *ifname;
    int timeout_ms;
    int skip_connect_rank;           /* -1, or a rank that opens but never connects */
    int delay_connect_ms[MAX_RANKS]; /* a rank that waits this long before connect() */
    int ipv6;                        /* default address ::1 instead of 127.0.0.1 */
    int lazy;                        /* connect on first use (gw_transport_params_t.lazy) */
    rank_fn fn;
    const void *arg;
    /* Parent side, between gathering and releasing addresses. */
    void (*tamper)(struct job *j, uint8_t *all);
    int stranger_fds[16];
    int nstrangers;
    int expect_connect[MAX_RANKS]; /* status connect() must give each rank (GW_OK) */
} job_t;

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
    pr.ifname = j->ifname;
    pr.nsocks = j->nsocks_of[rank] ? j->nsocks_of[rank] : j->nsocks;
    pr.lazy = j->lazy;
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
    uint8_t *all = exchange_blobs(fd, mine, j->n);
    CHECK(all, "exchanging addresses with the parent");
    if (rank == j->skip_connect_rank) {
        usleep(1000 * 1000);
        t->ops->close(t);
        free(all);
        return 0;
    }
    if (j->delay_connect_ms[rank])
        usleep((useconds_t)j->delay_connect_ms[rank] * 1000);
    return connect_and_run(t, all, rank, j->n, (gw_status_t)j->expect_connect[rank], pr.timeout_ms,
                           j->fn, j->arg, &lg);
}

static inline int rank_main_of(void *job, int rank, int fd) { return rank_main(job, rank, fd); }

static inline void tamper_of(void *job, uint8_t *all)
{
    job_t *j = job;
    j->tamper(j, all);
}

static inline void run_job(job_t *j)
{
    ranks_run_t rr = {.n = j->n,
                      .deadline_ms = JOB_DEADLINE_MS,
                      .job = j,
                      .rank_main = rank_main_of,
                      .tamper = j->tamper ? tamper_of : NULL};
    fork_ranks(&rr);
    for (int i = 0; i < j->nstrangers; i++)
        close(j->stranger_fds[i]);
    expect_ranks_ok(&rr, -1);
}

static inline job_t job(int n, int nsocks, rank_fn fn, const void *arg)
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

/* The ring exchange of transport_bodies.h, each round within 6 s. */
static inline int body_ring(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    return ring_exchange(t, rank, size, 6000);
}

#endif /* GW_TESTS_TCP_TEST_UTIL_H */
