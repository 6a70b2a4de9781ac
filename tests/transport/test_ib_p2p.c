/*
 * test_ib_p2p.c - the public point-to-point API (gw_send, gw_recv,
 * gw_sendrecv) that came with the IB transport for gradwire-bench p2p.
 *
 * Two communicators in one process, one thread per rank, over whatever
 * transport the selection picks: shared memory on a plain host, the verbs
 * transport when GW_TRANSPORT=ib (tests/integration/rxe_vm_test.sh runs it
 * so under Soft-RoCE). Covered: data of every size class (empty, eager,
 * rendezvous, striped), sendrecv in both directions at once, point-to-point
 * calls between collectives, count and dtype mismatches (both ranks fail,
 * the receive buffer stays untouched), and argument errors.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gradwire.h"

typedef struct rank {
    int rank;
    char root[64];
    int (*body)(struct rank *r);
    gw_comm_t *comm;
    int result;
} rank_t;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", r->rank, __FILE__, __LINE__,     \
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

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t len = sizeof(a);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void *thread_main(void *arg)
{
    rank_t *r = arg;
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = r->rank;
    cfg.size = 2;
    cfg.root = r->root;
    cfg.timeout_ms = 30000;
    cfg.job_token = "test_ib_p2p";
    gw_status_t st = gw_comm_init(&cfg, &r->comm);
    if (st != GW_OK) {
        fprintf(stderr, "rank %d: gw_comm_init: %s\n", r->rank, gw_status_name(st));
        r->result = 1;
        return NULL;
    }
    /* Under GW_TRANSPORT=ib (the Soft-RoCE VM) the calls must really go
     * over verbs, not over a transport the selection preferred. */
    const char *want = getenv("GW_TRANSPORT");
    if (want && strcmp(want, "ib") == 0 && strcmp(gw_comm_transport(r->comm), "ib") != 0) {
        fprintf(stderr, "rank %d: GW_TRANSPORT=ib, but the transport is %s\n", r->rank,
                gw_comm_transport(r->comm));
        r->result = 1;
        gw_comm_destroy(r->comm);
        return NULL;
    }
    r->result = r->body(r);
    gw_comm_destroy(r->comm);
    return NULL;
}

static void run(int (*body)(rank_t *))
{
    rank_t ranks[2];
    pthread_t th[2];
    int port = free_port();
    for (int i = 0; i < 2; i++) {
        memset(&ranks[i], 0, sizeof(ranks[i]));
        ranks[i].rank = i;
        ranks[i].body = body;
        snprintf(ranks[i].root, sizeof(ranks[i].root), "127.0.0.1:%d", port);
        pthread_create(&th[i], NULL, thread_main, &ranks[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(ranks[i].result, 0, "rank %d failed (see its output)", i);
}

static float value(int from, size_t i, int round) { return (float)(from * 1000 + (int)(i % 997) + round); }

/* Ping-pong of every size class: rank 0 sends, rank 1 answers with +1. */
static int pingpong_body(rank_t *r)
{
    static const size_t counts[] = {0, 1, 100, 1024, 3000, 70000, 1u << 20};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t n = counts[c];
        float *buf = malloc((n + 1) * sizeof(float));
        buf[n] = -7.0f; /* must stay */
        if (r->rank == 0) {
            for (size_t i = 0; i < n; i++)
                buf[i] = value(0, i, (int)c);
            CHECK_ST(gw_send(r->comm, buf, n, GW_FLOAT32, 1), GW_OK);
            memset(buf, 0, n * sizeof(float));
            CHECK_ST(gw_recv(r->comm, buf, n, GW_FLOAT32, 1), GW_OK);
            for (size_t i = 0; i < n; i++)
                CHECK(buf[i] == value(0, i, (int)c) + 1, "count %zu: element %zu is %g", n, i,
                      (double)buf[i]);
        } else {
            CHECK_ST(gw_recv(r->comm, buf, n, GW_FLOAT32, 0), GW_OK);
            for (size_t i = 0; i < n; i++) {
                CHECK(buf[i] == value(0, i, (int)c), "count %zu: element %zu is %g", n, i,
                      (double)buf[i]);
                buf[i] += 1;
            }
            CHECK_ST(gw_send(r->comm, buf, n, GW_FLOAT32, 0), GW_OK);
        }
        CHECK(buf[n] == -7.0f, "count %zu: written past the end", n);
        free(buf);
    }
    return 0;
}

Test(p2p_api, ping_pong_every_size, .timeout = 240) { run(pingpong_body); }

/* Both directions at once, then a collective, then messages again: the
 * point-to-point tags never disturb the collectives around them. */
static int mixed_body(rank_t *r)
{
    enum { N = 50000 };
    int32_t *s = malloc(N * sizeof(int32_t)), *d = malloc(N * sizeof(int32_t));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++)
            s[i] = r->rank * 1000000 + i + round;
        CHECK_ST(gw_sendrecv(r->comm, s, N, 1 - r->rank, d, N, 1 - r->rank, GW_INT32), GW_OK);
        for (int i = 0; i < N; i++)
            CHECK(d[i] == (1 - r->rank) * 1000000 + i + round, "round %d: element %d is %d", round,
                  i, d[i]);
        int64_t x = r->rank + 1, sum = 0;
        CHECK_ST(gw_allreduce(r->comm, &x, &sum, 1, GW_INT64, GW_SUM), GW_OK);
        CHECK(sum == 3, "allreduce between point-to-point calls gave %lld", (long long)sum);
        /* Uneven exchange: rank 0 sends 10, rank 1 sends 20 elements. */
        size_t mine = r->rank == 0 ? 10 : 20, theirs = r->rank == 0 ? 20 : 10;
        CHECK_ST(gw_sendrecv(r->comm, s, mine, 1 - r->rank, d, theirs, 1 - r->rank, GW_INT32),
                 GW_OK);
        CHECK(d[theirs - 1] == (1 - r->rank) * 1000000 + (int)theirs - 1 + round, "uneven");
    }
    CHECK_ST(gw_barrier(r->comm), GW_OK);
    free(s);
    free(d);
    return 0;
}

Test(p2p_api, sendrecv_between_collectives, .timeout = 240) { run(mixed_body); }

/* Rank 1 expects another count (or dtype) than rank 0 sends. */
static int mismatch_common(rank_t *r, size_t send_n, gw_dtype_t send_dt, size_t recv_n,
                           gw_dtype_t recv_dt)
{
    uint8_t buf[65536];
    memset(buf, r->rank == 0 ? 0x11 : 0xC3, sizeof(buf));
    gw_status_t st = r->rank == 0 ? gw_send(r->comm, buf, send_n, send_dt, 1)
                                  : gw_recv(r->comm, buf, recv_n, recv_dt, 0);
    if (st == GW_OK && r->rank == 0) /* an eager send completes before the receiver checks */
        st = gw_barrier(r->comm);
    CHECK(st == GW_ERR_MISMATCH, "got %s, expected GW_ERR_MISMATCH", gw_status_name(st));
    for (size_t i = 0; r->rank == 1 && i < sizeof(buf); i++)
        CHECK(buf[i] == 0xC3, "the receive buffer was written at byte %zu", i);
    CHECK_ST(gw_send(r->comm, buf, 1, GW_UINT8, 1 - r->rank), GW_ERR_MISMATCH);
    return 0;
}

static int count_mismatch_small(rank_t *r) { return mismatch_common(r, 10, GW_FLOAT32, 12, GW_FLOAT32); }
static int count_mismatch_large(rank_t *r) { return mismatch_common(r, 9000, GW_FLOAT32, 8000, GW_FLOAT32); }
static int dtype_mismatch(rank_t *r) { return mismatch_common(r, 100, GW_FLOAT32, 100, GW_INT32); }

Test(p2p_api, count_mismatch_fails_both, .timeout = 120)
{
    run(count_mismatch_small);
    run(count_mismatch_large);
}

Test(p2p_api, dtype_mismatch_fails_both, .timeout = 120) { run(dtype_mismatch); }

/* Rank 0 makes a bad call (which fails its communicator and tells rank 1);
 * rank 1, waiting for a message, fails too instead of hanging. */
static const struct bad_case {
    int null_buf;
    size_t n;
    gw_dtype_t dt;
    int peer;
    gw_status_t want;
} bad_cases[] = {
    {1, 1, GW_FLOAT32, 1, GW_ERR_INVALID_ARG},
    {0, SIZE_MAX / 2, GW_FLOAT32, 1, GW_ERR_OVERFLOW},
    {0, 1, (gw_dtype_t)99, 1, GW_ERR_INVALID_ARG},
    {0, 1, GW_FLOAT32, 5, GW_ERR_INVALID_ARG},
    {0, 1, GW_FLOAT32, 0, GW_ERR_INVALID_ARG}, /* to itself */
};
static const struct bad_case *bad_now;

static int bad_body(rank_t *r)
{
    float x[4] = {0};
    if (r->rank == 0) {
        CHECK_ST(gw_send(r->comm, bad_now->null_buf ? NULL : x, bad_now->n, bad_now->dt,
                         bad_now->peer),
                 bad_now->want);
        CHECK_ST(gw_send(r->comm, x, 1, GW_FLOAT32, 1), bad_now->want);
        return 0;
    }
    gw_status_t st = gw_recv(r->comm, x, 1, GW_FLOAT32, 0);
    CHECK(st != GW_OK, "rank 1 received a message rank 0 never sent");
    return 0;
}

Test(p2p_api, argument_errors, .timeout = 240)
{
    float x = 1;
    cr_assert_eq(gw_send(NULL, &x, 1, GW_FLOAT32, 0), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw_recv(NULL, &x, 1, GW_FLOAT32, 0), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw_sendrecv(NULL, &x, 1, 0, &x, 1, 0, GW_FLOAT32), GW_ERR_INVALID_ARG);
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    gw_comm_t *c = NULL;
    cr_assert_eq(gw_comm_init(&cfg, &c), GW_OK);
    cr_assert_eq(gw_send(c, &x, 1, GW_FLOAT32, 0), GW_ERR_INVALID_ARG, "one rank has no peer");
    gw_comm_destroy(c);
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        bad_now = &bad_cases[i];
        run(bad_body);
    }
}
