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
 * the receive buffer stays untouched), and argument errors; and the
 * non-blocking gw_isend/gw_irecv: windows of messages of every size class in
 * both directions, completed in any order by gw_wait and gw_test, over the
 * selected transport and over TCP; a collective started while handles are
 * pending fails on both ranks; gw_comm_destroy aborts leftovers; gw_test
 * times out when the peer sends nothing; standard sends (no receipts);
 * tagged messages, small and large, taken out of order and held while
 * unexpected, and a tagged count mismatch (over verbs the large ones are
 * announced in an eager slot, so that the receiver's peek sees them).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"

typedef struct rank {
    int rank;
    char root[64];
    int (*body)(struct rank *r);
    int timeout_ms; /* 0: 30 s */
    gw_comm_t *comm;
    int result;
} rank_t;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", r->rank, __FILE__, __LINE__, \
                    #cond);                                                                    \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

#define CHECK_ST(expr, want)                                                              \
    do {                                                                                  \
        gw_status_t st__ = (expr);                                                        \
        CHECK(st__ == (want), "%s returned %s, expected %s", #expr, gw_status_name(st__), \
              gw_status_name(want));                                                      \
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
    cfg.timeout_ms = r->timeout_ms ? r->timeout_ms : 30000;
    cfg.job_token = "test_ib_p2p-token";
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

static void run_timeout(int (*body)(rank_t *), int timeout_ms)
{
    rank_t ranks[2];
    pthread_t th[2];
    int port = free_port();
    for (int i = 0; i < 2; i++) {
        memset(&ranks[i], 0, sizeof(ranks[i]));
        ranks[i].rank = i;
        ranks[i].body = body;
        ranks[i].timeout_ms = timeout_ms;
        snprintf(ranks[i].root, sizeof(ranks[i].root), "127.0.0.1:%d", port);
        pthread_create(&th[i], NULL, thread_main, &ranks[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(ranks[i].result, 0, "rank %d failed (see its output)", i);
}

static void run(int (*body)(rank_t *)) { run_timeout(body, 0); }

static float value(int from, size_t i, int round)
{
    return (float)(from * 1000 + (int)(i % 997) + round);
}

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
    /* The send's own status: an eager send too completes only with the
     * receiver's receipt, and fails with its verdict. */
    CHECK(st == GW_ERR_MISMATCH, "got %s, expected GW_ERR_MISMATCH", gw_status_name(st));
    for (size_t i = 0; r->rank == 1 && i < sizeof(buf); i++)
        CHECK(buf[i] == 0xC3, "the receive buffer was written at byte %zu", i);
    CHECK_ST(gw_send(r->comm, buf, 1, GW_UINT8, 1 - r->rank), GW_ERR_MISMATCH);
    return 0;
}

static int count_mismatch_small(rank_t *r)
{
    return mismatch_common(r, 10, GW_FLOAT32, 12, GW_FLOAT32);
}
static int count_mismatch_large(rank_t *r)
{
    return mismatch_common(r, 9000, GW_FLOAT32, 8000, GW_FLOAT32);
}
static int dtype_mismatch(rank_t *r) { return mismatch_common(r, 100, GW_FLOAT32, 100, GW_INT32); }

Test(p2p_api, count_mismatch_fails_both, .timeout = 120)
{
    run(count_mismatch_small);
    run(count_mismatch_large);
}

/* Standard sends (gw_comm_set_p2p_send, as MPI_Send): body with the
 * communicator set so on both ranks. */
static int window_body(rank_t *r); /* below */
static int (*standard_body)(rank_t *r);
static int standard(rank_t *r)
{
    CHECK_ST(gw_comm_set_p2p_send(r->comm, GW_P2P_SEND_STANDARD), GW_OK);
    CHECK(gw_comm_p2p_send(r->comm) == GW_P2P_SEND_STANDARD, "the mode did not stick");
    return standard_body(r);
}
static void run_standard(int (*body)(rank_t *))
{
    standard_body = body;
    run(standard);
}

/* Under standard sends the sender's call completes without the receiver's
 * word, so it may return GW_OK (a small message: it is in the pair's
 * buffers) or the verdict (a large one over verbs: the receiver's
 * clear-to-send disagreed); its next call that waits on the receiver must
 * fail with GW_ERR_MISMATCH, and the receive buffer stays untouched. */
static int standard_mismatch(rank_t *r, size_t send_n, size_t recv_n)
{
    uint8_t buf[65536];
    memset(buf, r->rank == 0 ? 0x11 : 0xC3, sizeof(buf));
    gw_status_t st = r->rank == 0 ? gw_send(r->comm, buf, send_n, GW_FLOAT32, 1)
                                  : gw_recv(r->comm, buf, recv_n, GW_FLOAT32, 0);
    if (r->rank == 0 && st == GW_OK)
        st = gw_recv(r->comm, buf, 1, GW_UINT8, 1);
    CHECK(st == GW_ERR_MISMATCH, "got %s, expected GW_ERR_MISMATCH", gw_status_name(st));
    for (size_t i = 0; r->rank == 1 && i < sizeof(buf); i++)
        CHECK(buf[i] == 0xC3, "the receive buffer was written at byte %zu", i);
    return 0;
}
static int standard_mismatch_small(rank_t *r) { return standard_mismatch(r, 10, 12); }
static int standard_mismatch_large(rank_t *r) { return standard_mismatch(r, 9000, 8000); }

/* Tagged messages: rank 1 sends tags 3 (large), 1 (small), 2 (large);
 * rank 0 takes tag 2 first (3 and 1 wait, held), then any tag (3, the
 * earliest), then 1; then a large message whose count differs fails both.
 * Each tagged send completes as the mode says, the large ones over verbs
 * through their announcement and the receiver's CTS. */
static int tagged_body(rank_t *r)
{
    enum { BIG = 100000, MID = 5000, SMALL = 10 };
    static const int tags[3] = {3, 1, 2};
    static const size_t counts[3] = {BIG, SMALL, MID};
    float *buf = malloc((BIG + 1) * sizeof(float));
    if (r->rank == 1) {
        for (int m = 0; m < 3; m++) {
            for (size_t i = 0; i < counts[m]; i++)
                buf[i] = value(1, i, tags[m]);
            CHECK_ST(gw_send_tagged(r->comm, buf, counts[m], GW_FLOAT32, 0, tags[m]), GW_OK);
        }
        gw_status_t st = gw_send_tagged(r->comm, buf, MID, GW_FLOAT32, 0, 4);
        if (st == GW_OK) /* standard: the verdict comes after */
            st = gw_recv(r->comm, buf, 1, GW_FLOAT32, 0);
        CHECK(st == GW_ERR_MISMATCH, "the mismatched tagged send: %s", gw_status_name(st));
        free(buf);
        return 0;
    }
    static const int order[3] = {2, GW_ANY_TAG, 1};
    static const int want_tag[3] = {2, 3, 1};
    for (int k = 0; k < 3; k++) {
        int m = want_tag[k] == 3 ? 0 : want_tag[k] == 1 ? 1 : 2;
        gw_msg_status_t s;
        buf[counts[m]] = -7.0f;
        CHECK_ST(gw_recv_tagged(r->comm, buf, counts[m], GW_FLOAT32, 1, order[k], &s), GW_OK);
        CHECK(s.source == 1 && s.tag == want_tag[k] && s.count == counts[m],
              "receive %d: source %d, tag %d, count %zu", k, s.source, s.tag, s.count);
        for (size_t i = 0; i < counts[m]; i++)
            CHECK(buf[i] == value(1, i, want_tag[k]), "tag %d: element %zu is %g", want_tag[k], i,
                  (double)buf[i]);
        CHECK(buf[counts[m]] == -7.0f, "tag %d: written past the end", want_tag[k]);
    }
    gw_msg_status_t s;
    CHECK_ST(gw_recv_tagged(r->comm, buf, MID - 1000, GW_FLOAT32, 1, 4, &s), GW_ERR_MISMATCH);
    free(buf);
    return 0;
}

Test(p2p_api, tagged_out_of_order_every_size, .timeout = 240)
{
    run(tagged_body);
    run_standard(tagged_body);
}

/* A stream of STREAM small tagged messages, far more than a pair's eager
 * slots over verbs (4), tags 5 and 6 in turn, all in flight at once; rank
 * 0 takes every tag-6 one first (the tag-5 ones are held), then the tag-5
 * ones, each tag's in order. Over verbs the receiver posts no receive
 * until it sees a message, so only its reports of freed slots (the FREED
 * immediate) let the sender go on past the fourth. */
static int tagged_stream_body(rank_t *r)
{
    enum { STREAM = 24 };
    int32_t msg[STREAM][4];
    if (r->rank == 1) {
        gw_handle_t *h[STREAM];
        for (int i = 0; i < STREAM; i++) {
            for (int k = 0; k < 4; k++)
                msg[i][k] = i * 10 + k;
            CHECK_ST(gw_isend_tagged(r->comm, msg[i], 4, GW_INT32, 0, 5 + i % 2, &h[i]), GW_OK);
        }
        for (int i = 0; i < STREAM; i++)
            CHECK_ST(gw_wait(h[i]), GW_OK);
        return 0;
    }
    for (int pass = 0; pass < 2; pass++) {
        int tag = pass == 0 ? 6 : 5;
        for (int i = tag - 5; i < STREAM; i += 2) {
            int32_t got[4] = {-1, -1, -1, -1};
            gw_msg_status_t s;
            CHECK_ST(gw_recv_tagged(r->comm, got, 4, GW_INT32, 1, tag, &s), GW_OK);
            CHECK(got[0] == i * 10 && got[3] == i * 10 + 3 && s.tag == tag,
                  "tag %d: message %d came as %d (tag %d)", tag, i, got[0], s.tag);
        }
    }
    return 0;
}

Test(p2p_api, tagged_stream_past_the_eager_slots, .timeout = 240)
{
    run(tagged_stream_body);
    run_standard(tagged_stream_body);
}

Test(p2p_api, standard_sends_ping_pong_every_size, .timeout = 240) { run_standard(pingpong_body); }
Test(p2p_api, standard_sends_window_every_size, .timeout = 240) { run_standard(window_body); }
Test(p2p_api, standard_sends_mismatch_fails_both, .timeout = 120)
{
    run_standard(standard_mismatch_small);
    run_standard(standard_mismatch_large);
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
        CHECK_ST(
            gw_send(r->comm, bad_now->null_buf ? NULL : x, bad_now->n, bad_now->dt, bad_now->peer),
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

/* ---- non-blocking ------------------------------------------------------ */

/* More than the verbs transport's 32 CTS slots per peer, so that its FIFO wraps
 * and receives queue behind it. */
enum { WINDOW = 40 };

/* A window of WINDOW messages each way, of one size class per round, every
 * message with its own contents; rank 0 completes its handles with gw_wait
 * in reverse order, rank 1 by polling gw_test over all of them. The n-th
 * receive must hold the n-th message. */
static int window_body(rank_t *r)
{
    static const size_t counts[] = {0, 1, 1000, 20000, 70000};
    int peer = 1 - r->rank;
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t n = counts[c];
        float *sbuf[WINDOW], *rbuf[WINDOW];
        gw_handle_t *h[2 * WINDOW];
        for (int m = 0; m < WINDOW; m++) {
            sbuf[m] = malloc((n + 1) * sizeof(float));
            rbuf[m] = malloc((n + 1) * sizeof(float));
            for (size_t i = 0; i < n; i++) {
                sbuf[m][i] = value(r->rank, i, m);
                rbuf[m][i] = -1.0f;
            }
            rbuf[m][n] = -7.0f; /* must stay */
        }
        /* Rank 0 posts its sends first, rank 1 its receives: either order
         * must work. */
        for (int m = 0; m < WINDOW; m++) {
            if (r->rank == 0)
                CHECK_ST(gw_isend(r->comm, sbuf[m], n, GW_FLOAT32, peer, &h[m]), GW_OK);
            else
                CHECK_ST(gw_irecv(r->comm, rbuf[m], n, GW_FLOAT32, peer, &h[WINDOW + m]), GW_OK);
        }
        for (int m = 0; m < WINDOW; m++) {
            if (r->rank == 0)
                CHECK_ST(gw_irecv(r->comm, rbuf[m], n, GW_FLOAT32, peer, &h[WINDOW + m]), GW_OK);
            else
                CHECK_ST(gw_isend(r->comm, sbuf[m], n, GW_FLOAT32, peer, &h[m]), GW_OK);
        }
        if (r->rank == 0) {
            for (int k = 2 * WINDOW - 1; k >= 0; k--)
                CHECK_ST(gw_wait(h[k]), GW_OK);
        } else {
            int left = 2 * WINDOW;
            while (left > 0) {
                for (int k = 0; k < 2 * WINDOW; k++) {
                    int done = 0;
                    if (!h[k])
                        continue;
                    CHECK_ST(gw_test(h[k], &done), GW_OK);
                    if (done) {
                        h[k] = NULL;
                        left--;
                    }
                }
            }
        }
        for (int m = 0; m < WINDOW; m++) {
            for (size_t i = 0; i < n; i++)
                CHECK(rbuf[m][i] == value(peer, i, m), "count %zu, message %d: element %zu is %g",
                      n, m, i, (double)rbuf[m][i]);
            CHECK(rbuf[m][n] == -7.0f, "count %zu, message %d: written past the end", n, m);
            free(sbuf[m]);
            free(rbuf[m]);
        }
        /* A collective may follow once every handle is complete. */
        int64_t x = r->rank + 1, sum = 0;
        CHECK_ST(gw_allreduce(r->comm, &x, &sum, 1, GW_INT64, GW_SUM), GW_OK);
        CHECK(sum == 3, "allreduce after the window gave %lld", (long long)sum);
    }
    return 0;
}

Test(p2p_api, nonblocking_window_every_size, .timeout = 240) { run(window_body); }

Test(p2p_api, nonblocking_window_over_tcp, .timeout = 240)
{
    setenv("GW_TRANSPORT", "tcp", 1);
    run(window_body);
}

/* Blocking calls go between non-blocking ones to the same peer and keep
 * their place in the order. */
static int interleaved_body(rank_t *r)
{
    int32_t a = 0, b = 0, c = 0;
    gw_handle_t *h1 = NULL, *h2 = NULL;
    if (r->rank == 0) {
        int32_t x = 1, y = 2, z = 3;
        CHECK_ST(gw_isend(r->comm, &x, 1, GW_INT32, 1, &h1), GW_OK);
        CHECK_ST(gw_send(r->comm, &y, 1, GW_INT32, 1), GW_OK);
        CHECK_ST(gw_isend(r->comm, &z, 1, GW_INT32, 1, &h2), GW_OK);
        CHECK_ST(gw_wait(h2), GW_OK);
        CHECK_ST(gw_wait(h1), GW_OK);
        return 0;
    }
    CHECK_ST(gw_irecv(r->comm, &a, 1, GW_INT32, 0, &h1), GW_OK);
    CHECK_ST(gw_irecv(r->comm, &b, 1, GW_INT32, 0, &h2), GW_OK);
    CHECK_ST(gw_recv(r->comm, &c, 1, GW_INT32, 0), GW_OK);
    CHECK_ST(gw_wait(h1), GW_OK);
    CHECK_ST(gw_wait(h2), GW_OK);
    CHECK(a == 1 && b == 2 && c == 3, "received %d %d %d, expected 1 2 3", a, b, c);
    return 0;
}

Test(p2p_api, blocking_and_nonblocking_keep_order, .timeout = 120) { run(interleaved_body); }

/* Rank 0 starts an allreduce while its receive is pending: a usage error
 * that fails rank 0 at once and rank 1 (inside the allreduce) soon after. */
static int collective_while_pending(rank_t *r)
{
    float x = 1, y = 0;
    gw_handle_t *h = NULL;
    if (r->rank == 0) {
        CHECK_ST(gw_irecv(r->comm, &y, 1, GW_FLOAT32, 1, &h), GW_OK);
        CHECK_ST(gw_allreduce(r->comm, &x, &y, 1, GW_FLOAT32, GW_SUM), GW_ERR_INVALID_ARG);
        gw_status_t st = gw_wait(h);
        CHECK(st != GW_OK, "the pending receive completed after the failure");
        CHECK(gw_iallreduce(r->comm, &x, &y, 1, GW_FLOAT32, GW_SUM, &h) != GW_OK ||
                  gw_wait(h) != GW_OK,
              "a collective ran on the failed communicator");
        return 0;
    }
    gw_status_t st = gw_allreduce(r->comm, &x, &y, 1, GW_FLOAT32, GW_SUM);
    CHECK(st != GW_OK, "rank 1's allreduce succeeded without rank 0");
    return 0;
}

Test(p2p_api, collective_while_pending_fails_both, .timeout = 120)
{
    run(collective_while_pending);
}

/* Handles left pending at gw_comm_destroy complete with GW_ERR_ABORTED,
 * without touching the freed communicator (ASan watches). */
static gw_handle_t *leftover[2];

static int leave_pending(rank_t *r)
{
    static float y[2];
    CHECK_ST(gw_irecv(r->comm, &y[r->rank], 1, GW_FLOAT32, 1 - r->rank, &leftover[r->rank]), GW_OK);
    return 0;
}

Test(p2p_api, destroy_aborts_pending, .timeout = 120)
{
    run(leave_pending);
    int done = 0;
    cr_assert_eq(gw_test(leftover[0], &done), GW_ERR_ABORTED);
    cr_assert_eq(done, 1);
    cr_assert_eq(gw_wait(leftover[1]), GW_ERR_ABORTED);
}

/* Rank 1 polls a receive that rank 0 never sends: gw_test gives up with
 * GW_ERR_TIMEOUT after GW_TIMEOUT_MS (1 s here) instead of spinning on. */
static int test_times_out(rank_t *r)
{
    if (r->rank == 0) {
        usleep(2500 * 1000);
        return 0;
    }
    float y = 0;
    gw_handle_t *h = NULL;
    CHECK_ST(gw_irecv(r->comm, &y, 1, GW_FLOAT32, 0, &h), GW_OK);
    int done = 0;
    gw_status_t st = GW_OK;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!done && st == GW_OK) {
        st = gw_test(h, &done);
        usleep(1000);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(done == 1 && st == GW_ERR_TIMEOUT, "gw_test: done %d, %s", done, gw_status_name(st));
    CHECK(secs >= 0.9 && secs < 2.4, "timed out after %.2f s, expected about 1 s", secs);
    return 0;
}

Test(p2p_api, test_times_out, .timeout = 120) { run_timeout(test_times_out, 1000); }

Test(p2p_api, nonblocking_argument_errors)
{
    float x = 1;
    gw_handle_t *h = NULL;
    cr_assert_eq(gw_isend(NULL, &x, 1, GW_FLOAT32, 0, &h), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw_irecv(NULL, &x, 1, GW_FLOAT32, 0, &h), GW_ERR_INVALID_ARG);
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    gw_comm_t *c = NULL;
    cr_assert_eq(gw_comm_init(&cfg, &c), GW_OK);
    cr_assert_eq(gw_isend(c, &x, 1, GW_FLOAT32, 0, NULL), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw_irecv(c, &x, 1, GW_FLOAT32, 0, &h), GW_ERR_INVALID_ARG, "one rank has no peer");
    cr_assert_null(h);
    gw_comm_destroy(c);
}
